"""The picture of a comparison: per test, one bar per run (stock guest, remedied guest, host; or A and B),
scaled to the fastest run of that test, with its speed and its share of the reference beside it.

``chart_groups`` turns `compare`'s document (analyzer.rules.compare) into plain data; ``chart_table`` draws
it with rich for the terminal and the TUI, ``chart_html`` as a table of fixed columns with inline SVG bars
for ``report --html``. Every text in it is cleaned and HTML-escaped; nothing in it loads anything."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any

from analyzer.output.display import fmt_tps

ROLE_STYLE = {"stock guest": "red", "remedied guest": "green", "host": "blue", "A": "blue", "B": "magenta"}
ROLE_FILL = {"stock guest": "#d9534f", "remedied guest": "#3c9d5d", "host": "#3b6fb6", "A": "#3b6fb6",
             "B": "#9b59b6"}
BLOCKS = "▏▎▍▌▋▊▉"


@dataclass
class Bar:
    role: str  # stock guest | remedied guest | host | A | B
    run: int
    tok_s: float
    share: float | None  # of the reference run's speed (the host, or A); None for the reference itself


@dataclass
class Group:
    test: str
    bars: list[Bar]

    @property
    def top(self) -> float:
        return max((b.tok_s for b in self.bars if _finite(b.tok_s)), default=0.0)


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x) and x >= 0


def chart_groups(doc: dict[str, Any]) -> list[Group]:
    """The groups of `compare`'s document: the decomposition's tests when there is one, else the pair's."""
    dec = doc.get("decomposition")
    if dec:
        out = []
        for t in dec["tests"]:
            host = t["host_tok_s"]
            label = t["test"] + (f" [{t['config']}]" if t.get("config") else "")
            out.append(Group(label, [
                Bar("stock guest", dec["stock"], t["stock_tok_s"], t["stock_tok_s"] / host if host else None),
                Bar("remedied guest", dec["remedied"], t["remedied_tok_s"],
                    t["remedied_tok_s"] / host if host else None),
                Bar("host", dec["host"], host, None)]))
        return out
    out = []
    for pair in doc.get("pairs", [])[:1]:
        for t in pair["tests"]:
            label = t["test"] + (f" [{t['config']}]" if t.get("config") else "")
            out.append(Group(label, [Bar("A", pair["a"], t["a_tok_s"], None),
                                     Bar("B", pair["b"], t["b_tok_s"], t["ratio"])]))
    return out


def bar_text(value: float, top: float, width: int) -> str:
    """A horizontal bar with eighth-block resolution (at least a sliver for any speed above zero)."""
    if not (_finite(value) and top > 0):
        return ""
    eighths = max(1 if value > 0 else 0, round(min(1.0, value / top) * width * 8))
    full, part = divmod(eighths, 8)
    return "█" * full + (BLOCKS[part - 1] if part else "")


def share_text(bar: Bar) -> str:
    if bar.share is None:
        return "reference" if bar.role in ("host", "A") else ""
    return f"{bar.share:.0%} of {'host' if bar.role.endswith('guest') else 'A'}"


def chart_table(groups: list[Group], width: int = 36):
    """A rich renderable: test, role (run), bar, tok/s, share."""
    from rich.console import Group as RichGroup
    from rich.table import Table
    from rich.text import Text

    if not groups:
        return Text("no test in common to chart", style="dim")
    table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 1))
    table.add_column("test", no_wrap=True, style="bold")
    table.add_column("run", no_wrap=True)
    table.add_column("bar", no_wrap=True)
    table.add_column("tok/s", justify="right", no_wrap=True)
    table.add_column("share", no_wrap=True)
    for i, g in enumerate(groups):
        if i:
            table.add_row("", "", "", "", "")
        for j, b in enumerate(g.bars):
            style = ROLE_STYLE.get(b.role, "")
            table.add_row(g.test if j == 0 else "", Text(f"{b.role} #{b.run}", style=style),
                          Text(bar_text(b.tok_s, g.top, width), style=style), f"{fmt_tps(b.tok_s)} t/s",
                          Text(share_text(b), style="dim" if b.share is None else ""))
    return RichGroup(Text("Throughput per test (bars scaled to the fastest run of each test)", style="bold"), table)


# The chart's layout in the HTML report: a table of fixed columns, so no text can be drawn over another. The
# label (test and configuration, which llama-bench can make a hundred characters long) wraps inside its own
# column and stops at four lines with an ellipsis, its whole text in the title; each figure has its own cell.
CHART_CSS = """
table.chart { table-layout: fixed; width: 100%; border-collapse: collapse; font-size: 12px; margin: 0 0 1em; }
.chart caption { text-align: left; font-weight: bold; font-size: 13px; padding-bottom: 0.6em; }
.chart col.c-run { width: 12em; } .chart col.c-tps { width: 8.5em; } .chart col.c-share { width: 8.5em; }
.chart th, .chart td { padding: 2px 6px; height: 16px; text-align: left; vertical-align: middle; white-space: nowrap;
                       overflow: hidden; text-overflow: ellipsis; }
.chart .test { width: 30%; vertical-align: top; font-weight: bold; white-space: normal; overflow: hidden; }
.chart .test div { display: -webkit-box; -webkit-box-orient: vertical; -webkit-line-clamp: 4; overflow: hidden;
                   overflow-wrap: anywhere; }
.chart td.tps { text-align: right; }
.chart td.bar svg { display: block; width: 100%; height: 14px; }
.chart tbody + tbody > tr:first-child > * { padding-top: 10px; }
"""


def chart_html(groups: list[Group]) -> str:
    """The same chart as an HTML table (CHART_CSS): per bar the label (first bar of a test), the run, the bar
    (an inline SVG rect: no script, no external reference, printed like the text) and the figures. Every
    text is cleaned and HTML-escaped."""
    from analyzer.safe_text import clean

    esc = lambda s: html.escape(clean(str(s)), quote=True)  # noqa: E731
    parts = ['<table class="chart">',
             "<caption>Throughput per test (bars scaled to the fastest run of each test)</caption>",
             '<colgroup><col class="c-test"><col class="c-run"><col class="c-bar"><col class="c-tps">'
             '<col class="c-share"></colgroup>']
    for g in groups:
        parts.append("<tbody>")
        for j, b in enumerate(g.bars):
            fill = ROLE_FILL.get(b.role, "#777")
            frac = min(1.0, b.tok_s / g.top) if g.top > 0 and _finite(b.tok_s) else 0.0
            pct = max(1.0 if _finite(b.tok_s) and b.tok_s > 0 else 0.0, frac * 100)
            run = f"{b.role} #{b.run}"
            cells = [f'<th class="test" scope="rowgroup" rowspan="{len(g.bars)}" title="{esc(g.test)}">'
                     f"<div>{esc(g.test)}</div></th>"] if j == 0 else []
            cells += [f'<td class="run" title="{esc(run)}">{esc(run)}</td>',
                      f'<td class="bar"><svg viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">'
                      f'<rect width="{pct:.2f}" height="10" fill="{fill}"/></svg></td>',
                      f'<td class="tps">{esc(fmt_tps(b.tok_s))} t/s</td>',
                      f'<td class="share">{esc(share_text(b))}</td>']
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return "\n".join(parts)
