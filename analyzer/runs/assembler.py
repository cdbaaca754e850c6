"""Turn a source's event stream into runs.

A run is what one process showed about one device: its capability block,
its benchmark rows and timings. Which event starts a new run, and why, is decided in one
place, ``analyzer/runs/boundaries.py`` (its table is ``docs/reference/run-boundaries.md``);
a run ends when the next one starts or the input ends.

This module holds only the run lifecycle and the handler table. What each event means
lives in one handler module per parser family (``metal``, ``probes``, ``gpu_backends``,
``system``, ``context``, ``bench``, ``timings``, mirroring ``analyzer/parsers/``); each
declares a ``HANDLERS`` table, and a kind handled twice is an error at import. A kind
without a handler is counted in ``unhandled``, never silently lost:
``tests/runs/test_handler_table.py`` checks each kind a parser emits has one handler.

Throughput rows reach ``on_throughput`` in batches: a million rows never sit in memory.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from analyzer.model import Throughput
from analyzer.parsers import head_kinds
from analyzer.parsers.base import LEGACY_HEAD, M4_HEAD, Event
from analyzer.runs.boundaries import starts_run
from analyzer.runs.builder import SPILL_AT, RunBuilder
from analyzer.runs.metal import release_held

Handler = Callable[["Assembler", Event], None]

# The lines a waiting Metal block head keeps (metal.on_metal_tensor_gate, metal.on_metal_block_start), as the
# formats declare them (Pattern.heads): any other line releases the head.
_GATE_KINDS = head_kinds(M4_HEAD)
_HOLD_KINDS = head_kinds(LEGACY_HEAD)


def handler_table() -> dict[str, Handler]:
    """Every family's HANDLERS merged; the same kind claimed twice is a programming error. A family is any
    module of this package that declares ``HANDLERS``: a new one is found without a list to join."""
    import importlib
    import pkgutil

    import analyzer.runs as package

    table: dict[str, Handler] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        family = importlib.import_module(f"{package.__name__}.{info.name}")
        for kind, handler in getattr(family, "HANDLERS", {}).items():
            if kind in table:
                raise RuntimeError(f"event kind {kind!r} has two handlers ({family.__name__})")
            table[kind] = handler
    return table


class Assembler:
    _table: dict[str, Handler] | None = None

    def __init__(self, on_run: Callable[[RunBuilder], None],
                 on_throughput: Callable[[RunBuilder, list[Throughput]], None]):
        self.on_run = on_run
        self.on_throughput = on_throughput
        self.seq = 0
        self.run = RunBuilder(0)
        self.md_columns: list[str] | None = None  # the header of the llama-bench markdown table being read
        self.closed = 0
        self.pending_gate: list[Event] = []  # M4 block start awaiting its GPU name line
        self.held: list[Event] = []  # a legacy block's opening lines awaiting its GPU name line
        self.unhandled: Counter[str] = Counter()
        if Assembler._table is None:
            Assembler._table = handler_table()
        self._handlers = Assembler._table

    # -- run lifecycle ------------------------------------------------------
    def new_run(self, why: str, carry: tuple[str, ...] = ()) -> None:
        previous = self.run.facts
        self.close_run()
        self.seq += 1
        self.run = RunBuilder(self.seq, started_by=why)
        for name in carry:
            setattr(self.run.facts, name, getattr(previous, name))

    def close_run(self) -> None:
        run = self.run
        if not run.span.content:
            return
        if run.figures.trials:  # benchmark trials without their Averages line (cut off): the trials are the results
            for tp in run.figures.trials:
                run.add_throughput(tp)
            run.figures.trials = []
        run.finalize()
        self.on_run(run)
        if run.figures.pending:
            self.on_throughput(run, run.figures.pending)
            run.figures.pending = []
        self.closed += 1
        run.span.content = False  # closed runs are never emitted twice

    def finish(self) -> None:
        if self.pending_gate:
            self.flush_gate(self.run)
        if self.held:
            release_held(self, self.run)
        self.close_run()

    def spill(self) -> None:
        run = self.run
        if len(run.figures.pending) >= SPILL_AT:
            self.on_throughput(run, run.figures.pending)
            run.figures.pending = []

    def flush_gate(self, run: RunBuilder) -> None:
        for pending in self.pending_gate:
            run.touch(pending)
        self.pending_gate = []

    # -- events ---------------------------------------------------------------
    def feed(self, events: list[Event]) -> None:
        handlers = self._handlers
        for ev in events:
            if self.pending_gate and ev.kind not in _GATE_KINDS:
                self.flush_gate(self.run)
            if self.held and ev.kind not in _HOLD_KINDS:
                release_held(self, self.run)
            self.handle(ev, handlers)

    def handle(self, ev: Event, handlers: dict[str, Handler] | None = None) -> None:
        """One event: first a new run if it starts one (runs.boundaries), then its handler."""
        start = starts_run(self, ev)
        if start is not None:
            self.new_run(start[0], start[1].carry)
        handler = (handlers or self._handlers).get(ev.kind)
        if handler is None:
            self.unhandled[ev.kind] += 1
        else:
            handler(self, ev)
