"""The streaming JSON and NL writers: a listing row takes json's C encoder (runs -n 0 on 100,000
runs, bench/run.py), anything else the general ``dumps``; both write exactly the same text."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


def _assert_written_as_dumps_writes(items):
    """Both fast writers give the reference writers' text for ``items``."""
    arr, nl = io.StringIO(), io.StringIO()
    tabular.write_json_array(arr, iter(items))
    tabular.write_nl(nl, iter(items))
    assert arr.getvalue() == _reference_array(items)
    assert nl.getvalue() == _reference_nl(items)


@pytest.mark.parametrize("items", [[], [FLAT], [FLAT] * 3 + ODD, ODD + [FLAT] * (tabular.BATCH_ROWS + 3)],
                         ids=["empty", "one", "mixed", "batches"])
def test_fast_writers_write_what_dumps_writes(items):
    _assert_written_as_dumps_writes(items)


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


# A listing row as `runs --json` writes 100,000 of: orjson encodes these (tabular._orjson_batch).
LISTING = {"id": 99953, "created_at": "2026-10-05T15:30:00", "source": "~/bench/2026/run-024989 \x1b[31m\u202e 日本 \x7f.log",
           "program": "llama-bench", "backend": "Metal", "device": "Apple M5 Max", "apple_family": 1010,
           "model": None, "verdict": "healthy", "fixable": False, "environment": "bare-metal",
           "best_pp": 9535.51, "best_tg": 0.0001, "zero": -0.0, "big": 123456789012345.6, "neg": -(2 ** 63)}


@pytest.mark.parametrize("n", [1, 3, tabular.BATCH_ROWS + 5])
def test_rows_orjson_encodes_come_out_as_json_writes_them(n):
    items = [dict(LISTING, id=i, best_pp=LISTING["best_pp"] + i / 7) for i in range(n)]
    assert tabular._orjson_batch(items[:3], indented=True) is not None  # the fast path is taken
    assert tabular._orjson_batch(items[:3], indented=False) is not None
    _assert_written_as_dumps_writes(items)


@pytest.mark.parametrize("odd", [1e-5, -9.99e-5, 3e-7, 1.5e-9, 2 ** 64, "lone \ud800",  # orjson differs or refuses
                                 2.5e-300, 1e-10, 1e16, 1e300, float("nan"), float("-inf")])  # written alike
def test_what_orjson_would_write_differently_takes_json(odd):
    items = [LISTING, dict(LISTING, best_tg=odd)]
    differs = isinstance(odd, (int, str)) or 1e-9 <= abs(odd) < 1e-4
    assert (tabular._orjson_batch(items, indented=True) is None) == differs
    _assert_written_as_dumps_writes(items)


_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text())
# values orjson takes (the fast path): floats in [1e-4, 1e16), 64-bit ints, text without lone surrogates
_fast_values = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 63), 2 ** 63 - 1), st.just(0.0),
                         st.floats(1e-4, 1e16, exclude_max=True), st.floats(-1e16, -1e-4, exclude_min=True),
                         st.text())


def _rows(values):
    return st.lists(st.dictionaries(st.text(max_size=8), values, min_size=1, max_size=6), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_rows(_values), _rows(_fast_values)))
def test_any_flat_rows_are_written_as_dumps_writes_them(items):
    _assert_written_as_dumps_writes(items)


def test_floats_of_every_magnitude_come_out_as_json_writes_them():
    import random
    import struct

    rnd = random.Random(13)
    floats = [struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0] for _ in range(4000)]
    floats += [rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-12, 18) for _ in range(8000)]
    items = [{"id": i, "best_pp": v, "best_tg": -v} for i, v in enumerate(floats)]
    _assert_written_as_dumps_writes(items)
