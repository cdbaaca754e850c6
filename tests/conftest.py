"""Test isolation: no test ever touches the user's real database or home."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent


def _ignored_signals_reach_no_child() -> None:
    """A suite started with signals ignored (a background job of a script, nohup, some CI runners) hands
    that on to every child it starts, and a capscan child then never sees the Ctrl-C, hang-up or
    termination a test sends it. A handler that does nothing keeps them ignored here, and a caught
    signal is reset to its default in an exec'd child."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
        if signal.getsignal(sig) is signal.SIG_IGN:
            signal.signal(sig, lambda *_: None)


_ignored_signals_reach_no_child()

# The per-fixture sweeps: each runs once per bundled log. The floors run (`make test-floors`, which
# asks whether the declared minimum library versions work) keeps one fixture in CAPSCAN_SWEEP_SHARE of
# each; the README's test command runs them all.
_SWEEPS = ("tests/parsers/test_scanner.py::test_fixture_events_do_not_depend_on_chunking",
           "tests/output/test_json_schema.py::test_diagnose_and_show_json_of_every_bundled_log_obey_the_printed_schema",
           "tests/ingest/test_facts_typed.py::test_built_facts_are_strictly_typed_and_load_back_equal",
           "tests/output/test_styled_plain.py::test_plain_report_is_what_rich_prints")


def pytest_collection_modifyitems(config, items):
    share = int(os.environ.get("CAPSCAN_SWEEP_SHARE") or 1)
    if share <= 1:
        return
    seen: dict[str, int] = {}
    kept, dropped = [], []
    for item in items:
        sweep = item.nodeid.split("[", 1)[0]
        if sweep in _SWEEPS:
            seen[sweep] = seen.get(sweep, -1) + 1
            if seen[sweep] % share:
                dropped.append(item)
                continue
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("CAPSCAN_DB", str(home / "capscan-test.db"))
    monkeypatch.delenv("NO_COLOR", raising=False)
    yield


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "capscan.db"


def run_capscan(*args: str, input: bytes | str | None = None, db: Path | None = None,
                env: dict | None = None, check: bool = False) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess (python -m analyzer)."""
    cmd = [sys.executable, "-m", "analyzer"]
    if db is not None:
        cmd += ["--db", str(db)]
    cmd += list(args)
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if isinstance(input, str):
        input = input.encode()
    proc = subprocess.run(cmd, input=input if input is not None else b"", capture_output=True, env=full_env,
                          cwd=REPO, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"capscan {args} failed rc={proc.returncode}: {proc.stderr.decode()}")
    return proc
