"""Lines of styled text, written plain or through rich.

The per-run report is a list of lines, each a few spans of text with a style
name (rich's: "bold", "dim", "bold red"...). Where the output shows no styles
(a pipe, a file, NO_COLOR) the spans are cleaned and joined: rich would print
exactly those characters (``tests/output/test_styled_plain.py`` compares the
two on every fixture and on hostile text), so `capscan show N | less` and
`--fail-on` in CI need neither rich's import nor its renderer (issue 13:
about 50 ms of `show`). On a terminal the same lines go through the report's
``SafeConsole``, as before.

Log text is never markup here either: a span is text, whatever brackets it
holds, and every span is cleaned (``analyzer.safe_text.clean``) on its way out,
on both paths, before rich sees it (the SafeConsole then cleans what rich
renders once more).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterator, TextIO

from analyzer.safe_text import clean, is_clean, unfiltered

if TYPE_CHECKING:
    from rich.console import Console

Span = tuple[str, str]  # (text, style)

# Environment variables that make rich style output that is not a terminal (rich reads them at
# Console() time); with any of them set the report goes through rich, which honours them.
_RICH_FORCES = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES")


class StyledLines:
    """What a report prints, line by line, before anything decides how."""

    def __init__(self) -> None:
        self.lines: list[list[Span]] = []

    def add(self, *parts: str | Span, style: str = "") -> None:
        """One line: plain strings take ``style``; ``(text, style)`` pairs keep their own."""
        self.lines.append([p if isinstance(p, tuple) else (p, style) for p in parts])

    def blank(self) -> None:
        self.lines.append([])

    def extend(self, other: StyledLines) -> None:
        self.lines.extend(other.lines)


def styles_shown(file: TextIO) -> bool:
    """Would rich put style codes in this output? Not under NO_COLOR (the report's console
    turns colour off then), and not on anything but a terminal unless rich is told to."""
    if os.environ.get("NO_COLOR"):
        return False
    if any(os.environ.get(name) for name in _RICH_FORCES):
        return True
    try:
        return bool(unfiltered(file).isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _clean(text: str) -> str:
    return text if is_clean(text, keep_newlines=True) else clean(text, keep_newlines=True)


def _finished(line: list[Span]) -> list[Span]:
    """A line's spans as written: cleaned, and without whitespace at the end of the line (rich
    before 15 drops it from a line wider than the console and keeps it otherwise; no report line
    needs it, so neither path writes it)."""
    spans = [(_clean(t), style) for t, style in line]
    while spans and not spans[-1][0].rstrip():
        spans.pop()
    if spans:
        spans[-1] = (spans[-1][0].rstrip(), spans[-1][1])
    return spans


def _plain_lines(lines: StyledLines) -> Iterator[str]:
    for line in lines.lines:
        yield "".join(t for t, _ in _finished(line)) + "\n"


def plain_text(lines: StyledLines) -> str:
    """The lines as rich prints them without styles: each span cleaned, joined, one newline each."""
    return "".join(_plain_lines(lines))


def write_plain(lines: StyledLines, file: TextIO) -> None:
    # One write a line, as rich writes: a single large write to a pipe whose reader has gone
    # can end short without an error (unbuffered stdout, PYTHONUNBUFFERED), and the next write
    # is what reports the broken pipe (exit 141, never a silent 0).
    for text in _plain_lines(lines):
        file.write(text)


def write_rich(lines: StyledLines, console: Console) -> None:
    from rich.text import Text

    for line in lines.lines:
        text = Text()
        for t, style in _finished(line):
            # cleaned before rich sees it, as on the plain path: rich would expand a tab and drop
            # an OSC's BEL terminator (leaving the console's cleaning an unterminated sequence)
            text.append(t, style=style or None)
        console.print(text)


def write(lines: StyledLines, file: TextIO, make_console: Any) -> None:
    """Plain where no style would show, else through ``make_console(file)`` (a SafeConsole)."""
    if styles_shown(file):
        write_rich(lines, make_console(file))
    else:
        write_plain(lines, file)
