"""Today's programs (issue 38, item 3) through the real pipeline, into a real SQLite file: llama.cpp's
semantic version line, the unified `llama` binary, ollama 0.30's two engines, a Tart image's shim banner
that did not take, and fine-tuning aborting on a guest. Logs are written from field-2026.md's quoted lines
and the upstream format strings."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

BLOCK5 = """ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)
ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)
ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)
ggml_metal_device_init: simdgroup reduction   = false
ggml_metal_device_init: simdgroup matrix mul. = false
ggml_metal_device_init: has unified memory    = true
ggml_metal_device_init: has bfloat            = false
"""


def runs_of(tmp_path: Path, text: str):
    log = tmp_path / "in.log"
    log.write_text(text)
    db = open_db(tmp_path / "capscan.db")
    src = open_input(str(log))
    try:
        ids = ingest(db, src).run_ids
    finally:
        src.close()
    return diagnose_runs(db, ids)


@pytest.mark.parametrize("text,number,commit,release", [
    ("version: 0.5.0 (build 11146, commit 7fe450e19)\nbuilt with AppleClang 21.0.0.21000334 for Darwin arm64\n",
     11146, "7fe450e19", "0.5.0"),
    ("version: 7972 (e06088da0)\nbuilt with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin24.6.0\n",
     7972, "e06088da0", None),
    ("build: 11146 (7fe450e19) with AppleClang 21.0.0.21000334 for Darwin arm64\n" + BLOCK5, 11146, "7fe450e19", None),
])
def test_version_lines_keep_the_build_number(tmp_path, text, number, commit, release):
    (run,) = runs_of(tmp_path, text)
    f = run.facts
    assert (f.build_number, f.build_commit, f.release) == (number, commit, release)
    assert f.build_target in ("arm64-apple-darwin", "arm64-apple-darwin24.6.0")


@pytest.mark.parametrize("command,program", [
    ("$ llama serve -m ~/models/q.gguf --port 8080 -lv 4", "llama-server"),
    ("runner@Mac-1760103338 ~ % llama bench -m ~/models/q.gguf -p 64 -n 32", "llama-bench"),
    ("$ ./build/bin/llama cli -m q.gguf -lv 4", "llama-cli"),
    ("$ GGML_METAL_DEVICES=1 llama completion -m q.gguf -p hi", "llama-completion"),
    ("% /opt/homebrew/bin/llama-server -m q.gguf -lv 4", "llama-server"),  # a zsh prompt shown bare
])
def test_the_unified_binary_is_named_by_its_subcommand(tmp_path, command, program):
    (run,) = runs_of(tmp_path, command + "\n" + BLOCK5)
    assert run.facts.program == program
    assert run.diagnosis.verdict == "capability-downgrade"


OLLAMA_SERVE = ('time=2026-10-02T14:20:58.902+02:00 level=INFO source=types.go:130 msg="inference compute" id=0 '
                'library=Metal name=Metal description="Apple Paravirtual device" total="10.7 GiB" available="10.7 GiB"\n')
GGUF_LOAD = ('time=2026-10-02T14:21:07.532+02:00 level=INFO source=llama_server.go:412 msg="starting llama-server" '
             'cmd="/usr/local/bin/llama-server --model /Users/admin/.ollama/models/blobs/sha256-6a0746a1ec1a '
             '--port 50123 --log-verbosity 4 --no-log-prefix --no-log-timestamps"\n')
MLX_LOAD = ('time=2026-10-02T14:25:40.101+02:00 level=INFO source=runner.go:118 msg="starting mlx runner subprocess" '
            'model=qwen3:4b-mlx port=50188\n'
            'time=2026-10-02T14:25:44.877+02:00 level=INFO source=runner.go:164 msg="mlx runner is ready" port=50188\n')


def test_an_ollama_mlx_load_is_never_a_downgrade_even_after_a_clamped_gguf_load(tmp_path):
    runs = runs_of(tmp_path, OLLAMA_SERVE + GGUF_LOAD + BLOCK5 + "load_tensors: offloaded 29/29 layers to GPU\n"
                   + MLX_LOAD)
    assert [r.facts.ollama_engine for r in runs] == ["llama-server", "mlx"]
    gguf, mlx = runs
    assert gguf.diagnosis.verdict == "capability-downgrade"
    assert mlx.facts.backend == "mlx"
    assert mlx.diagnosis.verdict != "capability-downgrade" and mlx.diagnosis.fixable is False
    assert any(f["rule"] == "mlx-unaffected" for f in mlx.diagnosis.stored()["findings"])


def test_ollama_030_advice_does_not_ask_for_ollama_debug(tmp_path):
    (run,) = runs_of(tmp_path, OLLAMA_SERVE + GGUF_LOAD)
    steps = " ".join(run.diagnosis.next_steps)
    assert run.facts.program == "ollama" and run.diagnosis.verdict == "unknown"
    assert "OLLAMA_DEBUG" in steps and "without OLLAMA_DEBUG" in steps


def test_older_ollama_advice_still_asks_for_ollama_debug(tmp_path):
    old = ('time=2025-02-16T20:52:03.516-06:00 level=INFO source=server.go:380 msg="starting llama server" '
           'cmd="/usr/local/bin/ollama runner --model /Users/a/.ollama/models/blobs/sha256-dde5aa3fc5ff"\n')
    (run,) = runs_of(tmp_path, old)
    assert "OLLAMA_DEBUG=1 ollama serve" in " ".join(run.diagnosis.next_steps)


@pytest.mark.parametrize("banner", [
    "[TartMetalCapabilities] Enabled for llama-bench (appleFamilyMax=1009 maxThreadgroupMemory=65536)",
    "2026-10-12 09:14:03.118 llama-bench[1893:22107] [TartMetalCapabilities] Enabled for /opt/homebrew/bin/llama-bench",
    "[TartMetalCapabilities] Enabled for llama-bench: appleFamilyMax=1009, maxThreadgroupMemory=65536",
])
def test_a_tart_banner_beside_apple5_lines_is_still_a_downgrade(tmp_path, banner):
    (run,) = runs_of(tmp_path, banner + "\n" + BLOCK5)
    d = run.diagnosis.stored()
    assert run.facts.shim is not None and run.facts.shim.name == "TartMetalCapabilities"
    assert d["verdict"] == "capability-downgrade"
    assert any(f["rule"] == "shim-not-in-effect" for f in d["findings"])


def test_a_tart_banner_beside_apple9_lines_is_the_shim_working(tmp_path):
    block9 = BLOCK5.replace("Apple5  (1005)", "Apple9  (1009)").replace("= false", "= true")
    (run,) = runs_of(tmp_path, "[TartMetalCapabilities] Enabled for llama-bench: appleFamilyMax=1009\n" + block9)
    assert run.diagnosis.verdict == "healthy"
    assert run.facts.shim.apple_family_max == 1009


@pytest.mark.parametrize("line", [
    "ggml-backend.cpp:941: pre-allocated tensor (adamw step for output_norm.weight) in a buffer (MTL0) that cannot run "
    "the operation (OPT_STEP_ADAMW)",
    "/Users/runner/work/x/llama.cpp/ggml/src/ggml-backend.cpp:941: pre-allocated tensor (sgd step for "
    "blk.0.attn_q.weight) in a buffer (MTL0) that cannot run the operation (OPT_STEP_SGD)",
])
def test_training_aborts_on_a_guest_with_the_cpu_workaround(tmp_path, line):
    (run,) = runs_of(tmp_path, BLOCK5 + line + "\nAbort trap: 6\n")
    d = run.diagnosis.stored()
    assert d["verdict"] == "capability-downgrade"
    assert run.facts.op_refused.startswith("OPT_STEP_") and run.facts.crash
    assert any(f["rule"] == "training-aborts" for f in d["findings"])
    assert any("GGML_METAL_DEVICES=0" in s for s in d["next_steps"])


def test_training_abort_alone_does_not_claim_a_vm(tmp_path):
    (run,) = runs_of(tmp_path, "ggml-backend.cpp:941: pre-allocated tensor (adamw step for output_norm.weight) in a "
                               "buffer (MTL0) that cannot run the operation (OPT_STEP_ADAMW)\n")
    assert run.diagnosis.verdict == "unknown" and run.diagnosis.fixable is False


def test_whisper_family7_line_alone_is_not_fixable(tmp_path):
    """It says both 'CPU' and 'no Apple7', but an Intel Mac's GPU says the same: never fixable alone."""
    (run,) = runs_of(tmp_path, "whisper_backend_init: Metal GPU does not support family 7 - falling back to CPU\n")
    assert run.facts.program == "whisper.cpp"
    assert run.diagnosis.verdict == "unknown" and run.diagnosis.fixable is False


def test_a18_pro_guest_cpu_names_an_apple9_host(tmp_path):
    (run,) = runs_of(tmp_path, "machdep.cpu.brand_string: Apple A18 Pro (Virtual)\n" + BLOCK5)
    d = run.diagnosis.stored()
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is True
    assert d["host_chip"] == "Apple A18 Pro" and d["host_family"] == 1009


SLOT = ("slot print_timing: id  0 | task 0 | \n"
        "prompt eval time =    9683.12 ms /    64 tokens (  151.30 ms per token,     6.61 tokens per second)\n"
        "       eval time =  320114.90 ms /    32 tokens (10003.59 ms per token,     0.10 tokens per second)\n")


def test_slot_lines_inside_ollama_030_stay_ollama(tmp_path):
    """ollama 0.30 runs llama-server at --log-verbosity 4: its slot lines land in server.log, unprefixed."""
    (run,) = runs_of(tmp_path, GGUF_LOAD + "load_tensors: offloaded 29/29 layers to GPU\n" + SLOT)
    assert run.facts.program == "ollama"


@pytest.mark.parametrize("command", ["", "$ llama-cli -m q.gguf -p hi -n 32 -lv 4\n", "$ llama cli -m q.gguf -lv 4\n"])
def test_the_2026_llama_cli_at_lv4_is_llama_cli(tmp_path, command):
    """At -lv 4 the 2026 llama-cli prints its in-process server's slot lines, then its own summary."""
    (run,) = runs_of(tmp_path, command + SLOT + "\n[ Prompt: 6.6 t/s | Generation: 0.1 t/s ]\n\nExiting...\n")
    assert run.facts.program == "llama-cli"


def test_llama_server_slot_lines_are_llama_server(tmp_path):
    (run,) = runs_of(tmp_path, "main: server is listening on http://127.0.0.1:8080\n" + SLOT)
    assert run.facts.program == "llama-server"


def test_llama_simple_is_named_by_its_summary_line(tmp_path):
    (run,) = runs_of(tmp_path, "llama_perf_context_print:        load time =      12.01 ms\n"
                               "main: decoded 32 tokens in 0.41 s, speed: 78.05 t/s\n")
    assert run.facts.program == "llama-simple"


def test_a_banner_that_did_not_take_says_capscan_will_not_stack_on_it(tmp_path):
    """With the guest's own proof of an Apple-silicon host the clamp is fixable, but not on top of the image's
    shim (the remedy's preflight refuses a stock run with a banner): the next steps say to run stock first."""
    arm64 = ("system_info: n_threads = 4 (n_threads_batch = 4) / 4 | Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1 | "
             "ARM_FMA = 1 | ACCELERATE = 1 |\n")
    (run,) = runs_of(tmp_path, "[TartMetalCapabilities] Enabled for llama-bench (appleFamilyMax=1009)\n" + arm64 + BLOCK5)
    d = run.diagnosis.stored()
    assert d["verdict"] == "capability-downgrade"
    assert any("never stacks" in s for s in d["next_steps"])


# Lines of the real llama.cpp of 2026-10-01 (commit 0c1e570, a CPU build on Linux), as its programs printed
# them (scripts/real-llama-logs, issue 38 item 7): each program named from its own lines.
REAL_2026 = [
    ('llama-simple', [
        '<s> The capital of France is clock RAM aston記 offici promotedwork reprodu Notificationorte'
        'rARNING држа ließ⸮ indentkindmain: decoded 16 tokens in 0.03 s, speed: 512.33 t/s',
        'llama_perf_context_print:        load time =      51.21 ms',
        'llama_perf_context_print: prompt eval time =       5.76 ms /     6 tokens (    0.96 ms per'
        ' token,  1042.21 tokens per second)',
        'llama_perf_context_print:        eval time =      24.11 ms /    15 runs   (    1.61 ms per'
        ' token,   622.07 tokens per second)',
        'llama_perf_context_print:       total time =      76.69 ms /    21 tokens',
        'llama_perf_context_print:    graphs reused =         14',
    ]),
    ('llama-completion', [
        '0.00.001.365 I llama_completion: llama backend init',
        '0.00.002.706 I llama_completion: load the model and apply lora adapter, if any',
        '0.00.269.926 I common_perf_print:    sampling time =       1.46 ms',
        '0.00.269.936 I common_perf_print:    samplers time =       0.60 ms /    22 tokens',
        '0.00.269.960 I common_perf_print:        load time =      68.92 ms',
        '0.00.269.967 I common_perf_print: prompt eval time =      21.90 ms /     6 tokens (    3.6'
        '5 ms per token,   273.96 tokens per second)',
        '0.00.269.972 I common_perf_print:        eval time =      77.87 ms /    15 runs   (    5.1'
        '9 ms per token,   192.62 tokens per second)',
        '0.00.269.978 I common_perf_print:       total time =     102.92 ms /    21 tokens',
    ]),
    ('llama-cli', [
        'build      : b1-0c1e570',
        'model      : models/tiny-llama-q4_0.gguf',
        '[ Prompt: 2058.6 t/s | Generation: 445.3 t/s ]',
    ]),
    ('llama-cli', [
        'Loading model... |0.00.011.934 I cmn  common_param: common_params_print_info: build 1 (0c1'
        'e570) with GNU 12.2.0 for Linux x86_64',
        '0.00.443.059 I slot print_timing: id  0 | task 0 | prompt eval time =      17.63 ms /    3'
        '3 tokens (    0.53 ms per token,  1871.38 tokens per second)',
        '0.00.443.096 I slot print_timing: id  0 | task 0 |        eval time =     202.89 ms /    1'
        '6 tokens (   13.53 ms per token,    73.93 tokens per second)',
        '0.00.443.097 I slot print_timing: id  0 | task 0 |       total time =     220.52 ms /    49 tokens',
        '0.00.443.108 I slot print_timing: id  0 | task 0 |    graphs reused =         15',
        '[ Prompt: 1871.4 t/s | Generation: 73.9 t/s ]',
    ]),
    ('llama-server', [
        '0.00.652.544 I slot print_timing: id  3 | task 0 | prompt eval time =      11.43 ms /     '
        '6 tokens (    1.91 ms per token,   524.93 tokens per second)',
        '0.00.652.550 I slot print_timing: id  3 | task 0 |        eval time =     152.68 ms /    1'
        '6 tokens (   10.18 ms per token,    98.25 tokens per second)',
        '0.00.652.551 I slot print_timing: id  3 | task 0 |       total time =     164.11 ms /    22 tokens',
        '0.00.652.561 I slot print_timing: id  3 | task 0 |    graphs reused =         15',
    ]),
]


@pytest.mark.parametrize("program,lines", REAL_2026, ids=[f"{p}-{i}" for i, (p, _) in enumerate(REAL_2026)])
def test_real_2026_programs_are_named_right(tmp_path, program, lines):
    (run,) = runs_of(tmp_path, "\n".join(lines) + "\n")
    assert run.facts.program == program


def test_real_2026_version_line(tmp_path):
    (run,) = runs_of(tmp_path, "version: 0.5.0-dev (build 1, commit 0c1e570)\nbuilt with GNU 12.2.0 for Linux x86_64\n")
    f = run.facts
    assert (f.release, f.build_number, f.build_commit, f.build_target) == ("0.5.0-dev", 1, "0c1e570", "Linux x86_64")
