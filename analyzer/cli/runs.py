"""Browsing what is stored: ``runs`` (the list) and ``show`` (one run)."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Iterator, TextIO

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import Options, no_runs_stored, open_existing_db
from analyzer.cli.output import Result, output_options, report_result
from analyzer.output.display import VERDICT_STYLE, short
from analyzer.output.run_columns import BY_KEY, COLUMNS, HEADERS, TABLE_FIT_STEPS
from analyzer.verdicts import VERDICTS


def resolve_run(database, ref: str) -> int:
    """A run reference on the command line: a number, or ``last``/``-1``."""
    from analyzer.store.queries import last_run_id

    if ref in ("last", "-1"):
        rid = last_run_id(database)
        if rid is None:
            raise no_runs_stored(database=database)
        return rid
    from analyzer.store.queries import storable_id

    try:
        rid = int(ref)
    except ValueError:
        raise CapscanError(f"{ref!r} is not a run id (a number, or 'last')") from None
    if not storable_id(rid):
        raise CapscanError(f"no run {rid} (run ids are at most {(1 << 63) - 1})")
    return rid


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
    from analyzer.store.queries import iter_runs
    from analyzer.store.run_list import RUN_COLUMNS

    database = open_existing_db(opts)
    seen: list[str] = []

    def rows() -> Iterator[dict[str, Any]]:
        if database is None:
            return
        from analyzer.pipeline import decide_listing

        listed: Iterable[dict[str, Any]] = iter_runs(database, limit=limit or None, verdict=verdict, text=search,
                                                     instance=instance)
        among = None
        if limit and limit <= 2000:  # a short list: look up the claims of its own rows, not the whole store's
            listed = list(listed)
            among = [r["id"] for r in listed]
        # a stored verdict is a claim: today's rules decide each fixable or downgrade row again
        for row, today in decide_listing(database, listed, lambda r: r["id"], among=among):
            if today is not None:
                row.update(verdict=today.verdict, fixable=today.fixable, environment=today.environment)
                if verdict and row["verdict"] != verdict:
                    continue  # the stored verdict matched --verdict; today's does not
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

        safe = _safe_text()
        write_markdown(out, list(HEADERS), (dict(zip(HEADERS, _cell_values(r, safe), strict=True)) for r in rows()),
                       right=[c.header for c in COLUMNS if c.right])

    return Result(human=human, columns=RUN_COLUMNS, rows=rows(), markdown=markdown, verdicts=seen)


def _chain(first: dict, rest: Iterator[dict]) -> Iterator[dict]:
    yield first
    yield from rest


def _cells(row: dict[str, Any], safe: Callable[[Any], str]) -> dict[str, str]:
    return dict(zip(BY_KEY, _cell_values(row, safe), strict=True))


_TEXTS = tuple((c.text, c.logged) for c in COLUMNS)  # read once: this runs for each of 10^5 rows


def _cell_values(row: dict[str, Any], safe: Callable[[Any], str]) -> list[str]:
    """A run's listed cells, in the columns' order (analyzer.output.run_columns); log text made inert."""
    return [safe(text(row)) if logged else text(row) for text, logged in _TEXTS]


def _safe_text() -> Callable[[Any], str]:
    """tabular.safe_text, remembering its answers: a listing repeats the same few sources,
    programs and devices over thousands of runs."""
    import functools

    from analyzer.output.tabular import safe_text

    return functools.lru_cache(maxsize=4096)(safe_text)


def _write_runs(out: TextIO, rows: Iterator[dict[str, Any]]) -> None:
    """Piped: tab-separated, complete. On a terminal: a table fitted to its width."""
    safe = _safe_text()
    if not out.isatty():
        from analyzer.output.tabular import BATCH_ROWS

        batch = ["\t".join(HEADERS) + "\n"]
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
    widths = {c.key: max([len(c.header)] + [len(cells[c.key]) for cells in ahead]) for c in COLUMNS}
    import shutil

    widths = fit_widths(widths, shutil.get_terminal_size((100, 24)).columns)
    color = not os.environ.get("NO_COLOR")
    out.write(_line({c.key: c.header for c in COLUMNS}, widths, bold=color) + "\n")
    for cells in ahead:
        out.write(_line(cells, widths, color=color) + "\n")
    for row in rows:
        out.write(_line(_cells(row, safe), widths, color=color) + "\n")


def fit_widths(widths: dict[str, int], total: int) -> dict[str, int]:
    """Shorten and drop the least important columns until the table fits in total columns."""
    widths = dict(widths)

    def size() -> int:
        return sum(widths.values()) + 2 * (len(widths) - 1)

    for action, col, to in TABLE_FIT_STEPS:
        if size() <= total:
            break
        if col not in widths:
            continue
        if action == "drop":
            del widths[col]
        else:
            widths[col] = min(widths[col], max(to, len(BY_KEY[col].header), widths[col] - (size() - total)))
    return widths


def _click_style(style: str) -> dict[str, Any]:
    """display.VERDICT_STYLE's words ("bold red", "dim") as click.style's arguments."""
    words = style.split()
    return {"fg": next((w for w in words if w not in ("bold", "dim")), None), "bold": "bold" in words,
            "dim": "dim" in words}


_CLICK_STYLE = {verdict: _click_style(style) for verdict, style in VERDICT_STYLE.items()}  # the report's palette


def _line(cells: dict[str, str], widths: dict[str, int], *, color: bool = False, bold: bool = False) -> str:
    parts = []
    for key, w in widths.items():
        column, text = BY_KEY[key], cells[key]
        if len(text) > w and not column.right:
            # a path keeps its file name (the end); a piped source's name its program (the start)
            text = short(text, w, keep_end=column.cut_keeps_path_end and ("/" in text or "\\" in text))
        padded = text.rjust(w) if column.right else text.ljust(w)
        if bold:
            padded = click.style(padded, bold=True)
        elif color and key == "verdict" and text in _CLICK_STYLE:
            padded = click.style(padded, **_CLICK_STYLE[text])
        parts.append(padded)
    return "  ".join(parts).rstrip()


def empty_runs_notice(database, verdict: str | None, search: str | None, instance: str | None = None) -> str:
    """Why the list is empty: nothing stored at all, or nothing matching the filter."""
    from analyzer.store.paths import resolve_db_file
    from analyzer.store.queries import run_count

    stored = run_count(database) if database else 0
    if not stored:
        where = getattr(database, "path", "") or resolve_db_file(None)  # (None: the default, which does not exist)
        return f"No runs stored yet in {where}. Pipe a log in: llama-bench ... 2>&1 | capscan"
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
    from analyzer.pipeline import diagnose_to_read
    from analyzer.store.queries import load_run

    database = open_existing_db(opts)
    if database is None:
        raise no_runs_stored(opts)
    rid = resolve_run(database, run_ref)
    run = load_run(database, rid)
    if run is None:
        raise CapscanError(f"no run {run_ref}")
    # diagnosed in memory, with its peers as stored now: a reading command writes nothing
    runs_ = [diagnose_to_read(database, run)]
    return report_result(opts, runs_, max_evidence=200, overall=False, doc=run_to_json(runs_[0]),
                         gha=False)
