"""Live logs and fleets: ``sources``, ``watch``, ``export prometheus|otlp``
and ``db serve`` (issue 14). The modules behind them (sources, watch,
export, dbserve) are imported only when their command runs."""

from __future__ import annotations

import sys
import time
import unicodedata
from pathlib import Path
from typing import TextIO

import click

from analyzer.cli.exits import EXIT_FAIL_ON, EXIT_INTERRUPTED, CapscanError
from analyzer.cli.lazy import PhraseGroup
from analyzer.cli.options import Options, extra_install, no_runs_stored, open_db, open_existing_db, shared_options
from analyzer.cli.output import Result, output_options, text, write, write_atomically
from analyzer.safe_text import clean


def _plain(text: object) -> str:
    """Text for a terminal: control and format characters (escapes, bidi overrides) become '?'."""
    return "".join("?" if unicodedata.category(ch)[0] == "C" else ch for ch in str(text))


def _db_file(opts: Options) -> Path:
    from analyzer.store.paths import resolve_db_path

    return resolve_db_path(opts.db)


def _constant_labels(labels: tuple[str, ...]) -> dict[str, str]:
    from analyzer.fleet.metrics import constant_labels

    try:
        return constant_labels(labels)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--label") from None


def _snapshot(opts: Options, instance: str | None = None, max_age_days: float | None = None):
    """The metrics of the database. Nothing is created: a missing default database is an
    empty snapshot (nothing stored yet), a missing --db/$CAPSCAN_DB file a one-line error."""
    from analyzer.fleet.metrics import Snapshot, collect, label_value

    database = open_existing_db(opts)
    if database is None:
        return Snapshot(instance=label_value(instance)) if instance else Snapshot()
    max_age = _max_age_s(max_age_days)
    return collect(database, instance=instance, max_age_s=max_age)


def _max_age_s(days: float | None) -> float | None:
    """--max-age in seconds: the default 7 days when not given, no limit for 0."""
    from analyzer.fleet.metrics import MAX_AGE_S

    return MAX_AGE_S if days is None else (None if days == 0 else days * 86400)


def fleet_identity(f):
    """--instance and --max-age, for every command that exports metrics."""
    f = click.option("--max-age", "max_age_days", type=click.FloatRange(0, 3650), default=None, metavar="DAYS",
                     help="Leave out runs stored more than DAYS ago (default 7; 0 keeps every run), so a guest "
                          "that went quiet drops out.")(f)
    return click.option("--instance", default=None, metavar="NAME",
                        help="The machine's name on every series (instance label; OTLP service.instance.id); "
                             "default: the host name.")(f)


def _write_prometheus(snap, path: str, const: dict[str, str]) -> None:
    from analyzer.fleet.prometheus import write_textfile

    try:
        write_textfile(snap, path, const)
    except OSError as exc:
        raise CapscanError(f"{path}: cannot write the textfile ({exc.strerror or exc})") from None


# ---------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------


@click.command()
@click.option("--all", "show_all", is_flag=True, help="Also list the known locations where nothing was found.")
@output_options("json")
def sources(opts: Options, show_all: bool) -> Result:
    """The runtime log locations known on this machine (ollama, LM Studio, Jan,
    llama-server under launchd or systemd, brew services), which exist, their
    size and age. `capscan ingest --discover` and `capscan watch` read them."""
    from analyzer.read.sources import discover, human_age, human_size

    now = time.time()
    found = discover()

    shown = [s for s in found if s.exists or show_all]  # every form lists the same locations
    missing = sum(1 for s in found if not s.exists)

    def human(out: TextIO) -> None:
        if not shown:
            click.echo(f"No runtime logs found ({missing} known locations checked; `capscan sources --all` lists "
                       "them).", err=True)
            return
        for s in shown:
            state = f"{human_size(s.size):>10}  {human_age(s.age_seconds(now)):>4}" if s.exists else f"{'missing':>16}"
            out.write(f"{s.runtime:<12} {state}  {_plain(s.path)}   ({_plain(s.via)})\n")
        out.flush()
        if not show_all and missing:
            click.echo(f"({missing} other known locations hold nothing; `capscan sources --all` lists them)", err=True)

    return Result(human=human, doc=[s.to_json(now) for s in shown])


def discovered_paths() -> list[str]:
    from analyzer.read.sources import discover, existing

    return existing(discover())


def ingest_discovered(opts: Options) -> None:
    """``ingest --discover``: the discovered logs, read through watch's cursors
    (a runtime's log keeps growing: each run is stored once, however often
    this runs); prints the new run ids, or with --json one object per run."""
    from analyzer.fleet.watch import Watcher

    targets = discovered_paths()
    if not targets:
        click.echo("capscan: no runtime logs found (`capscan sources --all` lists where capscan looks)", err=True)
        return
    database = open_db(opts)
    watcher = Watcher(database, targets, on_notice=lambda m: click.echo(f"capscan: {_plain(m)}", err=True))
    try:
        runs = watcher.poll(final=True)
    finally:
        watcher.close()
    click.echo(f"capscan: {len(targets)} discovered log(s), {len(runs)} new run(s)", err=True)
    found = [{"path": r.source, "run_id": r.id, "verdict": r.diagnosis and r.diagnosis.verdict} for r in runs]
    write(opts, Result(human=text(*(str(r.id) for r in runs)), doc=found, records=found,
                       columns=("path", "run_id", "verdict"), rows=found))


# ---------------------------------------------------------------------------
# watch
# ---------------------------------------------------------------------------


def _verdict_line(run) -> str:
    f, d = run.facts, run.diagnosis
    from analyzer.output.display import source_span

    where = source_span(clean(run.source or ""), f.first_line, f.last_line)  # one line, cleaned as log text
    what = " / ".join(x or "-" for x in (f.program, f.backend, d and d.environment))
    fixable = " (fixable)" if d and d.fixable else ""
    device = f"  {f.device.name}" if f.device.name else ""
    return _plain(f"run {run.id}  {where}  {what}{device}  {d.verdict if d else 'unknown'}{fixable}")


def _say_what_is_followed(targets: list[str], *, discovered: bool, once: bool, settle: float) -> None:
    """watch's first words on stderr: which logs, what it does with them, how it stops (stdout is
    for the runs; nothing else is printed until a run completes)."""
    which = f"{len(targets)} discovered log(s)" if discovered else f"{len(targets)} log(s)"
    if once:
        click.echo(f"capscan: reading {which} once, storing every complete run:", err=True)
    else:
        click.echo(f"capscan: watching {which}" + ("; new ones are picked up as they appear" if discovered else "")
                   + f"; a run is stored once its log has been quiet {settle:g} s:", err=True)
    for path in targets:
        click.echo(f"capscan:   {_plain(path)}", err=True)
    if not once:
        click.echo("capscan: press Ctrl-C to stop (a restart resumes where it stopped)", err=True)
    sys.stderr.flush()


@click.command()
@click.argument("paths", nargs=-1)
@click.option("--once", is_flag=True, help="Read what is there now, store every complete line, exit.")
@click.option("--interval", type=click.FloatRange(0.01, 3600), default=0.5, show_default=True,
              help="Seconds between two looks at the files.")
@click.option("--settle", type=click.FloatRange(0, 86400), default=5.0, show_default=True,
              help="Store the open run once its file has been quiet this many seconds.")
@click.option("--prometheus", "prom_path", type=click.Path(dir_okay=False), default=None,
              help="Keep this node_exporter textfile current (rewritten after each stored run).")
@click.option("--label", "labels", multiple=True, metavar="NAME=VALUE",
              help="With --prometheus: a label on every series (e.g. guest=NAME); repeatable.")
@click.option("--nl", is_flag=True, help="One JSON event per run on stdout (for log shippers) instead of a line.")
@click.option("--otlp", "otlp_push", is_flag=True,
              help="Push each stored run as an OTLP log record, and the metrics, to OTEL_EXPORTER_OTLP_ENDPOINT "
                   "(extra: capscan[otel]).")
@click.option("--quiet", "-q", is_flag=True, help="Say nothing on stderr at the start (what is followed, how to stop).")
@fleet_identity
@shared_options("db", "fail_on")
def watch(opts: Options, paths: tuple[str, ...], once: bool, interval: float, settle: float,
          prom_path: str | None, labels: tuple[str, ...], nl: bool, otlp_push: bool, quiet: bool,
          instance: str | None, max_age_days: float | None) -> None:
    """Follow logs like `tail -F` (default: the discovered sources), store each
    run as it completes, print one line per new verdict. Restart-safe: where it
    stopped is kept in the database. Ctrl-C exits 130; with --fail-on, the first
    such verdict stops it with exit 1."""
    from analyzer.fleet.watch import Watcher

    const = _constant_labels(labels)
    if otlp_push:
        _check_otlp()
    discover = None
    targets = list(paths)
    if not targets:
        targets = discovered_paths()
        discover = discovered_paths
        if not targets and once:
            click.echo("capscan: no runtime logs found (`capscan sources --all` lists where capscan looks)", err=True)
            return
    database = open_db(opts)
    if not quiet:
        _say_what_is_followed(targets, discovered=discover is not None, once=once, settle=settle)
    if prom_path:
        _write_prometheus(_snapshot(opts, instance, max_age_days), prom_path, const)
    stored = 0
    found: list[str] = []

    def on_runs(runs: list) -> None:
        nonlocal stored
        from analyzer.fleet.events import event_line

        stored += len(runs)
        for run in runs:
            click.echo(event_line(database, run) if nl else _verdict_line(run))
            verdict = run.diagnosis and run.diagnosis.verdict
            if verdict in opts.fail_on:
                found.append(verdict)
        sys.stdout.flush()
        if prom_path:
            try:
                _write_prometheus(_snapshot(opts, instance, max_age_days), prom_path, const)
            except CapscanError as exc:
                click.echo(f"capscan: {exc.format_message()}; will retry after the next run", err=True)
        if otlp_push:
            from analyzer.fleet import otlp

            snap = _snapshot(opts, instance, max_age_days)
            try:
                _push_logs(_events(database, runs), snap, 10.0)
                otlp.push(snap)
            except (CapscanError, otlp.OtlpError) as exc:
                message = exc.format_message() if isinstance(exc, CapscanError) else str(exc)
                click.echo(f"capscan: {message}; the next run is pushed again", err=True)

    def on_notice(message: str) -> None:
        click.echo(f"capscan: {_plain(message)}", err=True)

    watcher = Watcher(database, targets, settle=settle, on_runs=on_runs, on_notice=on_notice, discover=discover)

    def on_term(signum, frame):  # launchd and systemd stop a job with SIGTERM: stop as on Ctrl-C
        raise KeyboardInterrupt

    import signal

    signal.signal(signal.SIGTERM, on_term)
    try:
        if once:
            watcher.poll(final=True)
        else:
            while not found:
                watcher.poll()
                time.sleep(interval)
    except KeyboardInterrupt:
        click.echo(f"capscan: watch stopped; {stored} run(s) stored; a restart resumes where it stopped", err=True)
        sys.exit(EXIT_INTERRUPTED)
    finally:
        watcher.close()
    if found:
        sys.exit(EXIT_FAIL_ON)


# ---------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------


@click.group(cls=PhraseGroup)
def export() -> None:
    """Hand stored results to Prometheus (textfile), an OpenTelemetry endpoint, or a central store (json)."""


@export.command("prometheus")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="The textfile to write, atomically (temp file + rename); default: stdout.")
@click.option("--label", "labels", multiple=True, metavar="NAME=VALUE",
              help="A label on every series (e.g. guest=NAME, for textfiles of several guests); repeatable.")
@fleet_identity
@shared_options("db")
def export_prometheus(opts: Options, out: str | None, labels: tuple[str, ...], instance: str | None,
                      max_age_days: float | None) -> None:
    """Write the node_exporter textfile format: verdicts, speeds, per-token overhead, remedy result."""
    const = _constant_labels(labels)
    snap = _snapshot(opts, instance, max_age_days)
    if out:
        _write_prometheus(snap, out, const)
        click.echo(f"capscan: wrote {out} ({snap.runs} recent run(s))", err=True)
        return
    from analyzer.fleet.prometheus import textfile_text

    sys.stdout.write(textfile_text(snap, const))


def _check_otlp() -> None:
    """The SDK is there and an endpoint is set, before anything is read (one line otherwise)."""
    try:
        from analyzer.fleet import otlp

        otlp.push  # noqa: B018 - the module imports the SDK lazily; check it is there before reading the database
        import opentelemetry.exporter.otlp.proto.http.metric_exporter  # noqa: F401
        import opentelemetry.proto.collector.logs.v1.logs_service_pb2  # noqa: F401
        import opentelemetry.sdk.metrics  # noqa: F401
    except ImportError:
        raise CapscanError("OTLP needs the OpenTelemetry SDK: " + extra_install(
            "otel", "opentelemetry-sdk opentelemetry-exporter-otlp-proto-http")) from None
    if not otlp.endpoint_configured():
        raise CapscanError("set OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318) to say where to push")


def _events(database, runs) -> list[dict]:
    from analyzer.fleet.events import run_event
    from analyzer.output.tabular import finite_json
    from analyzer.store.queries import source_sha256

    return [finite_json(run_event(run, sha256=source_sha256(database, run.source_id))) for run in runs]


def _push_logs(events: list[dict], snap, timeout: float) -> int:
    from analyzer.fleet import otlp, otlp_logs

    try:
        return otlp_logs.push_events(events, otlp.resource_attributes(snap), timeout_s=timeout)
    except otlp.OtlpError as exc:
        raise CapscanError(str(exc)) from None


def _recent_runs(opts: Options, max_age_days: float | None) -> tuple[object, list]:
    """The stored runs the snapshot covers (the newest 1,000 within --max-age), diagnosed."""
    from analyzer.fleet.metrics import RECENT_RUNS, _epoch
    from analyzer.pipeline import diagnose_and_store
    from analyzer.store.queries import recent_run_times

    database = open_existing_db(opts)
    if database is None:
        return None, []
    max_age = _max_age_s(max_age_days)
    oldest = None if max_age is None else time.time() - max_age
    ids = [rid for rid, created in recent_run_times(database, RECENT_RUNS)
           if oldest is None or (_epoch(created) or 0) >= oldest]
    return database, list(diagnose_and_store(database, sorted(ids), refresh_peers=False))


@export.command("otlp")
@click.option("--timeout", type=click.FloatRange(0.1, 600), default=10.0, show_default=True,
              help="Seconds to wait for the endpoint.")
@click.option("--logs", is_flag=True,
              help="Also push each stored run (within --max-age) as an OTLP log record, the --nl event's fields "
                   "as its attributes: no collector needed in the guest.")
@fleet_identity
@shared_options("db")
def export_otlp(opts: Options, timeout: float, logs: bool, instance: str | None, max_age_days: float | None) -> None:
    """Push the same metrics to OTEL_EXPORTER_OTLP_ENDPOINT (OTLP/HTTP; extra: capscan[otel])."""
    _check_otlp()
    from analyzer.fleet import otlp

    snap = _snapshot(opts, instance, max_age_days)
    try:
        points = otlp.push(snap, timeout_s=timeout)
    except otlp.OtlpError as exc:
        raise CapscanError(str(exc)) from None
    click.echo(f"capscan: pushed {points} data point(s) from {snap.runs} recent run(s)", err=True)
    if logs:
        database, runs = _recent_runs(opts, max_age_days)
        sent = _push_logs(_events(database, runs), snap, timeout) if runs else 0
        click.echo(f"capscan: pushed {sent} run event(s) as OTLP log records", err=True)


@export.command("json")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="The file to write, atomically (temp file + rename); default: stdout.")
@click.option("--since", default=None, metavar="WHEN",
              help="Only runs stored at or after WHEN: a date or time (2026-12-01, 2026-12-01T08:00Z) or an age "
                   "(30m, 24h, 7d). Default: every run.")
@click.option("--instance", default=None, metavar="NAME",
              help="This machine's name in each run's origin (as on the metrics); default: the host name.")
@shared_options("db")
def export_json(opts: Options, out: str | None, since: str | None, instance: str | None) -> None:
    """Every stored run with its origin, for one central store: `capscan ingest` reads it back as runs."""
    from analyzer.fleet.export_json import parse_since, write_export
    from analyzer.fleet.metrics import default_instance, label_value

    if since is not None:
        try:
            since = parse_since(since)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--since") from None
    name = label_value(instance) if instance else default_instance()
    database = open_existing_db(opts)
    if database is None:
        raise no_runs_stored(opts)
    if out is None:
        n = write_export(database, sys.stdout, instance=name, since=since)
    else:
        n = write_atomically(out, lambda f: write_export(database, f, instance=name, since=since),
                             prefix=".capscan-export-")
    click.echo(f"capscan: exported {n:,} run(s) of {_plain(name)}" + (f" to {_plain(out)}" if out else ""), err=True)


# ---------------------------------------------------------------------------
# db serve
# ---------------------------------------------------------------------------


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8001, show_default=True, help="Port to listen on.")
@click.option("--with-raw", is_flag=True, help="Also serve the kept raw logs (sources.raw_gzip: prompts and answers).")
@shared_options("db")
def db_serve(opts: Options, host: str, port: int, with_raw: bool) -> None:
    """Browse the database in Datasette, read-only (extra: capscan[datasette])."""
    import os

    path = _db_file(opts)
    if not os.path.isfile(path):  # never created, never migrated: serving changes nothing
        named = " (from --db)" if opts.db else " (from $CAPSCAN_DB)" if os.environ.get("CAPSCAN_DB") else ""
        raise CapscanError(f"no database at {path}{named} yet: nothing stored (pipe a log in first)")
    try:
        import datasette.app  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise CapscanError("db serve needs Datasette: " + extra_install("datasette", "datasette")) from None
    from analyzer.fleet import dbserve
    from analyzer.store.db import StoreError, guard_file

    try:
        guard_file(str(path))  # a trigger or view in the file is code: never served
    except StoreError as exc:
        raise CapscanError(str(exc)) from None
    raw = "" if with_raw else "; raw logs hidden (--with-raw serves them)"
    click.echo(f"capscan: serving {path} read-only at http://{host}:{port}/{raw} (Ctrl-C stops)", err=True)
    dbserve.serve(Path(path), host=host, port=port, with_raw=with_raw)
