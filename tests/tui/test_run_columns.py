"""The runs list's one column spec (analyzer.output.run_columns) over its one field list
(analyzer.store.run_list): the CLI table, its TSV and markdown, and the TUI read the same cells."""

from __future__ import annotations

import dataclasses

import pytest

from analyzer.output.run_columns import BY_KEY, COLUMNS, HEADERS, TABLE_FIT_STEPS, TUI_DROP_ORDER
from analyzer.store import browse
from analyzer.store.db import open_db
from analyzer.store.queries import iter_runs
from analyzer.store.run_list import RUN_COLUMNS, RunRow, named_row
from analyzer.tui.model import RUN_COLUMNS as TUI_COLUMNS
from tests.conftest import run_capscan


def _capscan(db, *argv: str) -> str:
    return run_capscan(*argv, db=db, check=True).stdout.decode()


def test_the_listing_and_the_tui_rows_give_the_same_cells(tui_db):
    db = open_db(tui_db)
    try:
        listed = list(iter_runs(db, limit=None))
    finally:
        db.conn.close()
    with browse.Store(tui_db).read() as conn:
        shown = browse.page(conn, browse.RunFilter())
    assert [r["id"] for r in listed] == [r.id for r in shown] == [5, 4, 3, 2, 1]
    for as_dict, as_row in zip(listed, shown, strict=True):
        assert list(as_dict) == list(RUN_COLUMNS)
        assert [c.text(as_dict) for c in COLUMNS] == [c.text(as_row) for c in COLUMNS]
    oldest = {c.key: c.text(shown[-1]) for c in COLUMNS}
    assert oldest["verdict"] == "capability-downgrade" and oldest["tg"] == "12.63"
    assert oldest["device"] == "Apple Paravirtual device"


def test_piped_tsv_and_markdown_follow_the_spec(tui_db):
    lines = _capscan(tui_db, "runs").splitlines()
    assert lines[0].split("\t") == list(HEADERS)
    assert len(lines) == 6 and all(len(line.split("\t")) == len(COLUMNS) for line in lines)
    assert lines[-1].split("\t")[list(BY_KEY).index("verdict")] == "capability-downgrade"
    md = _capscan(tui_db, "runs", "--markdown").splitlines()
    assert [c.strip() for c in md[0].strip("|").split("|")] == list(HEADERS)
    # right-aligned columns are the numbers: id and the speeds
    aligns = [c.strip() for c in md[1].strip("|").split("|")]
    assert [c.header for c, a in zip(COLUMNS, aligns, strict=True) if a.endswith(":")] == ["id", "best pp", "best tg"]


def test_rows_are_named_strictly():
    values = tuple(f"v{i}" for i in range(len(RUN_COLUMNS)))
    assert list(named_row(values)) == list(RUN_COLUMNS)
    for wrong in (values[:-1], values + (0,)):
        with pytest.raises(ValueError):
            named_row(wrong)
    assert tuple(f.name for f in dataclasses.fields(RunRow)) == RUN_COLUMNS


def test_every_fit_order_and_surface_names_a_column_of_the_spec():
    assert {key for _, key, _ in TABLE_FIT_STEPS} <= set(BY_KEY)
    assert not {key for _, key, _ in TABLE_FIT_STEPS} & {c.key for c in COLUMNS if c.right}  # numbers stay whole
    tui = [c.key for c in TUI_COLUMNS]
    assert tui[0] == "mark" and tui[1:] == [c.key for c in COLUMNS if c.tui_width]
    assert set(TUI_DROP_ORDER) <= set(tui)
    for c in COLUMNS:
        assert c.header == c.header.strip() and c.key, c
