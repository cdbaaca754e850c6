"""The picture of a comparison: per test, one bar per run (stock guest, remedied guest, host; or A and B),
scaled to the fastest run of that test, with its speed and its share of the reference beside it.

``chart_groups`` turns `compare`'s document (analyzer.rules.compare) into plain data; ``chart_labels`` names
each test by the parameters that vary between the charted tests only (llama.cpp's compare-llama-bench.py
shows a configuration column only where not all rows agree), the rest said once. ``chart_table`` draws it
with rich for the terminal and the TUI, laid out for the columns it is given; ``chart_html`` as a table of
fixed columns with inline SVG bars for ``report --html``. Every text in it is cleaned and HTML-escaped;
nothing in it loads anything."""

from __future__ import annotations

import html
import math
import textwrap
from dataclasses import dataclass, field
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
    test: str  # the test as llama-bench names it (pp512, tg128)
    bars: list[Bar]
    config: dict[str, str] = field(default_factory=dict)  # the parameters its rows state (threads=8 ...)

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
            out.append(Group(t["test"], [
                Bar("stock guest", dec["stock"], t["stock_tok_s"], t["stock_tok_s"] / host if host else None),
                Bar("remedied guest", dec["remedied"], t["remedied_tok_s"],
                    t["remedied_tok_s"] / host if host else None),
                Bar("host", dec["host"], host, None)], parse_config(t.get("config"))))
        return out
    out = []
    for pair in doc.get("pairs", [])[:1]:
        for t in pair["tests"]:
            # like_pairs matched the two sides on every parameter both state: together, what the rows state
            config = {**parse_config(t.get("b_config")), **parse_config(t.get("config"))}
            out.append(Group(t["test"], [Bar("A", pair["a"], t["a_tok_s"], None),
                                         Bar("B", pair["b"], t["b_tok_s"], t["ratio"])], config))
    return out


def parse_config(text: str | None) -> dict[str, str]:
    """``threads=8 n_batch=2048`` -> {parameter: value}, in the order printed."""
    return dict(part.partition("=")[::2] for part in (text or "").split())


def chart_labels(groups: list[Group]) -> tuple[list[str], str]:
    """Each group's label, and the configuration every group shares (said once, above the bars).

    compare-llama-bench.py's rule: a parameter is shown only where the charted rows do not all agree on it
    (here: two values, or stated by some tests and not others); ``pp512 [threads=8 n_batch=2048 ...]`` on
    every bar of a one-configuration benchmark says nothing the reader can use, and takes the room of the
    figures."""
    values: dict[str, set[str]] = {}
    for g in groups:
        for k, v in g.config.items():
            values.setdefault(k, set()).add(v)
    varies = {k for k, vs in values.items() if len(vs) > 1 or any(k not in g.config for g in groups)}
    labels = []
    for g in groups:
        shown = " ".join(f"{k}={v}" for k, v in g.config.items() if k in varies)
        labels.append(f"{g.test} [{shown}]" if shown else g.test)
    shared = " ".join(f"{k}={v}" for k, v in (groups[0].config.items() if groups else ()) if k not in varies)
    return labels, shared


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


TITLE = "Throughput per test (bars scaled to the fastest run of each test)"
MAX_BAR = 36
MIN_INLINE_BAR = 10  # a label shares its line with the bars only while they keep this many cells


def run_name(bar: Bar) -> str:
    return f"{bar.role} #{bar.run}"


def chart_table(groups: list[Group], columns: int = 120):
    """A rich renderable laid out for ``columns`` cells: run, bar, tok/s, share per line. The run names and
    figures always get their whole width; the label goes on a line of its own when beside them it would
    leave the bar less than MIN_INLINE_BAR cells; the bar takes what is left (none at all on a very narrow
    screen, rather than a cut figure). Every line but a long label's fits in ``columns``."""
    from rich.console import Group as RichGroup
    from rich.text import Text

    if not groups:
        return Text("no test in common to chart", style="dim")
    labels, shared = chart_labels(groups)
    bars = [b for g in groups for b in g.bars]
    run_w = max(len(run_name(b)) for b in bars)
    tps_w = max(len(f"{fmt_tps(b.tok_s)} t/s") for b in bars)
    share_w = max(len(share_text(b)) for b in bars)
    fixed = run_w + 1 + 1 + tps_w + 2 + share_w  # run, bar's gap, bar, gap, figure, gap, share
    label_w = max(len(x) for x in labels)
    inline = label_w + 1 + fixed + MIN_INLINE_BAR <= columns
    indent = label_w + 1 if inline else 2
    width = max(0, min(MAX_BAR, columns - indent - fixed))
    lines = [Text(TITLE, style="bold")]
    if shared:  # wrapped here: the console leaves long lines to the terminal, and a pipe has none
        lines += [Text(x, style="dim") for x in textwrap.wrap(f"every test: {shared}", max(20, columns),
                                                             subsequent_indent="  ", break_on_hyphens=False)]
    for g, label in zip(groups, labels, strict=True):
        lines.append(Text(""))
        if not inline:
            lines += [Text(x, style="bold") for x in textwrap.wrap(label, max(20, columns), subsequent_indent="  ",
                                                                  break_on_hyphens=False)]
        for j, b in enumerate(g.bars):
            style = ROLE_STYLE.get(b.role, "")
            line = Text(no_wrap=True, overflow="ignore")
            line.append((label if inline and j == 0 else "").ljust(indent), style="bold")
            line.append(run_name(b).ljust(run_w), style=style)
            if width:
                line.append(" " + bar_text(b.tok_s, g.top, width).ljust(width), style=style)
            line.append(" " + f"{fmt_tps(b.tok_s)} t/s".rjust(tps_w) + "  ")
            line.append(share_text(b), style="dim" if b.share is None else "")
            line.rstrip()
            lines.append(line)
    return RichGroup(*lines)


# The chart's layout in the HTML report: a table of fixed columns, so no text can be drawn over another. The
# label (test and configuration, which llama-bench can make a hundred characters long) wraps inside its own
# column and stops at four lines with an ellipsis, its whole text in the title; each figure has its own cell.
CHART_CSS = """
table.chart { table-layout: fixed; width: 100%; border-collapse: collapse; font-size: 12px; margin: 0 0 1em; }
.chart caption { text-align: left; font-weight: bold; font-size: 13px; padding-bottom: 0.6em; }
.chart caption .shared { font-weight: normal; font-size: 12px; color: #555; overflow-wrap: anywhere; }
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
    labels, shared = chart_labels(groups)
    every = f'<br><span class="shared">every test: {esc(shared)}</span>' if shared else ""
    parts = ['<table class="chart">', f"<caption>{esc(TITLE)}{every}</caption>",
             '<colgroup><col class="c-test"><col class="c-run"><col class="c-bar"><col class="c-tps">'
             '<col class="c-share"></colgroup>']
    for g, label in zip(groups, labels, strict=True):
        parts.append("<tbody>")
        for j, b in enumerate(g.bars):
            fill = ROLE_FILL.get(b.role, "#777")
            frac = min(1.0, b.tok_s / g.top) if g.top > 0 and _finite(b.tok_s) else 0.0
            pct = max(1.0 if _finite(b.tok_s) and b.tok_s > 0 else 0.0, frac * 100)
            run = run_name(b)
            cells = [f'<th class="test" scope="rowgroup" rowspan="{len(g.bars)}" title="{esc(label)}">'
                     f"<div>{esc(label)}</div></th>"] if j == 0 else []
            cells += [f'<td class="run" title="{esc(run)}">{esc(run)}</td>',
                      f'<td class="bar"><svg viewBox="0 0 100 10" preserveAspectRatio="none" aria-hidden="true">'
                      f'<rect width="{pct:.2f}" height="10" fill="{fill}"/></svg></td>',
                      f'<td class="tps">{esc(fmt_tps(b.tok_s))} t/s</td>',
                      f'<td class="share">{esc(share_text(b))}</td>']
            parts.append("<tr>" + "".join(cells) + "</tr>")
        parts.append("</tbody>")
    parts.append("</table>")
    return "\n".join(parts)
