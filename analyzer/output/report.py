"""Human-readable output through rich: the report's console, the runs table, compare.
(The per-run report itself is ``analyzer.output.run_report``: styled lines, written
through this console only on a terminal.)

Colour only on a terminal, and never when NO_COLOR is set (rich handles both
when the Console is created with ``force_terminal=None``).

Log text is hostile (see ``analyzer.safe_text``). The console made here is a
``SafeConsole``, the output boundary for everything rich prints: it never reads
markup or emoji codes in what it is given (a device named ``[/]`` or
``[link=...]`` is printed as written), and every piece of text it renders is
cleaned of escape sequences, control and bidi characters, whatever built it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console
from rich.table import Table
from rich.text import Text

from analyzer.output.display import cell, fmt_tps
from analyzer.output.safe_console import SafeConsole
from analyzer.safe_text import unfiltered

if TYPE_CHECKING:
    pass

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


class _Console(SafeConsole):
    fit_width = 0  # the columns the screen (or COLUMNS) really has, which the chart fits; see console()

    def on_broken_pipe(self) -> None:
        """The reader went away (`capscan | head`). rich exits 1, which would read as a
        --fail-on hit; exit as a shell reports SIGPIPE instead."""
        self.quiet = True
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.file.fileno())
        except (OSError, ValueError):
            pass
        raise SystemExit(EXIT_BROKEN_PIPE)


def console(file: TextIO) -> Console:
    """Styles only on a terminal; NO_COLOR (any value) turns every escape code off."""
    plain = bool(os.environ.get("NO_COLOR"))
    file = unfiltered(file)  # the console cleans its own output, and its style codes must survive
    fit = Console(file=file).width if file.isatty() else columns_env(120)
    out = _Console(file=file, color_system=None if plain else "auto", highlight=False, soft_wrap=True,
                   width=max(100, fit) if file.isatty() else fit)
    out.fit_width = fit
    return out


def columns_env(default: int) -> int:
    """COLUMNS when it is a sane width (a pipe has no terminal to ask), else ``default``."""
    try:
        n = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return default
    return n if 20 <= n <= 1000 else default


def render_compare(out: Console, doc: dict[str, Any]) -> None:
    from analyzer.output.chart import chart_groups, chart_table

    out.print(chart_table(chart_groups(doc), columns=getattr(out, "fit_width", 0) or out.width))
    out.print()
    for pair in doc["pairs"]:
        out.print(Text(f"run {pair['a']} (A) vs run {pair['b']} (B)", style="bold"))
        caps = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("", "A", "B"):
            caps.add_column(col)
        for row in pair["capabilities"]:
            style = "yellow" if row["differs"] else ""
            caps.add_row(row["field"], cell(row["a"]), cell(row["b"]), style=style)
        out.print(caps)
        if pair["tests"]:
            tp = Table(box=None, header_style="bold", pad_edge=False)
            for col in ("test", "A tok/s", "B tok/s", "B/A", "B - A per token"):
                tp.add_column(col, justify="left" if col == "test" else "right")
            for t in pair["tests"]:
                tp.add_row(t["test"], fmt_tps(t["a_tok_s"]), fmt_tps(t["b_tok_s"]), f"{t['ratio']:.1%}",
                           f"{t['per_token_s'] * 1000:+.3f} ms")
            out.print(tp)
            several = [f"{t['test']} A of {t.get('a_rows', 1)}, B of {t.get('b_rows', 1)}" for t in pair["tests"]
                       if t.get("a_rows", 1) > 1 or t.get("b_rows", 1) > 1]
            if several:  # a figure standing for several printed rows says so
                out.print("  tok/s: the best printed row of its configuration (" + "; ".join(several) + " rows)",
                          style="dim")
        else:
            out.print("  no test in common", style="dim")
        out.print()
    dec = doc.get("decomposition")
    if dec:
        out.print(Text(f"gap decomposition: stock run {dec['stock']}, remedied run {dec['remedied']}, "
                       f"host run {dec['host']}", style="bold"))
        t = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("test", "stock", "remedied", "host", "excess/token", "downgrade", "residual"):
            t.add_column(col, justify="left" if col == "test" else "right")
        for row in dec["tests"]:
            t.add_row(row["test"], fmt_tps(row["stock_tok_s"]), fmt_tps(row["remedied_tok_s"]),
                      fmt_tps(row["host_tok_s"]), f"{row['excess_s'] * 1000:.3f} ms",
                      f"{row['downgrade_share']:.1%}", f"{row['residual_share']:.1%}")
        out.print(t)

