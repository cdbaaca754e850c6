"""The dense llama-bench JSONL path parses a row's configuration once and only
the measured tail of the rows that share it: it must give exactly what a
full parse gives, row by row, whatever the order of configurations."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.parsers.base import Rejected
from analyzer.parsers.bench import JsonlRows, row_from_fields

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "bench"
LINES = [line for f in sorted(FIX.glob("*.jsonl")) for line in f.read_bytes().splitlines() if line.strip()]


def full(raw: bytes) -> dict | str | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return refused(row_from_fields, obj, "jsonl") if isinstance(obj, dict) else None


def refused(parse, *args):
    """What a parse gives, or "rejected" when it refuses the row (both paths must refuse alike)."""
    try:
        return parse(*args)
    except Rejected:
        return "rejected"


def variant(raw: bytes, rng: random.Random) -> bytes:
    obj = json.loads(raw)
    # mostly speeds the fixtures' hardware can have, some it cannot (refused by both paths)
    obj["avg_ts"] = rng.choice([round(rng.uniform(0.1, 200), 6)] * 4 + [round(rng.uniform(0.1, 5000), 6), -3.5, 0.0,
                                                                         1e12])
    obj["stddev_ts"] = rng.choice([0, 0.5, "1.25", None])
    obj["n_prompt"], obj["n_gen"] = rng.choice([(512, 0), (0, 128), (64, 32), (0, 0)])
    if rng.random() < 0.3:
        obj["n_depth"] = rng.choice([0, 4096])
    return json.dumps(obj).encode()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(range(len(LINES))), min_size=1, max_size=40), st.integers(0, 2**32))
def test_dense_rows_equal_full_parse(picks, seed):
    rng = random.Random(seed)
    rows = JsonlRows()
    for i in picks:
        raw = variant(LINES[i], rng) if rng.random() < 0.8 else LINES[i]
        if rng.random() < 0.05:
            raw = raw[: rng.randrange(len(raw))]  # cut off mid-way
        assert refused(rows.row, raw) == full(raw), raw[:200]


def test_fixture_rows_equal_full_parse():
    rows = JsonlRows()
    for raw in LINES + LINES:
        assert rows.row(raw) == full(raw)


def test_a_run_keeps_a_summary_equal_to_aggregating_its_rows(tmp_path):
    """Runs carry their per-test summary (each row as printed, or the median of many rows as one of
    them, issue 38), computed while ingesting; it must equal what aggregating the stored rows gives."""
    import statistics

    from analyzer.ingest import ingest
    from analyzer.read.reader import open_input
    from analyzer.store import open_db
    from analyzer.store.queries import _throughput, load_run

    rng = random.Random(7)
    path = tmp_path / "many.jsonl"
    path.write_bytes(b"\n".join(variant(LINES[i % len(LINES)], rng) for i in range(3001)) + b"\n")
    db = open_db(tmp_path / "s.db")
    src = open_input(str(path))
    ids = ingest(db, src).run_ids
    src.close()
    for rid in ids:
        run = load_run(db, rid)
        assert run.facts.throughput_summary is not None
        key = lambda t: (t["model"] or "", t["test"], t["kind"], t["line"], t["tok_s"])  # noqa: E731
        # (the stored rows do not keep the configuration; these rows have one per test)
        summary = [{k: v for k, v in t.items() if k != "config"} for t in run.throughput]
        assert sorted(summary, key=key) == sorted(({k: v for k, v in t.items() if k != "config"}
                                                   for t in _throughput(db, rid)), key=key)
        for t in run.throughput:
            rows = [r[0] for r in db.conn.execute(
                "SELECT tok_s FROM throughput WHERE run_id = ? AND test = ? AND model IS ?", (rid, t["test"], t["model"]))]
            if t["reduced"]:
                assert t["n"] == len(rows) == t["reduced"]["of"] and t["tok_s"] == statistics.median_low(rows)
            else:
                assert t["n"] == 1 and t["tok_s"] in rows
