"""The export reader's budgets, unit by unit (analyzer.parsers.exports): what one run object may
hold is bounded while it is decoded, before any model is built (issue 37, item 4)."""

from __future__ import annotations

import json

import pytest

from analyzer.parsers.exports import (
    MAX_HEAD_KEYS,
    MAX_KEYS,
    MAX_LIST,
    MAX_VALUES,
    OUT_OF_RANGE,
    OVER_BUDGET,
    Exported,
    ExportError,
    Trailing,
    decode,
    read_document,
    read_events,
)

HEAD = '{"capscan_version": "0.1.0", "export": "capscan.runs", "instance": "g"'


def _doc(text: str) -> list:
    data = text.encode()
    return list(read_document(iter([data[i:i + 4096] for i in range(0, len(data), 4096)])))


def test_lists_are_cut_at_every_depth():
    value = decode(json.dumps({"a": list(range(MAX_LIST + 5)), "b": [{"c": [[1]] * (MAX_LIST * 2)}]}))
    assert len(value["a"]) == MAX_LIST and len(value["b"][0]["c"]) == MAX_LIST


def test_an_object_keeps_its_first_keys():
    value = decode(json.dumps({f"k{i}": i for i in range(MAX_KEYS * 3)}))
    assert len(value) == MAX_KEYS and "k0" in value


@pytest.mark.parametrize("number", [str(1 << 63), str(-(1 << 63) - 1), "1" + "0" * 5000, "-" + "9" * 30])
def test_an_integer_no_column_can_hold_is_marked_never_converted(number):
    assert decode('{"first_line": ' + number + "}")["first_line"] is OUT_OF_RANGE


@pytest.mark.parametrize("number", [str((1 << 63) - 1), str(-(1 << 63)), "0", "-7"])
def test_every_64_bit_integer_reads_as_itself(number):
    assert decode("[" + number + "]") == [int(number)]


@pytest.mark.parametrize("item", ["{}", "1", "0.5", '{"a": [1, 2]}'])
def test_a_value_past_the_budget_is_refused_whole(item):
    text = "[" + ",".join([item] * (MAX_VALUES + 10)) + "]"
    (got,) = _doc(HEAD + ', "runs": [' + text + "]}")
    assert isinstance(got, Exported) and got.run is OVER_BUDGET


def test_a_value_under_the_budget_is_kept():
    (got,) = _doc(HEAD + ', "runs": [{"proof": [' + ",".join(["{}"] * 1_000) + "]}]}")
    assert len(got.run["proof"]) == 1_000


def test_text_after_the_document_is_counted():
    *runs, tail = _doc(HEAD + ', "runs": [{"id": 1}]}\nappended by a tool\n{"id": 2}\n')
    assert [r.run for r in runs] == [{"id": 1}]
    assert isinstance(tail, Trailing) and tail.chars == len('appended by a tool\n{"id": 2}\n') and tail.line == 2


def test_whitespace_after_the_document_is_nothing():
    assert all(not isinstance(x, Trailing) for x in _doc(HEAD + ', "runs": []}\n\n  \n'))


@pytest.mark.parametrize("header", [
    ", ".join(f'"k{i}": {i}' for i in range(MAX_HEAD_KEYS + 1)),
    ", ".join(f'"k{i}": "{"x" * 300_000}"' for i in range(4)),
])
def test_a_header_past_its_budget_is_damage(header):
    with pytest.raises(ExportError, match="header"):
        _doc('{"capscan_version": "0.1.0", "export": "capscan.runs", ' + header + ', "runs": []}')


def test_a_value_nested_too_deeply_is_damage_not_a_traceback():
    with pytest.raises(ExportError, match="nested"):
        _doc(HEAD + ', "runs": [' + "[" * 50_000 + "]" * 50_000 + "]}")


def test_an_event_line_nested_too_deeply_is_a_counted_line():
    lines = ('{"event": "capscan.run", "id": 1}\n' + "[" * 50_000 + "]" * 50_000 + "\n").encode()
    got = list(read_events(iter([lines])))
    assert isinstance(got[0], Exported) and got[1] == 2
