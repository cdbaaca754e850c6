"""Turn a source's event stream into runs.

A run is what one process showed about one device: its capability block,
its benchmark rows and timings. Boundaries, in order of evidence:

- an M4-era ``ggml_metal_device_init`` block is printed once per process at
  start-up, so a second one starts a new run, except ``MTL1``, ``MTL2``...
  (extra virtual devices of ``GGML_METAL_DEVICES`` in the same process);
- a legacy ``ggml_metal_init`` block is printed per context: a new run only when it names
  another device (its enumeration waits for the name), or follows measured results;
- a shim banner is printed by a constructor before ``main``: after a device
  it starts a new process;
- a llama-bench JSON/CSV/SQL row joins the run when its device and build agree, a markdown row when its
  backend does; a header after rows starts one (a process prints one backend and one header);
- probe and system_profiler output always form runs of their own;
- a second ``system_info`` line, or Vulkan/CUDA device list, starts a new run
  (a device list and a Metal block with no result between them: one process).

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
from analyzer.parsers.base import Event
from analyzer.runs.builder import SPILL_AT, RunBuilder
from analyzer.runs.metal import release_held

Handler = Callable[["Assembler", Event], None]

# Kinds that may arrive while an M4 block's first lines wait for its GPU name (metal.on_metal_tensor_gate).
_GATE_KINDS = frozenset(("metal.device", "metal.library_loaded", "metal.tensor_gate"))
# A legacy block reopened in a run that named its device waits for its GPU name line (metal.py).
_HOLD_KINDS = frozenset(("metal.found_device", "metal.picking_device", "metal.device"))


def handler_table() -> dict[str, Handler]:
    """Every family's HANDLERS merged; the same kind claimed twice is a programming error."""
    from analyzer.runs import (
        bench,
        context,
        gpu_backends,
        metal,
        probes,
        system,
        timings,
    )

    table: dict[str, Handler] = {}
    for family in (metal, probes, gpu_backends, system, context, bench, timings):
        for kind, handler in family.HANDLERS.items():
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
    def new_run(self) -> RunBuilder:
        self.close_run()
        self.seq += 1
        self.run = RunBuilder(self.seq)
        return self.run

    def close_run(self) -> None:
        run = self.run
        if not run.content:
            return
        if run.trials:  # benchmark trials without their Averages line (cut off): the trials are the results
            for tp in run.trials:
                run.add_throughput(tp)
            run.trials = []
        run.finalize()
        self.on_run(run)
        if run.pending:
            self.on_throughput(run, run.pending)
            run.pending = []
        self.closed += 1
        run.content = False  # closed runs are never emitted twice

    def finish(self) -> None:
        if self.pending_gate:
            self.flush_gate(self.run)
        if self.held:
            release_held(self, self.run)
        self.close_run()

    def spill(self) -> None:
        run = self.run
        if len(run.pending) >= SPILL_AT:
            self.on_throughput(run, run.pending)
            run.pending = []

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
            handler = handlers.get(ev.kind)
            if handler is None:
                self.unhandled[ev.kind] += 1
            else:
                handler(self, ev)
