"""A real database for the TUI tests: fixture logs through the real ingest and
diagnose path, with ingestion times pinned so screens are reproducible."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from analyzer.rules.diagnose import diagnose_runs
from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.store.db import open_db

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

# ingestion order -> run ids 1..5
LOGS = (
    "baselines/guest-stock-block-and-json.log",  # 1 capability-downgrade (vm on an M1 Ultra, named by cpu_info)
    "metal/m4-2026-08-host-m1-ultra.log",    # 2 healthy (bare-metal M1 Ultra)
    "shims/lume-shim-apple9-on-m1.log",         # 3 virtualization-overhead (vm on the M1 Ultra, Lume shim)
    "metal/m3-2025-03-intel-iris.log",       # 4 hardware-limit
    "metal/no-metal-rosetta-x86.log",        # 5 no-gpu-offload
)
PINNED = "2026-08-14T09:{:02d}:00+00:00"


def ingest_logs(db_path: Path, logs: tuple[str, ...] | list[str]) -> list[int]:
    db = open_db(db_path)
    ids: list[int] = []
    for rel in logs:
        source = open_input(str(FIXTURES / rel))
        try:
            ids += ingest(db, source, force=True).run_ids
        finally:
            source.close()
    diagnose_runs(db, ids)
    db.conn.close()
    return ids


def pin_times(db_path: Path) -> None:
    conn = sqlite3.connect(db_path)
    with conn:
        for (rid,) in conn.execute("SELECT id FROM runs").fetchall():
            conn.execute("UPDATE runs SET created_at = ? WHERE id = ?", (PINNED.format(rid % 60), rid))
    conn.close()


@pytest.fixture(scope="session")
def template_db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tui-template") / "template.db"
    ids = ingest_logs(path, LOGS)
    assert ids == [1, 2, 3, 4, 5]
    pin_times(path)
    clean = path.with_name("capscan.db")
    conn = sqlite3.connect(path)
    conn.execute("VACUUM INTO ?", (str(clean),))
    conn.close()
    return clean


@pytest.fixture
def tui_db(template_db, tmp_path) -> Path:
    """A fresh copy of the five-run database for each test."""
    path = tmp_path / "capscan.db"
    shutil.copy(template_db, path)
    open_db(path).conn.close()  # WAL mode and migrations, as the CLI leaves it
    return path


async def settle(pilot, rounds: int = 2) -> None:
    """Let workers finish and their messages land."""
    for _ in range(rounds):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def wait_until(pilot, predicate, timeout: float = 10.0) -> bool:
    import time

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        await pilot.pause(0.05)
    return predicate()
