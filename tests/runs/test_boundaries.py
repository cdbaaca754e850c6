"""Each run boundary (analyzer/runs/boundaries.py) fires on a log of the shape it is written for.

One case per reason a boundary gives: two processes' lines pasted one after the other, and the run the
second one opens must say that reason. The lines are the shapes of the parser samples and of the field
logs in tests/fixtures (real llama.cpp, ollama and probe output); a reason without a case here fails
``test_every_reason_has_a_case``, so a new boundary comes with its example.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from analyzer.parsers import Dispatcher
from analyzer.parsers.scanner import Scanner
from analyzer.runs import boundaries
from analyzer.runs.assembler import Assembler
from analyzer.runs.builder import RunBuilder

M4_BLOCK = """\
ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)
ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)
ggml_metal_device_init: simdgroup reduction   = false
ggml_metal_device_init: simdgroup matrix mul. = false
"""
LEGACY_M2 = """\
ggml_metal_init: allocating
ggml_metal_init: found device: Apple M2 Max
ggml_metal_init: picking default device: Apple M2 Max
ggml_metal_init: using MPS
ggml_metal_init: GPU name:   Apple M2 Max
ggml_metal_init: GPU family: MTLGPUFamilyApple8 (1008)
ggml_metal_init: hasUnifiedMemory              = true
"""
LEGACY_M1 = LEGACY_M2.replace("M2 Max", "M1 Pro").replace("Apple8 (1008)", "Apple7 (1007)")
PERF = """\
llama_perf_context_print:        load time =     812.30 ms
llama_perf_context_print: prompt eval time =     626.56 ms /    10 tokens (   62.66 ms per token,    15.96 tokens per second)
llama_perf_context_print:        eval time =     219.50 ms /    17 runs   (   12.91 ms per token,    77.45 tokens per second)
llama_perf_context_print:       total time =    1002.11 ms /    27 tokens
"""
VULKAN = """\
ggml_vulkan: Found 1 Vulkan devices:
ggml_vulkan: 0 = Virtio-GPU Venus (Apple M1 Max) (venus) | uma: 1 | fp16: 1 | bf16: 0 | warp size: 32 | \
shared memory: 32768 | int dot: 0 | matrix cores: none
"""
CUDA = """\
ggml_cuda_init: found 1 CUDA devices:
  Device 0: NVIDIA GeForce RTX 3090 Ti, compute capability 8.6, VMM: yes
"""
SYSTEM_INFO = ("system_info: n_threads = 24 (n_threads_batch = 24) / 32 | Metal : EMBED_LIBRARY = 1 | "
               "CPU : NEON = 1 | ARM_FMA = 1 | ACCELERATE = 1 | REPACK = 1 |\n")
BUILD = "build: 4240 (1a2b3c4d) with Apple clang version 15.0.0 (clang-1500.3.9.4) for arm64-apple-darwin23.4.0\n"
BANNER = ("2026-08-09 12:41:47.024 llama-bench[2738:54808] [LumeMetalCapabilities] Enabled for llama-bench "
          "(appleFamilyMax=1009 maxThreadgroupMemory=65536)\n")
PROBE = """\
probe=capscan-probe 1
device=Apple Paravirtual device
"""
MD_HEADER = """\
| model                          |       size |     params | backend    | threads |          test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: | -------------------: |
"""
MD_METAL = """\
| llama 1B Q4_K - Medium         | 636.18 MiB |     1.10 B | Metal,BLAS |       8 |         pp512 |       1502.61 ± 8.34 |
| llama 1B Q4_K - Medium         | 636.18 MiB |     1.10 B | Metal,BLAS |       8 |         tg128 |         12.63 ± 0.05 |
"""
MD_CPU = MD_METAL.replace("Metal,BLAS", "BLAS      ")


def jsonl(gpu: str = "Apple Paravirtual device", commit: str = "ee3d1b54c", ts: float = 12.63, pp: bool = False) -> str:
    """A llama-bench JSONL row: tg128, or pp512 (one invocation prints each test of a setup once)."""
    n_prompt, n_gen = (512, 0) if pp else (0, 128)
    return (f'{{"build_commit": "{commit}", "build_number": 10167, "cpu_info": "Accelerate, Apple M1 Ultra (Virtual)", '
            f'"gpu_info": "{gpu}", "backends": "MTL,BLAS", "model_filename": "/Users/admin/models/tinyllama.gguf", '
            '"model_type": "llama 1B Q4_K - Medium", "n_batch": 2048, "n_threads": 8, "n_gpu_layers": 99, '
            f'"n_prompt": {n_prompt}, "n_gen": {n_gen}, "n_depth": 0, "avg_ts": {ts}, "stddev_ts": 0.05}}\n')


def json_array(*rows: str) -> str:
    """llama-bench -o json: its rows as an array of objects, a field per line."""
    return "[\n" + ",\n".join(json.dumps(json.loads(r), indent=4) for r in rows) + "\n]\n"


OLLAMA_START = ('time=2025-02-16T20:51:57.943-06:00 level=INFO source=types.go:130 msg="inference compute" id=0 '
                'library=metal variant="" compute="" driver=0.0 name="" total="16.0 GiB" available="16.0 GiB"\n')
OLLAMA_LOAD = ('time=2025-02-16T20:52:03.516-06:00 level=INFO source=server.go:380 msg="starting llama server" '
               'cmd="/Applications/Ollama.app/Contents/Resources/ollama runner --model '
               '/Users/rae/.ollama/models/blobs/sha256-dde5aa3fc5ff --ctx-size 8192"\n')

# Shapes of today's programs, from the real logs of llama.cpp 0c1e570 (2026-10-01, scripts/real-llama-logs)
LOADER = """\
llama_model_loader: loaded meta data with 22 key-value pairs and 21 tensors from models/tiny-llama-q4_0.gguf
llama_model_loader: - kv   1:                               general.name str              = capscan tiny random llama
load_tensors: offloaded 0/3 layers to GPU
"""
OLLAMA_RATES = """\
prompt eval count:    26 token(s)
prompt eval rate:     261.79 tokens/s
eval count:           290 token(s)
eval rate:            23.15 tokens/s
"""
MLX = "Averages: prompt_tps=1656.550, generation_tps=172.090, peak_memory=1.166\n"
SLOT = ("slot print_timing: id  0 | task 0 | \n"
        "prompt eval time =      10.22 ms /    12 tokens (    0.85 ms per token,  1174.17 tokens per second)\n")
DEVICES = "Available devices:\n  (none)\n"
SERVER_2026 = "0.00.002.462 I srv  llama_server: initializing ...\n"
LISTENING = "main: server is listening on http://127.0.0.1:8080 - starting the main loop\n"
SQL = ("CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,\n  avg_ts REAL,\n  stddev_ts REAL\n);\n\n"
       "INSERT INTO llama_bench (build_commit, build_number, cpu_info, gpu_info, backends, model_filename, model_type, model_size, model_n_params, n_batch, n_ubatch, n_threads, cpu_mask, cpu_strict, poll, type_k, type_v, n_gpu_layers, n_cpu_moe, split_mode, main_gpu, no_kv_offload, flash_attn, devices, tensor_split, tensor_buft_overrides, load_mode, lazy_mode, embeddings, no_op_offload, no_host, repack, fit_target, fit_min_ctx, n_prompt, n_gen, n_depth, test_time, avg_ns, stddev_ns, avg_ts, stddev_ts) VALUES ('0c1e570', '1', 'Intel(R) Xeon(R) Processor', '', 'CPU', 'models/tiny-llama-q4_0.gguf', 'llama ?B Q4_0', '3370752', '4170048', '2048', '512', '2', '0x0', '0', '50', 'f16', 'f16', '0', '0', 'layer', '0', '0', '-1', 'auto', '0.00', 'none', 'auto', 'auto', '0', '0', '0', '1', '0', '0', '64', '0', '0', '2026-12-05T08:07:09Z', '225064944', '25345774', '286.177045', '32.227925');" "\n")  # a row of field log 338 (llama-bench -o sql, llama.cpp 0c1e570)

# reason -> (log, which run it opens: 1 is the second run)
CASES: dict[str, tuple[str, int]] = {
    # cat *.log | capscan (issue 38): a program's start after a run that measured is the next program's
    "a program's start after a finished run": (PERF + LOADER + PERF, 1),
    "a wrapper's result after a finished run": (PERF + "Running benchmark 3 times using model: llama3.2:1b\n"
                                                "| Run | Eval Rate (Tokens/Second) |\n| 1 | 80.32 tokens/s |\n", 1),
    "a build line after another program's model load": (LOADER + BUILD, 1),
    "a llama-bench header after another program's start": (SYSTEM_INFO + MD_HEADER + MD_METAL, 1),
    "a backend's registration after another program's model load": (LOADER + CUDA, 1),
    "timings of another program after a finished run": (PERF + OLLAMA_RATES, 1),
    "a llama-bench row after another program's results": (OLLAMA_RATES + jsonl(), 1),
    "a llama-bench row in another output format": (MD_HEADER + MD_METAL + jsonl(), 1),
    "a program's first line": (
        "main: build = 1015 (226255b)\n" + LEGACY_M2 + PERF + "main: build = 1015 (226255b)\n" + LEGACY_M2, 1),
    "common_init's build line after a result or a legacy Metal block": (BUILD + LEGACY_M2 + PERF + BUILD, 1),
    "a second system_info line": (SYSTEM_INFO + PERF + SYSTEM_INFO, 1),
    "a second device list": ("Available devices:\n  MTL0: Apple Paravirtual device (11453 MiB, 11453 MiB free)\n"
                             "Available devices:\n  MTL0: Apple M1 Ultra (98304 MiB, 98304 MiB free)\n", 1),
    "the argument parser's warning after another process's lines": (
        SYSTEM_INFO + PERF + "warning: not compiled with GPU offload support, --n-gpu-layers option will be ignored\n", 1),
    "the next ollama model load": (OLLAMA_START + OLLAMA_LOAD + OLLAMA_LOAD, 1),
    "a shim banner after another process's lines": (BANNER + M4_BLOCK + BANNER + M4_BLOCK, 1),
    "a probe's output": (M4_BLOCK + PROBE, 1),
    "system_profiler's output": (M4_BLOCK + "      Chipset Model: Apple Paravirtual device\n", 1),
    "a Metal block after another backend's device": (VULKAN + PERF + "ggml_metal_init: using MPS\n", 1),
    "a legacy Metal block after results": (LEGACY_M2 + PERF + LEGACY_M2, 1),
    "a second M4-era Metal block": (M4_BLOCK + M4_BLOCK, 1),
    "a legacy Metal block naming another device": (LEGACY_M2 + LEGACY_M1, 1),
    "another device list": (VULKAN + PERF + CUDA, 1),
    "a llama-bench header after rows": (MD_HEADER + MD_METAL + MD_HEADER + MD_METAL, 1),
    "a llama-bench row of another configuration": (jsonl() + jsonl(commit="3f2e7c1a5"), 1),  # another build
    "a llama-bench row after a probe": (PROBE + jsonl(), 1),
    "a llama-bench row naming another GPU": (
        "ggml_metal_init: GPU name:   Apple M2 Max\n" + jsonl(gpu="Apple Paravirtual device"), 1),
    "a llama-bench row of another backend": (MD_HEADER + MD_METAL + MD_CPU, 1),
    "timings after a probe": (PROBE + PERF, 1),
    "a timing block of another process": (PERF + "\n## q8_0\n\n```\n" + PERF, 1),
    # whisper.cpp's backend init finding no GPU, after a context on a GPU device (field 266: an app's later launch)
    "whisper.cpp finding no GPU after a GPU device": (LEGACY_M2 + "whisper_backend_init_gpu: no GPU found\n", 1),
    # the user's next command (a shell prompt's '$') after another process's model load or results
    "a pasted command after another process's run": (PERF + "$ ./llama-cli -m q8.gguf -p hi\n" + PERF, 1),
    # (-o json: `]` closes the array, after the last object; with -v its loader lines follow, like the next one's)
    "a llama-bench row after its JSON array closed": (json_array(jsonl(pp=True)) + json_array(jsonl()), 1),
    # -o jsonl: no close, but one invocation prints each test of its setup once (here a second tg128)
    "a llama-bench row repeating a test of its setup": (jsonl() + LOADER + jsonl(ts=12.70), 1),
}


def assemble(text: str) -> list[RunBuilder]:
    runs: list[RunBuilder] = []
    asm = Assembler(runs.append, lambda run, rows: None)
    scanner = Scanner(Dispatcher(), asm.feed)
    scanner.feed(text.encode())
    scanner.close()
    asm.finish()
    return runs


@pytest.mark.parametrize("reason", sorted(CASES))
def test_each_boundary_opens_its_run(reason):
    text, index = CASES[reason]
    runs = assemble(text)
    assert [r.started_by for r in runs][index] == reason, [r.started_by for r in runs]
    assert runs[0].started_by is None  # the first run is opened by the input's start, not a boundary


SAME_PROCESS = {
    "a second M4-era Metal block": M4_BLOCK + M4_BLOCK.replace("MTL0 (Apple Paravirtual device)", "MTL1"),
    "a llama-bench row of another configuration": jsonl(pp=True) + jsonl(ts=12.70),
    "a timing block of another process": PERF + PERF,  # a loop repeating one command: its blocks back to back
    # llama-bench -v (real, 2026): the first test's model load, then the header with the first row, a perf block per
    # test, the next test's load, its row
    "a program's start after a finished run": LOADER + MD_HEADER + MD_METAL.splitlines(keepends=True)[0] + PERF
                                              + LOADER + MD_METAL.splitlines(keepends=True)[1],
    # one llama-bench -o json 2>&1 of the M4 era: its Metal block (backend registration) before its JSON
    "a llama-bench row in another output format": M4_BLOCK + "[\n" + jsonl(pp=True) + jsonl(ts=12.70),
    # llama-server answering two requests: its slot lines and timings per request
    "timings of another program after a finished run": SLOT + SLOT,
}


@pytest.mark.parametrize("reason", sorted(SAME_PROCESS))
def test_the_same_process_stays_one_run(reason):
    """The counter-cases the predicates are careful about: each log here is one process."""
    assert [r.started_by for r in assemble(SAME_PROCESS[reason])] == [None]


def test_the_next_ollama_load_keeps_what_the_server_printed_at_start():
    runs = assemble(OLLAMA_START + OLLAMA_LOAD + OLLAMA_LOAD)
    assert [r.started_by for r in runs] == [None, "the next ollama model load"]
    assert runs[1].facts.ollama_library == runs[0].facts.ollama_library == "metal"
    assert runs[1].facts.ollama_app is True


def _reasons_in_source() -> set[str]:
    """Every string a boundary predicate returns (the `return "..."` statements of boundaries.py)."""
    tree = ast.parse(Path(boundaries.__file__).read_text())
    found = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.name.startswith("_"):
            for node in ast.walk(fn):
                if isinstance(node, ast.Return) and isinstance(node.value, ast.Constant) \
                        and isinstance(node.value.value, str):
                    found.add(node.value.value)
                elif isinstance(node, ast.Return) and isinstance(node.value, ast.IfExp):
                    for part in (node.value.body, node.value.orelse):
                        if isinstance(part, ast.Constant) and isinstance(part.value, str):
                            found.add(part.value)
    return found


def test_every_reason_has_a_case():
    reasons = _reasons_in_source()
    assert len(reasons) >= 15
    assert reasons == set(CASES), (reasons - set(CASES), set(CASES) - reasons)


def test_every_boundary_kind_is_a_kind_some_parser_emits():
    from analyzer.parsers import FORMATS
    emitted = {s.kind for f in FORMATS for s in f.samples} | {"bench.row", "vulkan.device", "cuda.device"}
    assert set(boundaries.BY_KIND) <= emitted, set(boundaries.BY_KIND) - emitted


# Each shape of `cat a.log b.log` where b starts a program after a's run measured (issue 38): b's first line
# opens b's run. (The real logs of llama.cpp 0c1e570 and the field corpus's shapes.)
AFTER_A_FINISHED_RUN = {
    "llama-simple's model load after llama-cli's timings": PERF + LOADER,
    "--list-devices after llama-completion's timings": PERF + DEVICES,
    "llama-server's slot lines after llama-bench's JSON": jsonl() + SLOT,
    "mlx_lm's averages after llama.cpp's timings": PERF + MLX,
    "ollama's eval rates after llama.cpp's timings": PERF + OLLAMA_RATES,
    "a llama-bench JSON row after ollama's eval rates": OLLAMA_RATES + jsonl(),
    "a llama-bench JSON row after a markdown table": MD_HEADER + MD_METAL + jsonl(),
    "a legacy Metal block after llama-cli's timings": PERF + LEGACY_M1,
    "an M4-era Metal block after a model load": LOADER + M4_BLOCK,
    "a CUDA device list after a model load": LOADER + CUDA,
    "common_init's build line after a model load": LOADER + BUILD,
    "the 2026 llama-server's first line after llama-simple's model load": LOADER + SERVER_2026 + SYSTEM_INFO,
    "a server listening after llama-cli's timings": PERF + LISTENING + SLOT,
    "llama-bench -o sql after llama-bench JSON rows": jsonl() + SQL,
    "llama-bench -o sql twice": SQL + SQL,
    # (real, Homebrew on macOS 27, 2026-10-07: shared/reference/field-2026.md 1.4)
    "--version after llama-bench's rows": jsonl() + "version: 0.5.0 (build 11146, commit 7fe450e19)\n"
                                          "built with AppleClang 21.0.0.21000334 for Darwin arm64\n",
}


@pytest.mark.parametrize("shape", sorted(AFTER_A_FINISHED_RUN))
def test_each_invocation_its_own_run(shape):
    runs = assemble(AFTER_A_FINISHED_RUN[shape])
    assert len(runs) == 2, [r.started_by for r in runs]


@pytest.mark.parametrize("backend", ["CANN", "CPU", "BLAS", "Vulkan"])
def test_a_metal_block_after_a_table_of_another_backend_is_the_next_process(backend):
    """A llama-bench table whose backend column names no Metal (field 091: CANN) is a build that prints no
    Metal block: one after its rows is the next process's, even though llama-bench -v reloads per test."""
    table = MD_HEADER + MD_METAL.replace("Metal,BLAS", f"{backend:<10}")
    runs = assemble(table + LEGACY_M2)
    assert [r.started_by for r in runs] == [None, "a Metal block after another backend's device"]
    assert [r.facts.device.name for r in runs] == [None, "Apple M2 Max"]

