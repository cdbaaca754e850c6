"""What the screens show, computed without textual: time and number formats,
the capability matrix, throughput bars."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from analyzer import chips

if TYPE_CHECKING:
    import sqlite3

    from analyzer.model import StoredRun
    from analyzer.store.browse import RunFilter, RunRow, TextIndex

# Shared with analyzer.output.report through analyzer.output.display, which imports nothing
# heavy (analyzer.output.report itself would cost the first screen ~300 ms).
from analyzer.output.display import VERDICT_STYLE, fmt_tps, short, utc_minutes  # noqa: E402,F401
from analyzer.output.run_columns import COLUMNS, TUI_DROP_ORDER  # noqa: E402

TimeFormat = Callable[[str], str]


def compact(now: dt.datetime) -> TimeFormat:
    """'Aug 14 09:05' within the year of ``now`` (the app's clock, pinned in
    tests), else '2025-08-14'; UTC, as stored."""
    def fmt(created_at: str) -> str:
        try:
            t = dt.datetime.fromisoformat(created_at)
        except (TypeError, ValueError):
            return utc_minutes(created_at)
        if t.tzinfo is not None:
            t = t.astimezone(dt.timezone.utc)
        return t.strftime("%b %d %H:%M") if t.year == now.year else t.strftime("%Y-%m-%d")
    return fmt


def relative_to(now: dt.datetime) -> TimeFormat:
    """A formatter relative to a fixed clock: '5 min ago', '3 h ago', else the date."""
    def fmt(created_at: str) -> str:
        try:
            t = dt.datetime.fromisoformat(created_at)
        except (TypeError, ValueError):
            return utc_minutes(created_at)
        if t.tzinfo is None:
            t = t.replace(tzinfo=dt.timezone.utc)
        secs = (now - t).total_seconds()
        if 0 <= secs < 60:
            return "just now"
        if 0 <= secs < 3600:
            return f"{int(secs // 60)} min ago"
        if 0 <= secs < 86400:
            return f"{int(secs // 3600)} h ago"
        return utc_minutes(created_at)
    return fmt


def source_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1] or path


def is_file_path(path: str | None) -> bool:
    """A stored source that is a file's path (its name is at the end), not a pipe's name (its
    program at the start: ``llama-bench · llama 1B Q4_K_M · 2026-12-02 11:40``)."""
    if not path:
        return False
    return "/" in path or "\\" in path or " · " not in path


def yes_no(value: bool | None) -> str:
    return "?" if value is None else ("yes" if value else "no")


# -- capability matrix ---------------------------------------------------------------

CAP_ROWS = (
    ("simdgroup_reduction", "simdgroup reduction", "Apple7 or Metal3"),
    ("simdgroup_mm", "simdgroup matrix mul", "Apple7"),
    ("bfloat", "bfloat", "Apple6 or Metal3"),
    ("tensor", "tensor API", "Apple10 (M5)"),
)


def family_allows(apple: int | None, metal: int | None, cap: str) -> bool | None:
    """What llama.cpp's Metal backend enables for a device answering these
    families (ggml-metal-device.m's supportsFamily gates)."""
    if apple is None and metal is None:
        return None
    a, m = apple or 0, metal or 0
    if cap == "simdgroup_reduction":
        return a >= 1007 or m >= chips.METAL3
    if cap == "simdgroup_mm":
        return a >= 1007
    if cap == "bfloat":
        return a >= 1006 or m >= chips.METAL3
    if cap == "tensor":
        return a >= 1010
    return None


@dataclass
class HostInfo:
    chip: str | None
    family: int | None
    basis: str  # where we know it from, in words


def host_info(run: StoredRun, baseline: StoredRun | None) -> HostInfo:
    from analyzer.diagnosis import UNDIAGNOSED

    diag = run.diagnosis or UNDIAGNOSED
    chip = diag.host_chip
    fam = diag.host_family or chips.chip_family(chip)
    if fam:
        where = "this run" if diag.environment == "bare-metal" else "named in the guest's log"
        return HostInfo(chip, fam, where)
    if baseline is not None:
        bdiag = baseline.diagnosis or UNDIAGNOSED
        bchip = bdiag.host_chip or baseline.facts.device.name
        bfam = bdiag.host_family or chips.chip_family(bchip) or baseline.facts.device.apple_family
        if bfam:
            return HostInfo(bchip, bfam, f"bare-metal run {baseline.id} of the same model")
    return HostInfo(None, None, diag.fixable_reason or "the log does not name the host chip")


def capability_matrix(run: StoredRun, host: HostInfo) -> list[dict[str, Any]]:
    """Rows of: capability, what the device reported, what the host chip
    supports, what the runtime turned on; with a status per row."""
    from analyzer.diagnosis import UNDIAGNOSED

    f = run.facts
    diag = run.diagnosis or UNDIAGNOSED
    apple = f.device.apple_family
    metal = max((c for c in f.device.families if 5001 <= c <= 5999), default=None)
    runtime = diag.capabilities or f.capabilities.as_dict()
    inferred = set(diag.capabilities_inferred)
    reported_fam = ", ".join(chips.family_name(c) for c in ([apple] if apple else []) + ([metal] if metal else []))
    shim = f"shim {f.shim.name}" + (f" (max {chips.family_name(f.shim.apple_family_max)})"
                                    if f.shim.apple_family_max else "") if f.shim else "no shim"
    rows = [{
        "capability": "GPU family",
        "device": reported_fam or "not printed",
        "host": (chips.family_name(host.family) + (f" ({host.chip})" if host.chip else "")) if host.family else "?",
        "runtime": shim,
        "status": "clamped" if apple and host.family and apple < host.family else "",
    }]
    for key, label, needs in CAP_ROWS:
        dev = family_allows(apple, metal, key)
        hst = family_allows(host.family, None, key) if host.family else None
        on = runtime.get(key)
        status = ""
        if hst and on is False:
            status = "downgraded"
        elif hst is False and on is False:
            status = "not on this chip"
        elif on:
            status = "on"
        rows.append({
            "capability": label,
            "needs": needs,
            "device": yes_no(dev),
            "host": yes_no(hst),
            "runtime": ("on" if on else "off" if on is False else "?") + (" (inferred)" if key in inferred else ""),
            "status": status,
        })
    return rows


# -- throughput ----------------------------------------------------------------------

def bar(value: float | None, scale: float, width: int = 24) -> str:
    """A horizontal bar with eighth-block resolution."""
    if value is None or scale <= 0 or math.isinf(value) or value != value:
        return ""
    frac = max(0.0, min(1.0, value / scale))
    eighths = round(frac * width * 8)
    full, part = divmod(eighths, 8)
    return "█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")



# -- the runs list's columns ----------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int


# Display order and natural widths (analyzer.output.run_columns, shared with `capscan runs`), after
# the mark column (the runs marked for compare); id, verdict and the best speeds always stay; the
# source takes whatever width is left.
RUN_COLUMNS = (Column("mark", " ", 1),) + tuple(Column(c.key, c.header, c.tui_width) for c in COLUMNS if c.tui_width)
DROP_ORDER = TUI_DROP_ORDER  # first dropped first
FLEX = "source"
FLEX_WANT = 18  # below this the program column makes room for the source
FLEX_MAX = 120
# the spare width goes to the device first (once the source has FLEX_WANT), up to this ("Apple Paravirtual
# device", "NVIDIA GeForce RTX 4090" whole), then to the source: a wide screen cut the device while the
# source took 100 columns (issue 41)
DEVICE_WANT = 26
CELL_PADDING = 2  # DataTable: one space either side of each cell


SOURCE_MIN = 8  # the source column shrinks to this before it is dropped
SHRINK_FIRST = ("env", "source")  # before dropping these, shrink the source if that is enough


def fit_columns(available: int, id_width: int = 2, pp_width: int = 0, tg_width: int = 0) -> list[Column]:
    """The columns that fit in ``available`` cells, in display order; the
    source column (at least its natural width) takes the spare width.

    id, verdict and the best speeds come first: they are as wide as their widest cell
    (``id_width``, ``pp_width``, ``tg_width``: the widest the list has shown), whatever
    that costs the others, which shrink (the source) or are dropped."""
    wants = {"id": id_width, "pp": pp_width, "tg": tg_width}
    cols = {c.key: Column(c.key, c.label, max(c.width, wants.get(c.key, 0))) for c in RUN_COLUMNS}
    shown = list(cols)

    def used() -> int:
        return sum(cols[k].width + CELL_PADDING for k in shown)

    for key in DROP_ORDER:
        if used() <= available:
            break
        if key in SHRINK_FIRST and FLEX in shown and used() - cols[FLEX].width + SOURCE_MIN <= available:
            cols[FLEX] = Column(FLEX, cols[FLEX].label, available - (used() - cols[FLEX].width))
            break  # a few cells short: the source shrinks rather than the env or the source itself goes
        shown.remove(key)
    if "program" in shown and available - used() + cols[FLEX].width < FLEX_WANT:
        shown.remove("program")  # which file a run came from says more than llama-bench vs llama.cpp
    out = [cols[k] for k in shown]
    if "device" in shown:
        source_first = max(0, FLEX_WANT - cols[FLEX].width) if FLEX in shown else 0  # the source keeps a name
        grow = min(max(0, available - used() - source_first), DEVICE_WANT - cols["device"].width)
        if grow > 0:
            cols["device"] = Column("device", cols["device"].label, cols["device"].width + grow)
            out[shown.index("device")] = cols["device"]
    if FLEX in shown:
        spare = max(0, available - used())
        flex = cols[FLEX]
        out[shown.index(FLEX)] = Column(flex.key, flex.label, min(FLEX_MAX, flex.width + spare))
    return out


# -- the runs list's rows ---------------------------------------------------------------------


def page_rows(conn: sqlite3.Connection, flt: RunFilter, *, before: int | None, limit: int,
              index: TextIndex | None = None) -> list[RunRow]:
    """One page of the runs list, each stored verdict that claims something (fixable, the downgrade, older
    rules) decided again with today's rules (analyzer.pipeline.decide_listing), as `capscan runs`
    lists it. A row keeps its place in a filtered page even when today's verdict differs from the filter's:
    the page is shown as it is today, and paging by id goes on unchanged."""
    from dataclasses import replace

    from analyzer.pipeline import decide_listing
    from analyzer.safe_text import clean
    from analyzer.store.browse import page
    from analyzer.store.db import Database

    rows = page(conn, flt, before=before, limit=limit, index=index)
    out = []
    for row, today in decide_listing(Database(conn), rows, lambda r: r.id, among=[r.id for r in rows]):
        if today is not None:
            env = today.environment
            row = replace(row, verdict=clean(today.verdict or "unknown"), fixable=today.fixable,
                          environment=clean(env) if isinstance(env, str) else None)
        out.append(row)
    return out
