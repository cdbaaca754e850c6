"""The TUI at 80x24 (the default terminal) and at 200x50: every screen shows the
run id, its verdict and the best speeds; nothing wraps or falls off the right
edge; the spare width goes to the source column; Ctrl-C quits."""

from __future__ import annotations

from textual.widgets import DataTable, Select, Static
from textual.widgets._select import SelectCurrent

from analyzer.tui.app import CapscanApp
from analyzer.tui.model import CELL_PADDING, fit_columns
from analyzer.tui.screens.compare import CompareScreen
from analyzer.tui.screens.detail import DetailScreen
from tests.tui.conftest import settle

SMALL, LARGE = (80, 24), (200, 50)


def app_for(db, run_id=None) -> CapscanApp:
    return CapscanApp(db, run_id=run_id, poll_interval=None)


def visible_columns(app: CapscanApp) -> dict[str, int]:
    """Column key -> width, for the columns that fit on screen left of the right edge."""
    table = app.runs_screen.query_one("#runs", DataTable)
    out, x = {}, 0
    for key, col in table.columns.items():
        x += col.get_render_width(table)
        if x <= app.size.width:
            out[key.value] = col.width
    return out


def test_fit_columns_keeps_id_verdict_and_speeds_at_any_width():
    for width in (40, 60, 78, 98, 118, 198):
        keys = [c.key for c in fit_columns(width)]
        assert {"id", "verdict", "pp", "tg"} <= set(keys), width
    assert [c.key for c in fit_columns(78)] == ["mark", "id", "source", "env", "verdict", "pp", "tg"]
    wide = fit_columns(198)
    assert sum(c.width + CELL_PADDING for c in wide) == 198
    assert next(c for c in wide if c.key == "source").width > 60


async def test_runs_at_80x24_show_id_verdict_and_speeds(tui_db):
    app = app_for(tui_db)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        shown = visible_columns(app)
        assert {"id", "verdict", "pp", "tg", "source", "env"} <= set(shown)
        table = app.runs_screen.query_one("#runs", DataTable)
        row = table.get_row("1")
        assert [str(c) for c in row[-3:]] == ["capability-downgrade", "431.86", "12.63"]
        # the filter selects keep their prompt on one line
        for select in app.runs_screen.query(Select):
            assert select.query_one(SelectCurrent).query_one("#label", Static).size.height == 1


async def test_runs_at_200_columns_give_the_source_the_spare_width(tui_db):
    app = app_for(tui_db)
    async with app.run_test(size=LARGE) as pilot:
        await settle(pilot)
        shown = visible_columns(app)
        assert set(shown) >= {"id", "when", "source", "program", "device", "env", "verdict", "pp", "tg"}
        assert shown["source"] > 60
        table = app.runs_screen.query_one("#runs", DataTable)
        assert str(table.get_row("3")[3]) == "lume-shim-apple9-on-m1.log"  # whole, not cut to 18


async def test_columns_follow_a_resize(tui_db):
    app = app_for(tui_db)
    async with app.run_test(size=LARGE) as pilot:
        await settle(pilot)
        table = app.runs_screen.query_one("#runs", DataTable)
        table.move_cursor(row=table.get_row_index("2"))
        await pilot.resize_terminal(*SMALL)
        await settle(pilot)
        assert "program" not in visible_columns(app)
        assert {"id", "verdict", "pp", "tg"} <= set(visible_columns(app))
        assert app.runs_screen._cursor_run(table) == 2  # the cursor stays on its run
        assert app.runs_screen.query_one("#verdict", Select).prompt == "verdict"


async def test_a_long_select_label_does_not_wrap_at_80(tui_db):
    app = app_for(tui_db)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        select = app.runs_screen.query_one("#verdict", Select)
        select.value = "capability-downgrade"
        await settle(pilot)
        label = select.query_one(SelectCurrent).query_one("#label", Static)
        assert label.size.height == 1 and select.size.height == 3


async def test_help_fits_at_80x24(tui_db):
    app = app_for(tui_db)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        box = app.screen.query_one("#help").region
        assert box.x >= 0 and box.right <= SMALL[0] and box.bottom <= SMALL[1]


async def test_compare_at_80x24_shows_ids_verdicts_and_speeds_uncovered(tui_db):
    app = app_for(tui_db)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        for rid in (4, 1, 3, 2):  # the fourth mark drops run 4 with a notice on the list
            app.toggle_mark(rid)
        await pilot.pause()
        assert len(app._notifications) == 1
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert len(app._notifications) == 0  # no notice covers the comparison
        who = app.screen.query_one("#who", Static)
        assert who.size.height == 3  # one line per run
        ratios = app.screen.query_one("#ratios", Static)
        assert ratios.region.bottom <= SMALL[1] - 1  # the speeds are on the first screen, above the footer


async def test_detail_at_80x24_shows_verdict_and_best_speeds_first(tui_db):
    app = app_for(tui_db, run_id=3)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        verdict = app.screen.query_one("#verdict", Static)
        assert verdict.region.bottom <= SMALL[1] - 1
        text = str(verdict.render())
        assert "VIRTUALIZATION-OVERHEAD" in text and "tg128 206.60 tok/s (72% of host)" in text
        assert app.screen.query_one("#head", Static).size.height == 2


async def test_ctrl_c_quits(tui_db):
    app = app_for(tui_db)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running
