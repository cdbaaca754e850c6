"""The streaming JSON and NL writers: a full batch of rows goes to orjson in one call (runs -n 0 on
100,000 runs, bench/run.py), a short one or one orjson refuses to the standard json module. The
contract is the JSON values, not the whitespace: what the writers write parses to the values
``dumps`` gives for each item (non-finite floats null, keys strings), whichever encoder wrote it,
and the text is safe to print (no raw newline inside a line, no control or bidi character)."""

from __future__ import annotations

import io
import json
import sys
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzer.output import tabular

HOSTILE = "a\x1b[2Kb \u202eevil\u202c \x85 \x7f \ud800 \"q\" \\ \n\t\r \u2028 \u2029 \u2066 \u061c 日本"
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
# A listing row as `runs --json` writes 100,000 of (orjson encodes a full batch of these).
LISTING = {"id": 99953, "created_at": "2026-10-05T15:30:00", "source": "~/bench/2026/run-024989 \x1b[31m\u202e 日本 \x7f.log",
           "program": "llama-bench", "backend": "Metal", "device": "Apple M5 Max", "apple_family": 1010,
           "model": None, "verdict": "healthy", "fixable": False, "environment": "bare-metal",
           "best_pp": 9535.51, "best_tg": 0.0001, "zero": -0.0, "big": 123456789012345.6, "neg": -(2 ** 63)}
# What the escaping leaves out of every line: control characters (a tab or newline only as \t, \n),
# DEL and C1, the line and paragraph separators, bidi overrides and isolates.
UNSAFE = [chr(c) for c in range(0x20)] + [chr(c) for c in range(0x7f, 0xa0)] + [
    "\u2028", "\u2029", "\u061c", "\u200e", "\u200f", *map(chr, range(0x202a, 0x202f)), *map(chr, range(0x2066, 0x206a))]


def _want(item):
    """The values of ``item`` in JSON: what the general ``dumps`` gives, parsed."""
    return json.loads(tabular.dumps(item))


def _written(items):
    """(the array's values, the NL lines' values, the NL text) the writers give for ``items``."""
    arr, nl = io.StringIO(), io.StringIO()
    tabular.write_json_array(arr, iter(items))
    tabular.write_nl(nl, iter(items))
    assert nl.getvalue() == "" or nl.getvalue().endswith("\n")
    return json.loads(arr.getvalue()), [json.loads(line) for line in nl.getvalue().splitlines()], nl.getvalue()


def _assert_values(items):
    arr, lines, text = _written(items)
    want = [_want(item) for item in items]
    assert arr == want
    assert lines == want
    assert len(text.splitlines()) == len(items)  # one line an item: no raw newline inside one
    assert not any(c in text.replace("\n", "") for c in UNSAFE)
    return text


@pytest.mark.parametrize("items", [[], [FLAT], [FLAT] * 3 + ODD, ODD + [FLAT] * (tabular.BATCH_ROWS + 3),
                                   [LISTING] * (2 * tabular.BATCH_ROWS + 7)],
                         ids=["empty", "one", "mixed", "batches", "listing"])
def test_written_values_are_the_items(items):
    _assert_values(items)


@pytest.mark.parametrize("source", [HOSTILE, HOSTILE.replace("\ud800 ", "")], ids=["surrogate", "orjson-text"])
def test_log_text_is_kept_escaped_by_either_encoder(source):
    for n in (1, tabular.BATCH_ROWS):  # json; then orjson, unless a lone surrogate sends the batch to json
        text = _assert_values([dict(LISTING, source=source)] * n)
        assert json.loads(text.splitlines()[0])["source"] == source
        assert all(esc in text for esc in ("\\u2028", "\\u2029", "\\u202e", "\\u001b", "\\u0085", "\\u007f"))


def test_a_full_batch_of_listing_rows_goes_to_orjson():
    pytest.importorskip("orjson")
    rows = [dict(LISTING, id=i) for i in range(tabular.BATCH_ROWS)]
    assert tabular._orjson_text(rows, indented=True) is not None
    assert tabular._orjson_text(rows, indented=False) is not None
    # what orjson refuses is written by json, with the same values
    for odd in (2 ** 64, "lone \ud800", {1: "int key"}):
        assert tabular._orjson_text(rows + [dict(LISTING, best_tg=odd)], indented=True) is None
        _assert_values(rows + [dict(LISTING, best_tg=odd)])


def test_without_orjson_the_standard_json_module_writes_the_same_values(monkeypatch):
    monkeypatch.setitem(sys.modules, "orjson", None)  # import orjson raises ImportError
    rows = [dict(LISTING, id=i, best_pp=i / 7) for i in range(tabular.BATCH_ROWS + 5)] + ODD
    assert tabular._orjson_text(rows, indented=False) is None
    _assert_values(rows)


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


@pytest.mark.parametrize("write", [tabular.write_json_array, tabular.write_nl])
def test_100000_rows_stream_in_bounded_memory(write):
    class Sink:
        size = 0

        def write(self, text):
            self.size += len(text)

    rows = (dict(LISTING, id=i, best_pp=i / 7) for i in range(100_000))
    sink = Sink()
    tracemalloc.start()
    try:
        write(sink, rows)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.size > 30_000_000  # 100,000 rows of about 300 characters
    assert peak < 4_000_000  # a few batches, never the whole output


_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text())


def _rows(values):
    return st.lists(st.dictionaries(st.text(max_size=8), values, min_size=1, max_size=6), max_size=12)


@settings(max_examples=200, deadline=None)
@given(_rows(_values), st.sampled_from([1, tabular.BATCH_ROWS]))
def test_any_rows_are_written_with_their_values(items, copies):
    _assert_values(items * copies if items else items)


def test_floats_of_every_magnitude_keep_their_values():
    import random
    import struct

    rnd = random.Random(13)
    floats = [struct.unpack("d", struct.pack("Q", rnd.getrandbits(64)))[0] for _ in range(4000)]
    floats += [rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-12, 18) for _ in range(8000)]
    items = [{"id": i, "best_pp": v, "best_tg": -v} for i, v in enumerate(floats)]
    _assert_values(items)
