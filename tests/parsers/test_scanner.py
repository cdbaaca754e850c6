"""The streaming scanner: which lines reach the dispatcher, with which line
numbers, whatever the chunking (chunk boundaries, overlong lines, collector
blocks, CRLF, a last line without newline, runs of llama-bench JSONL rows), with each
search engine: Hyperscan, and the pure fallback (memmem and bytes.find) that
must give identical results. Behaviour only: speed is measured by bench/run.py."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import analyzer.parsers.scanner as scanner_mod
from analyzer.read.literal_search import _MEMMEM, HyperscanSearch, PureSearch, hyperscan_search
from analyzer.parsers import Dispatcher
from analyzer.parsers.bench import bench_row_from
from analyzer.parsers.scanner import Scanner
from tests.ingest_util import is_label

FIXTURES = Path(__file__).parent.parent / "fixtures"
LITS = (b"BEGIN", b"hit", b"\xc2\xb1", b"build_commit")


class FakeDispatcher:
    """Records what it is fed; a line holding BEGIN opens a block that the
    next line holding END closes (that line is part of the block)."""

    def __init__(self) -> None:
        self.fed: list[tuple[int, bytes]] = []
        self.collecting = False

    def feed(self, line_no: int, raw: bytes) -> list:
        self.fed.append((line_no, raw))
        if self.collecting:
            if b"END" in raw:
                self.collecting = False
        elif b"BEGIN" in raw:
            self.collecting = True
        return []

    def feed_many(self, first: int, lines: list) -> list:
        """The dispatcher's batch form: ``feed`` for each line, in order, numbered from ``first``
        (None: a line too long to read, fed to no one)."""
        out: list = []
        for line_no, raw in enumerate(lines, first):
            if raw is not None:
                out += self.feed(line_no, raw)
        return out

    def finish(self) -> list:
        self.collecting = False
        return []


def reference(data: bytes, literals=LITS) -> tuple[list[tuple[int, bytes]], int]:
    """The specification, on the whole input at once."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    fake = FakeDispatcher()
    for no, raw in enumerate(lines, 1):
        if fake.collecting or any(lit in raw for lit in literals):
            fake.feed(no, raw)
    return fake.fed, len(lines)


def scan(data: bytes, chunk: int, literals=LITS, dispatcher=None) -> tuple[object, Scanner]:
    d = dispatcher if dispatcher is not None else FakeDispatcher()
    events: list = []
    s = Scanner(d, events.extend, literals=literals)
    for i in range(0, len(data), chunk):
        s.feed(data[i:i + chunk])
    s.close()
    return (d.fed if isinstance(d, FakeDispatcher) else events), s


def _engine(name: str, literals):
    if name == "hyperscan":
        engine = hyperscan_search(literals)
        if engine is None:
            pytest.skip("hyperscan does not import or run here")
        return engine
    if name == "memmem" and not _MEMMEM:
        pytest.skip("no glibc memmem here")
    return PureSearch(literals, use_memmem=name == "memmem")


@pytest.fixture(params=["hyperscan", "memmem", "bytes.find"])
def search(request, monkeypatch):
    """Every Scanner made in the test uses this engine."""
    monkeypatch.setattr(scanner_mod, "literal_search", lambda literals: _engine(request.param, literals))
    return request.param


def random_log(seed: int, n_lines: int = 3000) -> bytes:
    rng = random.Random(seed)
    words = ["noise", "ggml", "model", "layer", "hi", "t", "token", "±x", "\u00e9t\u00e9", "built", "BEGI", "ENDING"]
    out = []
    for _ in range(n_lines):
        r = rng.random()
        if r < 0.05:
            line = "BEGIN block " + " ".join(rng.choices(words, k=3))
        elif r < 0.1:
            line = "block line END"
        elif r < 0.15:
            line = rng.choice(["a hit here", "value 12 \u00b1 3", '{"build_commit": "x", "n": 1}', "xhitx"])
        elif r < 0.17:
            line = ""
        else:
            line = " ".join(rng.choices(words, k=rng.randint(1, 30)))
        out.append(line + ("\r\n" if rng.random() < 0.1 else "\n"))
    return "".join(out).encode()


@pytest.mark.parametrize("chunk", [1, 3, 64, 4097, 65536, 1 << 22])
@pytest.mark.parametrize("seed", [1, 2])
def test_matches_reference_whatever_the_chunking(search, seed, chunk):
    data = random_log(seed)
    fed, s = scan(data, chunk)
    want, n_lines = reference(data)
    assert fed == want
    assert s.stats.lines == n_lines
    assert s.stats.overlong == 0


def test_line_numbers_across_chunk_boundaries(search):
    data = b"one\ntwo hit\nthree\nfour hit\n" + b"pad\n" * 5000 + b"last hit\n"
    for chunk in (1, 5, 6, 7, 4096, len(data)):
        fed, s = scan(data, chunk)
        assert fed == [(2, b"two hit"), (4, b"four hit"), (5005, b"last hit")], chunk
        assert s.stats.lines == 5005


def test_literal_split_by_a_chunk_boundary(search):
    data = b"x\n" * 3000 + b"a long line with a hit in it\n" + b"y\n" * 3000
    cut = data.index(b"hit") + 1  # "h" | "it"
    d = FakeDispatcher()
    s = Scanner(d, lambda ev: None, literals=LITS)
    s.feed(data[:cut])
    s.feed(data[cut:])
    s.close()
    assert d.fed == [(3001, b"a long line with a hit in it")]


def test_overlong_lines_are_skipped_and_counted(search, monkeypatch):
    monkeypatch.setattr(scanner_mod, "MAX_LINE", 100)
    long_hit = b"hit " + b"z" * 300
    data = b"first hit\n" + long_hit + b"\nafter hit\n" + b"q" * 500 + b"\nlast hit"
    for chunk in (7, 64, 1000):
        fed, s = scan(data, chunk)
        assert fed == [(1, b"first hit"), (3, b"after hit"), (5, b"last hit")], chunk
        assert s.stats.lines == 5
        # a line spanning chunks is dropped whole; inside one chunk only a hit counts
        assert s.stats.overlong >= 1


def test_overlong_line_within_one_chunk_is_not_parsed(monkeypatch):
    monkeypatch.setattr(scanner_mod, "MAX_LINE", 100)
    data = b"hit " + b"z" * 300 + b"\nnext hit\n"
    fed, s = scan(data, len(data))
    assert fed == [(2, b"next hit")]
    assert s.stats.overlong == 1


def test_collector_mode_across_chunks(search):
    block = b"BEGIN table\nrow one\nrow two\nrow END\n"
    data = b"noise\n" * 2000 + block + b"noise after\n" + b"tail hit\n"
    start = 2001
    want = [(start, b"BEGIN table"), (start + 1, b"row one"), (start + 2, b"row two"), (start + 3, b"row END"),
            (start + 5, b"tail hit")]
    for chunk in (1, 9, 100, 4096, 13000, len(data)):
        fed, _ = scan(data, chunk)
        assert fed == want, chunk


def test_collector_open_at_end_of_input():
    fed, s = scan(b"BEGIN\nrow\nrow", 4)
    assert fed == [(1, b"BEGIN"), (2, b"row"), (3, b"row")]
    assert s.stats.lines == 3


def test_final_line_without_newline(search):
    for data in (b"a\nb hit", b"hit", b"x\n" * 3000 + b"end hit"):
        for chunk in (1, 2, 4096, len(data)):
            fed, s = scan(data, chunk)
            want, n = reference(data)
            assert fed == want and fed[-1][1].endswith(b"hit")
            assert s.stats.lines == n


def test_empty_input():
    fed, s = scan(b"", 10)
    assert fed == [] and s.stats.lines == 0


def test_crlf_lines_keep_their_cr_and_parse_like_lf():
    line = "ggml_metal_device_init: GPU family: MTLGPUFamilyApple7  (1007)"
    lf = ("noise\n" + line + "\nmore noise\n").encode()
    crlf = lf.replace(b"\n", b"\r\n")
    fed, _ = scan(crlf, 5, literals=(b"ggml_metal",))
    assert fed == [(2, line.encode() + b"\r")]
    ev_lf, _ = scan(lf, 7, literals=scanner_mod.LITERAL_BYTES, dispatcher=Dispatcher())
    ev_crlf, _ = scan(crlf, 7, literals=scanner_mod.LITERAL_BYTES, dispatcher=Dispatcher())
    assert [(e.kind, e.line, e.data) for e in ev_lf] == [(e.kind, e.line, e.data) for e in ev_crlf]
    assert any(e.kind == "metal.family" for e in ev_lf)


def test_runs_of_jsonl_rows_match_reference(search):
    row = b'{"build_commit": "ee3d1b54c", "n_prompt": 512, "avg_ts": 431.86}'
    data = b"".join([row + b"\n"] * 40 + [b"plain noise\n", b"a hit line\n"] + [row + b"\r\n"] * 40
                    + [b"BEGIN\n", b"inside\n", b"END\n"] + [row + b"\n"] * 3000)
    for chunk in (50, 4096, len(data)):
        fed, s = scan(data, chunk)
        want, n = reference(data)
        assert fed == want
        assert s.stats.lines == n


def _events(path: Path, chunk: int, rows_unsearched: bool = True) -> list:
    d = Dispatcher()
    events: list = []
    s = Scanner(d, events.extend)
    if not rows_unsearched:
        s._rows_prefix = None  # every line found by the search, JSONL rows too
    data = path.read_bytes()
    for i in range(0, len(data), chunk):
        s.feed(data[i:i + chunk])
    s.close()
    out = []
    for e in events:
        if e.kind == "bench.rows":  # a batch of rows of one configuration: the same rows, one by one
            out += [("bench.row", r[0], "", bench_row_from(e.data["config"], r[1:])) for r in e.data["rows"]]
        else:
            out.append((e.kind, e.line, e.text, e.data))
    return out


FIXTURE_FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".log", ".jsonl", ".json", ".csv",
                                                                                         ".sql", ".md", ".txt")
                       and not is_label(p))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fixture_events_do_not_depend_on_chunking(search, path):
    whole = _events(path, 1 << 22)
    assert _events(path, 61) == whole
    assert _events(path, 1 << 22, rows_unsearched=False) == whole


# -- the engines: Hyperscan and the pure fallback give identical results -------------------

@pytest.mark.parametrize("seed", range(6))
def test_engines_find_the_same_lines(seed):
    hs = hyperscan_search(LITS)
    if hs is None:
        pytest.skip("hyperscan does not import or run here")
    data = random_log(seed, 20_000)
    rng = random.Random(seed)
    cuts = sorted({0, len(data)} | {data.index(b"\n", rng.randrange(len(data) - 1)) + 1 for _ in range(4)})
    engines = [hs, PureSearch(LITS, use_memmem=True), PureSearch(LITS, use_memmem=False)]
    for a, b in zip(cuts, cuts[1:]):
        got = [e.line_starts(data, a, b) for e in engines]
        assert got[0] == got[1] == got[2]
        assert got[0] == sorted({data.rfind(b"\n", a, i) + 1 if data.rfind(b"\n", a, i) >= a else a
                                 for lit in LITS for i in _all(data, lit, a, b)})


def _all(data: bytes, lit: bytes, a: int, b: int) -> list[int]:
    out, i = [], data.find(lit, a, b)
    while i != -1:
        out.append(i)
        i = data.find(lit, i + 1, b)
    return out


def test_crowded_hits_fall_back_to_the_pure_passes_with_the_same_result():
    hs = hyperscan_search(LITS)
    if hs is None:
        pytest.skip("hyperscan does not import or run here")
    data = (b"hit" * 2000 + b"\n" + b"\xc2\xb1" * 500 + b"\nquiet\n") * 200  # far more hits than lines
    assert hs.line_starts(data) == PureSearch(LITS).line_starts(data)
    assert len(hs.line_starts(data)) == 400


def test_env_var_forces_the_pure_search(monkeypatch):
    from analyzer.read.literal_search import PURE_ENV, literal_search

    monkeypatch.setenv(PURE_ENV, "1")
    assert isinstance(literal_search(LITS), PureSearch)
    assert isinstance(Scanner(FakeDispatcher(), lambda ev: None, literals=LITS).search, PureSearch)
    monkeypatch.delenv(PURE_ENV)
    if hyperscan_search(LITS) is not None:
        assert isinstance(literal_search(LITS), HyperscanSearch)


def test_without_hyperscan_the_pure_search_is_used(monkeypatch):
    import sys

    from analyzer.read.literal_search import literal_search

    monkeypatch.delenv("CAPSCAN_PURE_SCAN", raising=False)
    monkeypatch.setitem(sys.modules, "hyperscan", None)  # import hyperscan -> ImportError
    assert hyperscan_search(LITS) is None
    assert isinstance(literal_search(LITS), PureSearch)


def test_whole_ingest_stores_the_same_with_either_engine(tmp_path, monkeypatch):
    """Every fixture log, concatenated, through the real pipeline into a real
    database: the pure fallback stores exactly what Hyperscan stores."""
    import sqlite3

    from tests.ingest_util import ingest_bytes

    if hyperscan_search(LITS) is None:
        pytest.skip("hyperscan does not import or run here")
    data = b"".join(p.read_bytes() for p in FIXTURE_FILES)
    dumps = []
    for pure in ("0", "1"):
        monkeypatch.setenv("CAPSCAN_PURE_SCAN", pure)
        db = tmp_path / f"pure{pure}.db"
        ingest_bytes(db, data, name="all-fixtures.log")
        with sqlite3.connect(db) as conn:
            dumps.append([conn.execute(f"SELECT * FROM {t} ORDER BY rowid").fetchall()
                          for t in ("throughput", "evidence")]
                         + [conn.execute("SELECT seq, first_line, last_line, program, backend, device_name, "
                                         "apple_family, model, facts FROM runs ORDER BY id").fetchall(),
                            conn.execute("SELECT lines, recognised_lines, sha256 FROM sources").fetchall()])
    assert dumps[0] == dumps[1]
    assert len(dumps[0][2]) > 20  # many runs: the comparison is not vacuous
