#!/usr/bin/env python3
"""capscan tui benchmark: first screen and filter latency over 100,000 runs.

    python3 bench/tui_bench.py [--runs 100000] [--db PATH] [--keep]

1. Builds a database of ``--runs`` runs (default 100,000) in one transaction:
   a few real fixture logs go through the real ingest + diagnose path, and
   their rows (facts, evidence lines, throughput, diagnosis reports) are the
   templates that are copied, with varied speeds, sources and times, into
   sources/runs/diagnoses/throughput/evidence. Migrations (including the TUI's
   indexes) are those of the real ``open_db``.
2. Runs the real app headless (``App.run_test``) and measures:
   - first screen: from the start of ``import analyzer.tui.app`` (textual
     included) to the runs table showing its first rows;
   - filter: from a key press (or a select change) to the table showing the
     rows of the new filter, for several filters (a text typed key by key
     with the latency of the last key; a text that matches almost nothing,
     so SQLite scans every run; a verdict, a device, an environment, and
     clearing the filter).
3. Its peer, in a fresh process of its own: a bare Textual app with the widgets
   of capscan's runs screen (Header, a text Input, three Selects, a DataTable
   of the same columns, a status line, Footer) that fills its table with the
   same number of constant rows in ``on_mount``, no database, no capscan
   code; measured the same way (the start of ``import textual`` to the rows
   shown). What the first screen cannot go below with Textual, on this machine.
Targets (issue 13): first screen within 0.35 s, a filter within 0.1 s. Prints
each figure beside its target with PASS/FAIL; exit 0 when all pass. A
script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

T_IMPORT = time.perf_counter()
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

FIRST_SCREEN_TARGET_S = 0.35  # issue 13 (issue 6 asked 1 s)
FILTER_TARGET_S = 0.1  # issue 13 (issue 6 asked 0.25 s)
TEMPLATE_LOGS = (
    "metal/m4-2026-08-guest-stock.log",
    "metal/m4-2026-08-host-m1-ultra.log",
    "metal/m4-2026-08-guest-lume-shim.log",
    "metal/m3-2025-03-intel-iris.log",
    "metal/no-metal-rosetta-x86.log",
    "metal/m3-2025-06-paravirtual-apple5.log",
    "metal/m4-2026-09-m5-max.log",
    "metal/m2-2024-03-m2max.log",
    "metal/m2-2024-07-gh-runner-paravirtual.log",
    "metal/m2-2024-10-amd-egpu-intel-mac.log",
    "backends/vulkan-2025-07-venus-guest.log",
    "backends/cuda-2026-03-vram.log",
)
SOURCE_DIRS = ("~/logs/guest", "~/logs/host", "/tmp/ci", "~/bench/2026", "/Volumes/shared/runs")


def build_db(path: Path, n_runs: int, seed: int = 6) -> dict:
    from analyzer.ingest import ingest
    from analyzer.read.reader import open_input
    from analyzer.rules.diagnose import diagnose_runs
    from analyzer.store.db import open_db

    t0 = time.perf_counter()
    db = open_db(path)
    ids = []
    for rel in TEMPLATE_LOGS:
        src = open_input(str(REPO / "tests" / "fixtures" / rel))
        try:
            ids += ingest(db, src, force=True).run_ids
        finally:
            src.close()
    diagnose_runs(db, ids)
    conn = db.conn
    templates = []
    for rid in ids:
        run = conn.execute("SELECT seq, first_line, last_line, program, backend, device_name, apple_family, model, "
                           "facts FROM runs WHERE id = ?", (rid,)).fetchone()
        diag = conn.execute("SELECT verdict, fixable, confidence, environment, host_chip, report, rules_version "
                            "FROM diagnoses WHERE run_id = ?", (rid,)).fetchone()
        tp = conn.execute("SELECT line, test, tok_s, stddev, model, kind, n_prompt, n_gen, n_depth FROM throughput "
                          "WHERE run_id = ?", (rid,)).fetchall()
        ev = conn.execute("SELECT line, kind, text FROM evidence WHERE run_id = ?", (rid,)).fetchall()
        templates.append((run, diag, tp, ev))
    # start from an empty store (same schema) and fill it in one transaction
    rnd = random.Random(seed)
    conn.execute("BEGIN")
    for table in ("evidence", "throughput", "diagnoses", "runs", "sources"):
        conn.execute(f"DELETE FROM {table}")
    runs_per_source = 4
    start = 1_767_225_600  # 2026-01-01 UTC
    sources, runs, diags, tps, evs = [], [], [], [], []
    for i in range(n_runs):
        rid = i + 1
        sid = i // runs_per_source + 1
        when = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(start + i * 240 + rnd.randrange(200)))
        if i % runs_per_source == 0:
            path_s = f"{rnd.choice(SOURCE_DIRS)}/run-{sid:06d}.log"
            sources.append((sid, path_s, 40_000 + rnd.randrange(10_000), f"{sid:064x}", when, 400, 40, 360, 0))
        run, diag, tp, ev = templates[rnd.randrange(len(templates))]
        seq, first, last, program, backend, device, fam, model, facts = run
        runs.append((rid, sid, i % runs_per_source, first, last, program, backend, device, fam, model, when, facts))
        if diag:
            diags.append((rid, *diag, when))
        k = rnd.uniform(0.9, 1.1)
        for line, test, tok_s, stddev, tmodel, kind, n_p, n_g, n_d in tp:
            tps.append((rid, line, test, tok_s * k, stddev, tmodel, kind, n_p, n_g, n_d))
        for line, kind, text in ev:
            evs.append((rid, line, kind, text))
    conn.executemany("INSERT INTO sources (id, path, size, sha256, ingested_at, lines, recognised_lines, "
                     "unrecognised_lines, overlong_lines) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", sources)
    conn.executemany("INSERT INTO runs (id, source_id, seq, first_line, last_line, program, backend, device_name, "
                     "apple_family, model, created_at, facts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)
    # stamped as capscan's writer stamps what it stores (analyzer.store.stamp): a copied claim lists as stored
    from analyzer.store import stamp

    secret = stamp.key(create=True)
    facts_of = {r[0]: r[11] for r in runs}
    diags = [(*d, stamp.stamp(secret, d[0], d[1], int(d[2]), d[4], d[7], facts_of[d[0]].encode()) if secret else None)
             for d in diags]
    conn.executemany("INSERT INTO diagnoses (run_id, verdict, fixable, confidence, environment, host_chip, report, "
                     "rules_version, diagnosed_at, stamp) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", diags)
    conn.executemany("INSERT INTO throughput (run_id, line, test, tok_s, stddev, model, kind, n_prompt, n_gen, "
                     "n_depth) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", tps)
    conn.executemany("INSERT INTO evidence (run_id, line, kind, text) VALUES (?, ?, ?, ?)", evs)
    conn.execute("COMMIT")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return {"runs": len(runs), "sources": len(sources), "diagnoses": len(diags), "throughput": len(tps),
            "evidence": len(evs), "build_s": time.perf_counter() - t0,
            "size_mb": path.stat().st_size / 2**20}


async def measure_bare_textual(n_rows: int, columns: list[str], t_import: float) -> dict:
    """The peer: Textual alone, with the runs screen's widgets and ``n_rows`` constant rows."""
    from textual.app import App
    from textual.containers import Horizontal
    from textual.widgets import DataTable, Footer, Header, Input, Select, Static

    t_imported = time.perf_counter()

    class Bare(App[None]):
        def compose(self):
            yield Header()
            with Horizontal():
                yield Input(placeholder="filter")
                for name in ("verdict", "device", "environment"):
                    yield Select([(name, name)], prompt=name)
            table: DataTable = DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            for col in columns:
                table.add_column(col)
            yield table
            yield Static("status")
            yield Footer()

        def on_mount(self) -> None:
            row = tuple(f"{c.lower()} 1234" for c in columns)
            self.query_one(DataTable).add_rows([row] * n_rows)

    app = Bare()
    async with app.run_test(size=(140, 45)):
        table = app.query_one(DataTable)
        while table.row_count == 0:
            await asyncio.sleep(0.002)
        t_first = time.perf_counter()
    return {"first_screen_s": t_first - t_import, "import_s": t_imported - t_import}


async def measure(path: Path, t_import: float) -> dict:
    from textual.widgets import DataTable, Select

    from analyzer.store.browse import RunFilter
    from analyzer.tui.app import CapscanApp

    t_imported = time.perf_counter()
    app = CapscanApp(path, poll_interval=None)
    out: dict = {"import_s": t_imported - t_import}
    async with app.run_test(size=(140, 45)) as pilot:
        table = app.runs_screen.query_one("#runs", DataTable)
        while table.row_count == 0:
            await asyncio.sleep(0.002)
        t_first = time.perf_counter()
        out["first_screen_s"] = t_first - t_import
        out["first_screen_app_s"] = t_first - app.started
        out["first_rows"] = table.row_count
        out["columns"] = [str(c.label) for c in table.columns.values()]
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.runs_screen

        async def until_shown(flt: RunFilter, t0: float, timeout: float = 30.0) -> float:
            end = time.perf_counter() + timeout
            while not (screen.shown_flt == flt and screen.shown_at >= t0):
                if time.perf_counter() > end:
                    raise TimeoutError(f"filter {flt} never shown")
                await asyncio.sleep(0.001)
            return screen.shown_at - t0

        async def settle() -> None:
            await app.workers.wait_for_complete()
            await pilot.pause()

        cases: list[tuple[str, float, int]] = []

        async def type_text(text: str, label: str) -> None:
            await pilot.press("slash")
            per_key = []
            for n, ch in enumerate(text, 1):
                t0 = time.perf_counter()
                await pilot.press(ch)
                per_key.append(await until_shown(RunFilter(text=text[:n]), t0))
            await settle()
            cases.append((f"{label}: typed '{text}', slowest key", max(per_key), table.row_count))
            # the same word at full speed: only the last key's answer counts
            await pilot.press("escape", "escape")
            await settle()
            await pilot.press("slash", *text[:-1])
            t0 = time.perf_counter()
            await pilot.press(text[-1])
            cases.append((f"{label}: typed '{text}' at full speed, last key", await until_shown(
                RunFilter(text=text), t0), table.row_count))
            await settle()
            await pilot.press("escape", "escape")
            await settle()

        await type_text("ultra", "text, common")
        await type_text("zzq", "text, matches nothing (full scan)")

        async def select(sel_id: str, value: str | None, flt: RunFilter, label: str) -> None:
            widget = screen.query_one(sel_id, Select)
            t0 = time.perf_counter()
            if value is None:
                widget.clear()
            else:
                widget.value = value
            cases.append((label, await until_shown(flt, t0), table.row_count))
            await settle()

        await select("#verdict", "capability-downgrade", RunFilter(verdict="capability-downgrade"),
                     "verdict = capability-downgrade")
        await select("#verdict", None, RunFilter(), "verdict cleared")
        await select("#device", "Apple M1 Ultra", RunFilter(device="Apple M1 Ultra"), "device = Apple M1 Ultra")
        await select("#environment", "vm", RunFilter(device="Apple M1 Ultra", environment="vm"),
                     "device and environment = vm (nothing matches)")
        await select("#device", None, RunFilter(environment="vm"), "environment = vm")
        t0 = time.perf_counter()
        await pilot.press("escape")
        cases.append(("escape clears the filters", await until_shown(RunFilter(), t0), table.row_count))
        await settle()
        # paging: scroll to the end of the first page
        t0 = time.perf_counter()
        table.move_cursor(row=table.row_count - 1)
        while table.row_count <= 200:
            await asyncio.sleep(0.001)
        out["next_page_s"] = time.perf_counter() - t0
        out["filters"] = cases
        # opening a run: detail screen with its run, baseline and remedy plan loaded
        from analyzer.tui.screens.detail import DetailScreen

        t0 = time.perf_counter()
        await pilot.press("enter")
        while not (isinstance(app.screen, DetailScreen) and app.screen.run is not None):
            await asyncio.sleep(0.001)
        out["open_run_s"] = time.perf_counter() - t0
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--db", type=Path, default=None, help="reuse (or create) this database")
    ap.add_argument("--keep", action="store_true", help="keep the generated database")
    ap.add_argument("--bare-textual", metavar="JSON", help=argparse.SUPPRESS)  # the peer's child
    args = ap.parse_args()
    if args.bare_textual:
        spec = json.loads(args.bare_textual)
        print(json.dumps(asyncio.run(measure_bare_textual(spec["rows"], spec["columns"], T_IMPORT))))
        return 0
    tmp = None
    if args.db is None:
        tmp = tempfile.mkdtemp(prefix="capscan-tui-bench-")
        path = Path(tmp) / "tui-bench.db"
    else:
        path = args.db
    built = None
    if not path.exists():
        built = build_db(path, args.runs)
        print(f"built {built['runs']:,} runs ({built['throughput']:,} throughput rows, {built['evidence']:,} "
              f"evidence lines, {built['size_mb']:.0f} MB) in {built['build_s']:.1f} s: {path}")
    # a fresh process measures the import too: run the measurement in a child
    if os.environ.get("CAPSCAN_TUI_BENCH_CHILD") != "1":
        import subprocess

        env = {**os.environ, "CAPSCAN_TUI_BENCH_CHILD": "1"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: capscan's .pyc files, not a compile per run
        subprocess.run([sys.executable, "-c", "import analyzer.tui.app"], env=env, cwd=REPO, check=False)
        proc = subprocess.run([sys.executable, __file__, "--db", str(path)], env=env, capture_output=True,
                              text=True)
        sys.stderr.write(proc.stderr)
        if proc.returncode != 0:
            print(proc.stdout)
            return 2
        result = json.loads(proc.stdout)
        peer = subprocess.run([sys.executable, __file__, "--bare-textual", json.dumps(
            {"rows": result["first_rows"], "columns": result["columns"]})], env=env, capture_output=True, text=True)
        sys.stderr.write(peer.stderr)
        result["bare_textual"] = json.loads(peer.stdout) if peer.returncode == 0 else None
        ok = report(result, path)
        if tmp and not args.keep:
            for p in Path(tmp).iterdir():
                p.unlink()
            os.rmdir(tmp)
        return 0 if ok else 1
    # child: measure and print JSON
    result = asyncio.run(measure(path, T_IMPORT))
    conn = sqlite3.connect(path)
    result["runs"] = conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
    result["sqlite"] = sqlite3.sqlite_version
    conn.close()
    print(json.dumps(result))
    return 0


def report(r: dict, path: Path) -> bool:
    import platform

    ok = True
    print(f"\ncapscan tui over {r['runs']:,} runs  (Python {platform.python_version()}, SQLite {r['sqlite']}, "
          f"{os.cpu_count()} CPUs)")
    rows: list[tuple[str, float, float | None]] = [
        ("first screen (process start of the import -> rows shown)", r["first_screen_s"], FIRST_SCREEN_TARGET_S)]
    bare = r.get("bare_textual")
    if bare:
        rows.append(("  peer: a bare Textual app, the same widgets and rows", bare["first_screen_s"], None))
    for label, secs, _ in r["filters"]:
        rows.append((f"filter: {label}", secs, FILTER_TARGET_S))
    width = max(len(x[0]) for x in rows)
    print(f"{'measure':<{width}}  {'time':>9}  {'target':>7}")
    for label, secs, target in rows:
        if target is None:
            print(f"{label:<{width}}  {secs * 1000:7.1f} ms  {'-':>7}")
            continue
        passed = secs <= target
        ok &= passed
        print(f"{label:<{width}}  {secs * 1000:7.1f} ms  {target:5.2f} s  {'PASS' if passed else 'FAIL'}")
    print(f"(of the first screen: importing textual and the app {r['import_s'] * 1000:.0f} ms, the app itself "
          f"{r['first_screen_app_s'] * 1000:.0f} ms; {r['first_rows']} rows on the first page; the next page "
          f"loaded in {r['next_page_s'] * 1000:.0f} ms; opening a run took {r['open_run_s'] * 1000:.0f} ms)")
    if bare:
        print(f"(of the peer's first screen: importing textual {bare['import_s'] * 1000:.0f} ms, the app "
              f"{(bare['first_screen_s'] - bare['import_s']) * 1000:.0f} ms)")
    print("PASS" if ok else "FAIL")
    return ok


if __name__ == "__main__":
    sys.exit(main())
