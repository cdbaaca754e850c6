"""`capscan report RUN... --html FILE` (issue 25 item 3): one self-contained page, rendered in headless
Chromium (Debian's `chromium`, installed by scripts/install-test-deps). It draws (a non-blank
screenshot of the asked size), it asks for nothing over the network, and hostile log text in it stays
text. The runs are the bundled examples and a hostile log, ingested into a real SQLite file."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.conftest import REPO, run_capscan
from tests.loopback import LoopbackServer

EXAMPLES = REPO / "examples"
HOSTILE = ("ggml_metal_device_init: GPU name:   MTL0 (<script>alert(1)</script><img src=x onerror=alert(2)>"
           " &amp; \u202eevil\x1b]0;title\x07)\n"
           "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)\n"
           "ggml_metal_device_init: simdgroup reduction   = false\n"
           "ggml_metal_init: error: <a href=\"http://evil.example/\">click</a> ::error::x\n")


def _stored(tmp_path: Path) -> Path:
    db = tmp_path / "c.db"
    for name in ("m1-ultra-guest-stock.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log"):
        run_capscan("ingest", str(EXAMPLES / name), db=db, check=True)
    run_capscan("ingest", "-", input=HOSTILE, db=db, check=True)
    return db


def _parse(page: str) -> tuple[set[str], set[str], str]:
    """The tags, the attribute names and the text of a page, as a browser's parser sees them."""
    from html.parser import HTMLParser

    class Collect(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.tags: set[str] = set()
            self.attrs: set[str] = set()
            self.text: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.tags.add(tag)
            self.attrs |= {name for name, _ in attrs}

        def handle_data(self, data):
            self.text.append(data)

    c = Collect()
    c.feed(page)
    return c.tags, c.attrs, "".join(c.text)


def _page(tmp_path: Path, *runs: str) -> str:
    out = tmp_path / "report.html"
    proc = run_capscan("report", *runs, "--html", str(out), db=tmp_path / "c.db")
    assert proc.returncode == 0, proc.stderr.decode()
    return out.read_text(encoding="utf-8")


def test_the_page_is_self_contained_and_hostile_text_stays_text(tmp_path):
    _stored(tmp_path)
    page = _page(tmp_path, "1", "2", "3", "4")
    tags, attrs, text = _parse(page)
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "a", "base", "form", "video", "audio"}
    assert not attrs & {"src", "href", "srcset", "action", "onerror", "onload", "xlink:href"}
    style = page[page.index("<style>"):page.index("</style>")]
    assert "url(" not in style and "@import" not in style and "http" not in style
    assert "<script>alert(1)</script>" in text and "<img src=x onerror=alert(2)>" in text  # as text, for the eye
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "&amp;amp;" in page                        # an entity in the log is shown as written
    assert "\x1b" not in page and "\u202e" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    # the three-run chart: one bar per role and test
    three = _page(tmp_path, "1", "2", "3")
    assert three.count("<rect") == 6 and "stock guest #1" in three and "98% of host" in three


def test_unknown_run_is_one_line(tmp_path):
    _stored(tmp_path)
    proc = run_capscan("report", "99", "--html", str(tmp_path / "x.html"), db=tmp_path / "c.db")
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "no run 99" in err and "Traceback" not in err
    assert not (tmp_path / "x.html").exists()


def _png(path: Path) -> tuple[int, int, set[bytes]]:
    """Width, height and the distinct pixels of an 8-bit RGB(A) PNG (enough to tell blank from drawn)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels + 1
    pixels = {raw[i:i + channels] for row in range(0, len(raw), stride * 7)  # every 7th row is plenty
              for i in range(row + 1, row + stride, channels * 5)}
    return width, height, pixels


class Canary(LoopbackServer):
    """Counts the requests it gets: any request from the page is a leak."""

    def __init__(self):
        super().__init__(lambda path, body: (204, "text/plain", b""))

    @property
    def hits(self) -> list[str]:
        return [path for _, path in self.requests]


def _shoot(page: Path, shot: Path, profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--window-size=1000,800", f"--user-data-dir={profile}", "--virtual-time-budget=3000",
                           f"--screenshot={shot}", page.as_uri()], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium (scripts/install-test-deps)")
def test_chromium_draws_the_page_and_it_asks_for_nothing(tmp_path):
    with Canary() as canary:
        db = _stored(tmp_path)
        bait = (f"ggml_metal_device_init: GPU name:   MTL0 (<img src=\"{canary.url}/img\">"
                f"<link rel=stylesheet href=\"{canary.url}/css\"><script src=\"{canary.url}/js\"></script>)\n"
                "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)\n")
        run_capscan("ingest", "-", input=bait, db=db, check=True)
        page = tmp_path / "report.html"
        run_capscan("report", "1", "2", "3", "5", "--html", str(page), db=db, check=True)
        shot = tmp_path / "shot.png"
        proc = _shoot(page, shot, tmp_path / "profile")
        assert shot.exists(), proc.stderr[-2000:]
        width, height, pixels = _png(shot)
        assert (width, height) == (1000, 800)
        assert len(pixels) > 10, "the screenshot is blank"
        assert canary.hits == [], canary.hits     # the page asked for nothing
        # the canary is real: a page holding the same markup as markup does ask it
        control = tmp_path / "control.html"
        control.write_text(f'<html><body><img src="{canary.url}/img"></body></html>')
        _shoot(control, tmp_path / "control.png", tmp_path / "profile2")
        assert "/img" in canary.hits


JSON_TRIO = ("m1-ultra-guest-stock-json.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log")
SHARED = "threads=8 n_batch=2048 n_ubatch=512 type_k=f16 type_v=f16 fa=-1 ngl=-1 nkvo=0 dev=auto"


def _json_page(tmp_path: Path, log: str | None = None, runs: tuple[str, ...] = ("1", "2", "3")) -> Path:
    db = tmp_path / "c.db"
    for name in JSON_TRIO:
        run_capscan("ingest", str(EXAMPLES / name), db=db, check=True)
    if log is not None:
        run_capscan("ingest", "-", input=log, db=db, check=True)
    page = tmp_path / "report.html"
    run_capscan("report", *runs, "--html", str(page), db=db, check=True)
    return page


def _two_configurations() -> str:
    """The stock JSON guest's log with its pp512 row measured again on another device string: two rows
    of one test whose configurations differ in ``dev`` only (a real llama-bench prints one object per
    test and configuration)."""
    text = (EXAMPLES / "m1-ultra-guest-stock-json.log").read_text()
    head, _, objects = text.partition("[\n")
    first = objects[:objects.index("\n  },") + len("\n  }")]
    other = first.replace('"devices": "auto"', '"devices": "MTL0/MTL1/BLAS/CPU/CPU-REPACK-01"').replace(
        "431.860000", "402.500000")
    return head + "[\n" + other + ",\n" + objects


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium (scripts/install-test-deps)")
@pytest.mark.parametrize("width", [800, 1280])
def test_chromium_lays_out_the_json_examples_chart(tmp_path, width):
    """Issue 41: the real llama-bench JSON example (stock guest, remedied guest, host) in `report --html`:
    the tests are labelled by what varies (nothing: `pp512`, `tg128`), the shared configuration said once in
    the caption, and Chromium draws no label over a bar or figure and no run name past the edge."""
    from tests.adversarial.test_lows import _layout

    page = _json_page(tmp_path)
    html_text = page.read_text()
    assert f'every test: {SHARED}</span></caption>' in html_text
    got = _layout(page, tmp_path, width)
    _no_overlap(got, ["pp512", "tg128"])
    assert 'title="pp512"><div>pp512</div>' in html_text and "pp512 [" not in html_text


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium (scripts/install-test-deps)")
def test_chromium_lays_out_labels_that_vary(tmp_path):
    """A run of two configurations: its labels carry the one parameter that differs (a device string of
    32 characters), and still stay in their column at 800 px."""
    from tests.adversarial.test_lows import _layout

    page = _json_page(tmp_path, _two_configurations(), runs=("4",))
    assert "every test: threads=8 n_batch=2048" in page.read_text()
    got = _layout(page, tmp_path, 800)
    _no_overlap(got, ["pp512 [dev=MTL0/MTL1/BLAS/CPU/CPU-REPACK-01]", "pp512 [dev=auto]", "tg128 [dev=auto]"])


def _no_overlap(got: dict, labels: list[str]) -> None:
    vw = got["vw"]
    assert got["table"] is not None and got["table"][1] <= vw
    heads = [row for row in got["rows"] if "test" in row]
    assert [row["test"]["title"] for row in heads] == labels
    for row in got["rows"]:
        for name in ("run", "tps", "share"):
            assert row[name]["sw"] <= row[name]["cw"], (name, row[name])  # never cut
        spans = [row["run"]["text"], row["rect"], row["tps"]["text"]]
        if row["share"]["text"][1] > row["share"]["text"][0]:
            spans.append(row["share"]["text"])
        if "test" in row:  # the label: inside its own cell, left of the run name and the bar
            cell, lab = row["test"]["cell"], row["label"]["box"]
            assert cell[0] - 0.5 <= lab[0] and lab[1] <= cell[1] + 0.5 and cell[1] <= row["run"]["cell"][0] + 0.5
            spans.insert(0, lab)
        for left, right in zip(spans, spans[1:], strict=False):
            assert left[1] <= right[0] + 0.5, (left, right, row)
        assert spans[-1][1] <= vw
