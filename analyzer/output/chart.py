"""The picture of a comparison: per test, one bar per run (stock guest, remedied guest, host; or A and B),
scaled to the fastest run of that test, with its speed and its share of the reference beside it.

``chart_groups`` turns `compare`'s document (analyzer.rules.compare) into plain data; ``chart_table`` draws
it with rich for the terminal and the TUI, ``chart_svg`` as inline SVG for ``report --html``. Every text
in the SVG is XML-escaped; nothing in it loads anything."""

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


def chart_svg(groups: list[Group], width: int = 720) -> str:
    """The same chart as one inline SVG element (no script, no external reference)."""
    esc = lambda s: html.escape(str(s), quote=True)  # noqa: E731
    label_w, value_w, row_h, gap = 230, 190, 22, 14
    bar_w = width - label_w - value_w
    rows = sum(len(g.bars) for g in groups)
    height = 30 + rows * row_h + max(0, len(groups) - 1) * gap + 10
    parts = [f'<svg width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="throughput per test">',
             '<text x="0" y="16" font-size="13" font-weight="bold">Throughput per test (bars scaled to the '
             'fastest run of each test)</text>']
    y = 30
    for gi, g in enumerate(groups):
        if gi:
            y += gap
        for j, b in enumerate(g.bars):
            fill = ROLE_FILL.get(b.role, "#777")
            frac = min(1.0, b.tok_s / g.top) if g.top > 0 and _finite(b.tok_s) else 0.0
            w = max(2.0 if b.tok_s > 0 else 0.0, frac * bar_w)
            name = f"{g.test}  " if j == 0 else ""
            parts.append(f'<text x="0" y="{y + 15}" font-size="12"><tspan font-weight="bold">{esc(name)}</tspan>'
                         f'{esc(b.role)} #{b.run}</text>')
            parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{w:.1f}" height="{row_h - 6}" fill="{fill}"/>')
            parts.append(f'<text x="{label_w + bar_w + 8}" y="{y + 15}" font-size="12">{esc(fmt_tps(b.tok_s))} t/s'
                         f'  {esc(share_text(b))}</text>')
            y += row_h
    parts.append("</svg>")
    return "\n".join(parts)
