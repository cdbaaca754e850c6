"""`capscan tui`: the Textual app over the database.

Screens: runs (the list, filters, marks), run detail, compare, help. All
database work happens in thread workers (`analyzer.store.browse` opens a short
connection per query); a poll every ``poll_interval`` seconds notices commits
by other capscan processes and refreshes the list.

Log text is hostile: the app renders rich objects through a ``SafeConsole``
(no markup read, every segment cleaned) and, as the last step before the
terminal, a line filter removes any control or bidi character left in any
widget's output, whatever built it.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import time
from pathlib import Path

from rich.segment import Segment
from textual import constants, work
from textual.app import App
from textual.binding import Binding
from textual.filter import LineFilter

from analyzer.output.safe_console import SafeConsole
from analyzer.safe_text import strip_unsafe_chars
from analyzer.store.browse import Store
from analyzer.tui.messages import DatabaseChanged
from analyzer.tui.model import TimeFormat, compact

MAX_MARKS = 3


class TerminalSafeFilter(LineFilter):
    """Every widget's last filter: no ESC, C0/C1 control or bidi character
    reaches the terminal (they take no cell, so the layout is unchanged)."""

    def apply(self, segments: list[Segment], background) -> list[Segment]:
        return [seg if seg.control else Segment(strip_unsafe_chars(seg.text), seg.style, seg.control)
                for seg in segments]


class CapscanApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "capscan"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),  # as in every terminal program
        Binding("question_mark", "help", "help", key_display="?"),
    ]

    def __init__(self, db_path: str | Path, run_id: int | None = None, *, poll_interval: float | None = 1.5,
                 now: dt.datetime | None = None, time_format: TimeFormat | None = None):
        """``now`` pins the clock the times are shown against (tests and
        snapshots); ``time_format`` replaces the formatter altogether."""
        super().__init__()
        # Rich renderables (tables of log text) are rendered without reading markup, and cleaned.
        environ = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
        self.console = SafeConsole(color_system=constants.COLOR_SYSTEM, file=self.console.file, legacy_windows=False,
                                   _environ=environ, force_terminal=True, safe_box=False, soft_wrap=False)
        self._safe_filter = TerminalSafeFilter()
        self.started = time.perf_counter()
        self.db_path = Path(db_path)
        self.store = Store(self.db_path)
        self.start_run = run_id
        self.poll_interval = poll_interval
        self.time_format: TimeFormat = time_format or compact(now or dt.datetime.now(dt.timezone.utc))
        self.marked: list[int] = []
        self.first_rows_s: float | None = None  # time from construction to the first rows shown
        self._token: tuple[int, int, int] | None = None
        self._polling = False
        self.sub_title = self.db_path.name

    def get_line_filters(self):
        return [*super().get_line_filters(), self._safe_filter]

    def on_mount(self) -> None:
        from analyzer.tui.screens.runs import RunsScreen

        self.runs_screen = RunsScreen()
        self.push_screen(self.runs_screen)
        if self.start_run is not None:
            self.open_run(self.start_run)
        if self.poll_interval:
            self.set_interval(self.poll_interval, self.poll_now)

    def on_unmount(self) -> None:
        self.store.close()

    # -- live refresh ----------------------------------------------------------------

    def poll_now(self) -> None:
        if not self._polling:
            self._polling = True
            self._poll()

    @work(thread=True, group="poll", exit_on_error=False)
    def _poll(self) -> None:
        try:
            token = self.store.change_token()
        except Exception:  # noqa: BLE001 - a locked or vanished database: try again next tick
            token = None
        finally:
            self._polling = False
        if token is None:
            return
        previous, self._token = self._token, token
        if previous is not None and token != previous:
            self.post_message(DatabaseChanged(new_runs=max(0, token[1] - previous[1])))

    def on_database_changed(self, message: DatabaseChanged) -> None:
        self.runs_screen.database_changed(message.new_runs)

    @work(thread=True, group="warm", exit_on_error=False)
    def warm_up(self) -> None:
        """After the first screen: import what the detail and compare screens
        need (the facts model, sqlite-utils, the rules), so opening a run is quick."""
        import analyzer.rules.compare  # noqa: F401
        import analyzer.store.queries  # noqa: F401
        import analyzer.tui.screens.compare  # noqa: F401
        import analyzer.tui.screens.detail  # noqa: F401
        try:
            import analyzer.remedy.plan  # noqa: F401
        except ImportError:
            pass

    # -- marks ---------------------------------------------------------------------------

    def toggle_mark(self, run_id: int) -> None:
        if run_id in self.marked:
            self.marked.remove(run_id)
        else:
            self.marked.append(run_id)
            if len(self.marked) > MAX_MARKS:
                dropped = self.marked.pop(0)
                self.notify(f"at most {MAX_MARKS} marks: unmarked run {dropped}", timeout=3)
        self.runs_screen.marks_changed()

    def clear_marks(self) -> None:
        self.marked.clear()
        self.runs_screen.marks_changed()

    # -- actions -------------------------------------------------------------------------

    def action_help(self) -> None:
        from analyzer.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_compare(self) -> None:
        from analyzer.tui.screens.compare import CompareScreen

        if len(self.marked) < 2:
            self.notify("Mark two runs with space (guest and host), or three of one model "
                        "(stock guest, remedied guest, host) for the gap decomposition.", timeout=4)
            return
        self.clear_notifications()  # a notice left from the list would cover the comparison
        self.push_screen(CompareScreen(list(self.marked)))

    def open_run(self, run_id: int) -> None:
        from analyzer.tui.screens.detail import DetailScreen

        self.push_screen(DetailScreen(run_id))


def run_app(db_path: Path, run_id: int | None = None) -> None:
    """Start the browser; refuse with one line when there is no terminal."""
    if not (sys.stdout.isatty() and sys.stdin.isatty()):
        print("capscan: the TUI needs a terminal (stdin and stdout); use `capscan runs` or `capscan show` in pipes",
              file=sys.stderr)
        raise SystemExit(2)
    CapscanApp(db_path, run_id=run_id).run()
