"""Issue 37 item 4: time linear in the input, memory bounded, on the surfaces the issue found.

No test here measures time: work is counted (SQLite virtual-machine steps through
``set_progress_handler``, statements through ``set_trace_callback``, Python line events of one
function) and results are bounded (figures kept, records counted). The timings and peak RSS of
the same inputs, each beside its peer, are in bench/bounds.py."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import cli
from analyzer.ingest import ingest
from analyzer.output.run_report import distinguishing_configs
from analyzer.parsers import probes, tables
from analyzer.read.reader import Input
from analyzer.rules import diagnose as diagnose_mod
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store.db import open_db
from analyzer.store.queries import load_run
from tests.ingest_util import json_invocation

FIX = Path(__file__).resolve().parent.parent / "fixtures"
# the budgets (getattr: on the code before them, the tests fail on their assertions, not on an import)
MAX_BUILDS = getattr(tables, "MAX_BUILDS", 16)
MAX_FAMILIES = getattr(probes, "MAX_FAMILIES", 64)

# llama-bench -o jsonl 2>&1 in a stock guest: the clamped Metal block on stderr, then the rows whose
# cpu_info names the host ("Apple M1 Ultra (Virtual)"): a fixable run (tests/rules/test_compare.py)
STOCK_BLOCK = (FIX / "metal/m4-2026-08-guest-stock.log").read_bytes().split(b"| model")[0]
FIXABLE = STOCK_BLOCK + (FIX / "bench/gemma-12b-stock.jsonl").read_bytes()


@contextmanager
def counted(db) -> Iterator[dict[str, int]]:
    """SQLite's work on this connection while the block runs: VM instructions, and the
    statements that read stored diagnosis reports (what a prediction reads)."""
    n = {"steps": 0, "report_reads": 0, "statements": 0}

    def step() -> int:
        n["steps"] += 1
        return 0

    def trace(sql: str) -> None:
        n["statements"] += 1
        # the reports of many runs (a prediction's read), not one run's (load_run: WHERE run_id = ?)
        if (sql.lstrip().upper().startswith("SELECT") and "report" in sql and "diagnoses" in sql
                and "WHERE run_id = " not in sql):
            n["report_reads"] += 1

    db.conn.set_progress_handler(step, 1)
    db.conn.set_trace_callback(trace)
    try:
        yield n
    finally:
        db.conn.set_progress_handler(None, 0)
        db.conn.set_trace_callback(None)


def _ingest(db, data: bytes, name: str) -> list[int]:
    return ingest(db, Input(name, io.BytesIO(data)), force=True).run_ids


def _store_fixable(path: Path, n: int, baselines: tuple[Path, ...] = ()) -> tuple[object, list[int]]:
    db = open_db(path)
    for p in baselines:
        diagnose_runs(db, _ingest(db, p.read_bytes(), str(p)), refresh_peers=True)
    ids = _ingest(db, FIXABLE * n, "guests.log")
    diagnose_runs(db, ids, refresh_peers=True)
    return db, ids


# ---------------------------------------------------------------------------
# finding 1: predictions read the stored runs once per batch, not once per fixable run
# ---------------------------------------------------------------------------


def test_rediagnosing_stored_fixable_runs_reads_reports_once_per_batch(tmp_path):
    """All the runs of one chip fixable and stored: diagnosing them again read every stored report
    once per fixable run (quadratic); now once per batch, and SQLite's work grows with the runs."""
    work = {}
    for n in (40, 160):
        db, ids = _store_fixable(tmp_path / f"r{n}.db", n)
        assert all(load_run(db, rid).diagnosis.fixable for rid in ids[:3])
        with counted(db) as c:
            runs = diagnose_runs(db, ids)
        assert len(runs) == n and all(r.diagnosis.fixable for r in runs)
        assert c["report_reads"] <= 1, c  # one batch: one read of the stored reports
        work[n] = c["steps"]
        db.conn.close()
    assert work[160] <= 6 * work[40], work  # 4x the runs; quadratic was ~16x


def test_ingesting_fixable_blocks_beyond_a_batch_reads_reports_once_per_batch(tmp_path, monkeypatch):
    """The issue's 4,000 fixable blocks, scaled down by a small batch: each batch of the ingest reads
    the stored reports once (those stored by the batches before it), not once per run."""
    monkeypatch.setattr(diagnose_mod, "BATCH", 20)
    for n in (40, 160):
        db = open_db(tmp_path / f"i{n}.db")
        with counted(db) as c:
            ids = _ingest(db, FIXABLE * n, "guests.log")
            diagnose_runs(db, ids, refresh_peers=True)
        assert len(ids) == n
        batches = -(-n // 20)
        # the refresh pass reads once more; each read is one statement over the runs stored so far
        # (so the work is N * N / BATCH: 8 reads of at most 4,000 runs for the 4,000 blocks)
        assert c["report_reads"] <= batches + 1, (c, batches)
        db.conn.close()


def test_rediagnosing_beside_real_baselines_predicts_once_per_batch(tmp_path):
    """The same with a host and a remedied guest stored: every fixable run gets its prediction,
    from one read of the stored speeds."""
    work = {}
    for n in (40, 160):
        db, ids = _store_fixable(tmp_path / f"b{n}.db", n, tuple(_baselines(tmp_path).values()))
        with counted(db) as c:
            runs = diagnose_runs(db, ids)
        assert all(r.diagnosis.fixable and r.diagnosis.stored()["prediction"] for r in runs)
        assert len({json.dumps(r.diagnosis.stored()["prediction"]) for r in runs}) == 1
        assert c["report_reads"] <= 1, c
        work[n] = c["steps"]
        db.conn.close()
    assert work[160] <= 6 * work[40], work


def _baselines(tmp_path: Path) -> dict[str, Path]:
    """The files of a prediction: a remedied (shim) guest and its bare-metal host of one model (llama
    1B), and the bare-metal host of the model to predict (gemma 12B), all on an M1 Ultra."""
    out = {}
    for name, (log, js) in {"shim": ("metal/m4-2026-08-guest-lume-shim.log", "bench/guest-shim.json"),
                            "host": ("metal/m4-2026-08-host-m1-ultra.log", "bench/host-m1-ultra.json")}.items():
        out[name] = tmp_path / f"{name}.log"
        out[name].write_bytes(json_invocation((FIX / log).read_bytes(), (FIX / js).read_bytes()))
    out["gemma-host"] = FIX / "bench/gemma-12b-host.jsonl"
    return out


def _prediction(db_path: Path) -> list[dict] | None:
    db = open_db(db_path)
    try:
        ids = _ingest(db, FIXABLE, "stock.log")
        run = diagnose_runs(db, ids, refresh_peers=True)[0]
        assert run.diagnosis.fixable is True
        return run.diagnosis.stored().get("prediction")
    finally:
        db.conn.close()


def _ingest_files(db_path: Path, *paths: Path) -> None:
    db = open_db(db_path)
    try:
        for p in paths:
            ids = _ingest(db, p.read_bytes(), str(p))
            diagnose_runs(db, ids, refresh_peers=True)
    finally:
        db.conn.close()


def _export(tmp_path: Path, files: list[Path], instance: str, edit=None) -> Path:
    """Another guest's store of these files, exported by the real CLI (``edit`` changes its runs)."""
    db = tmp_path / f"{instance}.db"
    _ingest_files(db, *files)
    out = tmp_path / f"{instance}.json"
    res = CliRunner().invoke(cli, ["--db", str(db), "export", "json", "--instance", instance, "--out", str(out)])
    assert res.exit_code == 0, res.output
    if edit is not None:
        doc = json.loads(out.read_text())
        edit(doc)
        out.write_text(json.dumps(doc))
    return out


def test_local_baselines_predict_the_remedied_speed(tmp_path):
    """The control: the same files stored here make a prediction (so the imported cases below
    lose it only because the data is imported)."""
    files = _baselines(tmp_path)
    _ingest_files(tmp_path / "local.db", *files.values())
    pred = _prediction(tmp_path / "local.db")
    assert pred and {p["test"] for p in pred} >= {"tg128"}
    assert all(p["from_models"] == ["llama 1B Q4_K - Medium"] for p in pred)


def test_imported_runs_do_not_feed_local_predictions(tmp_path):
    """Another guest's export of the same baselines, imported: reports, not measurements here."""
    export = _export(tmp_path, list(_baselines(tmp_path).values()), "guest-b")
    _ingest_files(tmp_path / "central.db", export)
    assert _prediction(tmp_path / "central.db") is None


def _inflate(doc: dict) -> None:
    """Every figure of the export 20x faster: an edited file (still a plausible speed)."""
    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "tok_s" and isinstance(v, (int, float)):
                    node[k] = v * 20
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(doc)


def test_imported_speeds_beside_local_ones_change_no_prediction(tmp_path):
    """Local baselines and an edited import of the same models: the prediction is the local one."""
    files = _baselines(tmp_path)
    _ingest_files(tmp_path / "local.db", *files.values())
    want = _prediction(tmp_path / "local.db")
    export = _export(tmp_path, [files["shim"], files["gemma-host"]], "guest-c", edit=_inflate)
    _ingest_files(tmp_path / "mixed.db", *files.values())
    _ingest_files(tmp_path / "mixed.db", export)
    assert want and _prediction(tmp_path / "mixed.db") == want


def test_an_imported_fixable_run_gets_no_local_prediction(tmp_path):
    """An imported fixable run is another guest's report: no remedy here, so no remedied speed."""
    files = _baselines(tmp_path)
    stock = tmp_path / "stock.log"
    stock.write_bytes(FIXABLE)
    export = _export(tmp_path, [stock], "guest-d")
    _ingest_files(tmp_path / "central.db", *files.values())
    db = open_db(tmp_path / "central.db")
    try:
        ids = _ingest(db, export.read_bytes(), str(export))
        runs = diagnose_runs(db, ids, refresh_peers=True)
        assert runs and all(r.origin is not None for r in runs)
        assert all("prediction" not in (r.diagnosis.stored() if r.diagnosis else {}) for r in runs)
    finally:
        db.conn.close()


# ---------------------------------------------------------------------------
# finding 2: distinguishing_configs makes one pass per test
# ---------------------------------------------------------------------------


def _lines_run(fn, *args) -> int:
    """Python line events executed inside ``fn`` (and what it calls in its own module): a count of
    the work, the same on every machine."""
    module = fn.__module__
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_globals.get("__name__") == module else None

    sys.settrace(tracer)
    try:
        fn(*args)
    finally:
        sys.settrace(None)
    return count


def _builds(n: int, test: str = "tg128", extra: str = "") -> list[dict]:
    """compare-llama-bench's figures of one test, one per build (``build=bN``)."""
    return [{"test": test, "tok_s": 10.0 + i % 7, "config": f"{extra} build=b{i}".strip()} for i in range(n)]


def _threads(n: int) -> list[dict]:
    """llama-bench -t 1,2,...,n: one test, a figure per thread count, other parameters alike."""
    return [{"test": "pp512", "tok_s": 50.0 + i, "config": f"ngl=99 threads={i + 1} fa=1"} for i in range(n)]


def _mixed(n: int) -> list[dict]:
    """Two tests interleaved, some figures stating a parameter the others do not."""
    out = []
    for i in range(n // 2):
        out.append({"test": "pp512", "tok_s": 80.0, "config": f"build=b{i}" + (" fa=1" if i % 3 == 0 else "")})
        out.append({"test": "tg128", "tok_s": 9.0, "config": f"ub={256 << (i % 3)} build=b{i}"})
    return out


@pytest.mark.parametrize("make", [_builds, _threads, _mixed, lambda n: _builds(n, extra="ngl=99 sm=row")],
                         ids=["builds", "threads", "two-tests", "builds-with-common-params"])
def test_distinguishing_configs_is_linear_in_the_figures_of_one_test(make):
    small, large = _lines_run(distinguishing_configs, make(200)), _lines_run(distinguishing_configs, make(1600))
    assert large <= 10 * small, (small, large)  # 8x the figures; quadratic was ~64x


def test_distinguishing_configs_names_what_tells_figures_apart():
    """The same answers as before: what varies within a test, None where a test has one figure."""
    tp = [{"test": "pp512", "config": "threads=4 fa=1"}, {"test": "pp512", "config": "threads=8 fa=1"},
          {"test": "tg128", "config": "threads=4 fa=1"}, {"test": "pp512", "config": "threads=8"},
          {"test": "tg32", "config": None}, {"test": "tg32", "config": "fa=1"}]
    assert distinguishing_configs(tp) == ["threads=4 fa=1", "threads=8 fa=1", None, "threads=8", None, "fa=1"]
    assert distinguishing_configs(_builds(3)) == ["build=b0", "build=b1", "build=b2"]
    assert distinguishing_configs(_builds(3, extra="ngl=99")) == ["build=b0", "build=b1", "build=b2"]


# ---------------------------------------------------------------------------
# finding 3: a compare table and a probe JSON keep bounded results, and count what they drop
# ---------------------------------------------------------------------------


def compare_table(builds: int, rows: int, tests: tuple[str, ...] = ("tg128",)) -> bytes:
    """compare-llama-bench's markdown table with ``builds`` t/s columns (tabulate's layout)."""
    head = "| CPU                      | Model         | Test   |" + "".join(f" t/s b{i} |" for i in range(builds))
    sep = "|:-------------------------|:--------------|:-------|" + "-----:|" * builds
    lines = [head + "   Speedup |", sep + "--------:|"]
    for r in range(rows):
        cells = "".join(f" {10 + (i * 7 + r) % 90}.{r % 100:02d} |" for i in range(builds))
        lines.append(f"| Accelerate, Apple M3 Max | llama 1B Q8_0 | {tests[r % len(tests)]} |{cells}      1.01 |")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("builds,rows,tests", [(5000, 4, ("tg128",)), (2000, 6, ("pp512", "tg128", "pp512+tg128")),
                                               (MAX_BUILDS + 1, 40, ("tg128", "pp512"))],
                         ids=["wide-one-test", "wide-three-tests", "one-over-many-rows"])
def test_a_wide_compare_table_keeps_a_bounded_number_of_builds(tmp_path, builds, rows, tests):
    db = open_db(tmp_path / "t.db")
    try:
        res = ingest(db, Input("compare.md", io.BytesIO(compare_table(builds, rows, tests))), force=True)
        run = load_run(db, res.run_ids[0])
        stored = db.conn.execute("SELECT COUNT(*) FROM throughput").fetchone()[0]
    finally:
        db.conn.close()
    assert stored == rows * MAX_BUILDS
    assert {t["config"] for t in run.throughput} == {f"build=b{i}" for i in range(MAX_BUILDS)}
    assert res.rejected == rows * (builds - MAX_BUILDS)  # each dropped figure counted


def test_a_compare_table_within_the_budget_keeps_every_build(tmp_path):
    db = open_db(tmp_path / "t.db")
    try:
        res = ingest(db, Input("compare.md", io.BytesIO(compare_table(3, 2))), force=True)
        assert db.conn.execute("SELECT COUNT(*) FROM throughput").fetchone()[0] == 6
    finally:
        db.conn.close()
    assert res.rejected == 0


def test_a_wide_compare_table_piped_prints_a_bounded_report(tmp_path):
    """Pipe mode, the issue's form: the report names the kept builds and says what was skipped."""
    res = CliRunner().invoke(cli, ["--db", str(tmp_path / "p.db")], input=compare_table(4000, 6))
    assert res.exit_code == 0, res.output
    assert "build=b0" in res.output and f"build=b{MAX_BUILDS}" not in res.output
    assert f"{6 * (4000 - MAX_BUILDS)} record(s) skipped" in res.output


def probe_json(families: int, *, first: int = 1000, extra: str = "") -> bytes:
    fams = ",".join(f'"{first + i}":{"true" if i % 2 == 0 else "false"}' for i in range(families))
    return (f'{{"probe":"capscan-probe","version":1,"device":"Apple Paravirtual device","supports_family":{{{fams}}},'
            f'"max_threadgroup_memory":32768,"has_unified_memory":true{extra}}}\n').encode()


@pytest.mark.parametrize("data,families,dropped", [
    (probe_json(70_000), 70_000, 70_000),
    (probe_json(70_000, first=1001, extra=',"cpu_brand":"Apple M1 Ultra (Virtual)","arch":"arm64"'), 70_000, 70_000),
    (probe_json(20_000) * 6, 20_000, 6 * 20_000),
], ids=["one-huge-probe", "huge-probe-with-host-lines", "six-probes"])
def test_a_probe_json_with_huge_family_lists_keeps_a_bounded_list(tmp_path, data, families, dropped):
    db = open_db(tmp_path / "p.db")
    try:
        res = ingest(db, Input("probe.json", io.BytesIO(data)), force=True)
        runs = [load_run(db, rid) for rid in res.run_ids]
    finally:
        db.conn.close()
    assert runs
    for run in runs:
        assert run.facts.probe is not None and len(run.facts.probe) <= MAX_FAMILIES
        assert len(run.facts.device.families) <= MAX_FAMILIES
    assert res.rejected == dropped - len(res.run_ids) * MAX_FAMILIES


def test_a_real_probe_json_keeps_every_family(tmp_path):
    db = open_db(tmp_path / "p.db")
    try:
        data = (FIX / "probe/capscan-probe-guest.json").read_bytes()
        res = ingest(db, Input("probe.json", io.BytesIO(data)), force=True)
        run = load_run(db, res.run_ids[0])
    finally:
        db.conn.close()
    assert res.rejected == 0
    assert run.facts.probe == {int(k): v for k, v in json.loads(data)["supports_family"].items()}


def _probe_text(families: int) -> bytes:
    """capscan-probe's key=value form, its family lines repeated past any real GPU's, then its last lines."""
    lines = ["probe=capscan-probe 1", "device=Apple Paravirtual device"]
    lines += [f"supports_family.{1000 + i}={'true' if i % 3 else 'false'}" for i in range(families)]
    lines += ["max_threadgroup_memory=32768", "has_unified_memory=true"]
    return ("\n".join(lines) + "\n").encode()


def _four_line(families: int) -> bytes:
    """The Lume/Tart probe with its family/supports_family pair repeated for many families."""
    lines = ["device=Apple Paravirtual device"]
    for i in range(families):
        lines += [f"family={1000 + i}", "supports_family=true"]
    lines.append("max_threadgroup_memory=32768")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize("data,families", [(_probe_text(20_000), 20_000), (_four_line(5_000), 5_000)],
                         ids=["capscan-probe-lines", "lume-four-line-pairs"])
def test_a_text_probe_with_huge_family_lists_keeps_a_bounded_list(tmp_path, data, families):
    """The line forms of a probe: past the budget each family line is counted, and the probe's
    other lines are still read."""
    db = open_db(tmp_path / "p.db")
    try:
        res = ingest(db, Input("probe.txt", io.BytesIO(data)), force=True)
        run = load_run(db, res.run_ids[0])
    finally:
        db.conn.close()
    assert len(res.run_ids) == 1
    assert run.facts.probe is not None and len(run.facts.probe) == MAX_FAMILIES
    assert res.rejected == families - MAX_FAMILIES
    assert run.facts.device.threadgroup_memory == 32768  # the line after the families still read
