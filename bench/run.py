#!/usr/bin/env python3
"""capscan benchmark: speed and memory, each figure beside its peer.

    python3 bench/run.py [--parts ingest,writers,startup,listing] [--size-mb 256] [--rows 1000000]
                         [--before REV] [--ingest-repeat 2] [--writer-rows 100000]
                         [--runs 100000] [--runs-db PATH] [--pure-too] [--keep] [--out DIR]
                         [--tree | --no-tree] [--repeat 9]

Before and after in one run (ingest, writers): ``--before REV`` (default ``HEAD~1``, the previous
commit; ``none`` to skip) exports that commit's tree (``git archive``, into ``--out``, once per
commit) and runs the same workload against it, in a subprocess with ``PYTHONPATH`` pointing there,
alternately with this tree (``--ingest-repeat`` rounds; the best of each side counts), and prints
both figures with their ratio.

ingest: generates, deterministically (seeded), into ``bench/out/`` (gitignored):

(a) ``noise.log``: at least ``--size-mb`` MiB of a noise-heavy llama.cpp /
    llama-server / ollama log (model-loader dumps, ``print_info``,
    ``load_tensors``, ``llama_context``, server slot lines, HTTP request lines,
    ollama slog lines, generated answer text) with about one relevant line in
    300 (Metal device blocks, timing lines, llama-bench markdown tables, shim
    banners, ``system_info``...);
(b) ``bench.jsonl``: ``--rows`` llama-bench JSONL rows (the current layout,
    about 1.1 KB a row).

Then measures, in the same run and on the same warm page cache:

- ``cat FILE > /dev/null``: plain read throughput, for context;
- ``LC_ALL=C grep -F -c -e LIT ...`` with exactly ``analyzer.parsers.LITERALS``:
  the peer of a literal prefilter (wall time, and CPU seconds);
- ``python -m analyzer --db TMP ingest FILE`` (the real CLI, in a subprocess,
  into a database created beforehand, as a user's exists after the first run)
  under ``/usr/bin/time -v`` (Debian package ``time``): wall time, CPU seconds
  and peak RSS; without it, ``resource.getrusage(RUSAGE_CHILDREN)``.
  ``--pure-too`` ingests (a) once more with ``CAPSCAN_PURE_SCAN=1``;
- for (b), its floor on this machine: in a fresh process, ``orjson.loads`` of
  each row's measured tail (no more than capscan decodes of a row) and
  sqlite3's ``executemany`` of the rows into a table of the same columns (no
  index, no foreign key, no check, no run assembly), CPU seconds of each: the
  most rows/s a design that decodes every row in Python and keeps it as a row
  could reach on one core here.

writers: ``--writer-rows`` listing rows (the keys ``runs --json`` writes, seeded values, one row in
fifty with non-ASCII text) through ``tabular.write_json_array`` and ``write_nl`` (``--json`` and
``--nl`` past the query) into a sink that counts what it gets; the best of 9 runs each, beside
``--before``'s.

startup, listing: on a database of ``--runs`` runs (the TUI benchmark's
builder, ``bench/tui_bench.py``; ``--runs-db`` keeps and reuses it), capscan as
users install it: a wheel built from this working tree (``pip wheel``) installed
into a fresh venv, ``bench/out/installed-venv`` (made from the running
interpreter's base Python; reused while the tree, the running environment's
package versions and the Python are unchanged: a fingerprint in its
``capscan-tree.sha256``). The dependencies are pinned to the versions of the
running environment (``pip freeze`` as constraints), and pip takes them from
wherever this machine's pip is configured to look (pip.conf / ``PIP_*``: a
local wheelhouse or index works offline). The development venv's editable
install is not what a user runs: its import hook (``__editable___*_finder``,
loaded by ``site``) costs 25-30 ms before any capscan code runs.
``--tree`` measures the tree the old way instead (``python -m analyzer`` with
the running interpreter, no wheel built); start-up prints that as a second,
labelled block either way unless ``--no-tree``.

- the median wall time of ``capscan --version``, ``runs``, ``runs --json``,
  ``show N`` and ``db stats`` (the venv's ``capscan`` console script) beside
  that venv's ``python -c pass`` (the interpreter alone), ``-c 'import re,
  click'`` (what pip's console script imports, plus click: where any click CLI
  starts), ``-c 'import re, click, sqlite3, pydantic'`` and the same plus one
  pydantic model of one field (what ``show`` cannot do without: ``import pydantic``
  alone loads neither BaseModel nor what building a first model imports, about as
  much again here; ``show`` is held to 1.3x of each, the second the target);
- ``capscan runs -n 0`` in table (piped), ``--json`` and ``--nl`` forms: wall
  time and peak RSS, beside the ``sqlite3`` CLI printing the same columns.

Targets (issue 13): (a) capscan's MB/s >= grep's (ratio >= 1.0); (b) >= 150,000
rows/s; peak RSS < 150 MB for both; ``--version`` < 60 ms; ``runs``, ``show``,
``db stats`` < 120 ms; ``show`` within 1.3x of its pydantic floor (issue 21); ``runs -n 0`` < 3 s and < 100 MB in every form. The
tables go to stdout, the figures to ``bench/out/results.json``. Exit status 0
when every target passes, 1 otherwise. This is a script, not a test: the
figures depend on the machine (and on what else runs on it: the load average
is printed with the figures).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import re
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analyzer.parsers import LITERALS  # noqa: E402

MB = 1 << 20
TARGET_GREP_RATIO = 1.0
TARGET_ROWS_S = 150_000
TARGET_RSS_MB = 150.0
TARGET_VERSION_S = 0.060
TARGET_READ_S = 0.120  # runs, show, db stats on 100,000 runs
TARGET_SHOW_FLOOR_RATIO = 1.3  # show's median over its floor's (issue 21)
SHOW_IMPORTS = "import re, click, sqlite3, pydantic"
# what any program with a pydantic model pays: BaseModel, and the schema machinery the first model loads
SHOW_FLOOR = SHOW_IMPORTS + "\nclass Floor(pydantic.BaseModel):\n    x: int = 0"
TARGET_LIST_S = 3.0  # runs -n 0 on 100,000 runs, each form
TARGET_LIST_RSS_MB = 100.0
RELEVANT_EVERY = 300  # about one relevant line in this many


# --------------------------------------------------------------------------
# (a) the noise-heavy log
# --------------------------------------------------------------------------

WORDS = ("the model layer token cache memory would could which their about there these other into more time "
         "when make like than first been after also where most only over such through some because between "
         "answer question result example function value should return list string number matrix vector "
         "gradient attention weights context prompt sequence batch compute kernel buffer thread device apple "
         "virtual machine guest host metal vulkan shader pipeline quantized inference latency request server "
         "python swift rust code variable loop array index error warning check test build system file path "
         "however therefore consider instance approach method simple complex large small fast slow better").split()

GGUF_KV = [
    ("general.architecture", "str", "llama"), ("general.type", "str", "model"),
    ("general.finetune", "str", "Instruct"), ("general.basename", "str", "Meta-Llama-3.1"),
    ("general.size_label", "str", "8B"), ("general.license", "str", "llama3.1"),
    ("general.tags", "arr[str,6]", '["facebook", "meta", "pytorch", "llama", "llama-3", "text-generation"]'),
    ("general.languages", "arr[str,8]", '["en", "de", "fr", "it", "pt", "hi", "es", "th"]'),
    ("llama.block_count", "u32", "32"), ("llama.context_length", "u32", "131072"),
    ("llama.embedding_length", "u32", "4096"), ("llama.feed_forward_length", "u32", "14336"),
    ("llama.attention.head_count", "u32", "32"), ("llama.attention.head_count_kv", "u32", "8"),
    ("llama.rope.freq_base", "f32", "500000.000000"), ("llama.attention.layer_norm_rms_epsilon", "f32", "0.000010"),
    ("llama.attention.key_length", "u32", "128"), ("llama.attention.value_length", "u32", "128"),
    ("general.file_type", "u32", "15"), ("llama.vocab_size", "u32", "128256"),
    ("llama.rope.dimension_count", "u32", "128"), ("tokenizer.ggml.model", "str", "gpt2"),
    ("tokenizer.ggml.pre", "str", "llama-bpe"),
    ("tokenizer.ggml.tokens", "arr[str,128256]", '["!", "\\"", "#", "$", "%", "&", "\'", "(", ")", "*", "+", ",", ...'),
    ("tokenizer.ggml.token_type", "arr[i32,128256]", "[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, ..."),
    ("tokenizer.ggml.merges", "arr[str,280147]", '["\u0120 \u0120", "\u0120 \u0120\u0120\u0120", "\u0120\u0120 \u0120\u0120", ...'),
    ("tokenizer.ggml.bos_token_id", "u32", "128000"), ("tokenizer.ggml.eos_token_id", "u32", "128009"),
    ("tokenizer.chat_template", "str", "{{- bos_token }}\\n{%- if custom_tools is defined %}\\n    {%- set tools_in_user..."),
    ("general.quantization_version", "u32", "2"),
]

PRINT_INFO = [
    "file format = GGUF V3 (latest)", "file type   = Q4_K - Medium", "file size   = 4.58 GiB (4.89 BPW)",
    "arch             = llama", "vocab_only       = 0", "n_ctx_train      = 131072", "n_embd           = 4096",
    "n_layer          = 32", "n_head           = 32", "n_head_kv        = 8", "n_rot            = 128",
    "n_swa            = 0", "n_embd_head_k    = 128", "n_embd_head_v    = 128", "n_gqa            = 4",
    "n_embd_k_gqa     = 1024", "n_embd_v_gqa     = 1024", "f_norm_eps       = 0.0e+00", "f_norm_rms_eps   = 1.0e-05",
    "f_clamp_kqv      = 0.0e+00", "f_max_alibi_bias = 0.0e+00", "f_logit_scale    = 0.0e+00", "n_ff             = 14336",
    "n_expert         = 0", "n_expert_used    = 0", "causal attn      = 1", "pooling type     = 0", "rope type        = 0",
    "rope scaling     = linear", "freq_base_train  = 500000.0", "freq_scale_train = 1", "n_ctx_orig_yarn  = 131072",
    "rope_finetuned   = unknown", "model type       = 8B", "model params     = 8.03 B",
    "vocab type       = BPE", "n_vocab          = 128256", "n_merges         = 280147",
    "BOS token        = 128000 '<|begin_of_text|>'", "EOS token        = 128009 '<|eot_id|>'",
    "EOT token        = 128009 '<|eot_id|>'", "LF token         = 198 '\u010a'", "max token length = 256",
]

LLAMA_CONTEXT = [
    "llama_context: constructing llama_context", "llama_context: n_seq_max     = 1", "llama_context: n_ctx         = 4096",
    "llama_context: n_ctx_per_seq = 4096", "llama_context: n_batch       = 2048", "llama_context: n_ubatch      = 512",
    "llama_context: causal_attn   = 1", "llama_context: flash_attn    = auto", "llama_context: freq_base     = 500000.0",
    "llama_context: freq_scale    = 1",
    "llama_context: n_ctx_per_seq (4096) < n_ctx_train (131072) -- the full capacity of the model will not be utilized",
    "llama_context:        CPU  output buffer size =     0.49 MiB",
    "llama_kv_cache_unified:      Metal KV buffer size =   512.00 MiB",
    "llama_kv_cache_unified: size =  512.00 MiB (  4096 cells,  32 layers,  1 seqs), K (f16):  256.00 MiB, V (f16):  256.00 MiB",
    "llama_context:      Metal compute buffer size =   296.00 MiB",
    "llama_context:        CPU compute buffer size =    16.01 MiB", "llama_context: graph nodes  = 1030",
    "llama_context: graph splits = 2",
]

LOAD_TENSORS = [
    "load_tensors: loading model tensors, this can take a while... (mmap = true)",
    "load_tensors: offloading 32 repeating layers to GPU", "load_tensors: offloading output layer to GPU",
    "load_tensors: Metal_Mapped model buffer size =  4403.50 MiB",
    "load_tensors:   CPU_Mapped model buffer size =   281.81 MiB",
]


def _ts(rng: random.Random) -> str:
    return (f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:"
            f"{rng.randint(0, 59):02d}.{rng.randint(0, 999):03d}+01:00")


def _sentence(rng: random.Random, lo: int = 6, hi: int = 30) -> str:
    words = rng.choices(WORDS, k=rng.randint(lo, hi))
    s = " ".join(words)
    return s[0].upper() + s[1:] + rng.choice((".", ".", ".", ",", ":", "?"))


def _noise_block(rng: random.Random) -> list[str]:
    """One coherent stretch of irrelevant lines."""
    kind = rng.random()
    out: list[str] = []
    if kind < 0.05:  # a model load, minus its relevant lines
        out.append(f"build: {rng.randint(3000, 7000)} ({rng.getrandbits(28):07x}) with Apple clang version 17.0.0 "
                   "(clang-1700.0.13.3) for arm64-apple-darwin24.5.0")
        out.append("main: llama backend init")
        out.append("main: load the model and apply lora adapter, if any")
        out.append(f"llama_model_loader: loaded meta data with {len(GGUF_KV)} key-value pairs and 291 tensors from "
                   f"/Users/admin/models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf (version GGUF V3 (latest))")
        out.append("llama_model_loader: Dumping metadata keys/values. Note: KV overrides do not apply in this output.")
        for i, (k, t, v) in enumerate(GGUF_KV):
            out.append(f"llama_model_loader: - kv {i:3d}: {k:>42s} {t:<16s} = {v}")
        out += ["llama_model_loader: - type  f32:   65 tensors", "llama_model_loader: - type q4_K:  193 tensors",
                "llama_model_loader: - type q6_K:   33 tensors"]
        out += [f"print_info: {p}" for p in PRINT_INFO]
        out += ["load: special tokens cache size = 256", "load: token to piece cache size = 0.7999 MB"]
        out += LOAD_TENSORS
        out += LLAMA_CONTEXT
        out.append("common_init_from_params: setting dry_penalty_last_n to ctx_size = 4096")
        out.append("common_init_from_params: warming up the model with an empty run - please wait ... "
                   "(--no-warmup to disable)")
    elif kind < 0.35:  # a llama-server request with its answer streamed in debug mode
        task = rng.randint(0, 99999)
        n = rng.randint(20, 400)
        out.append("srv  params_from_: Chat format: Content-only")
        out.append(f"slot launch_slot_: id  0 | task {task} | processing task")
        out.append(f"slot update_slots: id  0 | task {task} | new prompt, n_ctx_slot = 4096, n_keep = 0, "
                   f"n_prompt_tokens = {n}")
        out.append(f"slot update_slots: id  0 | task {task} | kv cache rm [0, end)")
        out.append(f"slot update_slots: id  0 | task {task} | prompt processing progress, n_past = {n}, "
                   f"n_tokens = {n}, progress = 1.000000")
        for _ in range(rng.randint(10, 60)):
            out.append(_sentence(rng, 4, 40))
        out.append(f"slot      release: id  0 | task {task} | stop processing: n_past = {n + 200}, truncated = 0")
        out.append(f"      total time =    {rng.uniform(100, 9000):8.2f} ms /   {n + 200} tokens")
        out.append("srv  update_slots: all slots are idle")
        out.append("srv  log_server_r: request: POST /v1/chat/completions 127.0.0.1 200")
    elif kind < 0.7:  # ollama
        for _ in range(rng.randint(3, 25)):
            r = rng.random()
            if r < 0.3:
                out.append(f"[GIN] 2025/{rng.randint(1, 12):02d}/{rng.randint(1, 28):02d} - {rng.randint(0, 23):02d}:"
                           f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} | 200 | {rng.uniform(0.01, 30):13.9f}s |"
                           f"       127.0.0.1 | POST     \"/api/{rng.choice(('chat', 'generate', 'embed'))}\"")
            elif r < 0.5:
                out.append(f"time={_ts(rng)} level=DEBUG source=sched.go:{rng.randint(300, 900)} "
                           f"msg=\"context for request finished\"")
            elif r < 0.65:
                out.append(f"time={_ts(rng)} level=DEBUG source=sched.go:{rng.randint(300, 900)} msg=\"runner with "
                           f"non-zero duration has gone idle, adding timer\" modelPath=/Users/admin/.ollama/models/"
                           f"blobs/sha256-{rng.getrandbits(128):032x} duration=5m0s")
            elif r < 0.8:
                out.append(f"time={_ts(rng)} level=DEBUG source=server.go:{rng.randint(600, 1200)} "
                           f"msg=\"completion request\" images=0 prompt={rng.randint(10, 9000)} format=\"\"")
            elif r < 0.9:
                out.append(f"time={_ts(rng)} level=INFO source=server.go:619 msg=\"llama runner started in "
                           f"{rng.uniform(1, 9):.2f} seconds\"")
            else:
                out.append(f"time={_ts(rng)} level=INFO source=routes.go:1238 msg=\"Listening on 127.0.0.1:11434 "
                           f"(version 0.{rng.randint(1, 12)}.{rng.randint(0, 9)})\"")
    elif kind < 0.85:  # HTTP access log of a reverse proxy in front of the server
        for _ in range(rng.randint(5, 40)):
            out.append(f"127.0.0.1 - - [{rng.randint(1, 28):02d}/Mar/2025:{rng.randint(0, 23):02d}:"
                       f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} +0100] \"POST /v1/chat/completions HTTP/1.1\" "
                       f"200 {rng.randint(200, 90000)} \"-\" \"python-requests/2.32.3\"")
    else:  # plain generated text (a pasted transcript)
        for _ in range(rng.randint(5, 80)):
            out.append(_sentence(rng, 3, 45))
    return out


def _relevant_block(rng: random.Random) -> list[str]:
    """One coherent stretch of lines the prefilter must let through."""
    kind = rng.random()
    if kind < 0.2:  # M4-era Metal block
        return ["ggml_metal_library_init: using embedded metal library",
                f"ggml_metal_library_init: loaded in {rng.uniform(0.005, 9):.3f} sec",
                "ggml_metal_device_init: GPU name:   MTL0 (Apple M2 Max)",
                "ggml_metal_device_init: GPU family: MTLGPUFamilyApple8  (1008)",
                "ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)",
                "ggml_metal_device_init: GPU family: MTLGPUFamilyMetal3  (5001)",
                "ggml_metal_device_init: simdgroup reduction   = true",
                "ggml_metal_device_init: simdgroup matrix mul. = true",
                "ggml_metal_device_init: has unified memory    = true",
                "ggml_metal_device_init: has bfloat            = true",
                "ggml_metal_device_init: has tensor            = false",
                "ggml_metal_device_init: use residency sets    = true",
                "ggml_metal_device_init: recommendedMaxWorkingSetSize  = 22906.50 MB"]
    if kind < 0.3:  # legacy Metal block
        return ["ggml_metal_init: allocating", "ggml_metal_init: found device: Apple M1 Pro",
                "ggml_metal_init: picking default device: Apple M1 Pro",
                "ggml_metal_init: using embedded metal library",
                "ggml_metal_init: GPU name:   Apple M1 Pro", "ggml_metal_init: GPU family: MTLGPUFamilyApple7  (1007)",
                "ggml_metal_init: GPU family: MTLGPUFamilyCommon3 (3003)",
                "ggml_metal_init: simdgroup reduction support   = true",
                "ggml_metal_init: simdgroup matrix mul. support = true",
                "ggml_metal_init: hasUnifiedMemory              = true",
                "ggml_metal_init: recommendedMaxWorkingSetSize  = 11453.25 MB"]
    if kind < 0.6:  # server timings
        p, g = rng.randint(10, 2000), rng.randint(10, 800)
        pm, gm = rng.uniform(50, 3000), rng.uniform(300, 30000)
        return [f"slot print_timing: id  0 | task {rng.randint(0, 99999)} | ",
                f"prompt eval time = {pm:10.2f} ms / {p:5d} tokens ({pm / p:8.2f} ms per token, "
                f"{p * 1000 / pm:8.2f} tokens per second)",
                f"       eval time = {gm:10.2f} ms / {g:5d} tokens ({gm / g:8.2f} ms per token, "
                f"{g * 1000 / gm:8.2f} tokens per second)"]
    if kind < 0.7:  # llama-cli perf
        p, g = rng.randint(10, 2000), rng.randint(10, 800)
        pm, gm = rng.uniform(50, 3000), rng.uniform(300, 30000)
        return [f"llama_perf_context_print: prompt eval time = {pm:10.2f} ms / {p:5d} tokens ({pm / p:8.2f} ms per "
                f"token, {p * 1000 / pm:8.2f} tokens per second)",
                f"llama_perf_context_print:        eval time = {gm:10.2f} ms / {g:5d} runs   ({gm / g:8.2f} ms per "
                f"token, {g * 1000 / gm:8.2f} tokens per second)"]
    if kind < 0.8:  # llama-bench markdown table
        rows = ["| model                          |       size |     params | backend    | threads |          test |"
                "                  t/s |",
                "| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: |"
                " -------------------: |"]
        for test in ("pp512", "tg128"):
            rows.append(f"| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | Metal,BLAS |       8 | {test:>13s} |"
                        f" {rng.uniform(10, 900):12.2f} \u00b1 {rng.uniform(0, 3):.2f} |")
        return rows
    if kind < 0.85:  # process start-up lines
        return ["main: built with Apple clang version 17.0.0 (clang-1700.0.13.3) for arm64-apple-darwin24.5.0",
                "load_backend: loaded Metal backend from /opt/homebrew/lib/libggml-metal.so",
                "system_info: n_threads = 8 (n_threads_batch = 8) / 12 | Metal : EMBED_LIBRARY = 1 | CPU : NEON = 1 | "
                "ARM_FMA = 1 | FP16_VA = 1 | DOTPROD = 1 | LLAMAFILE = 1 | ACCELERATE = 1 | REPACK = 1 |"]
    if kind < 0.9:  # model loading lines
        return ["llama_model_load_from_file_impl: using device MTL0 (Apple M2 Max) (unknown id) - 21845 MiB free",
                "llama_model_loader: - kv   2:                               general.name str              = "
                "Meta Llama 3.1 8B Instruct",
                "load_tensors: offloaded 33/33 layers to GPU"]
    if kind < 0.95:  # shim banner
        return ["[LumeMetalCapabilities] Enabled for llama-server (appleFamilyMax=1009 maxThreadgroupMemory=65536)"]
    return [f"time={_ts(rng)} level=INFO source=types.go:130 msg=\"inference compute\" id=0 library=metal variant=\"\" "
            "compute=\"\" driver=0.0 name=\"\" total=\"21.3 GiB\" available=\"21.3 GiB\""]


def generate_noise_log(path: Path, size_mb: int, seed: int = 20260810) -> dict:
    rng = random.Random(seed)
    lit_re = re.compile("|".join(re.escape(lit) for lit in LITERALS))
    # A pool of noise lines, cleaned of any literal so that the relevant
    # share is exactly what is inserted below.
    pool: list[str] = []
    while len(pool) < 200_000:
        pool += [line for line in _noise_block(rng) if not lit_re.search(line)]
    relevant_pool = [_relevant_block(rng) for _ in range(2000)]
    hits_in = [sum(1 for line in block if lit_re.search(line)) for block in relevant_pool]
    target = size_mb * MB
    written = lines = relevant = 0
    npool = len(pool)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        buf: list[str] = []
        while written < target:
            pick = rng.randrange(len(relevant_pool))
            block = relevant_pool[pick]
            # noise between relevant blocks: a few contiguous stretches of the pool
            gap = int(rng.expovariate(1.0 / (RELEVANT_EVERY * len(block)))) + 1
            while gap > 0:
                start = rng.randrange(npool)
                take = min(gap, rng.randint(20, 400), npool - start)
                buf += pool[start:start + take]
                gap -= take
            buf += block
            relevant += hits_in[pick]
            if len(buf) > 50_000:
                text = "\n".join(buf) + "\n"
                fh.write(text)
                written += len(text.encode())
                lines += len(buf)
                buf = []
        if buf:
            text = "\n".join(buf) + "\n"
            fh.write(text)
            written += len(text.encode())
            lines += len(buf)
    return {"lines": lines, "relevant_lines": relevant, "bytes": path.stat().st_size}


# --------------------------------------------------------------------------
# (b) the dense llama-bench JSONL file
# --------------------------------------------------------------------------

_JSONL = ('{{"build_commit": "{commit}", "build_number": {build}, "cpu_info": "Accelerate, Apple M1 Ultra (Virtual)", '
          '"gpu_info": "{gpu}", "backends": "MTL,BLAS", "model_filename": "/Users/admin/models/{model_file}", '
          '"model_type": "{model}", "model_size": 7365964800, "model_n_params": 11766034432, "n_batch": 2048, '
          '"n_ubatch": 512, "n_threads": 8, "cpu_mask": "0x0", "cpu_strict": false, "poll": 50, "type_k": "f16", '
          '"type_v": "f16", "n_gpu_layers": -1, "n_cpu_moe": 0, "split_mode": "layer", "main_gpu": 0, '
          '"no_kv_offload": false, "flash_attn": -1, "devices": "auto", "tensor_split": "0.00", '
          '"tensor_buft_overrides": "none", "load_mode": "mmap", "embeddings": false, "no_op_offload": 0, '
          '"no_host": false, "fit_target": 1024, "fit_min_ctx": 4096, "n_prompt": {n_prompt}, "n_gen": {n_gen}, '
          '"n_depth": {n_depth}, "test_time": "2026-08-{day:02d}T{hh:02d}:{mm:02d}:{ss:02d}Z", "avg_ns": {avg_ns}, '
          '"stddev_ns": {stddev_ns}, "avg_ts": {avg_ts:.6f}, "stddev_ts": {stddev_ts:.6f}, '
          '"samples_ns": [ {samples_ns} ],"samples_ts": [ {samples_ts} ]}}')

_BENCH_SETUPS = [
    ("ee3d1b54c", 10167, "Apple Paravirtual device", "gemma-4-12b-it-qat-q4_0.gguf", "gemma4 12B Q4_0"),
    ("ee3d1b54c", 10167, "Apple M1 Ultra", "gemma-4-12b-it-qat-q4_0.gguf", "gemma4 12B Q4_0"),
    ("a1b2c3d4e", 10201, "Apple Paravirtual device", "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llama 8B Q4_K - Medium"),
]
_TESTS = [(512, 0, 0), (0, 128, 0), (512, 0, 4096), (0, 128, 4096), (2048, 0, 0)]


def generate_jsonl(path: Path, rows: int, seed: int = 20260811, group: int = 10_000) -> dict:
    """``rows`` llama-bench rows; one llama-bench invocation (same build and
    device) every ``group`` rows, as when many sweeps are appended to one file."""
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8", newline="\n") as fh:
        buf: list[str] = []
        for i in range(rows):
            commit, build, gpu, model_file, model = _BENCH_SETUPS[(i // group) % len(_BENCH_SETUPS)]
            n_prompt, n_gen, n_depth = _TESTS[i % len(_TESTS)]
            tokens = n_prompt or n_gen
            # speeds this hardware can have (analyzer.parsers.plausible: tg of a 7.4 GB model on an
            # M1 Ultra is at most 222 t/s), or capscan refuses the rows as impossible
            avg_ts = rng.uniform(8, 900) if n_prompt else rng.uniform(2, 200)
            avg_ns = int(tokens / avg_ts * 1e9)
            samples = [avg_ns + rng.randint(-avg_ns // 200, avg_ns // 200) for _ in range(5)]
            buf.append(_JSONL.format(
                commit=commit, build=build, gpu=gpu, model_file=model_file, model=model, n_prompt=n_prompt,
                n_gen=n_gen, n_depth=n_depth, day=1 + (i // 86400) % 28, hh=(i // 3600) % 24, mm=(i // 60) % 60,
                ss=i % 60, avg_ns=avg_ns, stddev_ns=avg_ns // 300, avg_ts=avg_ts, stddev_ts=avg_ts / 300,
                samples_ns=", ".join(map(str, samples)),
                samples_ts=", ".join(f"{tokens / s * 1e9:.4f}" for s in samples)))
            if len(buf) >= 20_000:
                fh.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            fh.write("\n".join(buf) + "\n")
    return {"lines": rows, "relevant_lines": rows, "bytes": path.stat().st_size}


# --------------------------------------------------------------------------
# measurements
# --------------------------------------------------------------------------

_LAST_CPU: dict = {}


def _time_shell(cmd: list[str], env: dict | None = None, repeat: int = 2) -> tuple[float, str]:
    """Best wall time of ``repeat`` runs; stdout of the last. The CPU seconds
    (user + sys) of the best run are left in ``_LAST_CPU["cpu_s"]``."""
    best, out = float("inf"), ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if wall < best:
            best = wall
            _LAST_CPU["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode not in (0, 1):  # grep -c exits 1 on no match
            raise SystemExit(f"{cmd[0]} failed: {proc.stderr.decode(errors='replace')}")
        out = proc.stdout.decode()
    return best, out


def measure_cat(path: Path) -> float:
    secs, _ = _time_shell(["sh", "-c", 'cat "$1" > /dev/null', "cat", str(path)])
    return secs


def measure_grep(path: Path) -> tuple[float, int]:
    cmd = ["grep", "-F", "-c"]
    for lit in LITERALS:
        cmd += ["-e", lit]
    cmd.append(str(path))
    env = dict(os.environ, LC_ALL="C")
    secs, out = _time_shell(cmd, env=env)
    return secs, int(out.strip() or 0), _LAST_CPU["cpu_s"]


_TIME_V = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None  # Debian package "time"


def _parse_time_v(text: str) -> dict:
    out: dict = {}
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if m:
        out["rss_kb"] = int(m.group(1))
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", text)
    if m:
        out["elapsed"] = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    for key, label in (("user", "User time (seconds)"), ("sys", "System time (seconds)")):
        m = re.search(re.escape(label) + r": ([\d.]+)", text)
        if m:
            out[key] = float(m.group(1))
    return out


def measure_capscan(path: Path, workdir: Path, env_extra: dict | None = None, tree: Path = REPO) -> dict:
    """One ingest of ``path`` by the capscan of ``tree`` (this one, or an export of an earlier commit)."""
    db = workdir / f"bench-{path.stem}.db"
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "analyzer", "--db", str(db), "--json", "ingest", str(path)]
    env = {**_capscan_env(tree), **(env_extra or {})}
    # An existing database, as a user's is after the first run: creating it and applying the
    # migrations (which imports sqlite-utils) happens once per machine, not per ingest.
    empty = workdir / "empty.log"
    empty.write_bytes(b"")
    subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), "ingest", str(empty)], env=env,
                   capture_output=True, check=False, cwd=tree)
    if _TIME_V:
        cmd = [_TIME_V, "-v"] + cmd
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tree, check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"capscan ingest ({tree}) failed (rc={proc.returncode}):\n"
                         f"{proc.stderr.decode(errors='replace')[-3000:]}")
    result: dict = {"seconds": wall}
    if _TIME_V:
        tv = _parse_time_v(proc.stderr.decode(errors="replace"))
        result["rss_mb"] = tv.get("rss_kb", 0) / 1024
        result["user_s"], result["sys_s"] = tv.get("user"), tv.get("sys")
        result["rss_source"] = "/usr/bin/time -v"
    else:
        after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        # ru_maxrss of children is the largest child so far, in KiB on Linux
        result["rss_mb"] = after / 1024
        result["rss_source"] = "getrusage(RUSAGE_CHILDREN)" + (" (lower bound: an earlier child was larger)"
                                                               if after == before and before else "")
    report = json.loads(proc.stdout.decode() or "[]")
    if report:
        result.update(lines=report[0].get("lines"), recognised_lines=report[0].get("recognised_lines"),
                      runs=len(report[0].get("run_ids") or []))
    with sqlite3.connect(db) as conn:
        result["throughput_rows"] = conn.execute("SELECT count(*) FROM throughput").fetchone()[0]
        result["evidence_rows"] = conn.execute("SELECT count(*) FROM evidence").fetchone()[0]
    return result


# The floor of (b) on this machine: the two steps no design that keeps every row as a row can skip,
# timed alone in a fresh process (CPU seconds of each): decoding each row's measured tail with orjson
# (capscan decodes no more of a row than that) and inserting the rows into a table of the same
# columns with sqlite3's executemany, with no index, no foreign key, no check and no assembly.
_DENSE_FLOOR = r"""
import json, os, sqlite3, sys, tempfile, time
import orjson
path, cut = sys.argv[1], b'"n_prompt":'
d = tempfile.mkdtemp(prefix="capscan-floor-")
conn = sqlite3.connect(os.path.join(d, "floor.db"), isolation_level=None)
conn.execute("PRAGMA journal_mode = WAL"); conn.execute("PRAGMA synchronous = NORMAL")
conn.execute("CREATE TABLE throughput (run_id INTEGER NOT NULL, line INTEGER, test TEXT NOT NULL, tok_s REAL NOT NULL, "
             "stddev REAL, model TEXT, kind TEXT NOT NULL, n_prompt INTEGER, n_gen INTEGER, n_depth INTEGER)")
insert = ("INSERT INTO throughput (line, test, tok_s, stddev, n_prompt, n_gen, n_depth, model, kind, run_id) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, 'model', 'bench', 1)")
decode_s = insert_s = 0.0
rows = n = 0
conn.execute("BEGIN")
with open(path, "rb") as fh:
    rest = b""
    while True:
        chunk = fh.read(4 << 20)
        if not chunk and not rest:
            break
        data = rest + chunk
        end = data.rfind(b"\n") + 1 if chunk else len(data)
        rest = data[end:] if chunk else b""
        t = time.process_time()
        batch = []
        for raw in data[:end].splitlines():
            n += 1
            obj = orjson.loads(b"{" + raw[raw.find(cut):])
            batch.append((n, "pp512", obj["avg_ts"], obj["stddev_ts"], obj["n_prompt"], obj["n_gen"], obj["n_depth"]))
        t2 = time.process_time()
        conn.executemany(insert, batch)
        insert_s += time.process_time() - t2
        decode_s += t2 - t
        rows += len(batch)
t = time.process_time()
conn.execute("COMMIT")
insert_s += time.process_time() - t
conn.close()
for name in os.listdir(d):
    os.unlink(os.path.join(d, name))
os.rmdir(d)
print(json.dumps({"rows": rows, "decode_s": decode_s, "insert_s": insert_s}))
"""


def measure_dense_floor(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _DENSE_FLOOR, str(path)], capture_output=True, env=_capscan_env(),
                          check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr.decode(errors="replace").strip().splitlines()[-1:]}
    r = json.loads(proc.stdout)
    r["rows_per_s"] = round(r["rows"] / (r["decode_s"] + r["insert_s"]))
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}


# --------------------------------------------------------------------------
# before and after in one run: the same workload on an earlier commit's code
# --------------------------------------------------------------------------

def before_tree(rev: str, out: Path) -> tuple[str, Path]:
    """``rev``'s tree (``git archive``: the files it committed, nothing else) in ``out``, exported
    once per commit and reused; returns (the commit, the folder)."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{rev}^{{commit}}"], capture_output=True,
                         text=True, check=False).stdout.strip()
    if not sha:
        raise SystemExit(f"--before {rev}: not a commit of {REPO}")
    tree = out / f"before-{sha[:12]}"
    if not (tree / "analyzer" / "__init__.py").is_file():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.Popen(["git", "-C", str(REPO), "archive", sha], stdout=subprocess.PIPE)
        subprocess.run(["tar", "-x", "-C", str(tree)], stdin=archive.stdout, check=True)
        if archive.wait() != 0:
            raise SystemExit(f"git archive {sha} failed")
    return sha, tree


def _ratio(after: float | None, before: float | None) -> float | None:
    return round(after / before, 3) if after and before else None


# The JSON and NL writers alone (what `runs -n 0 --json` / `--nl` spend past the query): 100,000
# listing rows as iter_runs yields them, through tabular.write_json_array and write_nl into a sink
# that counts what it is given and keeps nothing (a pipe to the next program). Best of ``repeat``.
_WRITERS = r"""
import json, random, sys, time
from analyzer.output import tabular
n, repeat = int(sys.argv[1]), int(sys.argv[2])
rng = random.Random(20260812)
devices = ["Apple M1 Ultra", "Apple Paravirtual device", "Apple M4 Max", "NVIDIA GeForce RTX 4090", None]
verdicts = ["healthy", "capability-downgrade", "no-gpu-offload", "hardware-limit", "virtualization-overhead", None]
rows = [{"id": n - i, "created_at": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00",
         "source": f"~/bench/2026/run-{i:06d}" + (" 日本.log" if i % 50 == 0 else ".log"),
         "program": rng.choice(["llama-bench", "llama-server", "llama-cli", "ollama", None]),
         "backend": rng.choice(["Metal", "Vulkan", "CUDA", "CPU", None]), "device": rng.choice(devices),
         "apple_family": rng.choice([1007, 1008, 1009, 1010, None]),
         "model": rng.choice(["llama 8B Q4_K - Medium", "gemma4 12B Q4_0", None]), "verdict": rng.choice(verdicts),
         "fixable": rng.choice([True, False, None]), "environment": rng.choice(["bare-metal", "vm", "unknown"]),
         "best_pp": rng.choice([round(rng.uniform(10, 9000), 2), rng.uniform(10, 9000), None]),
         "best_tg": rng.choice([round(rng.uniform(1, 200), 2), rng.uniform(1, 200), None])} for i in range(n)]


class Sink:
    size = 0

    def write(self, text):
        self.size += len(text)
        return len(text)

    def flush(self):
        pass


out = {}
for name, write in (("json", tabular.write_json_array), ("nl", tabular.write_nl)):
    best, size = float("inf"), 0
    for _ in range(repeat):
        sink = Sink()
        t = time.perf_counter()
        write(sink, iter(rows))
        best = min(best, time.perf_counter() - t)
        size = sink.size
    out[name] = {"seconds": round(best, 4), "chars": size}
print(json.dumps(out))
"""


def measure_writers(tree: Path, rows: int, repeat: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", _WRITERS, str(rows), str(repeat)], capture_output=True,
                          env=_capscan_env(tree), cwd=str(tree), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"the writers benchmark ({tree}) failed:\n{proc.stderr.decode(errors='replace')[-3000:]}")
    return json.loads(proc.stdout)


def _writers(args, results: dict) -> None:
    """``--json`` and ``--nl`` of ``--writer-rows`` rows, this tree and the --before one alternately
    (three rounds, the best of each side's runs counts: other work on the machine only slows)."""
    sides = [("after", REPO)] + ([("before", args.before_tree)] if args.before_tree else [])
    best: dict = {}
    for _ in range(3):
        for side, tree in reversed(sides):
            got = measure_writers(tree, args.writer_rows, 3)
            for form, r in got.items():
                if form not in best.setdefault(side, {}) or r["seconds"] < best[side][form]["seconds"]:
                    best[side][form] = r
    results["writers"] = {"rows": args.writer_rows, **best}
    print(f"\nJSON/NL writers, {args.writer_rows:,} listing rows (tabular.write_json_array / write_nl into a "
          f"counting sink; best of 9 runs each)")
    table = []
    for form in ("json", "nl"):
        a = best["after"][form]
        b = best.get("before", {}).get(form)
        ratio = _ratio(a["seconds"], b["seconds"]) if b else None
        if b:
            best["after"][form]["ratio_to_before"] = ratio
        table.append([f"--{form}", f"{b['seconds'] * 1000:.0f}" if b else "-", f"{a['seconds'] * 1000:.0f}",
                      f"{ratio:.2f}" if ratio else "-", f"{a['chars'] / MB:.1f}"])
    _print_table(["form", f"before ms ({args.before_label})", "after ms (this tree)", "after/before", "M chars"], table)


# --------------------------------------------------------------------------
# show after an unrelated ingest, before and after issue 28 made it read-only
# --------------------------------------------------------------------------

_BUILD = ("import sys; from pathlib import Path; sys.path.insert(0, 'bench'); from tui_bench import build_db; "
          "build_db(Path(sys.argv[1]), int(sys.argv[2]))")
UNRELATED_LOG = REPO / "tests" / "fixtures" / "metal" / "m3-2025-03-intel-iris.log"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _show_once(tree: Path, db: Path, run_id: int) -> dict:
    """An unrelated ingest (which invalidated every stamp before issue 28), then `show` twice."""
    env = _capscan_env(tree)
    base = [sys.executable, "-m", "analyzer", "--db", str(db)]
    subprocess.run(base + ["ingest", "--force", str(UNRELATED_LOG)], env=env, cwd=str(tree), capture_output=True,
                   check=True)
    out = {}
    for label in ("first", "second"):
        before = _sha(db)
        t = time.perf_counter()
        proc = subprocess.run(base + ["show", str(run_id), "--json"], env=env, cwd=str(tree), capture_output=True)
        out[label] = {"seconds": time.perf_counter() - t, "exit": proc.returncode, "wrote": _sha(db) != before}
    return out


def _show(args, work: Path, results: dict) -> None:
    """`show RUN --json` after an unrelated ingest on a database of ``--show-runs`` runs, this tree and the
    --before one alternately (each side its own copy, migrated by its own code; best of three)."""
    if not args.before_tree:
        print("\nshow: needs --before (the tree before show became read-only)")
        return
    base = work / "show-base.db"
    subprocess.run([sys.executable, "-c", _BUILD, str(base), str(args.show_runs)], env=_capscan_env(args.before_tree),
                   cwd=str(args.before_tree), check=True, capture_output=True)
    with sqlite3.connect(base) as conn:
        run_id = conn.execute("SELECT MAX(id) FROM runs WHERE model IS NOT NULL").fetchone()[0]
    sides = {"before": args.before_tree, "after": REPO}
    best: dict = {}
    for _ in range(3):
        for side, tree in sides.items():
            db = work / f"show-{side}.db"
            shutil.copyfile(base, db)
            got = _show_once(tree, db, run_id)
            for label, r in got.items():
                if label not in best.setdefault(side, {}) or r["seconds"] < best[side][label]["seconds"]:
                    best[side][label] = r
    results["show"] = {"runs": args.show_runs, "run_id": run_id, **best}
    print(f"\nshow {run_id} --json after an unrelated ingest, {args.show_runs:,} runs (best of 3 per side)")
    table = []
    for label in ("first", "second"):
        b, a = best["before"][label], best["after"][label]
        table.append([f"{label} show", f"{b['seconds'] * 1000:.0f}" + (" (wrote)" if b["wrote"] else ""),
                      f"{a['seconds'] * 1000:.0f}" + (" (wrote)" if a["wrote"] else ""),
                      f"{_ratio(a['seconds'], b['seconds']):.2f}"])
    _print_table(["", f"before ms ({args.before_label})", "after ms (this tree)", "after/before"], table)
    _show_floors(args, work, results, sides, run_id)


def _show_floors(args, work: Path, results: dict, sides: dict[str, Path], run_id: int) -> None:
    """`show` beside its floor, both trees in one run (interleaved, median of ``--repeat``; each its own
    copy of the store, this tree's migrated on its warm-up): the run above, and a VM guest whose peers
    are read (``guest_database``, built by each tree)."""
    cases = []
    for side, tree in sides.items():
        env, guest_db = _capscan_env(tree), work / f"guest-{side}.db"
        guest = guest_database(guest_db, tree)
        cli = [sys.executable, "-m", "analyzer", "--db"]
        cases += [(side, "floor", [sys.executable, "-c", SHOW_FLOOR], env, tree),
                  (side, f"show {run_id}", cli + [str(work / f"show-{side}.db"), "show", str(run_id)], env, tree),
                  (side, f"show {guest} (a guest: {GUEST_PEERS:,} runs of its host)",
                   cli + [str(guest_db), "show", str(guest)], env, tree)]
    for _, _, cmd, env, tree in cases:  # warm-up: compiled modules, migrations
        subprocess.run(cmd, env=env, cwd=str(tree), capture_output=True, check=False)
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.repeat):
        for side, label, cmd, env, tree in cases:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run(cmd, env=env, cwd=str(tree), capture_output=True, check=False)
            wall = time.perf_counter() - t
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            got.setdefault((side, label), []).append(
                (wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))

    def median(side: str, label: str, i: int) -> float:
        xs = sorted(x[i] for x in got[(side, label)])
        return xs[len(xs) // 2]

    labels = list(dict.fromkeys(label for _, label, *_ in cases))
    out: dict = {}
    table = []
    for label in labels:
        row = [label if label != "floor" else f"floor: python -c '{SHOW_IMPORTS}' + one model"]
        for side in sides:
            wall, cpu = median(side, label, 0), median(side, label, 1)
            ratio = "" if label == "floor" else (f" = {wall / median(side, 'floor', 0):.2f}x / "
                                                 f"{cpu / median(side, 'floor', 1):.2f}x")
            out.setdefault(side, {})[label] = {"wall_s": round(wall, 4), "cpu_s": round(cpu, 4)}
            row.append(f"{wall * 1000:.0f} / {cpu * 1000:.0f}{ratio}")
        table.append(row)
    results["show_floors"] = {"repeat": args.repeat, **out}
    print(f"\nshow beside its floor (python -m analyzer, median of {args.repeat} interleaved runs; wall / CPU ms, "
          "and = the ratio to the floor, wall / CPU)")
    _print_table(["", f"before ({args.before_label})", "after (this tree)"], table)


# --------------------------------------------------------------------------
# (c) start-up and (d) listing everything, on a database of 100,000 runs
# --------------------------------------------------------------------------

def runs_database(path: Path, n_runs: int) -> dict:
    """The TUI benchmark's database (real fixture runs copied, with varied
    speeds, sources and times); built once, reused when it exists."""
    if path.exists():
        with sqlite3.connect(path) as conn:
            return {"runs": conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0], "reused": True,
                    "size_mb": round(path.stat().st_size / MB)}
    sys.path.insert(0, str(REPO / "bench"))
    from tui_bench import build_db

    built = build_db(path, n_runs)
    return {"runs": built["runs"], "reused": False, "size_mb": round(built["size_mb"]), "build_s": round(built["build_s"], 1)}


# A VM guest that names its host chip (an M1 Ultra) and a bare-metal run of that chip and model: copied
# GUEST_PEERS times, they are the stored runs the guest's `show` looks up (its peers, at most 200 read).
GUEST_LOG = "shims/lume-shim-apple9-on-m1.log"
GUEST_HOST_LOG = "metal/m4-2026-08-host-m1-ultra.log"
GUEST_PEERS = 2_000


# Run by the tree being measured (PYTHONPATH), so a --before tree builds its own store: argv path, copies.
_GUEST_BUILD = f"""
import sys
from pathlib import Path
from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store.db import open_db
path, copies = Path(sys.argv[1]), int(sys.argv[2])
path.unlink(missing_ok=True)
db = open_db(path)
ids = {{}}
for rel in ({GUEST_HOST_LOG!r}, {GUEST_LOG!r}):
    src = open_input(str(Path({str(REPO)!r}) / "tests" / "fixtures" / rel))
    try:
        ids[rel] = ingest(db, src, force=True).run_ids
    finally:
        src.close()
    diagnose_runs(db, ids[rel])
host, guest = ids[{GUEST_HOST_LOG!r}][0], ids[{GUEST_LOG!r}][0]
conn = db.conn
cols = "source_id, first_line, last_line, program, backend, device_name, apple_family, model, created_at, facts"
conn.execute("BEGIN")
for i in range(copies):
    new = conn.execute(f"INSERT INTO runs (seq, {{cols}}) SELECT ?, {{cols}} FROM runs WHERE id = ?",
                       (1000 + i, host)).lastrowid
    conn.execute("INSERT INTO evidence (run_id, line, kind, text) SELECT ?, line, kind, text FROM evidence "
                 "WHERE run_id = ?", (new, host))
    conn.execute("INSERT INTO throughput (run_id, line, test, tok_s, stddev, model, kind, n_prompt, n_gen, n_depth) "
                 "SELECT ?, line, test, tok_s, stddev, model, kind, n_prompt, n_gen, n_depth FROM throughput "
                 "WHERE run_id = ?", (new, host))
    conn.execute("INSERT INTO diagnoses (run_id, verdict, fixable, confidence, environment, host_chip, report, "
                 "rules_version, diagnosed_at) SELECT ?, verdict, fixable, confidence, environment, host_chip, "
                 "report, rules_version, diagnosed_at FROM diagnoses WHERE run_id = ?", (new, host))
conn.execute("COMMIT")
conn.close()
print(guest)
"""


def guest_database(path: Path, tree: Path = REPO, copies: int = GUEST_PEERS) -> int:
    """A store of ``copies`` bare-metal M1 Ultra runs of the guest's model, then the guest, built by
    ``tree``'s capscan (its ingest once each, the host's rows then copied in SQL); returns the guest's id."""
    out = subprocess.run([sys.executable, "-c", _GUEST_BUILD, str(path), str(copies)], env=_capscan_env(tree),
                         cwd=str(tree), capture_output=True, text=True, check=True).stdout
    return int(out.split()[-1])


def _capscan_env(tree: Path = REPO) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("CAPSCAN_DB", None)
    # As installed (pip compiles the .pyc files): with PYTHONDONTWRITEBYTECODE set, every run would
    # compile capscan's modules from source again (about a third of its start-up).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# --------------------------------------------------------------------------
# capscan as users install it: the tree's wheel in a venv of its own
# --------------------------------------------------------------------------

INSTALLED_VENV = "installed-venv"
_WHEEL_INPUTS = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "LICENSE")


def _tree_fingerprint(extra: str) -> str:
    """sha256 of everything that goes into the wheel (analyzer/, native/interposer's sources, the
    packaging files), plus ``extra`` (the pinned versions and the Python)."""
    h = hashlib.sha256(extra.encode())
    files = [REPO / name for name in _WHEEL_INPUTS]
    for top in ("analyzer", "native/interposer"):
        files += [p for p in (REPO / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and "build" not in p.relative_to(REPO / top).parts and p.suffix not in (".pyc", ".o", ".so", ".dylib")]
    for path in sorted(files):
        if path.is_file():
            h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _quiet_run(cmd: list[str], env: dict | None = None) -> None:
    """Run a build step; its chatter (pip's warnings about this machine's indexes) only when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")


def installed_venv(out: Path) -> Path:
    """A venv holding capscan's wheel built from this tree, its dependencies pinned to the running
    environment's versions; rebuilt only when the fingerprint changed. Returns the venv's path."""
    venv = out / INSTALLED_VENV
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True).stdout
    pins = "".join(line + "\n" for line in freeze.splitlines()
                   if "==" in line and not line.lower().startswith(("capscan==", "-e ")))
    stamp = venv / "capscan-tree.sha256"
    fingerprint = _tree_fingerprint(pins + platform.python_version())
    if stamp.is_file() and stamp.read_text().strip() == fingerprint and (venv / "bin" / "capscan").exists():
        return venv
    print(f"building capscan's wheel into {venv} (the tree or the pinned versions changed) ...",
          file=sys.stderr, flush=True)
    shutil.rmtree(venv, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)
    _quiet_run([base, "-m", "venv", str(venv)])
    wheels = out / "installed-wheel"
    shutil.rmtree(wheels, ignore_errors=True)
    quiet = ["-q", "--disable-pip-version-check"]
    _quiet_run([sys.executable, "-m", "pip", "wheel", *quiet, "--no-deps", "-w", str(wheels), str(REPO)])
    wheel = next(wheels.glob("capscan-*.whl"))
    constraints = out / "installed-constraints.txt"
    constraints.write_text(pins)
    vpy = str(_venv_python(venv))
    # Without PYTHONPATH: a tree on it (PYTHONPATH=$PWD) shows pip its capscan.egg-info, and pip then
    # skips the wheel as "already installed".
    _quiet_run([vpy, "-m", "pip", "install", *quiet, "--no-deps", str(wheel)], env=_installed_env())
    # The wheel's own requirements, each at the running environment's version.
    _quiet_run([vpy, "-m", "pip", "install", *quiet, "-c", str(constraints), str(wheel)], env=_installed_env())
    where = subprocess.run([vpy, "-c", "import analyzer; print(analyzer.__file__)"], capture_output=True, text=True,
                           cwd="/", env=_installed_env(), check=True).stdout.strip()
    if not where.startswith(str(venv)):
        raise SystemExit(f"the installed venv imports analyzer from {where}, not from the wheel")
    stamp.write_text(fingerprint + "\n")
    return venv


def _installed_env() -> dict:
    """The environment a user's shell gives: nothing pointing at this tree."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", "CAPSCAN_DB", "PYTHONDONTWRITEBYTECODE", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def _median_wall(cmd: list[str], env: dict, repeat: int, cwd: str | None = None) -> tuple[float, float, int, float]:
    """Median and best wall time of ``repeat`` runs (after one warm-up), the
    exit code, and the median CPU seconds (user + sys: less sensitive than wall
    time to other work on a shared machine)."""
    rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd,
                        check=False).returncode
    times, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=cwd, check=False)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    times.sort()
    cpus.sort()
    return times[len(times) // 2], times[0], rc, cpus[len(cpus) // 2]


def _startup_cases(py: list[str], capscan: list[str], db: Path, run_id: int, name: str,
                   guest: tuple[Path, int] | None = None) -> list:
    guest_case = [] if guest is None else [
        (f"capscan show {guest[1]} (a VM guest, {GUEST_PEERS:,} runs of its host stored: its peers read)",
         capscan + ["--db", str(guest[0]), "show", str(guest[1])], None)]
    return [(f"{name} -c pass (the interpreter alone: the peer)", py + ["-c", "pass"], None),
            (f"{name} -c 'import sqlite3' (plus the sqlite3 module)", py + ["-c", "import sqlite3"], None),
            (f"{name} -c 'import re, click' (a pip console script's import, plus click)",
             py + ["-c", "import re, click"], None),
            (f"{name} -c '{SHOW_IMPORTS}' (the imports show needs)", py + ["-c", SHOW_IMPORTS], None),
            (f"{name} -c '{SHOW_IMPORTS}' + one model (what show needs: its floor)", py + ["-c", SHOW_FLOOR], None),
            ("capscan --version", capscan + ["--version"], TARGET_VERSION_S),
            ("capscan runs", capscan + ["--db", str(db), "runs"], TARGET_READ_S),
            ("capscan runs --json", capscan + ["--db", str(db), "runs", "--json"], TARGET_READ_S),
            (f"capscan show {run_id}", capscan + ["--db", str(db), "show", str(run_id)], TARGET_READ_S),
            *guest_case,
            ("capscan db stats", capscan + ["--db", str(db), "db", "stats"], TARGET_READ_S)]


def measure_startup(db: Path, repeat: int, venv: Path | None, guest: tuple[Path, int] | None = None) -> list[dict]:
    """Start-up of the installed console script (``venv``) or, when ``venv`` is None, of this tree
    run as ``python -m analyzer`` by the running interpreter. ``guest``: a store and its guest run
    (``guest_database``), shown too."""
    with sqlite3.connect(db) as conn:
        run_id = conn.execute("SELECT MAX(id) FROM runs").fetchone()[0]
    if venv is not None:
        env, cwd = _installed_env(), "/"
        cases = _startup_cases([str(_venv_python(venv))], [str(venv / "bin" / "capscan")], db, run_id, "python",
                               guest)
    else:
        env, cwd = _capscan_env(), str(REPO)
        cases = _startup_cases([sys.executable], [sys.executable, "-m", "analyzer"], db, run_id, "python3", guest)
    out = []
    for label, cmd, target in cases:
        median, best, rc, cpu = _median_wall(cmd, env, repeat, cwd)
        out.append({"label": label, "median_s": round(median, 4), "best_s": round(best, 4), "cpu_s": round(cpu, 4),
                    "target_s": target, "exit": rc, "pass": None if target is None else (rc == 0 and median < target)})
    return out


def show_vs_floor(rows: list[dict]) -> dict:
    """``show``'s start-up over its floors' (the same run, the same interpreter), median and CPU; the
    target is on the floor with one model."""
    imports = next(c for c in rows if c["label"].endswith("(the imports show needs)"))
    floor = next(c for c in rows if c["label"].endswith("(what show needs: its floor)"))
    show = next(c for c in rows if c["label"].startswith("capscan show "))
    ratio = show["median_s"] / floor["median_s"]
    return {"show": show["label"], "floor": SHOW_FLOOR, "show_median_s": show["median_s"],
            "floor_median_s": floor["median_s"], "ratio": round(ratio, 2),
            "cpu_ratio": round(show["cpu_s"] / floor["cpu_s"], 2) if floor["cpu_s"] else None,
            "imports_median_s": imports["median_s"], "ratio_to_imports": round(show["median_s"] / imports["median_s"], 2),
            "target_ratio": TARGET_SHOW_FLOOR_RATIO, "pass": show["exit"] == 0 and ratio <= TARGET_SHOW_FLOOR_RATIO}


def _run_timed(cmd: list[str], env: dict) -> dict:
    """Wall time, peak RSS and output size of one run (stdout counted, not kept)."""
    if _TIME_V:
        cmd = [_TIME_V, "-v"] + cmd
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    size = 0
    assert proc.stdout is not None
    while chunk := proc.stdout.read(1 << 16):
        size += len(chunk)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    rc = proc.wait()
    wall = time.perf_counter() - t
    result = {"seconds": round(wall, 3), "exit": rc, "stdout_mb": round(size / MB, 1)}
    if _TIME_V:
        tv = _parse_time_v(err)
        result["rss_mb"] = round(tv.get("rss_kb", 0) / 1024, 1)
        result["cpu_s"] = round((tv.get("user") or 0) + (tv.get("sys") or 0), 2)
    return result


def measure_listing(db: Path, venv: Path | None) -> list[dict]:
    if venv is not None:
        env = _installed_env()
        py = [str(venv / "bin" / "capscan"), "--db", str(db), "runs", "-n", "0"]
    else:
        env = _capscan_env()
        py = [sys.executable, "-m", "analyzer", "--db", str(db), "runs", "-n", "0"]
    cols = ("r.id, r.created_at, s.path, r.program, r.backend, r.device_name, r.apple_family, r.model, d.verdict, "
            "d.fixable, d.environment")
    peer_sql = (f"SELECT {cols} FROM runs r JOIN sources s ON s.id = r.source_id "
                "LEFT JOIN diagnoses d ON d.run_id = r.id ORDER BY r.id DESC")
    cases = [("sqlite3 CLI, the same columns (the peer)", ["sqlite3", "-readonly", str(db), peer_sql], False),
             ("capscan runs -n 0 (table, piped)", py, True),
             ("capscan runs -n 0 --json", py + ["--json"], True),
             ("capscan runs -n 0 --nl", py + ["--nl"], True)]
    out = []
    for label, cmd, targeted in cases:
        if not targeted and not shutil.which(cmd[0]):
            continue
        r = _run_timed(cmd, env)
        r["label"] = label
        if targeted:
            r["pass"] = r["exit"] == 0 and r["seconds"] < TARGET_LIST_S and r.get("rss_mb", 0) < TARGET_LIST_RSS_MB
            if r["exit"] == 2:
                r["note"] = "form not offered by this version"
        out.append(r)
    return out


# --------------------------------------------------------------------------

def _fmt_row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))


def _print_table(headers: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [headers] + rows) for i in range(len(headers))]
    print(_fmt_row(headers, widths))
    for row in rows:
        print(_fmt_row(row, widths))


def _ingest(args, out: Path, work: Path, results: dict) -> None:
    files = [("a", "noise.log", lambda p: generate_noise_log(p, args.size_mb)),
             ("b", "bench.jsonl", lambda p: generate_jsonl(p, args.rows))]
    files = [f for f in files if f[0] in args.files.split(",")]
    results["literals"] = list(LITERALS)
    results["files"] = {}
    for label, name, gen in files:
        path = work / name
        t = time.perf_counter()
        print(f"generating ({label}) {name} ...", file=sys.stderr, flush=True)
        info = gen(path)
        info["generate_s"] = round(time.perf_counter() - t, 2)
        size_mb = info["bytes"] / MB
        print(f"  {size_mb:.0f} MiB, {info['lines']:,} lines in {info['generate_s']} s; measuring ...",
              file=sys.stderr, flush=True)
        cat_s = measure_cat(path)  # also warms the page cache for the others
        cat_s = min(cat_s, measure_cat(path))
        grep_s, grep_count, grep_cpu = measure_grep(path)
        # with --before: that commit's capscan and this one alternately, the best of each side counts
        cap: dict | None = None
        before: dict | None = None
        for _ in range(args.ingest_repeat if args.before_tree else 1):
            if args.before_tree:
                got = measure_capscan(path, work, tree=args.before_tree)
                before = got if before is None or got["seconds"] < before["seconds"] else before
            got = measure_capscan(path, work)
            cap = got if cap is None or got["seconds"] < cap["seconds"] else cap
        assert cap is not None
        entry = {
            "file": name, **info, "mb": round(size_mb, 1),
            "cat": {"seconds": round(cat_s, 3), "mb_s": round(size_mb / cat_s, 1)},
            "grep": {"seconds": round(grep_s, 3), "mb_s": round(size_mb / grep_s, 1), "count": grep_count,
                     "cpu_s": round(grep_cpu, 3)},
            "capscan": {**{k: (round(v, 3) if isinstance(v, float) else v) for k, v in cap.items()},
                        "mb_s": round(size_mb / cap["seconds"], 1)},
        }
        cap_cpu = (cap.get("user_s") or 0) + (cap.get("sys_s") or 0)
        entry["capscan"]["cpu_s"] = round(cap_cpu, 3) if cap_cpu else None
        entry["ratio"] = round(entry["capscan"]["mb_s"] / entry["grep"]["mb_s"], 3)
        entry["cpu_ratio"] = round(grep_cpu / cap_cpu, 3) if cap_cpu else None
        entry["rows_per_s"] = round(cap["throughput_rows"] / cap["seconds"]) if label == "b" else None
        if before is not None:
            before_cpu = (before.get("user_s") or 0) + (before.get("sys_s") or 0)
            entry["before"] = {"commit": args.before_label, "seconds": round(before["seconds"], 3),
                               "cpu_s": round(before_cpu, 3) if before_cpu else None,
                               "rss_mb": round(before["rss_mb"], 1), "throughput_rows": before["throughput_rows"],
                               "mb_s": round(size_mb / before["seconds"], 1),
                               "rows_per_s": round(before["throughput_rows"] / before["seconds"]) if label == "b" else None}
            entry["after_over_before"] = {"wall": _ratio(cap["seconds"], before["seconds"]),
                                          "cpu": _ratio(cap_cpu, before_cpu)}
        checks = {"rss": cap["rss_mb"] < TARGET_RSS_MB}
        if label == "a":
            checks["grep_ratio"] = entry["ratio"] >= TARGET_GREP_RATIO
            if args.pure_too:
                pure = measure_capscan(path, work, {"CAPSCAN_PURE_SCAN": "1"})
                entry["capscan_pure"] = {"seconds": round(pure["seconds"], 3), "rss_mb": round(pure["rss_mb"], 1),
                                         "mb_s": round(size_mb / pure["seconds"], 1)}
        else:
            checks["rows_per_s"] = entry["rows_per_s"] >= TARGET_ROWS_S
            checks["all_rows"] = cap["throughput_rows"] == args.rows
            entry["floor"] = measure_dense_floor(path)
        entry["pass"] = checks
        results["files"][label] = entry
        path.unlink()

    rows = []
    for label, e in results["files"].items():
        c = e["capscan"]
        verdicts = []
        if label == "a":
            verdicts.append(f"ratio>={TARGET_GREP_RATIO}:{'PASS' if e['pass']['grep_ratio'] else 'FAIL'}")
        else:
            verdicts.append(f"rows/s>={TARGET_ROWS_S:,}:{'PASS' if e['pass']['rows_per_s'] else 'FAIL'}")
        verdicts.append(f"RSS<{TARGET_RSS_MB:.0f}MB:{'PASS' if e['pass']['rss'] else 'FAIL'}")
        rows.append([f"({label}) {e['file']}", f"{e['mb']:.0f}", f"{e['cat']['mb_s']:.0f}",
                     f"{e['grep']['seconds']:.2f}", f"{e['grep']['mb_s']:.0f}", f"{c['seconds']:.2f}",
                     f"{c['mb_s']:.0f}", f"{e['ratio']:.2f}",
                     f"{e['grep']['cpu_s']:.2f}/{c['cpu_s']:.2f}" if c.get("cpu_s") else "-",
                     f"{c['rss_mb']:.1f}", f"{e['rows_per_s']:,}" if e["rows_per_s"] is not None else "-",
                     " ".join(verdicts)])
    _print_table(["file", "size MB", "cat MB/s", "grep -F -c s", "grep MB/s", "capscan s", "capscan MB/s", "ratio",
                  "cpu s grep/capscan", "peak RSS MB", "rows/s", "targets"], rows)
    for label, e in results["files"].items():
        c = e["capscan"]
        print(f"({label}) lines {e['lines']:,}; grep matched {e['grep']['count']:,} lines "
              f"(1 in {e['lines'] / max(e['grep']['count'], 1):.0f}); capscan: {c.get('recognised_lines')} recognised, "
              f"{c.get('runs')} runs, {c['throughput_rows']:,} throughput rows; user {c.get('user_s')} s, "
              f"sys {c.get('sys_s')} s; RSS via {c['rss_source']}")
        f = e.get("floor")
        if f and "error" not in f:
            print(f"(b) its floor on this machine, one core, CPU seconds: orjson.loads of each row's measured tail "
                  f"{f['decode_s']:.2f} s + sqlite3 executemany of the {f['rows']:,} rows (no index, no check) "
                  f"{f['insert_s']:.2f} s = {f['rows_per_s']:,} rows/s, against capscan's {e['rows_per_s']:,} "
                  f"and the target's {TARGET_ROWS_S:,}")
        elif f:
            print(f"(b) its floor could not be measured: {f['error']}")
        b = e.get("before")
        if b:
            r = e["after_over_before"]
            speed = (f"{b['rows_per_s']:,} -> {e['rows_per_s']:,} rows/s" if label == "b"
                     else f"{b['mb_s']:.0f} -> {c['mb_s']:.0f} MB/s")
            allowed = "; issue 28 allows 1.15 on this file" if label == "b" else ""
            print(f"({label}) before/after: {b['commit']} {b['seconds']:.2f} s (CPU {b['cpu_s']} s, RSS "
                  f"{b['rss_mb']:.0f} MB), this tree {c['seconds']:.2f} s (CPU {c.get('cpu_s')} s, RSS "
                  f"{c['rss_mb']:.0f} MB), {speed}: after/before {r['wall']} wall, {r['cpu']} CPU{allowed}")
        if "capscan_pure" in e:
            p = e["capscan_pure"]
            print(f"(a) with CAPSCAN_PURE_SCAN=1 (the fallback without Hyperscan): {p['seconds']:.2f} s, "
                  f"{p['mb_s']:.0f} MB/s, peak RSS {p['rss_mb']:.1f} MB")


def _has_editable_finder() -> bool:
    return any(Path(p).name.startswith("__editable__") for d in sys.path if d.endswith("site-packages")
               for p in (Path(d).glob("__editable__*.pth") if Path(d).is_dir() else ()))


def _startup_and_listing(args, work: Path, results: dict, parts: set[str]) -> None:
    db = args.runs_db or (work / "runs-100k.db")
    print(f"database of {args.runs:,} runs: {db} ...", file=sys.stderr, flush=True)
    results["runs_db"] = {"path": str(db), **runs_database(db, args.runs)}
    n = results["runs_db"]["runs"]
    venv = None if args.tree else installed_venv(args.out)
    results["capscan"] = ("this tree: python -m analyzer" if venv is None else
                          f"installed: the tree's wheel in {venv}, its console script")
    if "startup" in parts:
        guest_db = work / "guest-peers.db"
        print(f"a guest's store ({GUEST_PEERS:,} runs of its host): {guest_db} ...", file=sys.stderr, flush=True)
        guest = (guest_db, guest_database(guest_db))  # (built by this tree)
        blocks = [("startup", venv)] + ([("startup_tree", None)] if venv is not None and not args.no_tree else [])
        for key, where in blocks:
            results[key] = measure_startup(db, args.repeat, where, guest)
            what = (f"capscan as installed (the wheel's console script in {where})" if where is not None
                    else "this tree as python -m analyzer (the running interpreter"
                    + (", an editable install's import hook in its site-packages" if _has_editable_finder() else "")
                    + (": for comparison, no target)" if venv is not None else ")"))
            print(f"\nstart-up, median of {args.repeat} runs (database of {n:,} runs, "
                  f"{results['runs_db']['size_mb']} MB): {what}")
            rows = results[key]
            if key == "startup_tree" and venv is not None:
                for c in rows:  # the installed figures are the ones that count
                    c["target_s"], c["pass"] = None, None
            _print_table(["command", "median ms", "best ms", "cpu ms", "target"], [
                [c["label"], f"{c['median_s'] * 1000:.0f}", f"{c['best_s'] * 1000:.0f}", f"{c['cpu_s'] * 1000:.0f}",
                 "-" if c["target_s"] is None else f"< {c['target_s'] * 1000:.0f} ms "
                 + ("PASS" if c["pass"] else f"FAIL (exit {c['exit']})" if c["exit"] else "FAIL")]
                for c in rows])
            vs = show_vs_floor(rows)
            if key == "startup_tree" and venv is not None:
                vs["pass"] = None
            else:
                results["show_vs_floor"] = vs
            print(f"{vs['show']}: {vs['show_median_s'] * 1000:.0f} ms median = {vs['ratio']:.2f}x its floor "
                  f"'{SHOW_IMPORTS}' + one model ({vs['floor_median_s'] * 1000:.0f} ms; CPU {vs['cpu_ratio']}x), "
                  f"target <= {vs['target_ratio']}x" + ("" if vs["pass"] is None else " PASS" if vs["pass"] else " FAIL")
                  + f"; {vs['ratio_to_imports']:.2f}x the imports alone ({vs['imports_median_s'] * 1000:.0f} ms)")
            g = next((c for c in rows if "(a VM guest" in c["label"]), None)
            if g is not None:  # the peer lookup's own figure (the 100,000-run store holds no guest with peers)
                floor = next(c for c in rows if c["label"].endswith("(what show needs: its floor)"))
                vs["guest"] = {"label": g["label"], "median_s": g["median_s"],
                               "ratio": round(g["median_s"] / floor["median_s"], 2),
                               "cpu_ratio": round(g["cpu_s"] / floor["cpu_s"], 2) if floor["cpu_s"] else None}
                print(f"{g['label']}: {g['median_s'] * 1000:.0f} ms median = {vs['guest']['ratio']:.2f}x the same floor "
                      f"(CPU {vs['guest']['cpu_ratio']}x)")
    if "listing" in parts:
        results["listing"] = measure_listing(db, venv)
        print(f"\nlisting every run ({n:,}), capscan {'as installed' if venv is not None else 'from this tree'}")
        _print_table(["command", "wall s", "cpu s", "peak RSS MB", "stdout MB", "target"], [
            [r["label"], f"{r['seconds']:.2f}", f"{r.get('cpu_s', 0):.2f}", f"{r.get('rss_mb', 0):.0f}",
             f"{r['stdout_mb']:.1f}",
             "-" if "pass" not in r else (f"< {TARGET_LIST_S:.0f} s, < {TARGET_LIST_RSS_MB:.0f} MB "
                                          + ("PASS" if r["pass"] else "FAIL") + (f" ({r['note']})" if r.get("note") else ""))]
            for r in results["listing"]])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="ingest,writers,show,startup,listing",
                    help="what to measure, comma-separated: ingest, writers, show, startup, listing (default all)")
    ap.add_argument("--size-mb", type=int, default=256, help="size of the noise log in MiB (default 256)")
    ap.add_argument("--rows", type=int, default=1_000_000, help="llama-bench JSONL rows (default 1,000,000)")
    ap.add_argument("--files", default="a,b", help="ingest: which files, a (noise log) and/or b (JSONL)")
    ap.add_argument("--pure-too", action="store_true", help="also ingest (a) with the pure search (no Hyperscan)")
    ap.add_argument("--runs", type=int, default=100_000, help="runs in the start-up/listing database (default 100,000)")
    ap.add_argument("--runs-db", type=Path, default=None, help="reuse (or build) that database here")
    ap.add_argument("--tree", action="store_true",
                    help="start-up/listing: time this tree as python -m analyzer instead of the installed wheel")
    ap.add_argument("--no-tree", action="store_true",
                    help="start-up: skip the second block (this tree as python -m analyzer)")
    ap.add_argument("--repeat", type=int, default=9, help="start-up, and show beside its floor: runs per command (default 9; the median counts)")
    ap.add_argument("--before", default="HEAD~1",
                    help="ingest, writers: also measure this commit's code (git archive into --out), alternately "
                         "with this tree, and print both with their ratio (default HEAD~1; 'none' to skip)")
    ap.add_argument("--ingest-repeat", type=int, default=2,
                    help="ingest with --before: runs of each side, alternating (default 2; the best counts)")
    ap.add_argument("--writer-rows", type=int, default=100_000, help="writers: listing rows (default 100,000)")
    ap.add_argument("--show-runs", type=int, default=100_000, help="show: runs in its database (default 100,000)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out", help="work directory (default bench/out)")
    ap.add_argument("--keep", action="store_true", help="keep the generated files and databases")
    args = ap.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    known = {"ingest", "writers", "show", "startup", "listing"}
    if parts - known:
        ap.error(f"unknown part(s): {', '.join(sorted(parts - known))}")

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    args.before_tree = args.before_label = None
    if args.before.lower() != "none" and parts & {"ingest", "writers", "show"}:
        sha, args.before_tree = before_tree(args.before, out)
        args.before_label = sha[:9]
    work = Path(tempfile.mkdtemp(prefix="capscan-bench-", dir=out))
    if not _TIME_V:
        print("note: /usr/bin/time not found (Debian package 'time'); peak RSS from getrusage(RUSAGE_CHILDREN)",
              file=sys.stderr)
    results: dict = {"machine": {"python": platform.python_version(), "platform": platform.platform(),
                                 "cpus": os.cpu_count(), "sqlite": sqlite3.sqlite_version,
                                 "grep": subprocess.run(["grep", "--version"], capture_output=True,
                                                        text=True).stdout.splitlines()[0],
                                 "loadavg": os.getloadavg()},
                     "targets": {"grep_ratio": TARGET_GREP_RATIO, "rows_per_s": TARGET_ROWS_S,
                                 "rss_mb": TARGET_RSS_MB, "version_s": TARGET_VERSION_S, "read_s": TARGET_READ_S,
                                 "show_floor_ratio": TARGET_SHOW_FLOOR_RATIO,
                                 "list_s": TARGET_LIST_S, "list_rss_mb": TARGET_LIST_RSS_MB}}
    try:
        if args.before_label:
            results["before"] = {"rev": args.before, "commit": args.before_label, "tree": str(args.before_tree)}
        if "ingest" in parts:
            _ingest(args, out, work, results)
        if "writers" in parts:
            _writers(args, results)
        if "show" in parts:
            _show(args, work, results)
        if parts & {"startup", "listing"}:
            _startup_and_listing(args, work, results, parts)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            results["workdir"] = str(work)
    checks = [v for e in results.get("files", {}).values() for v in e["pass"].values()]
    checks += [c["pass"] for c in results.get("startup", []) if c["pass"] is not None]
    checks += [results["show_vs_floor"]["pass"]] if "show_vs_floor" in results else []
    checks += [r["pass"] for r in results.get("listing", []) if "pass" in r]
    ok = all(checks)
    results["all_pass"] = ok
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (other work on the machine slows "
          f"every figure); results: {out / 'results.json'}; {'all targets PASS' if ok else 'some targets FAIL'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
