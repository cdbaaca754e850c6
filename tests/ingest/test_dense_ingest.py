"""Dense llama-bench JSONL (a million rows a file): the batched rows and the
deferred index must change nothing but the speed.

- the scanner's runs of rows (handed to ``Dispatcher.feed_many`` together, each
  row of a known configuration decoding only its measured tail) give exactly
  the events, counts and line numbers of feeding every prefiltered line to
  ``Dispatcher.feed`` alone with each row parsed whole, on mixes of
  configurations, cut-off rows, rows that do not decode or are rejected, CRLF,
  noise and overlong lines, whatever the chunking;
- a source that brings more rows than the table held drops its indexes in its
  transaction and builds them again before the commit: the stored rows and
  every figure shown equal what the raw rows give, the indexes are back (same
  SQL, used by the queries), and a failure after the drop leaves the database,
  indexes included, as it was.
"""

from __future__ import annotations

import io
import json
import random
import sqlite3
import statistics
from pathlib import Path

import pytest

import analyzer.parsers.scanner as scanner_mod
from analyzer.ingest import ingest
from analyzer.parsers import LITERAL_BYTES, Dispatcher
from analyzer.parsers.bench import bench_row_from
from analyzer.parsers.bench import test_name as bench_test_name
from analyzer.read.reader import Input, InputError
from analyzer.parsers.scanner import Scanner
from analyzer.store import open_db
from analyzer.store.queries import _throughput, load_run
from analyzer.store.writer import DEFER_INDEX_ROWS
from tests.conftest import run_capscan
from tests.ingest_util import FIXTURES

BENCH_LINES = [line for f in sorted((FIXTURES / "bench").glob("*.jsonl"))
               for line in f.read_bytes().splitlines() if line.strip()]


def _row(rng: random.Random, config: dict) -> bytes:
    obj = dict(config)
    obj["n_prompt"], obj["n_gen"], obj["n_depth"] = rng.choice([(512, 0, 0), (0, 128, 0), (512, 0, 4096), (64, 32, 0)])
    obj["test_time"] = "2026-08-01T00:00:00Z"
    # speeds the configurations' hardware can have (their Gemma 12B on an M1 Ultra: tg at most 222 t/s)
    obj["avg_ts"] = rng.uniform(1, 200) if obj["n_prompt"] == 0 else rng.uniform(1, 5000)
    obj["stddev_ts"] = rng.choice([rng.uniform(0, 9), 0, None])
    obj["samples_ts"] = [rng.uniform(1, 5000) for _ in range(3)]
    return json.dumps(obj).encode()


def _configs(rng: random.Random, n: int) -> list[dict]:
    out = []
    for i in range(n):
        base = json.loads(rng.choice(BENCH_LINES))
        for k in ("n_prompt", "n_gen", "n_depth", "avg_ts", "stddev_ts", "samples_ts", "samples_ns", "avg_ns",
                  "stddev_ns", "test_time"):
            base.pop(k, None)
        base["build_commit"] = f"c{i:07x}"  # first key: the row opens with the dense prefix
        out.append({"build_commit": base.pop("build_commit"), **base})
    return out


def _damage(rng: random.Random, raw: bytes) -> bytes:
    kind = rng.randrange(10)
    if kind == 8:
        return raw.replace(b'"avg_ts": ', b'"avg_ts": -', 1)  # a negative speed: rejected
    if kind == 9:
        return raw.replace(b'"avg_ts": ', b'"avg_ts": 1e9, "was": ', 1)  # beyond the chip: rejected
    if kind == 0:
        return raw[: rng.randrange(len(raw))]  # cut off
    if kind == 1:
        return raw.replace(b'"avg_ts"', b'"avg_tx"')  # no speed
    if kind == 2:
        return raw.replace(b'"n_gen": ', b'"n_gen": 1' + b"0" * 25 + b", \"x\": ")  # an integer SQLite cannot hold
    if kind == 3:
        return raw[:-1] + b', "tail": "\\ud800"}'  # does not decode
    if kind == 4:
        return raw + b"\r"  # CRLF
    if kind == 5:
        return b"plain noise line " + str(rng.random()).encode()
    if kind == 6:
        return b""
    return raw[:-1] + b', "pad": "' + b"x" * 3000 + b'"}'  # overlong (MAX_LINE is made small below)


def dense_mix(seed: int, n: int = 3000) -> bytes:
    rng = random.Random(seed)
    configs = _configs(rng, 5)
    lines, config = [], configs[0]
    while len(lines) < n:
        if rng.random() < 0.01:
            config = rng.choice(configs)  # another configuration: a long stretch of it, or a few rows
        raw = _row(rng, config)
        lines.append(_damage(rng, raw) if rng.random() < 0.03 else raw)
    return b"\n".join(lines) + b"\n"


def _expand(events: list) -> list:
    out = []
    for e in events:
        if e.kind == "bench.rows":
            out += [("bench.row", r[0], bench_row_from(e.data["config"], r[1:])) for r in e.data["rows"]]
        else:
            out.append((e.kind, e.line, e.data))
    return out


def _scan(data: bytes, chunk: int) -> tuple[list, tuple]:
    d = Dispatcher()
    events: list = []
    s = Scanner(d, events.extend)
    for i in range(0, len(data), chunk):
        s.feed(data[i:i + chunk])
    s.close()
    return _expand(events), (d.recognised, d.unrecognised, d.rejected, s.stats.lines, s.stats.overlong)


def _line_by_line(data: bytes) -> tuple[list, tuple]:
    """The specification: no scanner, no batch, no shared configuration. Each line that holds a
    prefilter literal (every line while a block is open) goes to ``Dispatcher.feed`` alone, and
    each llama-bench row is parsed whole; a line over MAX_LINE is counted and skipped."""
    d = Dispatcher()
    d._jsonl.measure = lambda raw: None  # type: ignore[method-assign]  # every row parsed whole
    events: list = []
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    overlong = 0
    for no, raw in enumerate(lines, 1):
        if len(raw) > scanner_mod.MAX_LINE:
            overlong += 1
        elif d.collecting or any(lit in raw for lit in LITERAL_BYTES):
            events += d.feed(no, raw)
    events += d.finish()
    return _expand(events), (d.recognised, d.unrecognised, d.rejected, len(lines), overlong)


@pytest.mark.parametrize("seed", range(8))
def test_batched_rows_give_what_line_by_line_gives(monkeypatch, seed):
    monkeypatch.setattr(scanner_mod, "MAX_LINE", 2048)
    data = dense_mix(seed)
    want = _line_by_line(data)
    assert sum(1 for e in want[0] if e[0] == "bench.row") > 2000  # mostly rows, as in a real dense file
    assert want[1][2] > 0 and want[1][4] > 0  # rejected and overlong lines are part of the mix
    for chunk in (1 << 22, 65536, 4099):
        assert _scan(data, chunk) == want


def test_batched_rows_on_a_sweep_that_changes_configuration_every_row():
    rng = random.Random(5)
    configs = _configs(rng, 7)
    data = b"".join(_row(rng, configs[i % 7]) + b"\n" for i in range(2000))
    assert _scan(data, 1 << 22) == _line_by_line(data)


# -- end to end: the stored rows, the figures shown, the indexes ------------------------------

def dense_file(rows: int, per_config: int = 7_000) -> bytes:
    """llama-bench JSONL as bench/run.py writes it: long stretches of one configuration (one run each)."""
    rng = random.Random(rows)
    configs = _configs(rng, 3)
    for i, c in enumerate(configs):
        c["gpu_info"] = f"Apple Test GPU {i}"  # another device: another run
    return b"".join(_row(rng, configs[(i // per_config) % 3]) + b"\n" for i in range(rows))


def _raw_rows(data: bytes) -> list[tuple]:
    out = []
    for no, raw in enumerate(data.splitlines(), 1):
        obj = json.loads(raw)
        out.append((no, bench_test_name(obj["n_prompt"], obj["n_gen"], obj["n_depth"]), obj["avg_ts"], obj["stddev_ts"],
                    obj["model_type"] or None, obj["n_prompt"], obj["n_gen"], obj["n_depth"]))
    return out


def _indexes(db_path: Path) -> list[tuple]:
    conn = sqlite3.connect(str(db_path))
    try:
        return conn.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name").fetchall()
    finally:
        conn.close()


def test_dense_ingest_stores_every_row_and_shows_the_raw_rows_figures(db_path, tmp_path):
    open_db(db_path).conn.close()
    indexes = _indexes(db_path)
    assert ("throughput_run", "throughput", "CREATE INDEX throughput_run ON throughput(run_id, test)") in indexes
    data = dense_file(3 * DEFER_INDEX_ROWS // 2)
    path = tmp_path / "dense.jsonl"
    path.write_bytes(data)
    out = run_capscan("--json", "ingest", str(path), db=db_path, check=True)
    run_ids = json.loads(out.stdout)[0]["run_ids"]
    assert _indexes(db_path) == indexes  # dropped for the bulk insert, built again before the commit

    raw = _raw_rows(data)
    conn = sqlite3.connect(str(db_path))
    try:
        stored = conn.execute("SELECT line, test, tok_s, stddev, model, n_prompt, n_gen, n_depth FROM throughput "
                              "ORDER BY rowid").fetchall()
        plan = " ".join(r[-1] for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT MAX(tok_s) FROM throughput WHERE run_id = ? AND test = 'pp512'", (run_ids[0],)))
    finally:
        conn.close()
    assert stored == raw
    assert "throughput_run" in plan

    # what show, compare, the rules and the exports read: one entry per (model, test) of this many rows, the
    # median of its rows as one of them (median_low, labelled reduced: issue 38)
    db = open_db(db_path)
    try:
        for rid in run_ids:
            run = load_run(db, rid)
            lines = range(run.facts.first_line, run.facts.last_line + 1)
            mine = [r for r in raw if r[0] in lines]
            assert len(mine) == sum(t["n"] for t in run.throughput)
            for t in run.throughput:
                values = [r[2] for r in mine if r[1] == t["test"] and r[4] == t["model"]]
                assert t["n"] == len(values) == t["reduced"]["of"] and t["tok_s"] == statistics.median_low(values)
                assert t["line"] == min(r[0] for r in mine if r[1] == t["test"] and r[4] == t["model"])
            # (the stored rows do not keep the configuration; these rows have one per test)
            summary = [{k: v for k, v in t.items() if k != "config"} for t in run.throughput]
            from_sql = [{k: v for k, v in t.items() if k != "config"} for t in _throughput(db, rid)]
            assert sorted(summary, key=lambda t: t["line"]) == sorted(from_sql, key=lambda t: t["line"])
    finally:
        db.conn.close()
    shown = json.loads(run_capscan("--json", "show", str(run_ids[0]), db=db_path, check=True).stdout)
    want = {(t["test"], t["tok_s"]) for t in load_run(open_db(db_path), run_ids[0]).throughput}
    assert {(t["test"], t["tok_s"]) for t in shown["throughput"]} == want


class _FailingStream(io.RawIOBase):
    def __init__(self, data: bytes, ok_reads: int):
        self._buf, self._left = io.BytesIO(data), ok_reads

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._left == 0:
            raise OSError(5, "Input/output error")
        self._left -= 1
        return self._buf.read(n)


def test_a_failure_after_the_indexes_were_dropped_leaves_the_database_as_it_was(db_path):
    open_db(db_path).conn.close()
    indexes = _indexes(db_path)
    data = dense_file(4 * DEFER_INDEX_ROWS)
    db = open_db(db_path)
    # enough reads for more than DEFER_INDEX_ROWS rows to be written (and the indexes dropped) first
    reads = -(-len(data) * 3 // 4 // (4 << 20))
    with pytest.raises(InputError):
        ingest(db, Input("big.jsonl", _FailingStream(data, ok_reads=reads)))
    assert not db.conn.in_transaction
    db.conn.close()
    assert _indexes(db_path) == indexes
    conn = sqlite3.connect(str(db_path))
    try:
        assert conn.execute("SELECT COUNT(*) FROM throughput").fetchone()[0] == 0
    finally:
        conn.close()


def test_a_small_source_into_a_large_table_keeps_the_indexes(db_path, monkeypatch):
    """The indexes are dropped only for a source at least as large as the table (and 20,000 rows):
    a small file into a large database keeps them (rebuilding them would cost more than it saves)."""
    import analyzer.store.writer as writer_mod

    dropped: list[str] = []
    real = writer_mod.SourceWriter._maybe_defer_indexes

    def spy(self, adding):
        real(self, adding)
        if self.deferred_indexes:
            dropped.append(self.path)

    monkeypatch.setattr(writer_mod.SourceWriter, "_maybe_defer_indexes", spy)
    db = open_db(db_path)
    try:
        ingest(db, Input("big.jsonl", io.BytesIO(dense_file(DEFER_INDEX_ROWS + 5_000))))
        ingest(db, Input("small.jsonl", io.BytesIO(dense_file(DEFER_INDEX_ROWS + 1_000, per_config=500))))
    finally:
        db.conn.close()
    assert dropped[:1] == ["big.jsonl"] and "small.jsonl" not in dropped


def test_batched_rows_whose_measured_fields_are_not_the_typed_case():
    """A row of a known configuration decides the typed case (float speed, int token counts) inline
    and hands every other row to ``_measurement``: ints for floats, strings for numbers, a missing
    depth or stddev, a speed of 0, token counts that make no test or do not fit SQLite all come out
    as each row parsed whole."""
    rng = random.Random(7)
    config = _configs(rng, 1)[0]
    variants = [
        lambda o: o.update(avg_ts=int(o["avg_ts"])),
        lambda o: o.update(stddev_ts=0),
        lambda o: o.update(n_prompt=str(o["n_prompt"])),
        lambda o: o.update(avg_ts=f"{o['avg_ts']:.3f}"),
        lambda o: o.pop("n_depth"),
        lambda o: o.pop("stddev_ts"),
        lambda o: o.update(n_prompt=0, n_gen=0),
        lambda o: o.update(n_gen=-1),
        lambda o: o.update(avg_ts=0.0),
        lambda o: o.update(n_depth=True),
        lambda o: o.update(stddev_ts="n/a"),
        lambda o: o.update(avg_ts=[1.0]),
        lambda o: o.update(n_gen=2**63),  # an int orjson gives, SQLite cannot hold: rejected
    ]
    lines = []
    for i in range(1200):
        obj = json.loads(_row(rng, config))
        if i % 3 == 0:
            rng.choice(variants)(obj)
        lines.append(json.dumps(obj).encode())
    data = b"\n".join(lines) + b"\n"
    want = _line_by_line(data)
    assert len(want[0]) > 1000 and want[1][1] > 0 and want[1][2] > 0  # most rows kept, some not, some rejected
    for chunk in (1 << 22, 8191):
        assert _scan(data, chunk) == want
