"""Issue 24's three quadratic lines, through the real pipeline (reader, prefilter, dispatcher, run
assembly, SQLite): a 50 KB ``ggml_metal_init: error: xxxx...`` line took 11 s, ``using device X
(aaaa...`` of 80 KB 32 s, ``GPU name: x`` followed by 80,000 spaces 30 s.

Each is put into a real Metal log (tests/fixtures) at about 100 KB; the log is ingested and the run must
read as the fixture's expectation says (and the line's own fact as the line says). How its time grows
from 10 KB to 100 KB is measured by ``bench/linearity.py`` (``issue-24 line`` cases), never here: a
timing ratio fails on a busy machine (issue 39).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.ingest_util import (
    EXPECTED,
    FIXTURES,
    expected_summary,
    facts_summary,
    ingest_bytes,
    same_throughput,
    stored_runs,
    throughput_of,
)

REL = "metal/m2-2024-03-m2max.log"
GPU_NAME = b"ggml_metal_init: GPU name:   Apple M2 Max"
LARGE = 100_000


def _error(n: int) -> bytes:
    return b"ggml_metal_init: error: " + b"x" * n


def _using_device(n: int) -> bytes:
    return b"llama_model_load_from_file_impl: using device X (" + b"a" * n


def _gpu_name_spaces(n: int) -> bytes:
    return GPU_NAME + b" " * n  # (the fixture's own GPU name line, then the spaces)


def _gpu_name_spaces_inside(n: int) -> bytes:
    return b"ggml_metal_init: GPU name: x" + b" " * n + b"x"


def _log(line: bytes) -> bytes:
    """The fixture with the hostile line after its GPU name line, or in its place (a GPU name line:
    a second one would open a second device block)."""
    data = (FIXTURES / REL).read_bytes()
    assert GPU_NAME + b"\n" in data
    if b"GPU name:" in line:
        return data.replace(GPU_NAME + b"\n", line + b"\n", 1)
    return data.replace(GPU_NAME + b"\n", GPU_NAME + b"\n" + line + b"\n", 1)


def _ingest(tmp: Path, data: bytes, tag: str) -> list[dict]:
    db = tmp / f"{tag}.db"
    db.unlink(missing_ok=True)
    result = ingest_bytes(db, data, name=tag)
    return stored_runs(db, result.run_ids)


CASES: dict[str, Callable[[int], bytes]] = {
    "metal-error-xxxx": _error,
    "using-device-unclosed": _using_device,
    "gpu-name-then-spaces": _gpu_name_spaces,
    "gpu-name-spaces-inside": _gpu_name_spaces_inside,
}


@pytest.mark.parametrize("name", list(CASES))
def test_issue_24_line_is_read_right(name, tmp_path):
    make = CASES[name]
    e = EXPECTED[REL]
    large = _log(make(LARGE))

    runs = _ingest(tmp_path, large, "read")
    assert len(runs) == e["runs"] == 1
    assert same_throughput(throughput_of(runs), e["throughput"]), throughput_of(runs)
    facts = runs[0]["facts"]
    got, want = facts_summary(facts), expected_summary(e)
    if name == "gpu-name-spaces-inside":  # the device is the one the line names
        name_got = got.pop("device_name")
        want.pop("device_name")
        assert name_got.startswith("x ") and name_got.endswith(" x"), name_got[:40]
    assert got == want
    if name == "metal-error-xxxx":
        assert any(m.startswith("xxxx") for m in facts.metal_errors), facts.metal_errors[:3]
