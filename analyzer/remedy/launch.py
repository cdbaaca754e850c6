"""Run a command with the interposer injected, pass its output through to the
terminal while the same lines stream into capscan's parsers, store the new
run(s) linked to the stock run, and verify the fix from the new log.

Only the child's environment changes: the injection variable
(DYLD_INSERT_LIBRARIES or LD_PRELOAD) and CAPSCAN_METAL_APPLE_FAMILY_MAX.
"""

from __future__ import annotations

import os
import queue
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from analyzer.remedy import platform as plat
from analyzer.remedy.check import Check, failed, passed
from analyzer.store import remedy_records as records

if TYPE_CHECKING:
    from analyzer.store.db import Database

RELATION = "remedy-run"
GOOD_VERDICTS = ("healthy", "virtualization-overhead")
LOADER_ERRORS = re.compile(
    r"could not load inserted library|terminating because inserted dylib|incompatible architecture|"
    r"from LD_PRELOAD cannot be preloaded|into hardened process", re.IGNORECASE)
PIECE = 1 << 20  # the most read from the child's pipes at once
QUEUE_PIECES = 16  # pieces waiting for the parsers (at most 16 MiB)
GRACE_S = 3.0  # after a forwarded Ctrl-C, then after SIGTERM, before the next signal
SHIM_TROUBLE = re.compile(r"\[capscan-interposer\] (disabled|inactive|interposing is disabled) ")


class _LineStream:
    """What ingest reads: the child's stderr live, line by line, then its stdout.

    llama.cpp writes its device block to stderr (unbuffered) and results to
    stdout (block-buffered in a pipe, so it often arrives in one piece at exit).
    Reading stderr first and stdout after is the order `2>&1` shows in a pipe,
    and keeps benchmark rows attached to the run whose device printed them.
    stdout is spooled (memory, then a temporary file) until stderr ends.
    """

    def __init__(self) -> None:
        # bounded: a child faster than the parsers waits on its pipe instead of filling memory
        self._q: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUE_PIECES)
        self._abandoned = threading.Event()
        self._live_open = True
        self._held = tempfile.SpooledTemporaryFile(max_size=8 << 20)  # noqa: SIM115 - lives as long as the reader
        self._held_lock = threading.Lock()
        self._held_done = threading.Event()
        self._rewound = False

    def put(self, line: bytes) -> None:
        self._put(line)

    def live_done(self) -> None:
        self._put(None)

    def _put(self, item: bytes | None) -> None:
        while not self._abandoned.is_set():
            try:
                self._q.put(item, timeout=0.1)
                return
            except queue.Full:
                continue

    def abandon(self) -> None:
        """Nobody reads any more (interrupted): the pumps drop what they get."""
        self._abandoned.set()

    def hold(self, line: bytes) -> None:
        if self._abandoned.is_set():
            return
        with self._held_lock:
            self._held.write(line)

    def held_done(self) -> None:
        self._held_done.set()

    def read(self, n: int = -1) -> bytes:
        if self._live_open:
            parts: list[bytes] = []
            size = 0
            while True:
                if parts and self._q.empty():
                    break
                item = self._q.get()
                if item is None:
                    self._live_open = False
                    break
                parts.append(item)
                size += len(item)
                if 0 < n <= size:
                    break
            if parts:
                return b"".join(parts)
        self._held_done.wait()
        if not self._rewound:
            self._held.seek(0)
            self._rewound = True
        return self._held.read(n if n and n > 0 else 1 << 20)

    def close(self) -> None:
        self.abandon()
        with self._held_lock:
            self._held.close()


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP reached capscan while the command ran (timeout(1), a CI cancellation, launchd, a
    closed terminal): handled as Ctrl-C is, the signal forwarded to the child first; the exit code is
    128 + ``signum`` (143, 129)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


FORWARDED = (signal.SIGTERM, signal.SIGHUP)


class _forwarding:
    """While the command runs, SIGTERM and SIGHUP interrupt capscan like Ctrl-C instead of killing it
    outright (which left the child running and the record at 'running'). Main thread only."""

    def __enter__(self) -> None:
        self.old: dict[int, Any] = {}
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in FORWARDED:
            if signal.getsignal(sig) is signal.SIG_IGN:
                continue  # started ignoring it (nohup): stays ignored
            self.old[sig] = signal.signal(sig, self._raise)

    @staticmethod
    def _raise(signum: int, _frame: Any) -> None:
        raise Terminated(signum)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self.old.items():
            signal.signal(sig, handler)


@dataclass
class Outcome:
    returncode: int | None = None
    run_ids: list[int] = field(default_factory=list)
    loader_errors: list[str] = field(default_factory=list)
    shim_trouble: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    error: str | None = None
    interrupted: bool = False  # Ctrl-C (SIGINT), SIGTERM or SIGHUP reached capscan while the command ran
    signum: int = signal.SIGINT  # which of them
    stopped_by: str | None = None  # how the child was made to stop after the interrupt

    @property
    def ended(self) -> str:
        return describe_exit(self.returncode)

    @property
    def verified(self) -> bool:
        return bool(self.checks) and not any(c.failed for c in self.checks)


def _pump(pipe: BinaryIO, sink: BinaryIO, stream: _LineStream, outcome: Outcome, lock: threading.Lock,
          held: bool) -> None:
    try:
        # pieces of at most PIECE bytes: a line of 1 GiB without a newline costs PIECE at a time
        for line in iter(lambda: pipe.readline(PIECE), b""):
            try:
                sink.write(line)
                sink.flush()
            except (OSError, ValueError):
                pass
            # loader and shim messages are short lines: the head of a piece is enough (a 1 MiB piece of one
            # huge line is not decoded and searched whole)
            text = line[:4096].decode("utf-8", "replace").rstrip()
            if LOADER_ERRORS.search(text):
                with lock:
                    outcome.loader_errors.append(text)
            if SHIM_TROUBLE.search(text):
                with lock:
                    outcome.shim_trouble.append(text)
            (stream.hold if held else stream.put)(line)
    finally:
        (stream.held_done if held else stream.live_done)()


def child_env(base: dict[str, str], inj: plat.Injection, library: str, family: int) -> dict[str, str]:
    env = dict(base)
    env[inj.env_var] = library
    env[plat.FAMILY_VAR] = str(family)
    return env


def launch(db: Database, cmd: list[str], env: dict[str, str], *, out: BinaryIO, err: BinaryIO,
           grace: float = GRACE_S, action_id: int | None = None) -> Outcome:
    """Run cmd, tee stdout->out and stderr->err, ingest both as one log. Returns the new run ids.

    Ctrl-C is not left to the terminal alone: it is forwarded to the child
    (which may trap it), then SIGTERM and SIGKILL follow ``grace`` seconds
    apart; SIGTERM and SIGHUP to capscan likewise (forwarded as themselves).
    The outcome says ``interrupted``, by which signal, and how the child ended."""
    from analyzer.ingest import ingest
    from analyzer.read.reader import Input, InputError

    outcome = Outcome()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, shell=False)
    except OSError as exc:
        outcome.error = f"could not start {cmd[0]}: {exc.strerror or exc}"
        return outcome
    if action_id is not None:
        note_child(db, action_id, proc.pid)
    stream = _LineStream()
    lock = threading.Lock()
    threads = [threading.Thread(target=_pump, args=(proc.stdout, out, stream, outcome, lock, True), daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, err, stream, outcome, lock, False), daemon=True)]
    for t in threads:
        t.start()
    name = f"capscan remedy run: {shlex.join(cmd)}"[:300]

    def interrupted(exc: KeyboardInterrupt) -> None:
        # the source is rolled back (nothing half stored); the child must not outlive us
        outcome.interrupted = True
        outcome.signum = getattr(exc, "signum", signal.SIGINT)
        stream.abandon()
        with _forwarding():  # a second SIGTERM skips to the next step, as a second Ctrl-C does
            outcome.stopped_by = stop_child(proc, grace, first=outcome.signum)

    try:
        with _forwarding():
            try:
                result = ingest(db, Input(name, stream), force=True)  # type: ignore[arg-type]
                outcome.run_ids = list(result.run_ids)
            except InputError as exc:
                outcome.error = str(exc)
            except KeyboardInterrupt as exc:
                interrupted(exc)
            if proc.poll() is None:
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    outcome.stopped_by = stop_child(proc, grace, first=signal.SIGTERM)
    except KeyboardInterrupt as exc:  # Ctrl-C (or SIGTERM, SIGHUP) while waiting for the child to end
        interrupted(exc)
    finally:
        stream.abandon()
        for t in threads:
            t.join(timeout=grace)
        outcome.returncode = proc.poll()
        stream.close()
    return outcome


ESCALATION = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


def stop_child(proc: subprocess.Popen, grace: float = GRACE_S, first: int = signal.SIGINT) -> str:
    """Stop the child: forward ``first`` (the user's Ctrl-C), then SIGTERM,
    then SIGKILL, each after ``grace`` seconds; another Ctrl-C skips to the
    next step. Returns the name of the last signal sent ("" when none was)."""
    sent = ""
    first = signal.Signals(first)
    steps = ESCALATION[ESCALATION.index(first):] if first in ESCALATION else (first, *ESCALATION[1:])
    for sig in steps:
        if proc.poll() is not None:
            break
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            break
        sent = sig.name
        try:
            proc.wait(timeout=None if sig == signal.SIGKILL else grace)
            break
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            continue  # still running (or another Ctrl-C): the next signal
    return sent


def describe_exit(returncode: int | None) -> str:
    """'exited with status 3', 'killed by SIGSEGV' (subprocess reports a signal as -N)."""
    if returncode is None:
        return "still running"
    if returncode >= 0:
        return f"exited with status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    return f"killed by {name}"


# --------------------------------------------------------------------------- verification


def _main_run(runs: list) -> Any | None:
    """The new run that carries the device (the one to verify)."""
    with_device = [r for r in runs if r.facts.device.name or r.facts.capabilities.simdgroup_reduction is not None]
    return (with_device or runs or [None])[-1]


def verify(outcome: Outcome, runs: list, family: int, inj: plat.Injection) -> list[Check]:
    checks: list[Check] = []
    rc = outcome.returncode
    if outcome.error:
        checks.append(failed("launch", outcome.error, "check the command runs on its own first"))
        return checks
    if rc != 0:
        why = f"the command {describe_exit(rc)}"
        if outcome.loader_errors:
            why += f" and {inj.loader} said: {outcome.loader_errors[0]}"
        checks.append(failed("exit status", why, "look at its output above; run it once without capscan to see "
                             "whether it fails on its own"))
    else:
        checks.append(passed("exit status", "the command exited with status 0"))
    run = _main_run(runs)
    if run is None:
        checks.append(failed("new run", "nothing capscan recognises was printed, so there is no run to verify",
                             "make sure the command prints llama.cpp's Metal init lines (they go to stderr; "
                             "do not redirect them away)"))
        return checks
    f = run.facts
    diag = run.diagnosis or {}
    shim = f.shim
    if shim is not None and shim.name == plat.BANNER_NAME:
        checks.append(passed("banner", f"[{plat.BANNER_NAME}] enabled for {shim.process} "
                             f"(apple_family_max={shim.apple_family_max})"))
    elif shim is not None:
        checks.append(failed("banner", f"another shim answered ({shim.name}), not capscan's",
                             "start from an environment without other shims (Tart: TART_METAL_APPLE_FAMILY_MAX=0)"))
    else:
        if outcome.shim_trouble and "interposing is disabled" in outcome.shim_trouble[0]:
            why = (f"the interposer loaded but dyld did not apply its interposing: {outcome.shim_trouble[0]} -- so "
                   "the device kept its stock answers")
            instead = ("interposing is off for this process (AMFI): check `csrutil status` and the program's "
                       "signature, then run `capscan remedy selftest --json` and attach it to an issue")
        elif outcome.shim_trouble:
            why = (f"the interposer loaded but did not apply: {outcome.shim_trouble[0]} -- so the device kept its "
                   "stock answers")
            instead = "report the device class it names; this device needs a hook capscan does not have yet"
        elif outcome.loader_errors:
            why = f"{inj.loader} refused the library: {outcome.loader_errors[0]}"
            instead = "run `capscan remedy plan` and fix the failing check (architecture, hardened runtime, SIP)"
        else:
            why = (f"no [{plat.BANNER_NAME}] banner: {inj.loader} never loaded the interposer ({inj.env_var} was "
                   "dropped by SIP, a hardened runtime, or a launcher that resets the environment), or the program "
                   "never asked Metal for a device")
            instead = ("run the real binary directly (not a wrapper script), and check `csrutil status` and "
                       "`codesign -dv --verbose=4` on it")
        checks.append(failed("banner", why, instead))
    fam = f.device.apple_family
    if fam is not None and fam >= min(family, 1007):
        checks.append(passed("family", f"the device now reports Apple{fam - 1000} ({fam})"))
    else:
        checks.append(failed("family", f"the device still reports {('Apple' + str(fam - 1000)) if fam else 'no Apple family'}"
                             f" ({fam}), not {family}", "see the banner check: the hook did not take"))
    caps = diag.get("capabilities") or f.capabilities.as_dict()
    flags = {k: caps.get(k) for k in ("simdgroup_reduction", "simdgroup_mm", "bfloat")}
    false_ = [k for k, v in flags.items() if v is not True]
    if not false_:
        checks.append(passed("capability flags", "simdgroup reduction, simdgroup matrix mul. and bfloat are now true"))
    else:
        meaning = ("the family cap is below Apple7, which llama.cpp needs" if family < 1007 else
                   "the banner is there but llama.cpp still turned them off: it gates on something the interposer "
                   "does not answer" if shim else "the device kept its stock answers")
        checks.append(failed("capability flags", f"still not true: {', '.join(false_)} ({meaning})",
                             "compare the Metal init lines above with the stock run (capscan show)"))
    verdict = diag.get("verdict", "unknown")
    if verdict in GOOD_VERDICTS:
        checks.append(passed("verdict", f"the new run is {verdict}"))
    else:
        checks.append(failed("verdict", f"the new run is still {verdict}",
                             "read its findings: capscan show " + str(run.id)))
    return checks


# --------------------------------------------------------------------------- before / after


def _best(throughput: list[dict[str, Any]]) -> dict[str, float]:
    best: dict[str, float] = {}
    for t in throughput:
        v = t.get("tok_s")
        if v is not None and v == v and v != float("inf"):
            best[t["test"]] = max(best.get(t["test"], 0.0), float(v))
    return best


def compare(stock: Any, new: Any) -> dict[str, Any]:
    def caps(run: Any) -> dict[str, Any]:
        c = (run.diagnosis or {}).get("capabilities") or run.facts.capabilities.as_dict()
        return {"apple_family": run.facts.device.apple_family, **{k: c.get(k) for k in
                ("simdgroup_reduction", "simdgroup_mm", "bfloat")},
                "verdict": (run.diagnosis or {}).get("verdict")}

    before, after = _best(stock.throughput), _best(new.throughput) if new else {}
    speedup = {t: {"before": before[t], "after": after[t], "ratio": round(after[t] / before[t], 2)}
               for t in before if t in after and before[t] > 0}
    return {"stock_run_id": stock.id, "new_run_id": new.id if new else None, "before": caps(stock),
            "after": caps(new) if new else None, "throughput": speedup}


def record_run(db: Database, *, cmd: list[str], family: int, library: str, sha256: str | None,
               inj: plat.Injection, stock_run_id: int) -> int:
    # who runs it (host and pid): a capscan that dies without settling is found out by the next one
    return records.record(db, "remedy-run", {
        "argv": cmd, "family": family, "library": library, "sha256": sha256, "env_var": inj.env_var,
        "stock_run_id": stock_run_id, "run_ids": [], "host": this_host(), "capscan_pid": os.getpid()}, "running",
        {"why": "nothing to undo: only the child's environment was changed"})


def note_child(db: Database, action_id: int, pid: int) -> None:
    rec = records.get(db, action_id)
    if rec is not None and rec["result"] == "running":
        records.set_result(db, action_id, "running", {**rec["args"], "child_pid": pid})


def this_host() -> str:
    return socket.gethostname()


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user's counts: it cannot be signalled)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def reconcile(db: Database) -> list[int]:
    """Mark 'lost' what a capscan that died left 'running' (see records.reconcile_lost)."""
    return records.reconcile_lost(db, this_host(), pid_alive)


def settle(db: Database, outcome: Outcome, *, stock: Any, family: int, inj: plat.Injection,
           action_id: int) -> dict[str, Any] | None:
    """After the launch: link the new runs to the stock run, diagnose and verify
    them, record the result. Returns the before/after comparison (None without a new run)."""
    from analyzer.rules.diagnose import diagnose_runs

    if outcome.interrupted:
        # never left 'running': the record says it was interrupted and how the child ended
        rec = records.get(db, action_id)
        how = outcome.ended + (f" after capscan sent {outcome.stopped_by}" if outcome.stopped_by else "")
        by = "" if outcome.signum == signal.SIGINT else f" by {signal.Signals(outcome.signum).name}"
        records.set_result(db, action_id, f"interrupted{by}: the command {how}",
                           {**(rec["args"] if rec else {}), "returncode": outcome.returncode, "ended": outcome.ended})
        raise KeyboardInterrupt if outcome.signum == signal.SIGINT else Terminated(outcome.signum)
    if outcome.run_ids:
        records.link_runs(db, outcome.run_ids, stock.id, RELATION, action_id)
    new_runs = diagnose_runs(db, outcome.run_ids)
    outcome.checks = verify(outcome, new_runs, family, inj)
    main = _main_run(new_runs)
    cmp = compare(stock, main) if main is not None else None
    failed_checks = [c for c in outcome.checks if c.failed]
    result = "verified" if outcome.verified else "failed: " + ", ".join(c.name for c in failed_checks)
    rec = records.get(db, action_id)
    args = {**(rec["args"] if rec else {}), "run_ids": outcome.run_ids, "returncode": outcome.returncode,
            "ended": outcome.ended}
    records.set_result(db, action_id, result, args)
    return cmp
