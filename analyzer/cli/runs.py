"""Browsing what is stored: ``runs`` (the list) and ``show`` (one run)."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterator, TextIO

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import Options, open_existing_db
from analyzer.cli.output import Result, output_options, report_result
from analyzer.output.display import fmt_tps
from analyzer.verdicts import VERDICTS


def resolve_run(database, ref: str) -> int:
    """A run reference on the command line: a number, or ``last``/``-1``."""
    from analyzer.store.queries import last_run_id

    if ref in ("last", "-1"):
        rid = last_run_id(database)
        if rid is None:
            raise CapscanError("no runs stored yet")
        return rid
    from analyzer.store.queries import storable_id

    try:
        rid = int(ref)
    except ValueError:
        raise CapscanError(f"{ref!r} is not a run id (a number, or 'last')") from None
    if not storable_id(rid):
        raise CapscanError(f"no run {rid} (run ids are at most {(1 << 63) - 1})")
    return rid


# The columns people read: key, header, right-aligned. Piped, all of them, complete.
LIST_COLUMNS = (("id", "id", True), ("created_at", "when", False), ("source", "source", False),
                ("program", "program", False), ("device", "device", False), ("model", "model", False),
                ("environment", "env", False),
                ("verdict", "verdict", False), ("best_pp", "best pp", True), ("best_tg", "best tg", True))
# To fit a terminal, in this order: shorten, then drop; id, verdict and the speeds always stay whole.
# (A piped source's name already says its program and time: those columns go before the model.)
FIT_STEPS = (("shrink", "source", 24), ("shrink", "device", 24), ("shrink", "model", 24), ("shrink", "source", 20),
             ("drop", "when", 0), ("drop", "program", 0), ("shrink", "source", 14), ("shrink", "device", 14),
             ("shrink", "model", 16), ("drop", "env", 0), ("drop", "source", 0), ("drop", "device", 0),
             ("drop", "model", 0))
HEADERS = tuple(h for _, h, _ in LIST_COLUMNS)
SAMPLE = 200  # rows read ahead to size the columns; the rest stream


@click.command()
@click.option("--limit", "-n", default=50, show_default=True, help="How many runs (0 = all).")
@click.option("--verdict", default=None, type=click.Choice(VERDICTS), help="Only runs with this verdict.")
@click.option("--search", default=None, help="Only runs whose device, source, program or model contains this text.")
@click.option("--instance", default=None, metavar="NAME",
              help="Only runs imported from this guest's export (`capscan ingest` of `capscan export json`).")
@output_options("db", "formats", "fail_on")
def runs(opts: Options, limit: int, verdict: str | None, search: str | None, instance: str | None) -> Result:
    """List stored runs, newest first.

    On a terminal, a table that fits its width; piped, every column complete,
    tab-separated (or --json, --nl, --csv, --tsv, --markdown). Rows stream."""
    from analyzer.store.queries import RUN_COLUMNS, iter_runs

    database = open_existing_db(opts)
    seen: list[str] = []

    def rows() -> Iterator[dict[str, Any]]:
        if database is None:
            return
        for row in iter_runs(database, limit=limit or None, verdict=verdict, text=search, instance=instance):
            seen.append(row["verdict"] or "unknown")
            yield row

    def human(out: TextIO) -> None:
        stream = rows()
        first = next(stream, None)
        if first is None:
            click.echo(empty_runs_notice(database, verdict, search, instance), err=True)
            return
        _write_runs(out, _chain(first, stream))

    def markdown(out: TextIO) -> None:
        from analyzer.output.tabular import write_markdown

        headers = [h for _, h, _ in LIST_COLUMNS]
        safe = _safe_text()
        write_markdown(out, headers, (_cells(r, safe) for r in rows()), right=[h for _, h, r in LIST_COLUMNS if r])

    return Result(human=human, columns=RUN_COLUMNS, rows=rows(), markdown=markdown, verdicts=seen)


def _chain(first: dict, rest: Iterator[dict]) -> Iterator[dict]:
    yield first
    yield from rest


def _cells(row: dict[str, Any], safe: Callable[[Any], str] | None = None) -> dict[str, str]:
    return dict(zip(HEADERS, _cell_values(row, safe or _safe_text()), strict=True))


def _cell_values(row: dict[str, Any], safe: Callable[[Any], str]) -> tuple[str, ...]:
    """A run's listed cells, in LIST_COLUMNS' order: '-' when absent, inert text, speeds to 2 decimals."""
    return (str(row["id"]), (row["created_at"] or "")[:16].replace("T", " "), safe(row["source"] or "-"),
            safe(row["program"] or "-"), safe(row["device"] or "-"), safe(row["model"] or "-"),
            row["environment"] or "-",
            row["verdict"] or "-", fmt_tps(row["best_pp"]), fmt_tps(row["best_tg"]))


def _safe_text() -> Callable[[Any], str]:
    """tabular.safe_text, remembering its answers: a listing repeats the same few sources,
    programs and devices over thousands of runs."""
    import functools

    from analyzer.output.tabular import safe_text

    return functools.lru_cache(maxsize=4096)(safe_text)


def _write_runs(out: TextIO, rows: Iterator[dict[str, Any]]) -> None:
    """Piped: tab-separated, complete. On a terminal: a table fitted to its width."""
    headers = [h for _, h, _ in LIST_COLUMNS]
    safe = _safe_text()
    if not out.isatty():
        from analyzer.output.tabular import BATCH_ROWS

        batch = ["\t".join(headers) + "\n"]
        for row in rows:
            batch.append("\t".join(_cell_values(row, safe)) + "\n")
            if len(batch) >= BATCH_ROWS:
                out.write("".join(batch))
                batch.clear()
        out.write("".join(batch))
        return
    ahead = []
    for row in rows:
        ahead.append(_cells(row, safe))
        if len(ahead) >= SAMPLE:
            break
    widths = {h: max([len(h)] + [len(c[h]) for c in ahead]) for h in headers}
    import shutil

    widths = fit_widths(widths, shutil.get_terminal_size((100, 24)).columns)
    right = {h for _, h, r in LIST_COLUMNS if r}
    color = not os.environ.get("NO_COLOR")
    out.write(_line({h: h for h in widths}, widths, right, bold=color) + "\n")
    for c in ahead:
        out.write(_line(c, widths, right, color=color) + "\n")
    for row in rows:
        out.write(_line(_cells(row, safe), widths, right, color=color) + "\n")


def fit_widths(widths: dict[str, int], total: int) -> dict[str, int]:
    """Shorten and drop the least important columns until the table fits in total columns."""
    widths = dict(widths)

    def size() -> int:
        return sum(widths.values()) + 2 * (len(widths) - 1)

    for action, col, to in FIT_STEPS:
        if size() <= total:
            break
        if col not in widths:
            continue
        if action == "drop":
            del widths[col]
        else:
            widths[col] = min(widths[col], max(to, len(col), widths[col] - (size() - total)))
    return widths


_STYLE = {"capability-downgrade": ("red", True), "hardware-limit": ("magenta", True),
          "no-gpu-offload": ("yellow", True), "virtualization-overhead": ("cyan", True),
          "healthy": ("green", True), "unknown": (None, False)}


def _line(cells: dict[str, str], widths: dict[str, int], right: set[str], *, color: bool = False,
          bold: bool = False) -> str:
    parts = []
    for h, w in widths.items():
        text = cells[h]
        if len(text) > w and h in ("source", "device", "model", "program", "when", "env"):
            # a path keeps its file name (the end); a piped source's name its program (the start)
            keep_end = h == "source" and ("/" in text or "\\" in text)
            text = ("…" + text[-(w - 1):]) if keep_end else (text[:w - 1] + "…")
        padded = text.rjust(w) if h in right else text.ljust(w)
        if bold:
            padded = click.style(padded, bold=True)
        elif color and h == "verdict" and text in _STYLE:
            fg, b = _STYLE[text]
            padded = click.style(padded, fg=fg, bold=b, dim=text == "unknown")
        parts.append(padded)
    return "  ".join(parts).rstrip()


def empty_runs_notice(database, verdict: str | None, search: str | None, instance: str | None = None) -> str:
    """Why the list is empty: nothing stored at all, or nothing matching the filter."""
    from analyzer.store.queries import run_count

    stored = run_count(database) if database else 0
    if not stored:
        return "No runs stored yet. Pipe a log in: llama-bench ... 2>&1 | capscan"
    flt = " and ".join(x for x in (verdict and f"--verdict {verdict}", search and f"--search {search!r}",
                                   instance and f"--instance {instance!r}") if x)
    return (f"No run matches {flt} ({stored:,} run{'s' if stored != 1 else ''} stored; "
            "`capscan runs` lists them all).")


@click.command()
@click.argument("run_ref", metavar="RUN")
@output_options("db", "formats", "fail_on")
def show(opts: Options, run_ref: str) -> Result:
    """One run: device, capabilities, throughput, findings, evidence lines."""
    from analyzer.output.runjson import run_to_json
    from analyzer.rules.diagnose import diagnose_for_reading
    from analyzer.store.queries import load_run

    database = open_existing_db(opts)
    if database is None:
        raise CapscanError("no runs stored yet")
    rid = resolve_run(database, run_ref)
    run = load_run(database, rid)
    if run is None:
        raise CapscanError(f"no run {run_ref}")
    # diagnosed in memory, with its peers as stored now: a reading command writes nothing
    runs_ = [diagnose_for_reading(database, run)]
    return report_result(opts, runs_, max_evidence=200, overall=False, doc=run_to_json(runs_[0]),
                         gha=False)
