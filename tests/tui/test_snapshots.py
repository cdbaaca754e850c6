"""SVG snapshots of the main screens (pytest-textual-snapshot). Volatile values
are pinned: ingestion times are fixed in the database (conftest), the live
poll is off, sources show their file name only.

Review changes with the HTML report, then `pytest tests/tui --snapshot-update`."""

from __future__ import annotations

import datetime as dt

from textual.widgets import DataTable

from analyzer.tui.app import CapscanApp
from tests.tui.conftest import settle

SIZE = (130, 40)
NOW = dt.datetime(2026, 9, 1, 12, 0, tzinfo=dt.timezone.utc)  # the app's clock, pinned


def make_app(db, run_id=None) -> CapscanApp:
    return CapscanApp(db, run_id=run_id, poll_interval=None, now=NOW)


async def _loaded(pilot) -> None:
    await settle(pilot)


def test_runs_screen(snap_compare, tui_db):
    assert snap_compare(make_app(tui_db), terminal_size=SIZE, run_before=_loaded)


def test_runs_screen_filtered_with_marks(snap_compare, tui_db):
    async def before(pilot) -> None:
        await settle(pilot)
        app = pilot.app
        table = app.runs_screen.query_one("#runs", DataTable)
        for rid in ("2", "1"):
            table.move_cursor(row=table.get_row_index(rid))
            await pilot.press("space")
        await pilot.press("slash", *"llama-bench", "enter")
        await settle(pilot)

    assert snap_compare(make_app(tui_db), terminal_size=SIZE, run_before=before)


def test_detail_screen(snap_compare, tui_db):
    # run 3 (Lume shim, virtualization overhead): its remedy plan is a refusal, so
    # no machine-specific paths appear on screen
    assert snap_compare(make_app(tui_db, 3), terminal_size=(130, 50),
                        run_before=_loaded)


def test_compare_screen_three_runs(snap_compare, tui_db):
    async def before(pilot) -> None:
        await settle(pilot)
        for rid in (1, 3, 2):
            pilot.app.toggle_mark(rid)
        await pilot.press("c")
        await settle(pilot)

    assert snap_compare(make_app(tui_db), terminal_size=(130, 40), run_before=before)


def test_help_screen(snap_compare, tui_db):
    async def before(pilot) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(make_app(tui_db), terminal_size=(130, 45), run_before=before)


# -- the default terminal (80x24) and a wide one (200x50) ------------------------------------

SMALL, LARGE = (80, 24), (200, 50)


def test_runs_screen_80x24(snap_compare, tui_db):
    assert snap_compare(make_app(tui_db), terminal_size=SMALL, run_before=_loaded)


def test_runs_screen_200x50(snap_compare, tui_db):
    assert snap_compare(make_app(tui_db), terminal_size=LARGE, run_before=_loaded)


def test_runs_screen_select_open_80x24(snap_compare, tui_db):
    async def before(pilot) -> None:
        await settle(pilot)
        pilot.app.screen.query_one("#environment").focus()
        await pilot.press("enter")
        await pilot.pause()

    assert snap_compare(make_app(tui_db), terminal_size=SMALL, run_before=before)


def test_detail_screen_80x24(snap_compare, tui_db):
    assert snap_compare(make_app(tui_db, 3), terminal_size=SMALL, run_before=_loaded)


def test_compare_screen_80x24(snap_compare, tui_db):
    async def before(pilot) -> None:
        await settle(pilot)
        for rid in (1, 3, 2):
            pilot.app.toggle_mark(rid)
        await pilot.press("c")
        await settle(pilot)

    assert snap_compare(make_app(tui_db), terminal_size=SMALL, run_before=before)


def test_help_screen_80x24(snap_compare, tui_db):
    async def before(pilot) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(make_app(tui_db), terminal_size=SMALL, run_before=before)
