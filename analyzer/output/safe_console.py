"""A rich Console that is a safe output boundary for log text.

It never reads markup or emoji codes in the strings it is given (a device
named ``[/]``, ``[link=...]`` or ``[conceal]`` is printed as written), and it
cleans every segment of text it renders with ``analyzer.safe_text.clean``,
whatever built the renderable (a Text, a Table cell, a plain string), and
defuses GitHub workflow commands (``::error::`` at a line start, ``##[``). rich
applies its own styles after this, from each segment's style, so colours
survive while no escape sequence from a log can.

The report and the TUI (whose app console is replaced by one of these) both
render through it.
"""

from __future__ import annotations

from typing import Any, Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from analyzer.safe_text import clean, defuse_workflow_commands, is_clean

SAFE_SETTINGS: dict[str, Any] = {"markup": False, "emoji": False, "highlight": False}


class SafeConsole(Console):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, **SAFE_SETTINGS})

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control:
                yield segment
                continue
            text = defuse_workflow_commands(segment.text)  # (a segment may start a line: defused as if it did)
            if not is_clean(text, keep_newlines=True):
                text = clean(text, keep_newlines=True)
            yield segment if text == segment.text else Segment(text, segment.style)
