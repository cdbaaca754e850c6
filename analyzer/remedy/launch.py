"""Run a command with the interposer injected, pass its output through to the
terminal while the same lines stream into capscan's parsers, store the new
run(s) linked to the stock run, and verify the fix from the new log.

Only the child's environment changes: the injection variable
(DYLD_INSERT_LIBRARIES or LD_PRELOAD) and CAPSCAN_METAL_APPLE_FAMILY_MAX.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO

from analyzer import chips
from analyzer.remedy import platform as plat
from analyzer.remedy.check import Check, failed, passed
from analyzer.remedy.kernels import BF16_DISABLE, bf16_disabled
from analyzer.remedy.prefix import SCRUB_AT_LOAD, SCRUB_VAR, injection_vars
from analyzer.store import remedy_records as records

if TYPE_CHECKING:
    from analyzer.store.db import Database

RELATION = "remedy-run"
GOOD_VERDICTS = ("healthy", "virtualization-overhead")
LOADER_ERRORS = re.compile(
    r"could not load inserted library|terminating because inserted dylib|incompatible architecture|"
    r"from LD_PRELOAD cannot be preloaded|into hardened process", re.IGNORECASE)
PIECE = 1 << 20  # the most read from the child's pipes at once
GRACE_S = 3.0  # after a forwarded Ctrl-C, then after SIGTERM, before the next signal
SHIM_TROUBLE = re.compile(r"\[capscan-interposer\] (disabled|inactive|interposing is disabled) ")


class _Spool:
    """The child's output as ingest reads it, once the child has ended: its stderr, then its stdout.

    llama.cpp writes its device block to stderr (unbuffered) and results to stdout (block-buffered in
    a pipe, so it often arrives in one piece at exit). Reading stderr first and stdout after is the
    order `2>&1` shows in a pipe, and keeps benchmark rows attached to the run whose device printed
    them. Both are spooled (memory, then a temporary file), so nothing is stored until the command
    has ended, whatever stopped it, and no transaction is open while it runs (the record can move).
    """

    def __init__(self) -> None:
        self.live = tempfile.SpooledTemporaryFile(max_size=8 << 20)  # noqa: SIM115 - closed by close()
        self.held = tempfile.SpooledTemporaryFile(max_size=8 << 20)  # noqa: SIM115
        self._lock = threading.Lock()
        self._sealed = False
        self._reading: Any = None  # live, then held, once sealed

    def write(self, which: Any, line: bytes) -> None:
        with self._lock:
            if not self._sealed:
                which.write(line)

    def seal(self) -> None:
        """No more writes (a grandchild may still hold the pipes open): what is there is the log."""
        with self._lock:
            self._sealed = True
            self.live.seek(0)
            self.held.seek(0)
            self._reading = self.live

    def read(self, n: int = -1) -> bytes:
        if self._reading is None:
            return b""
        data = self._reading.read(n if n and n > 0 else 1 << 20)
        if not data and self._reading is self.live:
            self._reading = self.held
            data = self._reading.read(n if n and n > 0 else 1 << 20)
        return data

    def close(self) -> None:
        self.live.close()
        self.held.close()


_KERNEL_FLAGS = [chips.METAL_FLAG[name] for name in chips.KERNEL_FLAGS]
BF16_LABEL = chips.METAL_FLAG["bfloat"].label
_FLAG = re.compile(r"\b(?P<name>" + "|".join(re.escape(flag.printed[0]) for flag in _KERNEL_FLAGS)
                   + r")(?: support)?\s*=\s*(?P<v>true|false)\b")
_BANNER = re.compile(r"\[capscan-interposer\] enabled for ")


class EarlyCheck:
    """The verdict of the new capability block as soon as the child prints it: a server never exits,
    so waiting for the end would never verify it. A preview from the raw lines (the interposer's banner
    and the three flags llama.cpp gates on); the stored run is verified again when the command ends."""

    NAMES = {flag.printed[0]: flag.label for flag in _KERNEL_FLAGS}

    def __init__(self, bf16_disabled: bool = False) -> None:
        self.bf16_disabled = bf16_disabled  # GGML_METAL_BF16_DISABLE in the child's env: bfloat false is right
        self.banner = False
        self.flags: dict[str, bool] = {}
        self.decision: tuple[bool, str] | None = None
        self._taken = False
        self._lock = threading.Lock()

    def feed(self, text: str) -> None:
        with self._lock:
            if self.decision is not None:
                return
            if _BANNER.search(text):
                self.banner = True
            m = _FLAG.search(text)
            if m is not None:
                self.flags[self.NAMES[m.group("name")]] = m.group("v") == "true"
            if len(self.flags) == len(self.NAMES):
                optional = BF16_LABEL if self.bf16_disabled else None
                off = [k for k, v in self.flags.items() if not v and k != optional]
                if self.banner and not off:
                    self.decision = (True, "the interposer's banner, and simdgroup reduction, matrix mul. and "
                                           + ("bfloat true" if self.flags.get(BF16_LABEL) else
                                              f"bfloat false ({BF16_DISABLE} is set)"))
                else:
                    why = ([] if self.banner else ["no [capscan-interposer] banner"]) + [f"{k} false" for k in off]
                    self.decision = (False, ", ".join(why))

    def take(self) -> tuple[bool, str] | None:
        """The decision, once (None before it is made and after it was taken)."""
        with self._lock:
            if self.decision is None or self._taken:
                return None
            self._taken = True
            return self.decision


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
    early: tuple[bool, str] | None = None  # EarlyCheck's verdict of the block as printed, when it decided
    interrupted: bool = False  # Ctrl-C (SIGINT), SIGTERM or SIGHUP reached capscan while the command ran
    bf16_disabled: bool = False  # GGML_METAL_BF16_DISABLE was in the child's env: llama.cpp keeps bfloat off
    signum: int = signal.SIGINT  # which of them
    stopped_by: str | None = None  # how the child was made to stop after the interrupt

    @property
    def ended(self) -> str:
        return describe_exit(self.returncode)

    @property
    def verified(self) -> bool:
        return bool(self.checks) and not any(c.failed for c in self.checks)


def _pump(pipe: BinaryIO, sink: BinaryIO, spool: _Spool, which: Any, outcome: Outcome, lock: threading.Lock,
          early: EarlyCheck) -> None:
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
        early.feed(text)
        spool.write(which, line)


def child_env(base: dict[str, str], inj: plat.Injection, library: str, family: int, *,
              inject_children: bool = False, scrub: str = SCRUB_AT_LOAD) -> dict[str, str]:
    env = {k: v for k, v in base.items() if k != SCRUB_VAR}  # an inherited scrub switch never decides it
    env.update(injection_vars(inj, library, family, inject_children=inject_children, scrub=scrub))
    return env


def launch(db: Database, cmd: list[str], env: dict[str, str], *, out: BinaryIO, err: BinaryIO,
           grace: float = GRACE_S, action_id: int | None = None) -> Outcome:
    """Run cmd, tee stdout->out and stderr->err, and once it has ended ingest both as one log. Returns
    the new run ids.

    The new capability block is judged as soon as it is printed (``EarlyCheck``): a server keeps
    running, and the verdict is printed and recorded then. Ctrl-C is not left to the terminal alone:
    it is forwarded to the child (which may trap it), then SIGTERM and SIGKILL follow ``grace``
    seconds apart; SIGTERM and SIGHUP to capscan likewise (forwarded as themselves). Whatever
    stopped it, what the command printed is stored and verified; the outcome says ``interrupted``,
    by which signal, and how the child ended."""
    from analyzer.pipeline import store_input
    from analyzer.read.reader import Input, InputError

    outcome = Outcome(bf16_disabled=bf16_disabled(env))
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, shell=False)
    except OSError as exc:
        outcome.error = f"could not start {cmd[0]}: {exc.strerror or exc}"
        return outcome
    if action_id is not None:
        note_child(db, action_id, proc.pid)
    spool, early, lock = _Spool(), EarlyCheck(outcome.bf16_disabled), threading.Lock()
    threads = [threading.Thread(target=_pump, args=(proc.stdout, out, spool, spool.held, outcome, lock, early),
                                daemon=True),
               threading.Thread(target=_pump, args=(proc.stderr, err, spool, spool.live, outcome, lock, early),
                                daemon=True)]
    for t in threads:
        t.start()

    def report_early() -> None:
        decided = early.take()
        if decided is not None:
            _report_early(db, action_id, decided, err)

    try:
        with _forwarding():
            while proc.poll() is None:
                try:
                    proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
                report_early()
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP while the command runs
        outcome.interrupted = True
        outcome.signum = getattr(exc, "signum", signal.SIGINT)
        with _forwarding():  # a second one skips to the next step
            outcome.stopped_by = stop_child(proc, grace, first=outcome.signum)
    finally:
        for t in threads:
            t.join(timeout=grace)  # a grandchild may hold the pipes open: its output after this is not read
        spool.seal()
        outcome.returncode = proc.poll()
    report_early()
    outcome.early = early.decision
    name = f"capscan remedy run: {shlex.join(cmd)}"[:300]
    try:
        with _forwarding():
            result = store_input(db, Input(name, spool), force=True)  # type: ignore[arg-type]
        outcome.run_ids = list(result.run_ids)
    except InputError as exc:
        outcome.error = str(exc)
    except KeyboardInterrupt as exc:  # while storing: the source is rolled back, nothing half stored
        outcome.interrupted = True
        outcome.signum = getattr(exc, "signum", signal.SIGINT)
    finally:
        spool.close()
    return outcome


def _report_early(db: Database, action_id: int | None, decided: tuple[bool, str], err: BinaryIO) -> None:
    ok, why = decided
    line = (f"capscan: verified while it runs: {why}; the log is stored and checked again when the command ends\n"
            if ok else f"capscan: NOT verified while it runs: {why}\n")
    try:
        err.write(line.encode())
        err.flush()
    except (OSError, ValueError):
        pass
    if action_id is not None:
        rec = records.get(db, action_id)
        if rec is not None and rec["result"] == "running":
            records.set_result(db, action_id, "running: verified while it runs" if ok else
                               f"running: not verified while it runs ({why})", rec["args"])


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
    diag = run.diagnosis
    shim = f.shim
    if shim is not None and shim.name == plat.BANNER_NAME:
        checks.append(passed("banner", f"[{plat.BANNER_NAME}] enabled for {shim.process} "
                             f"(apple_family_max={shim.apple_family_max})"))
    elif shim is not None:
        checks.append(failed("banner", f"another shim answered ({shim.name}), not capscan's",
                             "start from an environment without other shims (Tart: TART_METAL_APPLE_FAMILY_MAX=0)"))
    else:
        # Only a line that says why the answers stayed stock is a cause: "interposing is disabled ... devices
        # are still patched" (verbose) is a note, since the init hook patches devices without it.
        trouble = [t for t in outcome.shim_trouble if not ("interposing is disabled" in t and "still patched" in t)]
        if trouble and "interposing is disabled" in trouble[0]:
            why = (f"the interposer loaded but dyld did not apply its interposing: {trouble[0]} -- so "
                   "the device kept its stock answers")
            instead = ("interposing is off for this process (AMFI): check `csrutil status` and the program's "
                       "signature, then run `capscan remedy selftest --json` and attach it to an issue")
        elif trouble:
            why = (f"the interposer loaded but did not apply: {trouble[0]} -- so the device kept its "
                   "stock answers")
            instead = "report the device class it names; this device needs a hook capscan does not have yet"
        elif outcome.loader_errors:
            why = f"{inj.loader} refused the library: {outcome.loader_errors[0]}"
            instead = "run `capscan remedy plan` and fix the failing check (architecture, hardened runtime, SIP)"
        else:
            why = (f"no [{plat.BANNER_NAME}] banner: {inj.loader} never loaded the interposer ({inj.env_var} was "
                   "dropped by SIP, a hardened runtime, a launcher that resets the environment, or a launcher "
                   "preflight did not recognise, which dropped the library before the program it starts), or the "
                   "program never asked Metal for a device")
            instead = ("run the real binary directly (not a wrapper script), and check `csrutil status` and "
                       "`codesign -dv --verbose=4` on it; a launcher that execs the workload needs "
                       "--inject-children")
        checks.append(failed("banner", why, instead))
    fam = f.device.apple_family
    if fam is not None and fam >= min(family, 1007):
        checks.append(passed("family", f"the device now reports Apple{fam - 1000} ({fam})"))
    else:
        checks.append(failed("family", f"the device still reports {('Apple' + str(fam - 1000)) if fam else 'no Apple family'}"
                             f" ({fam}), not {family}", "see the banner check: the hook did not take"))
    caps = (diag and diag.capabilities) or f.capabilities.as_dict()
    flags = {k: caps.get(k) for k in ("simdgroup_reduction", "simdgroup_mm", "bfloat")}
    # llama.cpp claims bfloat for Apple6+ (or Metal3, which needs Apple7 beside it for the simdgroup flags) unless
    # GGML_METAL_BF16_DISABLE is set: bfloat false is right otherwise
    bf16_claimed = not outcome.bf16_disabled and (fam or 0) >= 1006
    false_ = [k for k, v in flags.items() if v is not True and (k != "bfloat" or bf16_claimed)]
    if not false_ and flags["bfloat"] is not True:
        why = f"{BF16_DISABLE} is set" if outcome.bf16_disabled else "the device claims no Apple6"
        checks.append(passed("capability flags", "simdgroup reduction and simdgroup matrix mul. are now true; bfloat "
                             f"is {'false' if flags['bfloat'] is False else 'not shown'}, as llama.cpp decides when "
                             f"{why}"))
    elif not false_:
        checks.append(passed("capability flags", "simdgroup reduction, simdgroup matrix mul. and bfloat are now true"))
    else:
        meaning = ("the family cap is below Apple7, which llama.cpp needs" if family < 1007 else
                   "the banner is there but llama.cpp still turned them off: it gates on something the interposer "
                   "does not answer" if shim else "the device kept its stock answers")
        checks.append(failed("capability flags", f"still not true: {', '.join(false_)} ({meaning})",
                             "compare the Metal init lines above with the stock run (capscan show)"))
    verdict = diag.verdict if diag else "unknown"
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
        d = run.diagnosis
        c = (d and d.capabilities) or run.facts.capabilities.as_dict()
        return {"apple_family": run.facts.device.apple_family, **{k: c.get(k) for k in
                ("simdgroup_reduction", "simdgroup_mm", "bfloat")},
                "verdict": d and d.verdict}

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
    from analyzer.pipeline import diagnose_and_store

    if outcome.run_ids:
        records.link_runs(db, outcome.run_ids, stock.id, RELATION, action_id)
    new_runs = diagnose_and_store(db, outcome.run_ids, refresh_peers=False)
    outcome.checks = verify(outcome, new_runs, family, inj)
    main = _main_run(new_runs)
    cmp = compare(stock, main) if main is not None else None
    failed_checks = [c for c in outcome.checks if c.failed]
    result = "verified" if outcome.verified else "failed: " + ", ".join(c.name for c in failed_checks)
    rec = records.get(db, action_id)
    args = {**(rec["args"] if rec else {}), "run_ids": outcome.run_ids, "returncode": outcome.returncode,
            "ended": outcome.ended}
    if outcome.interrupted:
        # never left 'running': the record says it was interrupted, how the child ended, and what the block
        # showed while it ran (a server is stopped this way, so its exit status says nothing)
        how = outcome.ended + (f" after capscan sent {outcome.stopped_by}" if outcome.stopped_by else "")
        by = "" if outcome.signum == signal.SIGINT else f" by {signal.Signals(outcome.signum).name}"
        seen = ("" if outcome.early is None else
                "; verified while it ran" if outcome.early[0] else f"; not verified while it ran ({outcome.early[1]})")
        records.set_result(db, action_id, f"interrupted{by}: the command {how}{seen}", args)
        raise Terminated(outcome.signum)
    records.set_result(db, action_id, result, args)
    return cmp
