"""The dense llama-bench JSONL path parses a row's configuration once and only
the measured tail of the rows that share it: it must give exactly what a
full parse gives, row by row, whatever the order of configurations."""

from __future__ import annotations

import json
import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.parsers.bench import JsonlRows, row_from_fields

FIX = Path(__file__).resolve().parent / "fixtures" / "bench"
LINES = [line for f in sorted(FIX.glob("*.jsonl")) for line in f.read_bytes().splitlines() if line.strip()]


def full(raw: bytes) -> dict | None:
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    return row_from_fields(obj, "jsonl") if isinstance(obj, dict) else None


def variant(raw: bytes, rng: random.Random) -> bytes:
    obj = json.loads(raw)
    obj["avg_ts"] = round(rng.uniform(0.1, 5000), 6)
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
        assert rows.row(raw) == full(raw), raw[:200]


def test_fixture_rows_equal_full_parse():
    rows = JsonlRows()
    for raw in LINES + LINES:
        assert rows.row(raw) == full(raw)
