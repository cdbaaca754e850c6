"""`compare --plot FILE`: the chart `compare` prints, as an image to attach (an issue, a chat, a slide).

One layout (``layout``: rectangles and texts placed in pixels) drawn two ways: ``chart_svg`` writes it as
a standalone SVG (no script, no external reference, every text cleaned and XML-escaped), ``chart_png``
paints it with Pillow (the optional ``png`` extra: GitHub issues and most chats take PNG, not SVG).

Every label sits on a line of its own above its bars, and the run names, bars and figures each have a
column wide enough for the longest of them, so no text is drawn over a bar or another text whatever the
configuration labels are."""

from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass

from analyzer.output.chart import ROLE_FILL, TITLE, Group, _finite, chart_labels, run_name, share_text
from analyzer.output.display import fmt_tps

FONT = 13  # px; texts are laid out for a monospace face, whose advance is at most CHAR
CHAR = 8.0  # px per character at FONT (DejaVu Sans Mono: 0.602 em = 7.8 px)
SMALL = 12
TITLE_SIZE = 15
MARGIN = 16
GAP = 12
BAR_W = 360
ROW = 22
LABEL_CHARS = 96  # a label (or the shared configuration) wraps past this many characters


@dataclass
class Box:
    x: float
    y: float
    w: float
    h: float
    fill: str


@dataclass
class Label:
    x: float
    y: float  # the baseline
    text: str
    size: int = FONT
    bold: bool = False
    anchor: str = "start"  # or "end": x is where the text ends
    fill: str = "#222"


@dataclass
class Layout:
    width: int
    height: int
    boxes: list[Box]
    texts: list[Label]


def layout(groups: list[Group]) -> Layout:
    labels, shared = chart_labels(groups)
    bars = [b for g in groups for b in g.bars]
    run_w = max((len(run_name(b)) for b in bars), default=0) * CHAR
    tps_w = max((len(f"{fmt_tps(b.tok_s)} t/s") for b in bars), default=0) * CHAR
    share_w = max((len(share_text(b)) for b in bars), default=0) * CHAR
    bar_x = MARGIN + run_w + GAP
    tps_end = bar_x + BAR_W + GAP + tps_w
    share_x = tps_end + GAP

    def wrap(text: str) -> list[str]:
        return textwrap.wrap(text, LABEL_CHARS, subsequent_indent="  ", break_on_hyphens=False)

    shared_lines = wrap(f"every test: {shared}") if shared else []
    label_lines = [wrap(x) for x in labels]
    longest = max([len(TITLE) * TITLE_SIZE / FONT, *(len(x) for x in shared_lines), *(len(x) for ls in label_lines for x in ls)])
    width = max(share_x + share_w, MARGIN + CHAR * longest) + MARGIN
    texts = [Label(MARGIN, MARGIN + TITLE_SIZE, TITLE, size=TITLE_SIZE, bold=True)]
    boxes: list[Box] = []
    y = MARGIN + TITLE_SIZE
    for line in shared_lines:
        y += 18
        texts.append(Label(MARGIN, y, line, size=SMALL, fill="#555"))
    if not groups:
        y += 22
        texts.append(Label(MARGIN, y, "no test in common to chart", fill="#555"))
    for g, lines in zip(groups, label_lines, strict=True):
        y += 14
        for line in lines:
            y += 20
            texts.append(Label(MARGIN, y, line, bold=True))
        y += 6
        for b in g.bars:
            top = y
            y += ROW
            base = top + 15
            fill = ROLE_FILL.get(b.role, "#777")
            texts.append(Label(MARGIN, base, run_name(b), fill=fill))
            frac = min(1.0, b.tok_s / g.top) if g.top > 0 and _finite(b.tok_s) else 0.0
            w = max(1.0 if _finite(b.tok_s) and b.tok_s > 0 else 0.0, frac * BAR_W)
            boxes.append(Box(bar_x, top + 3, w, ROW - 6, fill))
            texts.append(Label(tps_end, base, f"{fmt_tps(b.tok_s)} t/s", anchor="end"))
            texts.append(Label(share_x, base, share_text(b), fill="#555" if b.share is None else "#222"))
    return Layout(int(width + 0.5), int(y + MARGIN + 0.5), boxes, texts)


def chart_svg(groups: list[Group]) -> str:
    """The chart as a standalone SVG document."""
    from analyzer.safe_text import clean

    lay = layout(groups)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{lay.width}" height="{lay.height}" '
           f'viewBox="0 0 {lay.width} {lay.height}" font-family="DejaVu Sans Mono, Menlo, Consolas, monospace">',
           f"<title>{html.escape(TITLE)}</title>",
           f'<rect width="{lay.width}" height="{lay.height}" fill="#fff"/>']
    for b in lay.boxes:
        out.append(f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" fill="{b.fill}"/>')
    for t in lay.texts:
        weight = ' font-weight="bold"' if t.bold else ""
        anchor = ' text-anchor="end"' if t.anchor == "end" else ""
        out.append(f'<text x="{t.x:.1f}" y="{t.y:.1f}" font-size="{t.size}" fill="{t.fill}"{weight}{anchor} '
                   f'xml:space="preserve">{html.escape(clean(t.text, keep_newlines=False), quote=True)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def chart_png(groups: list[Group], scale: int = 2) -> bytes:
    """The chart painted by Pillow at ``scale`` times the SVG's size (sharp on a high-density screen).
    Raises ImportError when Pillow (the ``png`` extra) is not installed."""
    import io

    from PIL import Image, ImageDraw, ImageFont

    from analyzer.safe_text import clean

    lay = layout(groups)
    img = Image.new("RGB", (lay.width * scale, lay.height * scale), "#ffffff")
    draw = ImageDraw.Draw(img)
    fonts: dict[int, ImageFont.FreeTypeFont | ImageFont.ImageFont] = {}
    for b in lay.boxes:
        draw.rectangle([b.x * scale, b.y * scale, (b.x + b.w) * scale - 1, (b.y + b.h) * scale - 1], fill=b.fill)
    for t in lay.texts:
        # Pillow's own scalable face (10.1+): nothing to find on the machine; its glyphs are no wider than CHAR
        font = fonts.setdefault(t.size, ImageFont.load_default(t.size * scale))
        draw.text((t.x * scale, t.y * scale), clean(t.text, keep_newlines=False), font=font, fill=t.fill,
                  anchor="rs" if t.anchor == "end" else "ls", stroke_width=1 if t.bold else 0, stroke_fill=t.fill)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    return buf.getvalue()
