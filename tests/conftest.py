"""Test isolation: no test ever touches the user's real database or home."""

from __future__ import annotations

import gc
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest
from click.testing import CliRunner

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

# Where tmp_path lives: a RAM-backed file system when the machine has a roomy one. The suite creates
# thousands of SQLite stores, and on a disk each creation and close waits for fsync (half of a new
# store's cost here); the tests' files are the same either way. --basetemp given still wins.
_RAM_DIR, _RAM_ROOM = "/dev/shm", 2 * 2**30


@pytest.hookimpl(tryfirst=True)  # before pytest's tmp_path factory reads --basetemp
def pytest_configure(config):
    if config.option.basetemp or hasattr(config, "workerinput"):  # an xdist worker gets its share from the controller
        return
    try:
        room = os.statvfs(_RAM_DIR)
    except OSError:
        return
    if room.f_bavail * room.f_frsize < _RAM_ROOM or not os.access(_RAM_DIR, os.W_OK | os.X_OK):
        return
    base = tempfile.mkdtemp(prefix="capscan-tests-", dir=_RAM_DIR)
    config.option.basetemp = base
    config.add_cleanup(lambda: shutil.rmtree(base, ignore_errors=True))

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
    monkeypatch.delenv("COLUMNS", raising=False)  # piped output honours it (issue 41): none from the runner's shell
    yield


@pytest.fixture
def db_path(tmp_path) -> Path:
    return tmp_path / "capscan.db"


def run_capscan(*args: str, input: bytes | str | None = None, db: Path | None = None,
                env: dict | None = None, check: bool = False, process: bool = False,
                cwd: Path = REPO) -> subprocess.CompletedProcess:
    """The CLI as `capscan` runs it, in this process: ``main()`` itself (its exit codes, its one-line errors,
    the SafeTextStream around stdout and stderr) under click's CliRunner isolation (argv, stdin, stdout,
    stderr and the environment swapped for the call): ~12 ms a short command here, against ~270 ms for a new
    interpreter.
    ``process=True`` starts a real one (``python -m analyzer``) for what only a process shows: signals,
    pipes and descriptors, start-up imports, the interpreter's own exit. ``env`` is laid over this
    process's environment (a value of None unsets the variable)."""
    cmd = ["--db", str(db)] if db is not None else []
    cmd += list(args)
    if isinstance(input, str):
        input = input.encode()
    if process:
        full_env = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
        proc = subprocess.run([sys.executable, "-m", "analyzer", *cmd], input=input if input is not None else b"",
                              capture_output=True, env=full_env, cwd=cwd, timeout=300)
    else:
        proc = _in_process(cmd, input or b"", env, cwd)
    if check and proc.returncode != 0:
        raise AssertionError(f"capscan {args} failed rc={proc.returncode}: {proc.stderr.decode()}")
    return proc


def _in_process(argv: list[str], input: bytes, env: dict | None, cwd: Path) -> subprocess.CompletedProcess:
    from analyzer.cli import main

    old_argv, old_cwd = sys.argv, os.getcwd()
    # a command may install its own (watch: SIGTERM stops it as Ctrl-C does); they end with the command
    old_handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    # a buffered reader over the bytes, as a pipe's stdin is (peek() is how capscan tells an empty pipe)
    with CliRunner().isolation(input=io.BufferedReader(io.BytesIO(input)), env=env) as (out, err, _):
        sys.argv = ["capscan", *argv]
        os.chdir(cwd)  # relative paths mean what they would to a process started there
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if isinstance(exc.code, str):
                sys.stderr.write(exc.code + "\n")
        except Exception:  # noqa: BLE001 - what the interpreter does with it: the traceback on stderr, exit 1
            sys.stderr.write(traceback.format_exc())
            code = 1
        finally:
            sys.argv = old_argv
            os.chdir(old_cwd)
            for sig, handler in old_handlers.items():
                signal.signal(sig, handler)
            # what a process's exit does: the command's objects go, and with them its SQLite connections
            # (closing the last one checkpoints the WAL and removes -wal and -shm, as tests of the files expect)
            gc.collect()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
        return subprocess.CompletedProcess(["capscan", *argv], code, out.getvalue(), err.getvalue())
