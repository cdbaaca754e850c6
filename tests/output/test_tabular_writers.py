"""The streaming JSON and NL writers: a listing row takes json's C encoder (runs -n 0 on 100,000
runs, bench/run.py), anything else the general ``dumps``; both write exactly the same text."""

from __future__ import annotations

import io
import json

import pytest

from analyzer.output import tabular

HOSTILE = "a\x1b[2Kb \u202eevil\u202c \x85 \ud800 \"q\" \\ \n\t \u2028 日本"
FLAT = {"id": 7, "created_at": "2026-08-01T10:00:00", "source": HOSTILE, "program": None, "apple_family": 1005,
        "fixable": True, "healthy": False, "best_pp": 431.86, "tiny": 1e-300, "big": 10 ** 20, "neg": -0.0}
ODD = [
    {**FLAT, "best_tg": float("inf")},   # JSON has no infinity: null
    {**FLAT, "best_tg": float("nan")},
    {"nested": {"a": [1, float("nan")], 2: "int key"}},
    {},
    {1: "an int key", True: "a bool key"},
    {"t": (1, 2)},
    [1, 2],
]


def _reference_array(items):
    """What write_json_array wrote before it had a fast path: dumps(indent=2) per item, indented."""
    bodies = ["\n".join("  " + line for line in tabular.dumps(item).splitlines()) for item in items]
    return "[]\n" if not bodies else "[\n" + ",\n".join(bodies) + "\n]\n"


def _reference_nl(items):
    return "".join(tabular.dumps(item, indent=None) + "\n" for item in items)


@pytest.mark.parametrize("items", [[], [FLAT], [FLAT] * 3 + ODD, ODD + [FLAT] * (tabular.BATCH_ROWS + 3)],
                         ids=["empty", "one", "mixed", "batches"])
def test_fast_writers_write_what_dumps_writes(items):
    arr, nl = io.StringIO(), io.StringIO()
    tabular.write_json_array(arr, iter(items))
    tabular.write_nl(nl, iter(items))
    assert arr.getvalue() == _reference_array(items)
    assert nl.getvalue() == _reference_nl(items)


def test_the_fast_path_is_taken_for_a_listing_row_and_its_text_is_safe_json():
    assert tabular._flat_object(FLAT) is not None  # the row the fast path is for
    assert all(tabular._flat_object(item) is None for item in ODD)
    out = io.StringIO()
    tabular.write_nl(out, [FLAT])
    line = out.getvalue()
    assert "\x1b" not in line and "\u202e" not in line and "\u2028" not in line and "\x85" not in line
    assert json.loads(line)["source"].startswith("a\x1b[2Kb")  # log text kept, escaped


def test_rows_are_written_in_batches_not_one_write_each():
    class Counting(io.StringIO):
        writes = 0

        def write(self, text):
            Counting.writes += 1
            return super().write(text)

    out = Counting()
    tabular.write_nl(out, iter([FLAT] * (2 * tabular.BATCH_ROWS + 1)))
    assert Counting.writes == 3
    assert out.getvalue().count("\n") == 2 * tabular.BATCH_ROWS + 1
