"""The low findings of issue 37, each in several shapes of its own.

- the Prometheus textfile is written through a temporary file that cannot be a symlink someone planted
  (prometheus_client's ``write_to_textfile`` opened ``PATH.PID.THREAD`` following links);
- every label value is printable ASCII, also on stdout (the stdout sanitiser put U+2060 into "##[");
- a long configuration label stays inside its column of the HTML chart;
- ``db serve`` refuses SQL functions that leak a pointer or reach a file (``fts3_tokenizer``);
- ``export json --out``, ``export prometheus --out`` and ``report --html`` write the mode a new file gets
  under the user's umask, and keep an existing file's mode.

Who wrote this, and may it act? A local user who can write the textfile folder, a log's model name, a
browser page talking to ``db serve``: none of them may write another file, change what a dashboard
reads, or learn an address."""

from __future__ import annotations

import html
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import cli
from analyzer.fleet.metrics import collect, label_value
from analyzer.fleet.prometheus import write_textfile
from analyzer.safe_text import clean_output
from analyzer.store.db import open_db
from tests.conftest import REPO, run_capscan
from tests.fleet.dbutil import fleet_db, samples

EXAMPLES = REPO / "examples"
VICTIM_TEXT = b"a file the textfile collector's folder points at; capscan must never write it\n"


def _invoke(db: Path, *args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(cli, ["--db", str(db), *args])
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


# ---------------------------------------------------------------------------
# 1. the textfile's temporary file never follows a planted symlink
# ---------------------------------------------------------------------------


def _plant(out: Path, victim: Path, names: list[str]) -> list[Path]:
    """Symlinks to ``victim`` at each name beside ``out`` (the names a temp file could be guessed by)."""
    links = []
    for name in names:
        link = out.parent / name
        link.symlink_to(victim)
        links.append(link)
    return links


def _guessable(out: Path, ident: int | None = None) -> list[str]:
    """prometheus_client's own temp name (PATH.PID.THREAD, what capscan used before) and the usual guesses."""
    ident = threading.current_thread().ident if ident is None else ident
    return [f"{out.name}.{os.getpid()}.{ident}", f"{out.name}.tmp", f"{out.name}~", f"{out.name}.new",
            f"{out.name}.{os.getpid()}", f".{out.name}.tmp"]


def _assert_untouched(victim: Path | None, links: list[Path], out: Path) -> None:
    if victim is not None:
        assert victim.read_bytes() == VICTIM_TEXT, "a planted symlink was followed: the victim was rewritten"
    for link in links:
        assert link.is_symlink(), f"{link.name} was moved or replaced"
    assert not out.is_symlink() and out.is_file()
    got = samples(out.read_text())
    assert "capscan_run_info" in got and {lab["instance"] for lab, _ in got["capscan_run_info"]} == {"guest-1"}


def test_textfile_new_ignores_a_symlink_at_the_old_temp_name(tmp_path, db_path):
    fleet_db(db_path)
    folder = tmp_path / "textfile"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    out = folder / "capscan.prom"
    links = _plant(out, victim, _guessable(out))
    write_textfile(collect(open_db(db_path), instance="guest-1"), out)
    _assert_untouched(victim, links, out)


def test_textfile_replaced_ignores_symlinks_and_keeps_none_of_its_own(tmp_path, db_path):
    fleet_db(db_path)
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    out = tmp_path / "textfile" / "capscan.prom"
    out.parent.mkdir()
    out.write_text("# an older textfile\n")
    links = _plant(out, victim, _guessable(out))
    before = set(os.listdir(out.parent))
    write_textfile(collect(open_db(db_path), instance="guest-1"), out)
    _assert_untouched(victim, links, out)
    assert set(os.listdir(out.parent)) == before  # no temp file left beside it


def test_textfile_dangling_symlink_creates_nothing(tmp_path, db_path):
    """A link to a file that does not exist yet: following it would create the file (O_CREAT)."""
    fleet_db(db_path)
    target = tmp_path / "elsewhere" / "authorized_keys"
    target.parent.mkdir()
    out = tmp_path / "capscan.prom"
    links = _plant(out, target, _guessable(out))
    write_textfile(collect(open_db(db_path), instance="guest-1"), out)
    assert not target.exists()
    _assert_untouched(None, links, out)


def test_textfile_from_another_thread(tmp_path, db_path):
    """The old temp name holds the writing thread's id: plant the link for that thread."""
    fleet_db(db_path)
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    out = tmp_path / "capscan.prom"
    snap = collect(open_db(db_path), instance="guest-1")
    started, planted, errors = threading.Event(), threading.Event(), []
    ident: list[int] = []

    def writer() -> None:
        ident.append(threading.get_ident())
        started.set()
        planted.wait(10)
        try:
            write_textfile(snap, out)
        except OSError as exc:  # reported below, in the test's own thread
            errors.append(exc)

    t = threading.Thread(target=writer)
    t.start()
    assert started.wait(10)
    links = _plant(out, victim, _guessable(out, ident[0]))
    planted.set()
    t.join(30)
    assert not errors
    _assert_untouched(victim, links, out)


def test_export_prometheus_out_through_the_cli(tmp_path, db_path):
    fleet_db(db_path)
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    out = tmp_path / "capscan.prom"
    links = _plant(out, victim, _guessable(out))
    code, _, err = _invoke(db_path, "export", "prometheus", "--out", str(out), "--instance", "guest-1")
    assert code == 0, err
    _assert_untouched(victim, links, out)


# ---------------------------------------------------------------------------
# 2. label values are printable ASCII, wherever they are written
# ---------------------------------------------------------------------------

HOSTILE_LABELS = [
    "##[error]the build failed",                 # GitHub's legacy workflow command, anywhere in a line
    "###[warning]x",
    "##[group]a ##[endgroup]",
    "::error file=a::x",                         # the modern form (only at a line's start, but still)
    "\uff03\uff03\uff3berror]fullwidth",        # fullwidth "##[": NFKC makes it ASCII "##["
    "##\u2060[error]already joined",
    "llama\u2060 7B",                            # the word joiner itself
    "evil\u202egnp.exe \u2066x\u2069",           # bidi override and isolates
    "a\x1b[31mred\x1b[0m\x07\x00\x7f\x9b",        # escapes and C0/C1 controls
    "model \U0001F680 \u00e9t\u00e9 \u4e2d\u6587",  # emoji, accents, CJK
    'quote " and \\ backslash',
    "line\nbreak\r\nand\u2028sep\u2029",
    "e\u0301\u200b\u200d\ufeff",                # combining mark, zero-width space and joiner, BOM
    "\ud800 lone surrogate",
    "A" * 10_000 + "##[",
]


@pytest.mark.parametrize("value", HOSTILE_LABELS, ids=[ascii(v[:20]) for v in HOSTILE_LABELS])
def test_label_value_is_printable_ascii_that_stdout_leaves_alone(value):
    got = label_value(value)
    assert got and all(0x20 <= ord(c) < 0x7F for c in got), got
    assert '"' not in got and "\\" not in got and "{" not in got and "}" not in got
    assert "##[" not in got and not got.startswith("::")
    assert clean_output(got) == got  # nothing left for the stdout sanitiser to change (no U+2060 added)


def _hostile_log(tmp_path: Path) -> Path:
    log = (EXAMPLES / "m1-ultra-host.log").read_text()
    log = log.replace("llama 1B Q4_K - Medium", "llama ##[error]1B \uff03\uff03\uff3bx\u2060")
    path = tmp_path / "hostile.log"
    path.write_text(log)
    return path


def _ascii_exposition(text: bytes) -> dict:
    assert text.isascii(), [c for c in text.decode() if not c.isascii()][:5]
    got = samples(text.decode())
    for series in got.values():
        for labels, _ in series:
            for v in labels.values():
                assert v.isprintable() and v.isascii() and "##[" not in v, v
    return got


def test_stdout_exposition_is_ascii_in_a_real_process(tmp_path, db_path):
    """`export prometheus` to stdout passes the CLI's stdout sanitiser, which defuses '##[' with U+2060."""
    run_capscan("ingest", str(_hostile_log(tmp_path)), db=db_path, check=True)
    proc = run_capscan("export", "prometheus", "--instance", "##[error]guest", "--label", "site=##[warning]lab",
                       db=db_path, check=True)
    got = _ascii_exposition(proc.stdout)
    labels = got["capscan_throughput_tokens_per_second"][0][0]
    assert labels["model"].startswith("llama ") and labels["instance"].endswith("guest")
    assert labels["site"].endswith("lab")


def test_textfile_exposition_is_ascii(tmp_path, db_path):
    run_capscan("ingest", str(_hostile_log(tmp_path)), db=db_path, check=True)
    out = tmp_path / "capscan.prom"
    proc = run_capscan("export", "prometheus", "--out", str(out), "--instance", "::error::guest",
                       "--label", "site=\u202e##[x]", db=db_path)
    assert proc.returncode == 0, proc.stderr.decode()
    _ascii_exposition(out.read_bytes())


@pytest.mark.skipif(shutil.which("promtool") is None, reason="Debian's prometheus (promtool)")
def test_promtool_accepts_the_hostile_exposition(tmp_path, db_path):
    run_capscan("ingest", str(_hostile_log(tmp_path)), db=db_path, check=True)
    proc = run_capscan("export", "prometheus", "--instance", "##[error]guest", db=db_path, check=True)
    check = subprocess.run(["promtool", "check", "metrics"], input=proc.stdout, capture_output=True, timeout=60)
    assert check.returncode == 0, check.stderr.decode()[-1000:]


# ---------------------------------------------------------------------------
# 3. a long configuration label stays inside its column of the HTML chart
# ---------------------------------------------------------------------------

# llama-bench's configuration columns (analyzer.parsers.bench.CONFIG_FIELDS), as `llama-bench -t 8 -b 2048 -ub 512
# -ctk q8_0 -ctv q8_0 -fa 1 -ngl 99 -dev ...` prints them: each becomes part of the figure's label
CONFIG_COLUMNS = ("threads", "n_batch", "n_ubatch", "type_k", "type_v", "fa", "ngl", "dev")
CONFIGS = {
    "long": ("8", "2048", "512", "q8_0", "q8_0", "1", "99", "MTL0/BLAS/BLAS-CPU-Accelerate"),
    "longest": ("8", "16384", "16384", "iq4_nl", "iq4_nl", "1", "99", "MTL0/MTL1/BLAS/CPU/CPU-REPACK-01"),
    "markup": ("8", "2048", "512", "q8_0", "q8_0", "1", "99", "\"><b>MTL0</b><i>'&amp;"),
    "short": ("8",),
}


def _widened(text: str, values: tuple[str, ...]) -> str:
    """A bundled llama-bench table with configuration columns added before `test`."""
    cols = CONFIG_COLUMNS[:len(values)]
    out = []
    for line in text.splitlines():
        if line.startswith("| model"):
            line = "| model | size | params | backend | " + " | ".join(cols) + " | test | t/s |"
        elif line.startswith("| ---"):
            line = "| --- | ---: | ---: | --- | " + " | ".join("---:" for _ in cols) + " | ---: | ---: |"
        elif line.startswith("| llama"):
            model, size, params, backend, _threads, test, tps = (c.strip() for c in line.strip("|").split("|"))
            line = f"| {model} | {size} | {params} | {backend} | " + " | ".join(values) + f" | {test} | {tps} |"
        out.append(line)
    return "\n".join(out) + "\n"


def _chart_page(tmp_path: Path, config: str, runs: tuple[str, ...]) -> Path:
    """`report --html` over the bundled stock guest (1), remedied guest (2) and host (3), their tables
    carrying the configuration ``config``; ``runs`` picks the chart: three (the decomposition), two (a
    pair) or one (that run's figures)."""
    db = tmp_path / "c.db"
    for name in ("m1-ultra-guest-stock.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log"):
        log = tmp_path / name
        log.write_text(_widened((EXAMPLES / name).read_text(), CONFIGS[config]))
        code, _, err = _invoke(db, "ingest", str(log))
        assert code == 0, err
    page = tmp_path / "report.html"
    code, _, err = _invoke(db, "report", *runs, "--html", str(page))
    assert code == 0, err
    return page


def _cells(page: str) -> list[list[tuple[str, dict[str, str], str]]]:
    """The chart table's rows: (tag, attributes, text) per cell, as a browser's parser reads them."""
    from html.parser import HTMLParser

    class Rows(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.rows: list[list] = []
            self.cell: list | None = None
            self.depth = 0  # inside the chart's table

        def handle_starttag(self, tag, attrs):
            a = {k: v or "" for k, v in attrs}
            if tag == "table" and "chart" in a.get("class", "").split():
                self.depth = 1
            elif self.depth and tag == "tr":
                self.rows.append([])
            elif self.depth and tag in ("td", "th"):
                self.cell = [tag, a, ""]
                self.rows[-1].append(self.cell)

        def handle_endtag(self, tag):
            if tag == "table":
                self.depth = 0
            elif tag in ("td", "th"):
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell[2] += data

    p = Rows()
    p.feed(page)
    return [[(t, a, x.strip()) for t, a, x in row] for row in p.rows]


@pytest.mark.parametrize("config", ["long", "longest", "markup", "short"])
@pytest.mark.parametrize("runs", [("1", "2", "3"), ("1", "3"), ("2",)])
def test_chart_label_has_its_own_bounded_column(tmp_path, config, runs):
    """Every figure in a cell of its own; the label in a fixed column that clips with an ellipsis, its whole
    text in the title attribute."""
    page = _chart_page(tmp_path, config, runs).read_text()
    rows = _cells(page)
    per_test = len(runs)  # bars per test: one per run (a single run charts its own figures)
    assert len(rows) == 2 * per_test, rows  # pp512 and tg128, one row per run
    labels = []
    for i, row in enumerate(rows):
        classes = [a.get("class", "").split()[0] for _, a, _ in row]
        if i % per_test == 0:
            assert classes == ["test", "run", "bar", "tps", "share"], classes
            tag, attrs, text = row[0]
            assert tag == "th" and attrs.get("title") == text and attrs.get("rowspan", "1") == str(per_test)
            labels.append(text)
        else:
            assert classes == ["run", "bar", "tps", "share"], classes
        tps = next(x for _, a, x in row if a["class"].startswith("tps"))
        assert tps.endswith(" t/s") and tps[0].isdigit()  # the speed alone in its cell
    # every row states the same configuration: the labels name the tests, the caption says it once (issue 41)
    config_text = " ".join(f"{k}={v}" for k, v in zip(CONFIG_COLUMNS, CONFIGS[config], strict=False))
    assert labels == ["pp512", "tg128"]
    assert f"every test: {html.escape(config_text)}</span></caption>" in page
    style = page[page.index("<style>"):page.index("</style>")]

    def rule(selector: str) -> str:
        body = style[style.index(selector + " {"):]
        return body[:body.index("}")]
    assert "width:" in rule(".chart .test") and "overflow: hidden" in rule(".chart .test")
    # the label wraps inside its column and stops at a few lines, with an ellipsis
    assert "-webkit-line-clamp:" in rule(".chart .test div") and "overflow: hidden" in rule(".chart .test div")
    assert "overflow-wrap: anywhere" in rule(".chart .test div")
    assert "table-layout: fixed" in rule("table.chart")
    assert "<b>" not in page and "<i>" not in page  # markup in a log stays text


_LAYOUT_PROBE = """<script>
const box = r => [r.left, r.right, r.top, r.bottom];
const textBox = el => { const g = document.createRange(); g.selectNodeContents(el); return box(g.getBoundingClientRect()); };
const out = {vw: document.documentElement.clientWidth, rows: []};
for (const tr of document.querySelectorAll('table.chart tr')) {
  const row = {};
  for (const td of tr.children) {
    const cs = getComputedStyle(td);
    row[td.className.split(' ')[0]] = {cell: box(td.getBoundingClientRect()), text: textBox(td), title: td.title,
      clip: cs.overflowX,
      ellipsis: cs.textOverflow, sw: td.scrollWidth, cw: td.clientWidth};
  }
  const label = tr.querySelector('th.test > div');
  if (label) row.label = {box: box(label.getBoundingClientRect()), clip: getComputedStyle(label).overflowY};
  const rect = tr.querySelector('rect');
  if (rect) row.rect = box(rect.getBoundingClientRect());
  out.rows.push(row);
}
const table = document.querySelector('table.chart');
out.table = table ? box(table.getBoundingClientRect()) : null;
const pre = document.createElement('pre');
pre.id = 'lay' + 'out';  /* not the literal the test looks for, which this script's own text holds */
pre.textContent = JSON.stringify(out);
document.body.replaceChildren(pre);
</script>"""


def _layout(page: Path, tmp_path: Path, width: int) -> dict:
    """Where Chromium lays out the chart's cells, texts and bars in a window ``width`` pixels wide: the page
    with a probe script appended (and its no-script policy dropped, in this copy only), its DOM dumped."""
    import json
    import re

    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", _LAYOUT_PROBE + "</body>"))
    proc = subprocess.run(["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--window-size={width},900", f"--user-data-dir={tmp_path / 'profile'}",
                           "--virtual-time-budget=3000", "--dump-dom", probe.as_uri()],
                          capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="layout">(.*?)</pre>', proc.stdout, re.S)
    assert m, proc.stderr[-2000:]
    import html

    return json.loads(html.unescape(m.group(1)))


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium (scripts/install-test-deps)")
@pytest.mark.parametrize("config, runs", [("long", ("1", "2", "3")), ("longest", ("1", "3")), ("markup", ("2",)),
                                          ("short", ("1", "2", "3"))])
def test_chromium_lays_the_chart_out_without_overlap_at_800px(tmp_path, config, runs):
    page = _chart_page(tmp_path, config, runs)
    got = _layout(page, tmp_path, 800)
    vw = got["vw"]
    assert got["table"] is not None, "no chart table in the page"
    assert got["table"][1] <= vw, ("the chart is wider than the window", got["table"], vw)
    assert got["rows"]
    for row in got["rows"]:
        cell = row.get("test")
        if cell is not None:
            # the label wraps inside its column; what is drawn (its box, which clips the rest) stays in its cell
            lab = row["label"]["box"]
            assert cell["cell"][0] - 0.5 <= cell["text"][0] and cell["text"][1] <= cell["cell"][1] + 0.5, cell
            assert row["label"]["clip"] == "hidden"
            assert cell["cell"][0] - 0.5 <= lab[0] and lab[1] <= cell["cell"][1] + 0.5, (lab, cell)
            assert cell["cell"][2] - 0.5 <= lab[2] and lab[3] <= cell["cell"][3] + 0.5, (lab, cell)
            assert cell["cell"][1] <= row["run"]["cell"][0] + 0.5
        for name in ("run", "tps", "share"):
            cell = row[name]
            assert cell["sw"] <= cell["cw"], (name, cell)  # a figure or run name is never cut
        # left to right, nothing drawn over its neighbour: run name, bar, speed, share
        spans = [row["run"]["text"], row["rect"], row["tps"]["text"]]
        if row["share"]["text"][1] > row["share"]["text"][0]:
            spans.append(row["share"]["text"])
        for left, right in zip(spans, spans[1:]):
            assert left[1] <= right[0] + 0.5, (left, right, row)
        assert spans[-1][1] <= vw
        assert row["rect"][0] >= row["bar"]["cell"][0] - 0.5 and row["rect"][1] <= row["bar"]["cell"][1] + 0.5


# ---------------------------------------------------------------------------
# 5. files written whole keep the mode a file would get
# ---------------------------------------------------------------------------


@pytest.fixture
def umask():
    """Set the process umask for one test (in-process CLI runs honour it), restored afterwards."""
    old = os.umask(0o022)
    os.umask(old)

    def set_to(mask: int) -> None:
        os.umask(mask)
    yield set_to
    os.umask(old)


def _writers(db: Path, ids: dict[str, int]) -> dict[str, list[str]]:
    """Each command that writes a file whole, by the option naming the file."""
    return {"export-json": ["export", "json", "--out"],
            "export-prometheus": ["export", "prometheus", "--out"],
            "report-html": ["report", str(ids["stock"]), str(ids["host"]), "--html"]}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.mark.parametrize("mask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664), (0o027, 0o640)])
def test_new_file_gets_the_umask_mode(tmp_path, db_path, umask, mask, expected):
    ids = fleet_db(db_path)
    umask(mask)
    for name, args in _writers(db_path, ids).items():
        out = tmp_path / f"{name}.out"
        code, _, err = _invoke(db_path, *args, str(out))
        assert code == 0, (name, err)
        assert _mode(out) == expected, (name, oct(_mode(out)))


@pytest.mark.parametrize("mask", [0o022, 0o077])
@pytest.mark.parametrize("existing", [0o640, 0o604, 0o600])
def test_existing_file_keeps_its_mode(tmp_path, db_path, umask, mask, existing):
    ids = fleet_db(db_path)
    umask(mask)
    for name, args in _writers(db_path, ids).items():
        out = tmp_path / f"{name}.out"
        out.write_text("old\n")
        out.chmod(existing)
        inode = out.stat().st_ino
        code, _, err = _invoke(db_path, *args, str(out))
        assert code == 0, (name, err)
        assert out.stat().st_ino != inode, name  # still replaced by a rename, never rewritten in place
        assert out.read_text() != "old\n"
        assert _mode(out) == existing, (name, oct(_mode(out)))


def test_writes_stay_atomic_and_leave_nothing_beside(tmp_path, db_path, umask):
    """No temporary file is left beside the file; links planted by the temp prefix are left alone."""
    ids = fleet_db(db_path)
    umask(0o022)
    victim = tmp_path / "victim"
    victim.write_bytes(VICTIM_TEXT)
    for name, args in _writers(db_path, ids).items():
        folder = tmp_path / name
        folder.mkdir()
        out = folder / "out"
        links = _plant(out, victim, [".capscan-export-", ".capscan-report-.html", "out.tmp"])
        before = set(os.listdir(folder))
        code, _, err = _invoke(db_path, *args, str(out))
        assert code == 0, (name, err)
        assert set(os.listdir(folder)) == before | {"out"}
        assert victim.read_bytes() == VICTIM_TEXT and all(link.is_symlink() for link in links)


def test_unwritable_folder_is_one_line_and_creates_nothing(tmp_path, db_path):
    fleet_db(db_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as root: a read-only folder is writable")
        code, _, err = _invoke(db_path, "export", "json", "--out", str(locked / "x.json"))
        assert code != 0 and "cannot write" in err and "Traceback" not in err
        assert os.listdir(locked) == []
    finally:
        locked.chmod(0o700)


# ---------------------------------------------------------------------------
# 4. db serve runs no SQL function that leaks an address or reaches a file
# ---------------------------------------------------------------------------


class _Served:
    """``capscan db serve``'s app (dbserve.app_for) under uvicorn on 127.0.0.1, a port the OS picks, in a
    thread; stopped when the ``with`` block ends."""

    def __init__(self, path: Path, *, with_raw: bool = False):
        import uvicorn

        from analyzer.fleet.dbserve import app_for

        config = uvicorn.Config(app_for(path, with_raw=with_raw), host="127.0.0.1", port=0, log_level="warning",
                                lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        import time

        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline and self.thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        return self

    def get(self, path: str) -> tuple[int, str]:
        import httpx

        r = httpx.get(f"http://127.0.0.1:{self.port}{path}", timeout=30)
        return r.status_code, r.text

    def sql(self, name: str, query: str) -> tuple[int, str]:
        from urllib.parse import urlencode

        return self.get(f"/{name}.json?" + urlencode({"sql": query, "_shape": "array"}))

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive()


LEAKS = [
    "select hex(fts3_tokenizer('simple')) as p",
    "select hex(FTS3_TOKENIZER('porter')) as p",
    "select hex(fts3_tokenizer('unicode61')) as p from runs limit 1",
    "with t(p) as (select fts3_tokenizer('simple')) select hex(p) as p from t",
    "select id from runs where fts3_tokenizer('simple') is not null",
    "select fts3_tokenizer('simple', x'0000000000000000') as p",
    "select load_extension('/tmp/capscan-nonexistent') as p",
]


def _served_db(db_path: Path) -> str:
    from analyzer.fleet.dbserve import db_name_of
    from analyzer.store.db import checkpoint

    fleet_db(db_path)
    checkpoint(db_path)
    return db_name_of(db_path)


@pytest.mark.parametrize("with_raw", [False, True])
def test_db_serve_refuses_pointer_and_file_functions(db_path, with_raw):
    pytest.importorskip("datasette")
    name = _served_db(db_path)
    with _Served(db_path, with_raw=with_raw) as served:
        status, body = served.sql(name, "select count(*) as n from runs")
        assert (status, body) == (200, '[{"n": 3}]')  # the server answers SQL at all
        for query in LEAKS:
            status, body = served.sql(name, query)
            assert status != 200, (query, body[:200])
            assert "not authorized" in body, (query, body[:300])


def test_db_serve_view_calling_fts3_tokenizer_is_refused(db_path):
    """A view in the file (whoever put it there) is no way around it: its functions are checked too."""
    pytest.importorskip("datasette")
    import sqlite3

    name = _served_db(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute("create view pointer as select hex(fts3_tokenizer('simple')) as p")
    conn.commit()
    conn.close()
    with _Served(db_path) as served:
        for path in (f"/{name}/pointer.json?_shape=array", f"/{name}.json?sql=select+*+from+pointer&_shape=array"):
            status, body = served.get(path)
            assert status != 200 or "[]" == body.strip(), (path, body[:200])
            assert not any(len(token) == 16 and token.isalnum() for token in body.replace('"', " ").split()), body


def test_db_serve_still_answers_ordinary_sql(db_path):
    """What a person browsing runs uses stays: aggregates, JSON, dates, search, canned queries, facets."""
    pytest.importorskip("datasette")
    name = _served_db(db_path)
    with _Served(db_path) as served:
        for query in ("select count(*) as n, max(id) as m from runs",
                      "select json_extract('{\"a\": 2}', '$.a') as a, date('2026-12-05') as d, "
                      "lower(hex(randomblob(2))) is not null as r, printf('%d', 3) as p",
                      "select program, count(*) from runs group by program"):
            status, body = served.sql(name, query)
            assert status == 200, (query, body[:300])
        for path in (f"/{name}/verdicts.json?_shape=array", f"/{name}/runs.json?_facet=program&_shape=objects",
                     f"/{name}/runs?_sort_desc=id", "/-/versions.json"):
            status, body = served.get(path)
            assert status == 200, (path, body[:300])
