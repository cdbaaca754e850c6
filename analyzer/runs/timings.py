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


# How finely a source prints its rates: the new llama-cli's summary line is '%.1f' ('[ Prompt: 20.0 t/s ]'),
# llama.cpp's perf and print_timing lines '%.2f'; the server's JSON prints the double itself
_COARSE = {"llama-cli": 0.05}
_PERF = 0.005


def _half_step(tok_s: float, source: str) -> float:
    """Half the last printed digit's step: how far the printed figure may be from the measurement."""
    if source in _COARSE:
        return _COARSE[source]
    _, _, frac = repr(tok_s).partition(".")
    return min(_PERF, 0.5 * 10.0 ** -len(frac)) if source == "server-json" and "e" not in frac else _PERF


def _printed_twice(prev: tuple[Throughput, str, bool] | None, tok_s: float, source: str) -> bool:
    """Is this figure the one just before it (same phase) printed again by another line of the same program:
    llama-cli's summary beside the perf lines of the same request, a streamed request's last running
    total beside its print_timing block? Two sources, each printing folded at most once, and the same
    value to the coarser one's precision."""
    if prev is None or prev[2] or prev[1] == source:
        return False
    tolerance = max(_half_step(prev[0].tok_s, prev[1]), _half_step(tok_s, source))
    return abs(prev[0].tok_s - tok_s) <= tolerance + 1e-9


def _timing(asm: Assembler, ev: Event, phase: str, tok_s: float | None, source: str, tokens: int | None = None,
            trial: bool = False, continues: Throughput | None = None) -> Throughput | None:
    """Record one timing figure (and return it). ``continues``: the figure of an earlier chunk of the
    same streamed request, whose running total this one supersedes."""
    run = asm.run
    if source in ONCE_PER_PROCESS:
        # a block printed once per process closes at its eval line; where the next opens decides whether it
        # is the same command repeated or another process (runs.boundaries)
        run.timing.closed_at = ev.line if phase == "eval" else None
    if tok_s is None or phase == "sample":
        return None
    key = "prompt" if phase == "prompt" else "eval"
    pending = run.timing.pending_counts.pop(key, None)
    if tokens is None:
        tokens = pending if pending is not None else run.timing.setup_counts.get(key)
    program = {"ollama": "ollama", "mlx_lm": "mlx_lm", "server-slot": "llama-server", "server-json": "llama-server",
               "server-running": "llama-server",
               "llama-cli": "llama-cli", "koboldcpp": "koboldcpp"}.get(source)
    # (the '[ Prompt: ... ]' summary is the 2026 llama-cli's alone: its -lv 4 slot lines are its in-process server's)
    if program and (run.program.name in (None, "llama.cpp")
                    or (program == "llama-cli" and run.program.name == "llama-server")):
        run.program.name = program
    tp = Throughput(test="prompt" if key == "prompt" else "generation", tok_s=tok_s, model=run.facts.model,
                    line=ev.line, kind="timing", n_prompt=tokens if key == "prompt" else None,
                    n_gen=tokens if key == "eval" else None)
    run.touch(ev)
    if trial:
        run.figures.trials.append(tp)
        return tp
    prev = run.timing.last.get(key)
    if continues is not None and prev is not None and prev[0] is continues and run.replace(continues, tp):
        # a streamed request's running total: only its last chunk's counts (604.59 ... 940.50: 940.50)
        run.timing.last[key] = (tp, source, False)
        return tp
    if _printed_twice(prev, tok_s, source):
        # one measurement on two lines (20.01 and '[ Prompt: 20.0 t/s ]'): one figure, the more precise
        assert prev is not None
        if _half_step(tok_s, source) < _half_step(prev[0].tok_s, prev[1]) and run.replace(prev[0], tp):
            run.timing.last[key] = (tp, source, True)
        else:
            run.timing.last[key] = (prev[0], prev[1], True)
        return prev[0]
    run.add_throughput(tp)
    run.timing.last[key] = (tp, source, False)
    return tp


def on_timing(asm: Assembler, ev: Event) -> None:
    d = ev.data
    continues = None
    if d.get("source") == "server-running":
        # a streaming slot's running rate: a later line of the same task, more tokens decoded, supersedes it
        prev = asm.run.timing.last.get("eval")
        if (prev is not None and prev[1] == "server-running" and asm.run.timing.running_task == d.get("task")
                and prev[0].n_gen is not None and (d.get("tokens") or 0) > prev[0].n_gen):
            continues = prev[0]
        asm.run.timing.running_task = d.get("task")
    _timing(asm, ev, d["phase"], d.get("tok_s"), d.get("source", ""), d.get("tokens"), continues=continues)


def on_timing_pair(asm: Assembler, ev: Event) -> None:
    d = ev.data
    run = asm.run
    run.figures.trials = []  # an Averages line supersedes the trials before it
    source = d.get("source", "")
    stream = None
    if source == "server-json":
        # Streamed chunks carry the request's running timings: the same prompt (its count and its time) and
        # more tokens predicted than the chunk before continue that request; anything else is a new one.
        last, now = run.timing.stream, (d.get("prompt_n"), d.get("prompt_ms"), d.get("eval_n"))
        if (last is not None and None not in now and now[:2] == last[:2] and last[2] is not None
                and now[2] > last[2]):
            stream = last
    p = _timing(asm, ev, "prompt", d.get("prompt_tok_s"), source, d.get("prompt_n"),
                continues=stream[3] if stream else None)
    g = _timing(asm, ev, "eval", d.get("eval_tok_s"), source, d.get("eval_n"),
                continues=stream[4] if stream else None)
    run.timing.stream = (d.get("prompt_n"), d.get("prompt_ms"), d.get("eval_n"), p, g) if source == "server-json" else None


def on_timing_trial(asm: Assembler, ev: Event) -> None:
    d = ev.data
    _timing(asm, ev, "prompt", d.get("prompt_tok_s"), d.get("source", ""), trial=True)
    _timing(asm, ev, "eval", d.get("eval_tok_s"), d.get("source", ""), trial=True)


def on_timing_count(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.timing.pending_counts[ev.data["phase"]] = ev.data["tokens"]
    run.touch(ev)


def on_timing_setup(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.timing.setup_counts = {"prompt": ev.data["prompt_n"], "eval": ev.data["eval_n"]}
    run.program.name = run.program.name or "mlx_lm"
    run.touch(ev)


def on_server_slot(asm: Assembler, ev: Event) -> None:
    # slot lines are llama-server's, also inside ollama 0.30's server.log and the 2026 llama-cli at -lv 4:
    # a program its own lines named already keeps its name
    if asm.run.program.name in (None, "llama.cpp"):
        asm.run.program.name = "llama-server"
    asm.run.touch(ev, evidence=False)


def on_whisper_timing(asm: Assembler, ev: Event) -> None:
    asm.run.program.name = "whisper.cpp"
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
