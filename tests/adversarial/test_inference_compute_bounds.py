"""Issue 37, "Quadratic time": ollama's `msg="inference compute"` line was split with shlex.split whole
(one 1 MiB line took 41-73 s) and its values kept whole. It is now read on its slog shape, in one
linear pass, to a bounded result: only the keys capscan reads, each value cut to SLOG_VALUE_MAX.
Timing lives in bench/bounds.py (beside a plain line of the same size); these assert behaviour."""

from __future__ import annotations

import io

import pytest

from analyzer.ingest import ingest
from analyzer.parsers import FORMATS
from analyzer.read.reader import Input
from analyzer.store import open_db
from analyzer.store.queries import load_run

MIB = 1 << 20
BOUND = 256  # no name, description or memory figure ollama prints is longer
KEYS = {"library", "name", "description", "total", "available", "type"}
HEAD = ('time=2025-05-21T11:35:57.935-03:00 level=INFO source=types.go:130 msg="inference compute" id=0 '
        'library=metal variant="" compute="" driver=0.0 ')


def _fill(unit: str, size: int) -> str:
    return unit * (size // len(unit))


# Each just under the reader's 1 MiB line cap, a different shape of the same slog record
LINES = {
    "a 1 MiB quoted description": HEAD + 'name="Apple Paravirtual device" description="' + _fill("M2 Max ", MIB - 300)
    + '" total="16.0 GiB" available="16.0 GiB"',
    "a 1 MiB bare value": HEAD + "name=" + _fill("x", MIB - 200) + ' total="16.0 GiB"',
    "a million key=value pairs": HEAD + _fill(" k=v", MIB - 200) + ' name="Apple M4" total="16.0 GiB"',
    "escaped quotes throughout": HEAD + 'description="' + _fill('\\" ', MIB - 200) + '"',
    "quotes never closed": HEAD + _fill(' name="Apple', MIB - 200),
    "records run together": _fill('time=2025-05-21T11:35:57.935-03:00 level=INFO msg="" library=cuda ', MIB - 300)
    + HEAD + 'name="Apple M3 Pro" total="36.0 GiB"',
}


def _compute_pattern():
    ollama = next(f for f in FORMATS if f.name == "ollama")
    return next(p for p in ollama.patterns if p.kind == "ollama.compute")


@pytest.mark.parametrize("shape", sorted(LINES))
def test_a_1_mib_inference_compute_line_is_read_to_a_bounded_result(shape):
    line = LINES[shape]
    assert MIB - 1000 < len(line) <= MIB
    data = _compute_pattern().match(line)
    assert data is not None, "the record is still read"
    assert data["library"] == "metal"
    assert set(data) <= KEYS
    assert all(len(str(v)) <= BOUND for v in data.values()), {k: len(str(v)) for k, v in data.items()}


def test_the_records_own_values_are_read_not_the_previous_records():
    data = _compute_pattern().match(LINES["records run together"])
    assert data is not None and data["library"] == "metal" and data["name"] == "Apple M3 Pro"


def test_quoted_values_are_unescaped():
    data = _compute_pattern().match(HEAD + 'name="" description="Apple \\"Paravirtual\\" device" total="8.0 GiB"')
    assert data is not None and data["description"] == 'Apple "Paravirtual" device' and data["total"] == "8.0 GiB"


@pytest.mark.parametrize("line", [
    'user: what does "inference compute" library=metal mean in my ollama log?',
    'INFO prompt="explain msg=inference compute id=0 library=metal"',
    'time=2025-05-21T11:35:57.935-03:00 level=INFO msg="inference computed" library=metal',
], ids=["chat", "quoted in a prompt", "another message"])
def test_the_words_outside_the_slog_msg_pair_are_no_device_summary(line):
    assert _compute_pattern().match(line) is None


def test_a_1_mib_line_through_the_pipeline_stores_a_bounded_device(tmp_path):
    text = LINES["a 1 MiB quoted description"] + "\n"
    db = open_db(tmp_path / "c.db")
    result = ingest(db, Input("server.log", io.BytesIO(text.encode())))
    [rid] = result.run_ids
    run = load_run(db, rid)
    db.conn.close()
    assert run is not None and run.facts.ollama_library == "metal"
    assert run.facts.ollama_description is not None and len(run.facts.ollama_description) <= BOUND
    assert all(len(str(o.value)) <= BOUND for o in run.facts.observations)
    assert all(len(n) <= BOUND for n in run.facts.seen_devices)
