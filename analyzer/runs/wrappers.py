"""Figures of wrapper programs and speed lines of their own shape (analyzer.parsers.wrappers): each
kept as printed, in a series of its own where the same test could be printed again with another
meaning (a wrapper's run, its average or median), so no figure becomes a mean nobody printed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.model import Throughput
from analyzer.parsers.base import Event
from analyzer.runs.timings import on_timing_pair

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler

_OBENCH = "obench (ollama)"


def _name(asm: Assembler, program: str) -> None:
    run = asm.run
    if run.program.name in (None, "llama.cpp", "ollama"):
        run.program.name = program


def _add(asm: Assembler, ev: Event, test: str, tok_s: float, config: str | None = None, *,
         n_prompt: int | None = None, n_gen: int | None = None, kind: str = "timing", model: str | None = None) -> None:
    run = asm.run
    run.add_throughput(Throughput(test=test, tok_s=tok_s, model=model or run.facts.model, line=ev.line, kind=kind,
                                  n_prompt=n_prompt, n_gen=n_gen), config)
    run.touch(ev)


def on_figures(asm: Assembler, ev: Event) -> None:
    """A wrapper's JSON result: its figures, with the model it names when the run names none."""
    d = ev.data
    run = asm.run
    _name(asm, d["program"])
    if run.facts.model is None and d.get("model"):
        run.facts.model = d["model"]
    for test, tok_s, n_prompt, n_gen, config in d["figures"]:
        kind = "bench" if test[:2] in ("pp", "tg") else "timing"
        # each model's figures its own (a result JSON may hold several models)
        _add(asm, ev, test, tok_s, config, n_prompt=n_prompt, n_gen=n_gen, kind=kind, model=d.get("model"))


def on_json_start(asm: Assembler, ev: Event) -> None:
    """The line a wrapper's JSON is recognised by: its figures arrive as ``wrapper.figures``."""


def on_decoded(asm: Assembler, ev: Event) -> None:
    # tokens decoded over the whole loop, the prompt's batch included: a test of its own, never generation
    _add(asm, ev, "decoded", ev.data["tok_s"], n_gen=ev.data.get("tokens"))
    run = asm.run
    if run.program.name in (None, "llama.cpp"):
        # the line llama-simple ends with (llama-batched prints it too, after lines that name it first)
        run.program.name = "llama-simple"


def on_kobold_total(asm: Assembler, ev: Event) -> None:
    on_timing_pair(asm, ev)
    total = ev.data.get("total_tok_s")
    if total is not None:
        # both phases over the whole time: its own test, so it never stands for generation
        _add(asm, ev, "total", total)


def on_obench(asm: Assembler, ev: Event) -> None:
    _name(asm, _OBENCH)
    model = ev.data.get("model")
    if model:
        if asm.run.facts.model is None:
            asm.run.facts.model = model
        asm.run.program.wrapper_model = model
    asm.run.touch(ev, evidence=False)


def on_obench_run(asm: Assembler, ev: Event) -> None:
    _name(asm, _OBENCH)
    _add(asm, ev, "generation", ev.data["tok_s"], f"run={ev.data['run']}", model=asm.run.program.wrapper_model)


def on_obench_average(asm: Assembler, ev: Event) -> None:
    # the wrapper's own average, as printed, labelled so: never merged with the rates it averages
    _name(asm, _OBENCH)
    _add(asm, ev, "generation", ev.data["tok_s"], "aggregate=average", model=asm.run.program.wrapper_model)


HANDLERS: dict[str, Handler] = {
    "wrapper.figures": on_figures,
    "wrapper.json": on_json_start,
    "wrapper.decoded": on_decoded,
    "wrapper.kobold_total": on_kobold_total,
    "wrapper.obench": on_obench,
    "wrapper.obench_run": on_obench_run,
    "wrapper.obench_average": on_obench_average,
}
