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
from tests.tui.conftest import ingest_logs, settle

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
    # the device's name whole before the source takes the rest (issue 41)
    assert next(c for c in wide if c.key == "device").width >= len("Apple Paravirtual device")


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


# llama-bench on a tiny model (stories15M) on an RTX 4090: figures wider than the columns' labels
TINY_ON_4090 = """\
| model                          |       size |     params | backend    | ngl |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | --------------: | -------------------: |
| llama ?B Q8_0                  |  24.46 MiB |    24.41 M | CUDA       |  99 |           pp512 |  131072.50 ± 812.40 |
| llama ?B Q8_0                  |  24.46 MiB |    24.41 M | CUDA       |  99 |           tg128 |    10240.50 ± 12.10 |

build: 3f1ae2e3 (4524)
"""


def screen_lines(app: CapscanApp) -> list[str]:
    return [strip.text for strip in app.screen._compositor.render_strips()]


async def test_runs_at_80x24_show_id_verdict_and_speeds_in_full_however_wide(tui_db, tmp_path):
    """Issue 25: the id, verdict and best pp/tg cells are shown whole at 80x24, even a six-digit
    speed; the source shrinks, and the other columns go."""
    log = tmp_path / "stories15m-4090.log"
    log.write_text(TINY_ON_4090)
    (rid,) = ingest_logs(tui_db, [str(log)])
    app = app_for(tui_db)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        lines = screen_lines(app)
        assert all(len(line) <= 80 for line in lines)
        verdicts = {r.id: r.verdict for r in app.runs_screen.rows.values()}
        assert len(verdicts) == 6
        head = next(i for i, line in enumerate(lines) if line.split()[:1] == ["id"])
        assert lines[head].rstrip().endswith("best pp     best tg")
        rows = {int(line.split()[0]): line for line in lines[head + 1:head + 7]}
        assert set(rows) == set(verdicts)
        tiny = rows[rid].split()
        assert tiny[-3:] == [verdicts[rid], "131,072.50", "10,240.50"], rows[rid]
        for run_id, line in rows.items():
            assert verdicts[run_id] in line.split(), line  # whole, never "virtualization-ove…"
        assert "431.86" in rows[1] and "12.63" in rows[1]
        shown = visible_columns(app)
        assert {"id", "verdict", "pp", "tg", "source"} <= set(shown) and "device" not in shown
        assert shown["pp"] >= len("131,072.50") and shown["tg"] >= len("10,240.50")
        assert shown["source"] >= 8  # shrunk, not dropped


def test_fit_columns_gives_wide_figures_their_width_and_shrinks_the_source():
    cols = {c.key: c.width for c in fit_columns(78, 6, len("131,072.50"), len("10,240.50"))}
    assert cols["id"] == 6 and cols["pp"] == 10 and cols["tg"] == 9 and cols["verdict"] == 23
    assert sum(w + CELL_PADDING for w in cols.values()) <= 78
    assert "env" not in cols and cols["source"] >= 8  # the env goes; the source keeps the spare width
    cols = {c.key: c.width for c in fit_columns(78, 2, len("131,072.50"), len("10,240.50"))}
    assert cols["pp"] == 10 and cols["tg"] == 9 and "env" in cols and cols["source"] == 9  # shrunk by one


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
