"""The TUI driven headless with Textual's Pilot on a real database."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Select, Static

from analyzer.tui.app import CapscanApp, run_app
from analyzer.tui.screens.compare import CompareScreen
from analyzer.tui.screens.detail import DetailScreen
from analyzer.tui.screens.help import HelpScreen
from analyzer.tui.screens.runs import RunsScreen
from tests.conftest import run_capscan
from tests.tui.conftest import FIXTURES, ingest_logs, settle, wait_until

REPO = Path(__file__).resolve().parents[2]
SIZE = (140, 45)


def table_ids(app: CapscanApp) -> list[int]:
    table = app.runs_screen.query_one("#runs", DataTable)
    return [int(k.value) for k in table.rows]


def status_of(app: CapscanApp) -> str:
    return str(app.runs_screen.query_one("#status", Static).content)


def text_of(screen, selector: str) -> str:
    """The plain text a Static shows (rich renderables rendered at 200 columns)."""
    from rich.console import Console

    console = Console(width=200, record=True, color_system=None)
    console.print(screen.query_one(selector, Static).content)
    return console.export_text()


async def test_runs_newest_first_with_verdicts(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)
        assert table_ids(app) == [5, 4, 3, 2, 1]
        table = app.runs_screen.query_one("#runs", DataTable)
        row = table.get_row("1")
        assert str(row[7]) == "capability-downgrade" and "red" in str(row[7].style)
        assert [str(c) for c in row[8:]] == ["431.86", "12.63"]
        assert str(table.get_row("2")[5]) == "Apple M1 Ultra"
        assert app.first_rows_s is not None
        assert "5 runs" in status_of(app)


async def test_filter_by_text_verdict_device_environment(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"ultra")
        await settle(pilot)
        assert table_ids(app) == [2]
        assert "1 of 5 runs" in status_of(app)

        await pilot.press("escape", "escape")  # back to the list (the filter kept), then clear it
        await settle(pilot)
        assert table_ids(app) == [5, 4, 3, 2, 1]

        screen = app.runs_screen
        screen.query_one("#verdict", Select).value = "capability-downgrade"
        await settle(pilot)
        assert table_ids(app) == [1]
        screen.query_one("#verdict", Select).clear()
        screen.query_one("#device", Select).value = "Apple Paravirtual device"
        await settle(pilot)
        assert table_ids(app) == [3, 1]
        screen.query_one("#environment", Select).value = "vm"
        await pilot.press("slash", *"lume")
        await settle(pilot)
        assert table_ids(app) == [3]
        # a run id typed in the filter finds that run
        await pilot.press("escape", "escape")
        await settle(pilot)
        await pilot.press("slash", "4")
        await settle(pilot)
        assert 4 in table_ids(app)


def footer_keys(app: CapscanApp) -> dict[str, str]:
    """What the footer shows: key as displayed -> its description."""
    from textual.widgets._footer import FooterKey

    return {k.key_display: k.description for k in app.screen.query(FooterKey)}


@pytest.mark.parametrize("key", ["escape", "down"])
async def test_esc_and_down_leave_the_filter_for_the_list_and_the_footer_says_so(tui_db, key):
    """Issue 25: after typing a filter, only Enter left it; Down, Space and `c` went on typing into it."""
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.runs_screen
        table = screen.query_one("#runs", DataTable)
        await pilot.press("slash", *"paravirtual")
        await settle(pilot)
        assert isinstance(app.focused, Input) and table_ids(app) == [3, 1]
        assert footer_keys(app).get("esc/↓") == "back to the runs"
        await pilot.press(key)
        await settle(pilot)
        assert app.focused is table
        assert screen.query_one("#text", Input).value == "paravirtual" and table_ids(app) == [3, 1]  # kept
        assert "esc/↓" not in footer_keys(app) and footer_keys(app).get("esc") == "clear filter"
        # the list has the keys now: down moves, space marks, c compares (nothing is typed into the filter)
        await pilot.press("down", "space")
        await settle(pilot)
        assert screen.query_one("#text", Input).value == "paravirtual" and app.marked == [1]
        await pilot.press("escape")  # on the list: clears the filter
        await settle(pilot)
        assert screen.query_one("#text", Input).value == "" and table_ids(app) == [5, 4, 3, 2, 1]


async def test_a_narrower_filter_with_the_same_rows_keeps_the_table(tui_db):
    """Typing on ('ul', 'ult', ... 'ultra') while the same runs match: the table is not cleared and
    drawn again for every key, yet each filter is the one shown, and a change of rows still shows."""
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.runs_screen
        table = screen.query_one("#runs", DataTable)
        await pilot.press("slash", *"ul")
        await settle(pilot)
        assert table_ids(app) == [2]
        clears = []
        real_clear = table.clear
        table.clear = lambda *a, **k: (clears.append(1), real_clear(*a, **k))[1]
        await pilot.press(*"tra")
        await settle(pilot)
        assert table_ids(app) == [2] and clears == []
        assert screen.shown_flt.text == "ultra" and "1 of 5 runs" in status_of(app)
        await pilot.press("escape", "escape")
        await settle(pilot)
        assert table_ids(app) == [5, 4, 3, 2, 1] and clears == [1]


async def test_select_options_come_from_the_database(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.runs_screen
        devices = [v for _, v in screen.query_one("#device", Select)._options if v != Select.NULL]
        assert "Apple M1 Ultra" in devices and "Apple Paravirtual device" in devices
        envs = [v for _, v in screen.query_one("#environment", Select)._options if v != Select.NULL]
        assert {"vm", "bare-metal"} <= set(envs)


async def test_open_run_detail_and_back(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.runs_screen.query_one("#runs", DataTable)
        table.move_cursor(row=table.get_row_index("1"))
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen) and app.screen.run_id == 1
        verdict = text_of(app.screen, "#verdict")
        assert "CAPABILITY-DOWNGRADE" in verdict and "fixable" in verdict
        assert "reports Apple5" in verdict
        caps = text_of(app.screen, "#caps")
        assert "Apple M1 Ultra" in caps and "named in the guest's log" in caps
        assert caps.count("downgraded") == 3
        findings = text_of(app.screen, "#findings")
        assert "paravirtual-family-clamp" in findings
        assert "     6 │ ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)" in findings
        throughput = text_of(app.screen, "#throughput")
        assert "tg128" in throughput and "4.4%" in throughput and "host run 2" in throughput
        remedy = text_of(app.screen, "#remedy")
        # the guest's steps, read here off macOS: its remedy run takes the guest's own stock run
        assert "Remedy plan" in remedy and "in the macOS guest (this machine is linux)" in remedy
        assert "capscan remedy run --family 1007" in remedy and "LD_PRELOAD" not in remedy

        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)


async def test_detail_of_a_run_with_nothing_to_remedy(tui_db):
    app = CapscanApp(tui_db, run_id=3, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        assert "VIRTUALIZATION-OVERHEAD" in text_of(app.screen, "#verdict")
        assert "shim LumeMetalCapabilities" in text_of(app.screen, "#caps")
        assert "nothing to run" in text_of(app.screen, "#remedy")
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)  # --run opens over the list


async def test_run_that_does_not_exist(tui_db):
    app = CapscanApp(tui_db, run_id=999, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert "not in this database" in text_of(app.screen, "#head")


async def test_mark_two_runs_and_compare(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.runs_screen.query_one("#runs", DataTable)
        await pilot.press("c")  # nothing marked: a hint, no screen
        assert isinstance(app.screen, RunsScreen)
        for rid in ("1", "2"):
            table.move_cursor(row=table.get_row_index(rid))
            await pilot.press("space")
        assert app.marked == [1, 2]
        assert str(table.get_row("1")[0]) == "1" and str(table.get_row("2")[0]) == "2"
        await pilot.press("c")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        # the bare-metal run is A (the baseline), the guest is B
        ratios = text_of(screen, "#ratios")
        assert "A #2 tok/s" in ratios and "B #1 tok/s" in ratios
        assert "4.4%" in ratios and "+75.689 ms" in ratios and "8.9%" in ratios
        capdiff = text_of(screen, "#capdiff")
        assert "simdgroup_mm" in capdiff and "differs" in capdiff
        await pilot.press("x")
        await settle(pilot)
        assert "A #1 tok/s" in text_of(screen, "#ratios")
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("u")
        assert app.marked == []


async def test_three_runs_gap_decomposition(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.runs_screen.query_one("#runs", DataTable)
        for rid in ("3", "2", "1"):
            table.move_cursor(row=table.get_row_index(rid))
            await pilot.press("space")
        await pilot.press("c")
        await settle(pilot)
        dec = text_of(app.screen, "#decomposition")
        assert "stock run 1, remedied run 3, host run 2" in dec
        assert "98.2%" in dec and "1.8%" in dec and "75.689 ms" in dec
        assert "LumeMetalCapabilities" in text_of(app.screen, "#capdiff")
        # the picture (issue 25): a bar per run and test, the host the reference
        chart = text_of(app.screen, "#chart")
        assert "stock guest #1" in chart and "remedied guest #3" in chart and "host #2" in chart
        assert "█" in chart and "reference" in chart and "of host" in chart


async def test_marks_are_capped_at_three(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        for rid in (1, 2, 3, 4):
            app.toggle_mark(rid)
        assert app.marked == [2, 3, 4]


async def test_mark_from_detail_then_compare(tui_db):
    app = CapscanApp(tui_db, run_id=1, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("space", "escape")
        table = app.runs_screen.query_one("#runs", DataTable)
        table.move_cursor(row=table.get_row_index("3"))
        await pilot.press("space", "c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen) and app.screen.run_ids == [1, 3]


async def test_live_refresh_shows_runs_written_by_another_process(tui_db):
    app = CapscanApp(tui_db, poll_interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert table_ids(app) == [5, 4, 3, 2, 1]
        log = (FIXTURES / "metal/m4-2026-09-m5-max.log").read_bytes()
        proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(tui_db)], input=log,
                              capture_output=True, cwd=REPO, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert await wait_until(pilot, lambda: 6 in table_ids(app)), table_ids(app)
        assert table_ids(app)[0] == 6
        # the diagnosis written right after the run shows up too
        table = app.runs_screen.query_one("#runs", DataTable)
        assert await wait_until(pilot, lambda: str(table.get_row("6")[7]) != "-")
        assert "new since opened" in status_of(app)


async def test_live_refresh_keeps_the_filter(tui_db):
    app = CapscanApp(tui_db, poll_interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"paravirtual")
        await settle(pilot)
        assert table_ids(app) == [3, 1]
        ingest_logs(tui_db, ["metal/m4-2026-08-guest-stock.log", "metal/m4-2026-08-host-m1-ultra.log"])
        assert await wait_until(pilot, lambda: table_ids(app) == [6, 3, 1]), table_ids(app)


async def test_paging_loads_more_rows_at_the_end(tui_db):
    conn = sqlite3.connect(tui_db)
    with conn:  # 450 more copies of run 1, its diagnosis and throughput
        for i in range(450):
            rid = 100 + i
            conn.execute("INSERT INTO runs (id, source_id, seq, first_line, last_line, program, backend, device_name, "
                         "apple_family, model, created_at, facts) SELECT ?, source_id, seq, first_line, last_line, "
                         "program, backend, device_name, apple_family, model, created_at, facts FROM runs WHERE id = 1",
                         (rid,))
            conn.execute("INSERT INTO diagnoses SELECT ?, verdict, fixable, confidence, environment, host_chip, report, "
                         "rules_version, diagnosed_at, stamp FROM diagnoses WHERE run_id = 1", (rid,))
            conn.execute("INSERT INTO throughput SELECT ?, line, test, tok_s, stddev, model, kind, n_prompt, n_gen, "
                         "n_depth FROM throughput WHERE run_id = 1", (rid,))
    conn.close()
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.runs_screen.query_one("#runs", DataTable)
        from analyzer.tui.screens.runs import first_page_rows

        assert table.row_count == first_page_rows(SIZE[1]) < 200  # what the screen shows, and 20 more
        assert "455 runs" in status_of(app)
        for _ in range(3):
            table.move_cursor(row=table.row_count - 1)
            await settle(pilot)
        assert table.row_count == 455
        assert table_ids(app)[-5:] == [5, 4, 3, 2, 1]


async def test_help_escape_and_quit(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, RunsScreen)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    assert not app.is_running


async def test_mouse_click_opens_a_run(tui_db):
    app = CapscanApp(tui_db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # header row is y=0 of the table; the third data row is run 3
        assert await pilot.click("#runs", offset=(10, 3))
        await settle(pilot)
        if not isinstance(app.screen, DetailScreen):  # first click highlights, the second selects
            assert await pilot.click("#runs", offset=(10, 3))
            await settle(pilot)
        assert isinstance(app.screen, DetailScreen) and app.screen.run_id == 3


async def test_empty_database(tmp_path):
    from analyzer.store.db import open_db

    path = tmp_path / "empty.db"
    open_db(path).conn.close()
    app = CapscanApp(path, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert table_ids(app) == []
        assert "no runs yet" in status_of(app)


def test_run_app_refuses_without_a_terminal(tui_db, capsys):
    with pytest.raises(SystemExit) as exc:
        run_app(tui_db)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs a terminal" in err


def test_cli_tui_refuses_when_stdout_is_not_a_terminal(tui_db):
    proc = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(tui_db), "tui"], capture_output=True,
                          cwd=REPO, timeout=60, env={**os.environ, "TERM": "xterm"})
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert err.strip().count("\n") == 0 and "terminal" in err
    assert proc.stdout == b""


def test_pipe_report_ends_with_the_tui_hint(tmp_path):
    log = (FIXTURES / "metal/m4-2026-08-guest-stock.log").read_bytes()
    proc = run_capscan(input=log, db=tmp_path / "c.db")
    last = proc.stdout.decode().strip().splitlines()[-1]
    assert "capscan tui --run 1" in last


async def test_compare_chart_at_80x24_shows_every_figure(tmp_path):
    """Issue 41: the real llama-bench JSON example (its rows state ten parameters) charted at 80x24: the
    labels name the tests, the run names and figures are whole inside the screen's width."""
    from rich.console import Console

    db = tmp_path / "c.db"
    examples = Path(__file__).resolve().parents[2] / "examples"
    for name in ("m1-ultra-guest-stock-json.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log"):
        run_capscan("ingest", str(examples / name), db=db, check=True)
    app = CapscanApp(db, poll_interval=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        for rid in (1, 2, 3):
            app.toggle_mark(rid)
        await pilot.press("c")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        chart = app.screen.query_one("#chart", Static)
        width = chart.content_region.width
        assert 70 <= width <= 80
        # what the widget shows: its content rendered at its own width (a longer line would be cut there)
        console = Console(width=width, record=True, color_system=None)
        console.print(chart.content)
        lines = console.export_text().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    bars = [line.rstrip() for line in lines if "t/s" in line]
    assert [b.split()[0] for b in bars] == ["pp512", "remedied", "host", "tg128", "remedied", "host"]
    for line, want in zip(bars, ["stock guest #1", "remedied guest #2", "host #3"] * 2, strict=True):
        assert want in line
    assert bars[0].endswith("431.86 t/s  9% of host") and bars[4].endswith("206.60 t/s  72% of host")
    assert bars[2].endswith("4,871.99 t/s  reference") and bars[5].endswith("286.71 t/s  reference")
    assert any(line.startswith("every test: threads=8 n_batch=2048") for line in lines)


async def test_detail_head_of_a_piped_run_reads_lines_a_to_b_of_n(tmp_path):
    # a piped input's name ends in a time: "18:13:1-105" would read as a time, so the span is spelled out
    from tests.conftest import REPO

    db = tmp_path / "piped.db"
    run_capscan(db=db, input=(REPO / "examples" / "m1-ultra-guest-stock-json.log").read_bytes(), check=True)
    app = CapscanApp(db, run_id=1, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        head = text_of(app.screen, "#head")
        assert "2026-08-09 18:13, lines 1-105 of 105" in head and "18:13:1" not in head


async def test_throughput_without_a_host_draws_no_full_width_bars(tmp_path):
    """No bare-metal run stored: no "of host" column, and bars only against the same test's fastest row
    (every bar was full width, as if each row were as fast as a host; issue 41)."""
    db = tmp_path / "sweep.db"
    ingest_logs(db, ["field/087-llama-bench-macos-cpu-thread-sweep-kleidiai-2025.log"])
    app = CapscanApp(db, run_id=1, poll_interval=None)
    async with app.run_test(size=(130, 60)) as pilot:
        await settle(pilot)
        text = text_of(app.screen, "#throughput")
        assert "of host" not in text
        bars = [line.count("█") for line in text.splitlines() if line.lstrip().startswith("tg64")]
        assert len(bars) == 6 and len(set(bars)) > 1 and min(bars) < max(bars) / 2, text


async def test_detail_numbers_a_json_wrapped_logs_evidence_line_colon_inner(tmp_path):
    # a log inside one JSON string (line 20 of the artifact): each finding's evidence line says which line of it
    from tests.conftest import REPO

    db = tmp_path / "artifact.db"
    run_capscan("ingest", str(REPO / "tests" / "fixtures" / "forms" / "json-ci-artifact-stderr-tail.json"), db=db,
                check=True)
    app = CapscanApp(db, run_id=1, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        findings = text_of(app.screen, "#findings")
        assert "20:5 │ ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)" in findings
        assert "20:6 │ ggml_metal_device_init: GPU family: MTLGPUFamilyApple5" in findings
