"""Helpers shared by the ingest tests: ingest into a real SQLite file, read
the stored runs back, parse bytes in memory (for the property test), and
compare against tests/fixtures/expected.json, and diagnose fixtures through the whole pipeline."""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path
from typing import Any

from analyzer.ingest import IngestResult, ingest
from analyzer.model import RunFacts, Throughput
from analyzer.parsers import Dispatcher
from analyzer.parsers.scanner import Scanner
from analyzer.read.reader import Input, InputError, PartialInputError, open_input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.runs.assembler import Assembler
from analyzer.runs.builder import RunBuilder
from analyzer.store.db import open_db
from analyzer.store.queries import load_run

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED: dict[str, dict[str, Any]] = json.loads((FIXTURES / "expected.json").read_text())


def is_label(path: Path) -> bool:
    """The field corpus's sidecars and first-sight records are labels, not logs: the sweeps over every
    fixture skip them (tests/rules/test_field_corpus.py reads them)."""
    parts = path.relative_to(FIXTURES).parts
    return parts[0] == "field" and path.suffix == ".json"


FLAGS = ("simdgroup_reduction", "simdgroup_mm", "bfloat", "tensor", "unified_memory")


def ingest_path(db_path: Path, path: str | Path, **kw) -> tuple[IngestResult | None, str | None]:
    """Ingest one file into the database at ``db_path``: (result, error message)."""
    db = open_db(db_path)
    try:
        source = open_input(str(path), keep_raw=kw.get("keep_raw", False))
    except InputError as exc:
        return None, str(exc)
    try:
        return ingest(db, source, **kw), None
    except PartialInputError as exc:
        return exc.result, str(exc)
    except InputError as exc:
        return None, str(exc)
    finally:
        source.close()
        db.conn.close()


def ingest_bytes(db_path: Path, data: bytes, name: str = "<bytes>", **kw) -> IngestResult:
    db = open_db(db_path)
    try:
        return ingest(db, Input(name, io.BytesIO(data), keep_raw=kw.get("keep_raw", False)), **kw)
    finally:
        db.conn.close()


def stored_runs(db_path: Path, run_ids: list[int]) -> list[dict[str, Any]]:
    """Each run as stored: its facts, and its throughput rows in file order."""
    db = open_db(db_path)
    out = []
    try:
        for rid in run_ids:
            run = load_run(db, rid)
            assert run is not None, rid
            rows = db.conn.execute(
                "SELECT test, tok_s, kind, n_prompt, n_gen, line FROM throughput WHERE run_id = ? ORDER BY rowid",
                (rid,)).fetchall()
            out.append({"id": rid, "facts": run.facts, "throughput": rows, "evidence": run.evidence})
    finally:
        db.conn.close()
    return out


def label(test: str, kind: str, n_prompt: int | None, n_gen: int | None) -> str:
    """expected.json names a timing measurement ``pp<N>``/``tg<N>`` (``pp``/``tg`` without a count);
    capscan stores it as test ``prompt``/``generation`` with the count in n_prompt/n_gen. Both the
    phase and the count are compared, so nothing is loosened by the translation."""
    if kind != "timing":
        return test
    if test == "prompt":
        return "pp" + (str(n_prompt) if n_prompt is not None else "")
    if test == "generation":
        return "tg" + (str(n_gen) if n_gen is not None else "")
    return test


def throughput_of(runs: list[dict[str, Any]]) -> list[tuple[str, float]]:
    return [(label(t, k, p, g), v) for r in runs for (t, v, k, p, g, _line) in r["throughput"]]


def facts_summary(facts: RunFacts) -> dict[str, Any]:
    return {
        "device_name": facts.device.name,
        "apple_family": facts.device.apple_family,
        "families": facts.device.families,
        "simdgroup_reduction": facts.capabilities.simdgroup_reduction,
        "simdgroup_mm": facts.capabilities.simdgroup_mm,
        "bfloat": facts.capabilities.bfloat,
        "tensor": facts.capabilities.tensor,
        "unified_memory": facts.device.unified_memory,
        "shim": facts.shim.name if facts.shim else None,
    }


def expected_summary(e: dict[str, Any]) -> dict[str, Any]:
    """A key absent from expected.json means the file does not show it: the parser must leave it empty."""
    return {
        "device_name": e.get("device_name"),
        "apple_family": e.get("apple_family"),
        "families": e.get("families", []),
        **{flag: e.get(flag) for flag in FLAGS},
        "shim": e.get("shim"),
    }


def same_throughput(got: list[tuple[str, float]], want: list[dict[str, Any]], decimals: int = 2) -> bool:
    return [(t, round(v, decimals)) for t, v in got] == [(w["test"], round(w["tok_s"], decimals)) for w in want]


# ---------------------------------------------------------------------------
# in memory: the parsers and the assembly without a database
# ---------------------------------------------------------------------------


def parse_in_memory(data: bytes, chunk: int = 1 << 16) -> list[tuple[RunFacts, list[Throughput]]]:
    """reader-less pipeline: scanner -> dispatcher -> assembly; the runs with their throughput."""
    runs: dict[int, tuple[RunFacts, list[Throughput]]] = {}

    def on_run(run: RunBuilder) -> None:
        runs.setdefault(run.seq, (run.facts, []))

    def on_throughput(run: RunBuilder, rows: list[Throughput]) -> None:
        runs.setdefault(run.seq, (run.facts, []))[1].extend(rows)

    assembler = Assembler(on_run, on_throughput)
    scanner = Scanner(Dispatcher(), assembler.feed)
    for i in range(0, len(data), chunk):
        scanner.feed(data[i:i + chunk])
    scanner.close()
    assembler.finish()
    return [runs[k] for k in sorted(runs)]


def db_bytes(db_path: Path) -> bytes:
    """Every byte SQLite keeps for this database (main file and WAL)."""
    out = b""
    for p in (db_path, Path(str(db_path) + "-wal")):
        if p.exists():
            out += p.read_bytes()
    return out


def count(db_path: Path, sql: str, args: tuple = ()) -> int:
    conn = sqlite3.connect(str(db_path))
    try:
        return conn.execute(sql, args).fetchone()[0]
    finally:
        conn.close()


def diagnosed(tmp_path: Path, *files: str) -> list:
    """Ingest fixture files in order into one database (the earlier ones are baselines), diagnose
    every stored run so peers are known, and return the diagnosed runs of the last file."""
    db = open_db(tmp_path / "diagnosed.db")
    result = None
    for name in files:
        source = open_input(str(FIXTURES / name))
        try:
            result = ingest(db, source, force=True)
        finally:
            source.close()
    assert result is not None, "give at least one fixture"
    all_ids = [r[0] for r in db.conn.execute("SELECT id FROM runs ORDER BY id")]
    diagnose_runs(db, all_ids, refresh_peers=True)
    return diagnose_runs(db, result.run_ids, refresh_peers=True)


def json_invocation(log: bytes, json_rows: bytes) -> bytes:
    """One `llama-bench -o json 2>&1` as it prints: a fixture log's stderr (its Metal block; its own markdown
    table and `build:` footer left out) and then the JSON rows. A JSON output after the table would be another
    invocation, and another run (issue 38)."""
    block = b"".join(line for line in log.splitlines(keepends=True)
                     if line.strip() and not line.startswith((b"|", b"build:")))
    return block + json_rows
