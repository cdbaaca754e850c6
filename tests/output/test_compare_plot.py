"""`capscan compare --plot FILE` (issue 41 item 1): the chart as an image to attach, SVG or PNG by the file's
suffix, laid out so that no text is drawn over a bar or another text; hostile text stays text."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET

import pytest

from analyzer.output.chart import Bar, Group, parse_config
from analyzer.output.chart_image import CHAR, FONT, chart_png, chart_svg, layout
from tests.conftest import REPO, run_capscan

EXAMPLES = REPO / "examples"
JSON_TRIO = ("m1-ultra-guest-stock-json.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log")
SVG = "{http://www.w3.org/2000/svg}"


def _db(tmp_path):
    db = tmp_path / "c.db"
    for name in JSON_TRIO:
        run_capscan("ingest", str(EXAMPLES / name), db=db, check=True)
    return db


def _extent(t) -> tuple[float, float, float, float]:
    """A text's box (left, right, top, bottom) at most: CHAR per character at FONT, scaled to its size."""
    w = len(t.text) * CHAR * t.size / FONT
    left = t.x - w if t.anchor == "end" else t.x
    return left, left + w, t.y - t.size, t.y + t.size * 0.3


def _overlap(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _assert_laid_out(groups: list[Group]) -> None:
    lay = layout(groups)
    texts = [_extent(t) for t in lay.texts]
    boxes = [(b.x, b.x + b.w, b.y, b.y + b.h) for b in lay.boxes]
    for i, t in enumerate(texts):
        assert 0 <= t[0] and t[1] <= lay.width and 0 <= t[2] and t[3] <= lay.height, (lay.texts[i], lay.width)
        assert not any(_overlap(t, b) for b in boxes), lay.texts[i]
        assert not any(_overlap(t, u) for u in texts[i + 1:]), lay.texts[i]
    assert all(b[1] <= lay.width for b in boxes)


def test_plot_svg_of_the_json_example(tmp_path):
    out = tmp_path / "chart.svg"
    proc = run_capscan("compare", "1", "2", "3", "--plot", str(out), db=_db(tmp_path), check=True)
    assert proc.stdout.decode().startswith("Throughput per test")  # the terminal output is unchanged
    assert f"wrote {out}" in proc.stderr.decode()
    root = ET.fromstring(out.read_text())
    assert root.tag == f"{SVG}svg"
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts[1].startswith("every test: threads=8 n_batch=2048")
    assert "pp512" in texts and "tg128" in texts and not any(t.startswith("pp512 [") for t in texts)
    for figure in ("431.86 t/s", "4,786.70 t/s", "4,871.99 t/s", "12.63 t/s", "206.60 t/s", "286.71 t/s",
                   "9% of host", "98% of host", "4% of host", "72% of host", "reference", "stock guest #1",
                   "remedied guest #2", "host #3"):
        assert figure in texts, figure
    widths = [float(r.get("width")) for r in root.iter(f"{SVG}rect")][1:]  # the first is the background
    assert widths[2] == widths[5] == max(widths) and widths[0] < widths[1] < widths[2]  # to scale per test
    assert not any(tag in out.read_text() for tag in ("<script", "href", "<image", "<foreignObject"))


def test_plot_layout_keeps_texts_off_the_bars():
    dev = "MTL0/MTL1/BLAS/CPU/CPU-REPACK-01-" * 4  # a device string longer than a line
    groups = [Group("pp512", [Bar("stock guest", 1, 431.86, 0.09), Bar("remedied guest", 12, 4786.7, 0.98),
                              Bar("host", 123, 4871.99, None)], parse_config(f"threads=8 dev={dev}")),
              Group("pp512", [Bar("stock guest", 1, 1e308, 0.5), Bar("remedied guest", 12, 0.0, 0.0),
                              Bar("host", 123, 1_234_567.0, None)], parse_config("threads=8 dev=auto"))]
    _assert_laid_out(groups)
    assert any(t.text.startswith("  ") and t.bold for t in layout(groups).texts)  # the long label wrapped
    _assert_laid_out([])


def test_plot_svg_escapes_hostile_text():
    svg = chart_svg([Group("<script>alert(1)</script>&amp;\u202e\x1b[2J", [Bar("host", 1, 10.0, None)],
                           {"dev": "\"><foreignObject/>"})])
    root = ET.fromstring(svg)  # still one well-formed document
    texts = "".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "<script>alert(1)</script>&amp;" in texts  # shown as written, as text
    assert "<script" not in svg and "<foreignObject" not in svg and "\x1b" not in svg and "\u202e" not in svg


def test_plot_png_of_the_json_example(tmp_path):
    image = pytest.importorskip("PIL.Image", reason="Pillow: the png extra (scripts/install-test-deps)")
    out = tmp_path / "chart.PNG"
    run_capscan("compare", "1", "2", "3", "--plot", str(out), db=_db(tmp_path), check=True)
    with image.open(out) as img:
        assert img.format == "PNG"
        colours = {c for _, c in img.convert("RGB").getcolors(1 << 20)}
        width, height = img.size
    assert (0xd9, 0x53, 0x4f) in colours and (0x3c, 0x9d, 0x5d) in colours and (0x3b, 0x6f, 0xb6) in colours
    assert width > 1000 and 400 < height < 800  # twice the SVG's size
    assert chart_png([]).startswith(b"\x89PNG")


def test_plot_png_without_pillow_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # as if the png extra were not installed
    out = tmp_path / "chart.png"
    proc = run_capscan("compare", "1", "2", "3", "--plot", str(out), db=_db(tmp_path))
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "pip install 'capscan[png]'" in err and not out.exists()


@pytest.mark.parametrize("name", ["chart.jpg", "chart", "chart.svg.txt"])
def test_plot_other_suffixes_are_a_usage_error(tmp_path, name):
    proc = run_capscan("compare", "1", "2", "3", "--plot", str(tmp_path / name), db=_db(tmp_path))
    assert proc.returncode == 2 and "--plot writes .svg or .png" in proc.stderr.decode()
    assert not (tmp_path / name).exists()
