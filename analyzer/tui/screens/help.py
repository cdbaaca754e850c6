"""`?`: the keys of every screen and what each screen answers."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    ("everywhere", (
        ("?", "this help"),
        ("escape", "back out (close help, leave a run or a comparison, clear the filter)"),
        ("q", "quit"),
        ("mouse", "click a row to open it, click the footer keys, scroll with the wheel"),
    )),
    ("runs", (
        ("↑ ↓ pgup pgdn", "move; more rows load as you reach the end"),
        ("enter", "open the run"),
        ("space", "mark / unmark the run (up to three)"),
        ("c", "compare the marked runs"),
        ("u", "unmark all"),
        ("/", "filter by text: device, source, program, model, verdict, or a run id"),
        ("esc ↓ enter", "in the filter: back to the list, the filter kept"),
        ("tab", "move to the verdict, device and environment filters"),
        ("r", "reload now (new runs also appear by themselves)"),
    )),
    ("run detail", (
        ("space", "mark / unmark this run"),
        ("c", "compare the marked runs"),
        ("y", "copy the remedy commands"),
        ("n / p", "next / previous run in the list"),
    )),
    ("compare", (
        ("x", "swap A and B (with three runs: host against stock or against remedied)"),
    )),
)

SCREENS = (
    "Runs: every stored run, newest first, coloured by verdict, with its best prompt (pp) and generation (tg) "
    "speed. Another capscan writing to the same database shows up here within two seconds.",
    "Run detail: the verdict and its reason; the capability matrix (what the device reported, what the host chip "
    "supports, what llama.cpp turned on); findings with their evidence lines; throughput against the host; the "
    "remedy plan.",
    "Compare: two marked runs side by side (capability diff, B/A per test, per-token overhead); three runs of one "
    "model (stock guest, remedied guest, host) add the gap decomposition: how much of the guest's lost time per "
    "token the downgrade explains, and how much is the virtual GPU's own cost.",
)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "close"),
        Binding("question_mark", "app.pop_screen", "close", show=False),
    ]

    def compose(self) -> ComposeResult:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for section, keys in KEYS:
            table.add_row(Text(section, style="bold underline"), "")
            for key, what in keys:
                table.add_row("  " + key, what)
            table.add_row("", "")
        with VerticalScroll(id="help"):
            yield Static(Text("capscan tui", style="bold"), id="help-title")
            yield Static(table)
            for para in SCREENS:
                yield Static(para, classes="para")
            yield Static(Text("escape or ? closes this help", style="dim"))
