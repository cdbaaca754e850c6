"""`capscan report RUN... --html FILE`: one self-contained page to attach to an issue.

Inline CSS and inline SVG only: no script, no font, image or stylesheet to fetch, no link that loads
anything. Per run it holds what `capscan show` prints (the headline, the verdict, the proof, the
evidence lines, the next steps), with the report's own styles as CSS classes, and above them the
chart of `capscan compare` over the runs given. Log text is hostile: every span is cleaned
(analyzer.safe_text.clean) and HTML-escaped."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Any

from analyzer.output.chart import CHART_CSS, chart_groups, chart_html
from analyzer.output.run_report import run_lines
from analyzer.output.styled import StyledLines
from analyzer.safe_text import clean

if TYPE_CHECKING:
    from analyzer.model import StoredRun

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em; color: #1d1d1f;
       max-width: 70em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 2em; }
pre { background: #f6f6f7; padding: 1em; overflow-x: auto; white-space: pre-wrap; word-break: break-word;
      font-size: 12px; line-height: 1.45; }
.s-bold { font-weight: bold; } .s-dim { color: #6e6e73; }
.s-red { color: #c0392b; } .s-green { color: #2e7d32; } .s-yellow { color: #9a6b00; }
.s-magenta { color: #8e44ad; } .s-cyan { color: #00838f; } .s-blue { color: #1f5fa8; }
footer { margin-top: 3em; color: #6e6e73; font-size: 0.85em; }
""" + CHART_CSS
KNOWN_STYLES = {"bold", "dim", "red", "green", "yellow", "magenta", "cyan", "blue"}


def esc(text: Any) -> str:
    return html.escape(clean(str(text)), quote=True)


def _lines_html(lines: StyledLines) -> str:
    out = []
    for line in lines.lines:
        spans = []
        for text, style in line:
            classes = " ".join(f"s-{w}" for w in style.split() if w in KNOWN_STYLES)
            body = html.escape(clean(text, keep_newlines=False), quote=True)
            spans.append(f'<span class="{classes}">{body}</span>' if classes else body)
        out.append("".join(spans).rstrip())
    return "\n".join(out)


def single_run_groups(run: StoredRun) -> list:
    from analyzer.output.chart import Bar, Group, parse_config

    # each configuration its own figure, named by what sets it apart (chart_labels: ``tg128 [threads=8]``)
    return [Group(str(t["test"]), [Bar("A", run.id, float(t["tok_s"]), None)], parse_config(t.get("config")))
            for t in run.throughput if isinstance(t.get("tok_s"), (int, float))][:12]


def html_page(runs: list[StoredRun], compare_doc: dict[str, Any] | None, *, version: str) -> str:
    title = "capscan report: " + ", ".join(f"run {r.id}" for r in runs)
    groups = chart_groups(compare_doc) if compare_doc else (single_run_groups(runs[0]) if len(runs) == 1 else [])
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             # no request of any kind may leave the page, even if something slipped in
             '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; style-src \'unsafe-inline\'; '
             'img-src data:">',
             f"<title>{esc(title)}</title><style>{CSS}</style></head><body>", f"<h1>{esc(title)}</h1>"]
    if groups:
        parts.append(chart_html(groups))
    for run in runs:
        diag = run.diagnosis
        verdict = diag.verdict if diag else "unknown"
        parts.append(f'<h2 id="run-{run.id}">run {run.id}: {esc(verdict)}'
                     f'{" (fixable)" if diag and diag.fixable else ""}</h2>')
        parts.append(f"<pre>{_lines_html(run_lines(run, max_evidence=200))}</pre>")
    parts.append(f"<footer>written by capscan {esc(version)}; log text in this page is shown as text.</footer>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
