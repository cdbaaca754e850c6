"""The runs list: newest first, coloured by verdict, filtered live, paged
from SQLite 200 rows at a time, refreshed when other processes add runs."""

from __future__ import annotations

import sqlite3
import time
from typing import Callable

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Header, Input, Select, Static
from textual.worker import get_current_worker

from analyzer.output.run_columns import BY_KEY
from analyzer.safe_text import clean
from analyzer.store import browse
from analyzer.store.browse import NOT_DIAGNOSED, PAGE_SIZE, Facets, RunFilter, RunRow
from analyzer.tui.messages import CountLoaded, FacetsLoaded, RunsLoaded
from analyzer.tui.model import (
    VERDICT_STYLE,
    Column,
    fit_columns,
    fmt_tps,
    is_file_path,
    page_rows,
    short,
    source_name,
)
from analyzer.tui.screens.base import CapscanScreen
from analyzer.verdicts import VERDICTS

SCROLLBAR = 2  # kept free for the table's vertical scrollbar
NARROW = 100  # below this many columns the filter prompts are short
PROMPTS = {"wide": ("/ filter: device, source, program, model, verdict, id", "any verdict", "any device",
                    "any environment"),
           "narrow": ("/ filter", "verdict", "device", "env")}
MAX_RELOAD_ROWS = 1000  # a live refresh keeps up to this many rows already paged in
SCROLL_AHEAD = 20  # rows of a first page beyond the screen's height (the next page loads 20 rows before the end)


def first_page_rows(height: int) -> int:
    """A filter's first page: what the screen shows and a little more (200 rows took Textual about
    as long to add and measure as the query and the rest of the screen together); the next pages
    are PAGE_SIZE rows, loaded as the cursor nears the end."""
    return min(PAGE_SIZE, max(60, height + SCROLL_AHEAD))


def interruptible(conn: sqlite3.Connection) -> None:
    """Abort the running query as soon as its worker is cancelled (a newer
    filter replaced it), instead of finishing a scan nobody will see."""
    worker = get_current_worker()
    conn.set_progress_handler(lambda: 1 if worker.is_cancelled else 0, 20_000)


class FilterInput(Input):
    """The text filter: Esc or Down goes back to the runs list with the filter kept (Esc there
    clears it); the footer says so while the filter has the focus."""

    BINDINGS = [
        Binding("escape", "screen.leave_filter", "back to the runs", key_display="esc/↓"),
        Binding("down", "screen.leave_filter", "back to the runs", show=False),
    ]


class RunsScreen(CapscanScreen):
    BINDINGS = [
        Binding("enter", "open", "open", show=True),
        Binding("space", "mark", "mark"),
        Binding("c", "app.compare", "compare"),
        Binding("slash", "focus_filter", "filter", key_display="/"),
        Binding("escape", "clear", "clear filter"),
        Binding("u", "unmark", "unmark all", show=False),
        Binding("r", "reload", "reload", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.flt = RunFilter()
        self.generation = 0
        self.rows: dict[int, RunRow] = {}
        self.oldest: int | None = None
        self.more = False
        self.loading_more = False
        self.total = 0
        self.matching: int | None = None
        self.last_query_s: float | None = None
        self.new_since_open = 0
        self.facets = Facets()
        self.shown_flt: RunFilter | None = None  # the filter the table shows, and since when (benchmarks)
        self.shown_at = 0.0
        self.columns: list[Column] = []
        # The id column's width only grows: a filter showing only shorter ids keeps the table as it is
        # (rebuilding it for a narrower id column doubled the cost of every filter change).
        self.id_digits = 1
        self.speed_widths = (0, 0)  # the widest best pp and best tg cells shown (they only grow, like the ids)
        self.makers: list = []  # one function per shown column: RunRow -> its cell
        self.makers_for: list[Column] | None = None  # the columns they were made for
        self.text_index: browse.TextIndex | None = None  # read after the first page; until then LIKE

    def compose(self) -> ComposeResult:
        yield Header()
        text, verdict, device, env = PROMPTS["narrow" if self.capscan.size.width < NARROW else "wide"]
        with Horizontal(id="filters"):
            yield FilterInput(placeholder=text, id="text")
            yield Select([(v, v) for v in VERDICTS], prompt=verdict, id="verdict")
            yield Select([], prompt=device, id="device")
            yield Select([], prompt=env, id="environment")
        table: DataTable = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        self.columns = self._fit(self.capscan.size.width)
        for col in self.columns:
            table.add_column(col.label, key=col.key, width=col.width)
        yield table
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs", DataTable).focus()
        self.load()
        self.load_facets()

    # -- loading ------------------------------------------------------------------------

    def load(self, *, keep: bool = False) -> None:
        """(Re)load the first page for the current filter. ``keep`` reloads as
        many rows as are paged in now (up to MAX_RELOAD_ROWS), for live refresh."""
        self.generation += 1
        first = first_page_rows(self.capscan.size.height)
        limit = min(max(first, len(self.rows)), MAX_RELOAD_ROWS) if keep else first
        self._load(self.flt, self.generation, None, limit, False)

    @work(thread=True, exclusive=True, group="runs", exit_on_error=False)
    def _load(self, flt: RunFilter, generation: int, before: int | None, limit: int, append: bool) -> None:
        t0 = time.perf_counter()
        try:
            with self.capscan.store.read() as conn:
                interruptible(conn)
                rows = page_rows(conn, flt, before=before, limit=limit, index=self.text_index)
        except sqlite3.OperationalError:
            if get_current_worker().is_cancelled:
                return
            raise
        if not get_current_worker().is_cancelled:
            self.post_message(RunsLoaded(generation, flt, rows, append, limit, time.perf_counter() - t0))

    @work(thread=True, exclusive=True, group="count", exit_on_error=False)
    def _count(self, flt: RunFilter, generation: int) -> None:
        try:
            with self.capscan.store.read() as conn:
                interruptible(conn)
                n = browse.count(conn, flt, self.text_index)
        except sqlite3.OperationalError:
            return
        if not get_current_worker().is_cancelled:
            self.post_message(CountLoaded(generation, n))

    @work(thread=True, exclusive=True, group="facets", exit_on_error=False)
    def load_facets(self) -> None:
        with self.capscan.store.read() as conn:
            self.post_message(FacetsLoaded(browse.facets(conn)))
            # the values a text filter is matched against (a filter then reads no run it does not show)
            index = browse.text_index(conn)
        if not get_current_worker().is_cancelled:
            self.text_index = index

    def on_runs_loaded(self, message: RunsLoaded) -> None:
        if message.generation != self.generation:
            return  # a newer filter is on its way
        self.loading_more = False
        self.last_query_s = message.elapsed_s
        table = self.query_one("#runs", DataTable)
        # A new filter with the very rows the table shows (a text typed on that still matches them):
        # the table stays as it is, instead of Textual clearing and drawing every cell again.
        same = not message.append and list(self.rows.values()) == message.rows
        current = None
        if not message.append and not same:
            current = self._cursor_run(table)
            table.clear()
            self.rows = {}
        if not same:
            self._measure(message.rows)  # refit() below widens the speed columns if a figure needs it
            for row in message.rows:
                if row.id in self.rows:
                    continue
                self.rows[row.id] = row
                table.add_row(*self._cells(row), key=str(row.id))
            self.refit()  # a longer run id or speed needs a wider column
        self.oldest = message.rows[-1].id if message.rows else self.oldest
        self.more = len(message.rows) == message.limit
        if not message.append:
            if current is not None and current in self.rows:
                table.move_cursor(row=table.get_row_index(str(current)), animate=False)
            self.matching = None
            self._count(message.flt, message.generation)
        if not message.append:
            self.shown_flt, self.shown_at = message.flt, time.perf_counter()
        if self.capscan.first_rows_s is None:
            self.capscan.first_rows_s = time.perf_counter() - self.capscan.started
            self.capscan.warm_up()
        self.update_status()

    def on_count_loaded(self, message: CountLoaded) -> None:
        if message.generation == self.generation:
            self.matching = message.matching
            if not self.flt.active:
                self.total = message.matching
            self.update_status()

    def on_facets_loaded(self, message: FacetsLoaded) -> None:
        f = self.facets = message.facets
        self.total = f.total
        verdicts: list[tuple[str | Text, str]] = [(f"{v} ({f.verdicts.get(v, 0):,})", v) for v in VERDICTS]
        if f.total > sum(f.verdicts.values()):
            verdicts.append((f"not diagnosed ({f.total - sum(f.verdicts.values()):,})", NOT_DIAGNOSED))
        self._set_options("#verdict", verdicts)
        # the label is cleaned log text, never markup; the value stays as stored (it is what the filter matches)
        self._set_options("#device", [(Text(f"{short(clean(d), 30)} ({n:,})") if d != NOT_DIAGNOSED
                                       else f"not named ({n:,})", d) for d, n in f.devices])
        self._set_options("#environment", [(Text(f"{clean(e) if e != NOT_DIAGNOSED else 'not known'} ({n:,})"), e)
                                           for e, n in f.environments])
        self.update_status()

    def _set_options(self, selector: str, options: list[tuple[str | Text, str]]) -> None:
        select = self.query_one(selector, Select)
        value = select.value
        with select.prevent(Select.Changed):
            select.set_options(options)
            if value != Select.NULL and any(v == value for _, v in options):
                select.value = value

    def database_changed(self, new_runs: int) -> None:
        self.new_since_open += new_runs
        self.text_index = None  # new runs may bring new values: LIKE until load_facets reads them again
        self.load(keep=True)
        self.load_facets()

    # -- layout -------------------------------------------------------------------------

    def _fit(self, width: int) -> list[Column]:
        self.id_digits = max(self.id_digits, len(str(max(self.rows, default=1))))
        return fit_columns(width - SCROLLBAR, self.id_digits, *self.speed_widths)

    def _measure(self, rows: list[RunRow]) -> None:
        """Widen the speed columns for these rows' figures (never cut: they are what the list is for)."""
        pp, tg = self.speed_widths
        for row in rows:
            pp = max(pp, len(fmt_tps(row.best_pp)))
            tg = max(tg, len(fmt_tps(row.best_tg)))
        self.speed_widths = (pp, tg)

    def on_resize(self, event: events.Resize) -> None:
        self.refit()
        text, verdict, device, env = PROMPTS["narrow" if event.size.width < NARROW else "wide"]
        self.query_one("#text", Input).placeholder = text
        for sid, prompt in (("#verdict", verdict), ("#device", device), ("#environment", env)):
            self.query_one(sid, Select).prompt = prompt

    def refit(self) -> None:
        """Choose the columns for the screen's width (id, verdict and speeds always;
        the source takes the spare width) and rebuild the table when they change."""
        columns = self._fit(self.size.width or self.capscan.size.width)
        if columns == self.columns:
            return
        self.columns = columns
        table = self.query_one("#runs", DataTable)
        current = self._cursor_run(table)
        table.clear(columns=True)
        for col in columns:
            table.add_column(col.label, key=col.key, width=col.width)
        for row in self.rows.values():
            table.add_row(*self._cells(row), key=str(row.id))
        if current is not None and current in self.rows:
            table.move_cursor(row=table.get_row_index(str(current)), animate=False)

    # -- rendering ----------------------------------------------------------------------

    def _cells(self, row: RunRow) -> list:
        if self.makers_for is not self.columns:
            self.makers, self.makers_for = self._makers(), self.columns
        return [make(row) for make in self.makers]

    def _makers(self) -> list:
        """For each shown column, the function that makes its cell of a run: log text as Text,
        never as markup (a DataTable reads markup in str cells). Made once per set of columns, not
        once per row."""
        widths = {c.key: c.width for c in self.columns}
        time_format = self.capscan.time_format

        def style(row: RunRow) -> str:
            return VERDICT_STYLE.get(row.verdict or "-", "")

        def generic(key: str) -> Callable[[RunRow], Text]:
            column, width = BY_KEY[key], widths[key]
            if column.right:
                return lambda row: Text(column.text(row), justify="right")
            return lambda row: Text(short(column.text(row), width))

        # this screen's own choices: the mark, a coloured verdict, compact times, a source's file name
        cell = {
            "mark": lambda row: self._mark_text(row.id),
            "id": lambda row: Text(str(row.id), style=style(row).replace("bold ", ""), justify="right"),
            "when": lambda row: Text(time_format(row.created_at)),
            "source": lambda row: Text(short(source_name(row.source), widths["source"],
                                             keep_end=is_file_path(row.source))),
            "verdict": lambda row: Text(row.verdict or "-", style=style(row)),
        }
        return [cell[c.key] if c.key in cell else generic(c.key) for c in self.columns]

    def _mark_text(self, run_id: int) -> Text:
        if run_id in self.capscan.marked:
            return Text(str(self.capscan.marked.index(run_id) + 1), style="bold reverse yellow")
        return Text("")

    def marks_changed(self) -> None:
        table = self.query_one("#runs", DataTable)
        for rid in self.rows:
            table.update_cell(str(rid), "mark", self._mark_text(rid))
        self.update_status()

    def update_status(self) -> None:
        parts = []
        shown = len(self.rows)
        if self.matching is not None:
            parts.append(f"{self.matching:,} of {self.total:,} runs" if self.flt.active else f"{self.total:,} runs")
        else:
            parts.append(f"{self.total:,} runs" if not self.flt.active else "counting…")
        if shown:
            parts.append(f"showing {shown:,}" + ("+" if self.more else ""))
        elif self.total:
            parts.append("nothing matches the filter")
        else:
            parts.append("no runs yet: pipe a log in (llama-bench … 2>&1 | capscan)")
        if self.capscan.marked:
            parts.append("marked " + ", ".join(f"#{r}" for r in self.capscan.marked)
                         + ("  (c compares)" if len(self.capscan.marked) >= 2 else ""))
        if self.new_since_open:
            parts.append(f"{self.new_since_open} new since opened")
        self.query_one("#status", Static).update("  ·  ".join(parts))

    # -- events -------------------------------------------------------------------------

    @on(Input.Changed, "#text")
    def _text_changed(self, event: Input.Changed) -> None:
        self._set_filter(text=event.value)

    @on(Input.Submitted, "#text")
    def _text_submitted(self) -> None:
        self.query_one("#runs", DataTable).focus()

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        value = None if event.value == Select.NULL else str(event.value)
        self._set_filter(**{str(event.select.id): value})

    def _set_filter(self, **changes) -> None:
        new = RunFilter(**{**self.flt.__dict__, **changes})
        if new != self.flt:
            self.flt = new
            self.load()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.capscan.open_run(int(event.row_key.value))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = event.data_table
        if self.more and not self.loading_more and event.cursor_row >= table.row_count - SCROLL_AHEAD:
            self.loading_more = True
            self._load(self.flt, self.generation, self.oldest, PAGE_SIZE, True)

    def _cursor_run(self, table: DataTable) -> int | None:
        if not table.row_count:
            return None
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        except Exception:  # noqa: BLE001 - no row under the cursor (empty or refreshing table)
            return None
        return int(key.value) if key and key.value else None

    # -- actions ------------------------------------------------------------------------

    def action_open(self) -> None:
        rid = self._cursor_run(self.query_one("#runs", DataTable))
        if rid is not None:
            self.capscan.open_run(rid)

    def action_mark(self) -> None:
        rid = self._cursor_run(self.query_one("#runs", DataTable))
        if rid is not None:
            self.capscan.toggle_mark(rid)

    def action_unmark(self) -> None:
        self.capscan.clear_marks()

    def action_focus_filter(self) -> None:
        self.query_one("#text", Input).focus()

    def action_leave_filter(self) -> None:
        """From the text filter back to the list, the filter kept (Enter does the same)."""
        self.query_one("#runs", DataTable).focus()

    def action_reload(self) -> None:
        self.load(keep=True)
        self.load_facets()

    def action_clear(self) -> None:
        text = self.query_one("#text", Input)
        if self.focused is text and not text.value:
            self.query_one("#runs", DataTable).focus()
            return
        if not self.flt.active:
            self.query_one("#runs", DataTable).focus()
            return
        text.value = ""
        for sid in ("#verdict", "#device", "#environment"):
            select = self.query_one(sid, Select)
            with select.prevent(Select.Changed):
                select.clear()
        self.flt = RunFilter()
        self.load()
        self.query_one("#runs", DataTable).focus()
