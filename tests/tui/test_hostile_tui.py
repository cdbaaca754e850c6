"""The TUI over a database of hostile runs (issue 9): start-up, the device
filter, the run detail and compare never crash on markup in log text, and
nothing the app would write to the terminal carries an escape sequence,
control or bidi character from a log."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from textual.widgets import Select

from analyzer.safe_text import BIDI
from analyzer.tui.app import CapscanApp
from analyzer.tui.screens.compare import CompareScreen
from analyzer.tui.screens.detail import DetailScreen
from tests.test_hostile_input import ERASE, HOSTILE_LOGS, MARKUP, OSC0, OSC52, RLO
from tests.tui.conftest import ingest_logs, settle

SIZE = (160, 50)
# What Textual itself writes: SGR and cursor-movement CSI sequences. Anything else is foreign.
_TEXTUAL_CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_FOREIGN = re.compile(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f{BIDI}]")


def terminal_output(app: CapscanApp) -> str:
    """Exactly what the app would write to the terminal for a full repaint of its screen."""
    update = app.screen._compositor.render_update(full=True)
    return update.render_segments(app.console)


def assert_safe(output: str) -> None:
    rest = _TEXTUAL_CSI.sub("", output)
    bad = _FOREIGN.search(rest)
    assert bad is None, f"{bad.group(0)!r} near {rest[max(0, bad.start() - 50):bad.start() + 30]!r}"
    # (evidence quoting a JSON line shows "\u001b]52;..." as the log printed it: harmless text)
    assert re.search(r"(?<!\\u001b)\](?:52;|0;pwned)", rest) is None


def hostile_database(tmp_path: Path) -> Path:
    logs = []
    for name, text in HOSTILE_LOGS.items():
        path = tmp_path / f"{name}[draft].log"
        path.write_text(text, encoding="utf-8")
        logs.append(str(path))
    db = tmp_path / "capscan.db"
    ingest_logs(db, logs)
    # ... and a run written by an older capscan: raw escapes and markup in every stored string
    conn = sqlite3.connect(db)
    with conn:
        facts = json.loads(conn.execute("SELECT facts FROM runs WHERE id = 1").fetchone()[0])
        facts["device"]["name"] = "Apple " + OSC0 + "[/] device"
        conn.execute("UPDATE runs SET facts = ?, device_name = ?, program = ? WHERE id = 1",
                     (json.dumps(facts), "Apple " + OSC0 + "[/] device", "llama" + OSC52))
        conn.execute("UPDATE evidence SET text = text || ?", (ERASE + MARKUP + RLO,))
        conn.execute("UPDATE sources SET path = path || ?", (OSC0 + "[red]",))
    conn.close()
    return db


async def test_hostile_runs_list_filter_detail_and_compare(tmp_path):
    db = hostile_database(tmp_path)
    app = CapscanApp(db, poll_interval=None)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert len(app.runs_screen.rows) == 7  # raw-escapes holds three device blocks
        assert_safe(terminal_output(app))
        # the device filter: options from stored names, with `[/]` and escapes in them
        select = app.runs_screen.query_one("#device", Select)
        values = [v for _, v in select._options if v != Select.NULL]
        assert any("[/]" in v for v in values)
        for value in values:
            select.value = value
            await settle(pilot)
            assert_safe(terminal_output(app))
        select.value = Select.NULL
        await settle(pilot)
        for rid in sorted(app.runs_screen.rows):
            app.open_run(rid)
            await settle(pilot)
            assert isinstance(app.screen, DetailScreen)
            assert_safe(terminal_output(app))
            await pilot.press("escape")
            await settle(pilot)
        app.marked[:] = [1, 2]
        app.action_compare()
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert_safe(terminal_output(app))
