"""The runs list's columns, once, for every surface that lists runs: ``capscan runs`` (the fitted
terminal table, the piped TSV, ``--markdown``) and the TUI's runs screen.

A column names its header, its alignment, what it may lose when space is short, and the function
that makes its cell's text from a listed run (``row["device"]``: the store's ``RunRow`` or the
listing's dict, both named by ``analyzer.store.run_list.RUN_FIELDS``). The JSON, NL and CSV outputs
are the stored fields themselves, not these cells."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from analyzer.output.display import fmt_tps, utc_minutes


@dataclass(frozen=True)
class RunColumn:
    key: str
    header: str
    text: Callable[[Any], str]  # the cell as plain text; '-' when absent
    right: bool = False  # numbers: right-aligned, never cut
    logged: bool = False  # log text (a device, a path): made inert before a terminal or a table sees it
    cut_keeps_path_end: bool = False  # cut to fit: a path keeps its file name (the end), other text its start
    tui_width: int = 0  # natural width on the TUI's runs screen; 0: not shown there


def _or_dash(field: str) -> Callable[[Any], str]:
    return lambda row: row[field] or "-"


COLUMNS: tuple[RunColumn, ...] = (
    RunColumn("id", "id", lambda row: str(row["id"]), right=True, tui_width=2),
    RunColumn("when", "when", lambda row: utc_minutes(row["created_at"]), tui_width=12),
    RunColumn("source", "source", _or_dash("source"), logged=True, cut_keeps_path_end=True, tui_width=10),
    RunColumn("program", "program", _or_dash("program"), logged=True, tui_width=11),
    RunColumn("device", "device", _or_dash("device"), logged=True, tui_width=18),
    RunColumn("model", "model", _or_dash("model"), logged=True),
    RunColumn("env", "env", _or_dash("environment"), tui_width=10),
    RunColumn("verdict", "verdict", _or_dash("verdict"), tui_width=23),
    RunColumn("pp", "best pp", lambda row: fmt_tps(row["best_pp"]), right=True, tui_width=9),
    RunColumn("tg", "best tg", lambda row: fmt_tps(row["best_tg"]), right=True, tui_width=8),
)
BY_KEY = {c.key: c for c in COLUMNS}
HEADERS = tuple(c.header for c in COLUMNS)

# To fit a terminal (``capscan runs``), in this order: shorten a column to a width, then drop it;
# id, verdict and the speeds always stay whole. (A piped source's name already says its program
# and time: those columns go before the model.)
TABLE_FIT_STEPS = (("shrink", "source", 24), ("shrink", "device", 24), ("shrink", "model", 24),
                   ("shrink", "source", 20), ("drop", "when", 0), ("drop", "program", 0),
                   ("shrink", "source", 14), ("shrink", "device", 14), ("shrink", "model", 16),
                   ("drop", "env", 0), ("drop", "source", 0), ("drop", "device", 0), ("drop", "model", 0))
# The TUI's narrow screen drops these first (then shrinks the source; see analyzer.tui.model.fit_columns).
TUI_DROP_ORDER = ("program", "device", "when", "env", "source")
