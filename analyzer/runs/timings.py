"""Timing lines (llama.cpp, llama-server, ollama, mlx_lm, whisper.cpp): measured speeds,
with token counts printed apart from their rate joined to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.model import Throughput
from analyzer.parsers.base import Event
from analyzer.runs.boundaries import ONCE_PER_PROCESS

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler


def _timing(asm: Assembler, ev: Event, phase: str, tok_s: float | None, source: str, tokens: int | None = None,
            trial: bool = False) -> None:
    run = asm.run
    if source in ONCE_PER_PROCESS:
        # a block printed once per process closes at its eval line; where the next opens decides whether it
        # is the same command repeated or another process (runs.boundaries)
        run.timing_closed_at = ev.line if phase == "eval" else None
    if tok_s is None or phase == "sample":
        return
    key = "prompt" if phase == "prompt" else "eval"
    pending = run.pending_counts.pop(key, None)
    if tokens is None:
        tokens = pending if pending is not None else run.setup_counts.get(key)
    program = {"ollama": "ollama", "mlx_lm": "mlx_lm", "server-slot": "llama-server", "server-json": "llama-server",
               "llama-cli": "llama-cli", "koboldcpp": "koboldcpp"}.get(source)
    # (the '[ Prompt: ... ]' summary is the 2026 llama-cli's alone: its -lv 4 slot lines are its in-process server's)
    if program and (run.explicit_program in (None, "llama.cpp")
                    or (program == "llama-cli" and run.explicit_program == "llama-server")):
        run.explicit_program = program
    tp = Throughput(test="prompt" if key == "prompt" else "generation", tok_s=tok_s, model=run.facts.model,
                    line=ev.line, kind="timing", n_prompt=tokens if key == "prompt" else None,
                    n_gen=tokens if key == "eval" else None)
    if trial:
        run.trials.append(tp)
    else:
        run.add_throughput(tp)
    run.touch(ev)


def on_timing(asm: Assembler, ev: Event) -> None:
    d = ev.data
    _timing(asm, ev, d["phase"], d.get("tok_s"), d.get("source", ""), d.get("tokens"))


def on_timing_pair(asm: Assembler, ev: Event) -> None:
    d = ev.data
    run = asm.run
    run.trials = []  # an Averages line supersedes the trials before it
    _timing(asm, ev, "prompt", d.get("prompt_tok_s"), d.get("source", ""), d.get("prompt_n"))
    _timing(asm, ev, "eval", d.get("eval_tok_s"), d.get("source", ""), d.get("eval_n"))


def on_timing_trial(asm: Assembler, ev: Event) -> None:
    d = ev.data
    _timing(asm, ev, "prompt", d.get("prompt_tok_s"), d.get("source", ""), trial=True)
    _timing(asm, ev, "eval", d.get("eval_tok_s"), d.get("source", ""), trial=True)


def on_timing_count(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.pending_counts[ev.data["phase"]] = ev.data["tokens"]
    run.touch(ev)


def on_timing_setup(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.setup_counts = {"prompt": ev.data["prompt_n"], "eval": ev.data["eval_n"]}
    run.explicit_program = run.explicit_program or "mlx_lm"
    run.touch(ev)


def on_server_slot(asm: Assembler, ev: Event) -> None:
    # slot lines are llama-server's, also inside ollama 0.30's server.log and the 2026 llama-cli at -lv 4:
    # a program its own lines named already keeps its name
    if asm.run.explicit_program in (None, "llama.cpp"):
        asm.run.explicit_program = "llama-server"
    asm.run.touch(ev, evidence=False)


def on_whisper_timing(asm: Assembler, ev: Event) -> None:
    asm.run.explicit_program = "whisper.cpp"
    asm.run.touch(ev)


HANDLERS: dict[str, Handler] = {
    "timing": on_timing,
    "timing.pair": on_timing_pair,
    "timing.trial": on_timing_trial,
    "timing.count": on_timing_count,
    "timing.setup": on_timing_setup,
    "server.slot": on_server_slot,
    "whisper.timing": on_whisper_timing,
}
