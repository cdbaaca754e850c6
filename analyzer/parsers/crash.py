"""The process stopped: an assertion, an abort, a segmentation fault. What the runtime printed before
is still read; this only says the run ended in a crash, with the line that says so."""

from __future__ import annotations

from analyzer.parsers.base import Format, Pattern, Sample, rx

CRASH = Format(
    name="crash",
    description="the run crashed: a GGML_ASSERT, a ggml source line reporting an unsupported op, an abort or a "
                "segmentation fault from the shell",
    literals=("GGML_ASSERT(", ": unsupported op", "abort", "Abort trap", "Segmentation fault", "Aborted",
              "libc++abi: terminating", "that cannot run the operation"),
    patterns=(
        # the scheduler refusing a weight's op on its buffer's device, then GGML_ABORT: fine-tuning on a VM's
        # paravirtual GPU (OPT_STEP_ADAMW/SGD are gated on simdgroup reduction, llama.cpp #16529)
        Pattern("run.op_refused", rx(r"(?P<what>\bggml[\w-]*+\.cpp:\d++: pre-allocated tensor \((?P<tensor>[^()\n]{1,200}?)\) "
                                     r"in a buffer \((?P<buffer>[\w.-]{1,40})\) that cannot run the operation "
                                     r"\((?P<op>\w{1,40})\))")),
        # ggml/src/ggml-metal/ggml-metal-ops.cpp:204: GGML_ASSERT(ok) failed / ...:204: unsupported op
        # (from "ggml" on: a leading path class under search would rescan the line from every start)
        Pattern("run.crash", rx(r"(?P<what>\bggml[\w-]*+\.(?:c|cpp|m|mm):\d++: "
                                r"(?:GGML_ASSERT\([^\n]{0,200}?\) failed|unsupported op\b[^\n]{0,200}))")),
        Pattern("run.crash", rx(r"(?P<what>GGML_ASSERT\([^\n]{0,200}?\) failed)")),
        # the shell's word for the signal that ended it
        Pattern("run.crash", rx(r"^(?:zsh|bash|sh): (?:line \d+: )?(?:\d+ )?"
                                r"(?P<what>(?i:abort(?: trap: 6)?|segmentation fault))(?:\s|$)")),
        Pattern("run.crash", rx(r"^(?P<what>Abort trap: 6|Segmentation fault(?: \(core dumped\))?"
                                r"|Aborted(?: \(core dumped\))?)\s*$")),
        Pattern("run.crash", rx(r"^(?P<what>libc\+\+abi: terminating[^\n]{0,200})")),
    ),
    samples=(
        Sample("/Users/runner/work/inferna/build/llama.cpp/ggml/src/ggml-backend.cpp:941: pre-allocated tensor (adamw "
               "step for output_norm.weight) in a buffer (MTL0) that cannot run the operation (OPT_STEP_ADAMW)",
               "run.op_refused", {"buffer": "MTL0", "op": "OPT_STEP_ADAMW", "tensor": "adamw step for output_norm.weight"}),
        Sample("ggml-backend.cpp:941: pre-allocated tensor (sgd step for blk.0.attn_q.weight) in a buffer (MTL0) that "
               "cannot run the operation (OPT_STEP_SGD)", "run.op_refused", {"op": "OPT_STEP_SGD"}),
        Sample("/Users/runner/work/llama.cpp/llama.cpp/ggml/src/ggml-metal/ggml-metal-ops.cpp:204: GGML_ASSERT(ok) "
               "failed", "run.crash",
               {"what": "ggml-metal-ops.cpp:204: GGML_ASSERT(ok) failed"}),
        Sample("ggml/src/ggml-metal/ggml-metal-ops.cpp:204: unsupported op", "run.crash",
               {"what": "ggml-metal-ops.cpp:204: unsupported op"}),
        Sample("GGML_ASSERT(buf != NULL && \"tensor buffer not set\") failed", "run.crash",
               {"what": "GGML_ASSERT(buf != NULL && \"tensor buffer not set\") failed"}),
        Sample("zsh: abort      ./llama-server -m ~/models/qwen2.5-0.5b-instruct-q4_k_m.gguf --port 8080",
               "run.crash", {"what": "abort"}),
        Sample("bash: line 1: 4242 Abort trap: 6           ./llama-cli -m m.gguf", "run.crash",
               {"what": "Abort trap: 6"}),
        Sample("Abort trap: 6", "run.crash", {"what": "Abort trap: 6"}),
        Sample("Segmentation fault (core dumped)", "run.crash", {"what": "Segmentation fault (core dumped)"}),
        Sample("libc++abi: terminating due to uncaught exception of type std::runtime_error: failed to load",
               "run.crash", {"what": "libc++abi: terminating due to uncaught exception of type std::runtime_error: "
                                     "failed to load"}),
    ),
)
