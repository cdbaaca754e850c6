"""Lines read only to tell one invocation from the next (analyzer.parsers.starts): their boundary
(runs.boundaries) decides; the lines themselves add nothing to a run's facts."""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.parsers.base import Event

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler


def marks_a_start(asm: Assembler, ev: Event) -> None:
    """Nothing to keep: the line's work was done at its boundary."""


HANDLERS: dict[str, Handler] = {
    "program.start": marks_a_start,
    "server.listening": marks_a_start,
    "bench.sql_header": marks_a_start,
}
