"""`capscan remedy selftest --bundle FILE`: every check only a Mac can settle, as named hypotheses, in
one JSON file (analyzer.output.bundle) a user attaches to an issue and `capscan ingest` reads back.

It runs after the self-test (analyzer.remedy.selftest) and reuses what that ran: the probe stock and
remedied (the library hooks; the injected kernel check), llama-bench before and after. It adds the
stock kernel check ten times (stable?), framework Python with and without the scrub, llama.cpp's
`test-backend-ops` under the library, and the host default (guided: the user says it was set and the
VM restarted). What this machine cannot settle (the Linux stand-in has no Mac, a guest no host) is
"not-run-here" with why, never left out.

Redaction (on unless --no-redact): home directories, the user's and the machine's names, and
capscan's own directory are replaced in every string, logs included."""

from __future__ import annotations

import datetime as dt
import getpass
import os
import re
import socket
import time
from pathlib import Path
from typing import Any

import analyzer
from analyzer.output.bundle import KIND, VERSION, Bundle, BundleLog, Hypothesis, Machine
from analyzer.remedy import kernels as km
from analyzer.remedy import platform as plat
from analyzer.remedy.prefix import SCRUB_AT_DEVICE, SCRUB_AT_LOAD, injection_vars
from analyzer.remedy.runner import Runner
from analyzer.remedy.selftest import WORKS, ProbeRun, Report

SEND_TO = ("attach the file to an issue at the project's issue tracker (https://github.com/capscan/capscan/issues), "
           "titled 'selftest bundle: <verdict> on <host chip>'")
STABLE_RUNS = 10
BACKEND_OPS = ("MUL_MAT", "FLASH_ATTN_EXT", "SOFT_MAX")
BACKEND_OPS_TIMEOUT = 1800.0  # MUL_MAT alone runs thousands of cases
MAX_LOG = 4 << 20  # one log in the bundle; a longer one keeps its end (where the results are)
MAC_ONLY = ("only macOS can settle this: the Linux stand-in has the LD_PRELOAD library and a fake device, not dyld, "
            "Metal, a Mac's Pythons or the host default")
# framework Python, asked through ctypes what the device answers: the interpreter the launcher re-execs
# (Python.app) is the process that must have the library, and is the one that prints this
PY_SNIPPET = """import ctypes
objc = ctypes.CDLL("/usr/lib/libobjc.A.dylib")
metal = ctypes.CDLL("/System/Library/Frameworks/Metal.framework/Metal")
metal.MTLCreateSystemDefaultDevice.restype = ctypes.c_void_p
objc.sel_registerName.restype = ctypes.c_void_p
objc.sel_registerName.argtypes = [ctypes.c_char_p]
send = ctypes.CFUNCTYPE(ctypes.c_bool, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long)(("objc_msgSend", objc))
dev = metal.MTLCreateSystemDefaultDevice()
print("supports_family.{family}=" + ("true" if send(dev, objc.sel_registerName(b"supportsFamily:"), {family}) else "false"))
"""
PYTHONS = ("/Library/Frameworks/Python.framework/Versions/Current/bin/python3", "/opt/homebrew/bin/python3",
           "/usr/local/bin/python3")


# --------------------------------------------------------------------------- redaction


def identity(runner: Runner, system: str) -> tuple[list[str], list[str], list[str]]:
    """(home directories, user names, host names) of this machine, as the bundle must not carry them."""
    homes = {os.path.expanduser("~"), os.environ.get("HOME", "")}
    users = {os.environ.get(k, "") for k in ("USER", "LOGNAME", "USERNAME")}
    try:
        users.add(getpass.getuser())
    except (KeyError, OSError):   # no passwd entry: the environment's names are all there is
        pass
    users.update(Path(h).name for h in homes if h and str(Path(h).parent) in ("/Users", "/home"))
    hosts = {socket.gethostname()}
    argvs = [["hostname"]]
    if system == "darwin":    # the Mac's three names (Sharing settings), which logs and prompts show
        argvs += [["scutil", "--get", n] for n in ("ComputerName", "LocalHostName", "HostName")]
    for argv in argvs:
        r = runner.run(argv, timeout=10)
        if r.ok:
            hosts.add(r.stdout.strip())
    hosts.update(h.split(".")[0] for h in list(hosts))

    def keep(names: set[str]) -> list[str]:  # longest first: "mac-mini.local" before "mac-mini"
        return sorted({n for n in names if len(n) >= 3 and n.lower() not in GENERIC}, key=len, reverse=True)

    return sorted({h for h in homes if len(h) > 1}, key=len, reverse=True), keep(users), keep(hosts)


# names too common to be anyone's: replacing them would rewrite the logs' own words
GENERIC = frozenset({"root", "localhost", "admin", "user", "mac", "runner", "ollama", "llama", "metal"})


class Redactor:
    """Replaces capscan's directory, home directories, user and host names in every string it is given."""

    def __init__(self, homes: list[str], users: list[str], hosts: list[str], on: bool = True):
        self.on = on
        self.root = str(Path(analyzer.__file__).resolve().parent.parent)
        self.homes = homes
        # a user name where one stands (a path component, user@host, USER=name): a name that is also a word
        # ("alex", "runner") stays where it is a word of the log; a host name wherever it stands alone
        self.words = [(re.compile(r"(?:(?<=[/=~])|(?<![\w.-])(?=" + re.escape(u) + r"@))" + re.escape(u)
                                  + r"(?![\w-])", re.IGNORECASE), "<user>") for u in users]
        self.words += [(re.compile(r"(?<![\w.-])" + re.escape(h) + r"(?![\w-])", re.IGNORECASE), "<host>")
                       for h in hosts]

    def text(self, text: str) -> str:
        text = text.replace(self.root, "<capscan>")   # capscan's own paths say nothing about the user
        if not self.on:
            return text
        for home in self.homes:
            text = re.sub(re.escape(home) + r"(?=/|\b|$)", "~", text)
        for pattern, repl in self.words:
            text = pattern.sub(repl, text)
        return text

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, list):
            return [self(x) for x in obj]
        if isinstance(obj, dict):
            return {self.text(k) if isinstance(k, str) else k: self(v) for k, v in obj.items()}
        return obj


# --------------------------------------------------------------------------- hypotheses


def _kernel_results(p: ProbeRun) -> km.KernelCheck:
    """A probe run's kernel lines, read as analyzer.remedy.kernels reads them, and judged by its classes."""
    return km.parse_lines(p.stdout) or km.KernelCheck()


def _kernel_summary(kc: km.KernelCheck) -> str:
    return ", ".join(f"{cap}={r.get('result')}" for cap, r in kc.results.items()) or "no kernel lines"


def library_hooks(report: Report, family: int | None) -> Hypothesis:
    expected = (f"'[capscan-interposer] enabled for capscan-probe', a 'hook point' line, 'patched device class', "
                f"supports_family.{family}=true, no 'interposing is disabled' line")
    h = Hypothesis(name="library-hooks", claim="the packaged library loads and hooks in the packaged probe",
                   expected=expected, actual=None, status="not-run")
    p = report.probes.get("capscan")
    if p is None:
        h.why = f"the remedied probe did not run: {report.reason}"
        return h
    lines = p.interposer_lines
    banner = any(" enabled for " in ln for ln in lines)
    hook = any("hook point" in ln for ln in lines)
    patched = any("patched device class" in ln for ln in lines)
    off = [ln for ln in lines if "interposing is disabled" in ln]
    got = p.supports(family) if family is not None else None
    h.actual = f"supports_family.{family}={_yn(got)}; " + (" | ".join(lines) or "no [capscan-interposer] line")
    h.status = "pass" if banner and hook and patched and got and not off else "fail"
    if h.status == "fail":
        h.why = "; ".join(w for w, bad in (("no banner", not banner), ("no hook point line", not hook),
                                          ("no patched class", not patched), (f"{family} not answered", not got),
                                          ("the 'disabled' line was printed", bool(off))) if bad)
    return h


def kernels_injected(report: Report) -> Hypothesis:
    h = Hypothesis(name="kernels-injected", claim="with the library loaded, the GPU runs the kernels llama.cpp's "
                   "fast paths use (capscan-probe --kernels)", expected="every kernel.*=pass", actual=None,
                   status="not-run")
    p = report.probes.get("capscan")
    if p is None:
        h.why = f"the remedied probe did not run: {report.reason}"
        return h
    return _judge(h, _kernel_results(p), p.returncode)


def _judge(h: Hypothesis, kc: km.KernelCheck, returncode: int) -> Hypothesis:
    h.actual = _kernel_summary(kc)
    wrong = kc.having(km.WRONG + km.REFUSED)  # the GPU's answer; a crash or timeout is the check's own
    could_not = kc.having(km.COULD_NOT_RUN)
    if wrong:
        h.status, h.why = "fail", "; ".join(f"{cap}: {r.get('message') or r.get('result')}" for cap, r in wrong)
    elif could_not:
        h.status, h.why = "error", "the check could not run: " + "; ".join(
            f"{cap}: {r.get('message') or r.get('result')}" for cap, r in could_not)
    elif returncode != 0 or not kc.results:
        h.status, h.why = "error", f"the check exited {returncode} with {h.actual}"
    elif kc.all_passed:  # bfloat "not-run" (MSL below 3.1) is no failure: llama.cpp does not claim it there
        h.status = "pass"
    else:
        h.status, h.why = "fail", f"not every kernel passed: {h.actual}"
    return h


def kernels_stock(runner: Runner, report: Report, logs: list[BundleLog], runs: int = STABLE_RUNS) -> Hypothesis:
    """The stock check, ``runs`` times, each a fresh process (no cache): the same answers every time?"""
    h = Hypothesis(name="kernels-stock", claim=f"stock (no library), the GPU runs the kernels, the same way "
                   f"{runs} times in a row", expected=f"every kernel.*=pass, identical in all {runs} runs",
                   actual=None, status="not-run")
    if report.probe_path is None or report.stock_env is None:
        h.why = f"no probe to run: {report.reason}"
        return h
    argv = [str(report.probe_path), "--kernels"]
    h.command = argv
    seen: list[tuple[str, int]] = []
    for i in range(runs):
        start = time.monotonic()
        r = Runner(report.stock_env, timeout=120).run(argv)
        h.timings_ms.append(round((time.monotonic() - start) * 1000))
        p = ProbeRun(f"kernels stock {i + 1}", r.returncode, r.stdout, r.stderr)
        kc = _kernel_results(p)
        seen.append((_kernel_summary(kc), r.returncode))
        if i == 0:   # one of them travels whole (the others say the same, or the summary shows where not)
            logs.append(BundleLog(label="kernels stock", hypothesis=h.name, command=argv, returncode=r.returncode,
                                  text=_tail(r.stderr + r.stdout)))
        _judge(h, kc, r.returncode)
        if h.status != "pass":
            h.actual = f"run {i + 1} of {runs}: {h.actual}"
            return h
    distinct = sorted({s for s, _ in seen})
    if len(distinct) > 1:
        h.status, h.why = "fail", "the runs disagree: " + " / ".join(distinct)
    h.actual = f"{runs} runs: " + " / ".join(distinct)
    return h


def framework_python(runner: Runner, report: Report, system: str, python: str | None,
                     logs: list[BundleLog]) -> Hypothesis:
    family = report.family
    h = Hypothesis(name="framework-python", claim="a framework Python (python.org, Homebrew: a launcher that "
                   "re-execs Python.app) gets the library into its interpreter, with the default scrub and without",
                   expected=f"supports_family.{family}=true printed by the interpreter with the scrub `remedy run` "
                   "sets for it (at the device) and without a scrub (the scrub at load is recorded: it loses it)",
                   actual=None, status="not-run-here")
    if system != "darwin":
        h.why = MAC_ONLY
        return h
    inj = plat.injection(system)
    exe = python or next((p for p in (runner.which("python3"), *PYTHONS) if p and _framework(p)), None)
    if exe is None or inj is None or report.library is None or family is None or report.stock_env is None:
        h.status = "not-run"
        h.why = ("no framework Python found (python3 on PATH, python.org's, Homebrew's); pass --python PATH"
                 if exe is None else f"the library was not chosen: {report.reason}")
        return h
    h.command = [exe, "-c", "<ask MTLCreateSystemDefaultDevice() supportsFamily: through ctypes>"]
    got, status = [], "pass"
    snippet = [exe, "-c", PY_SNIPPET.format(family=family)]
    # The scrub at load is recorded, not judged: a launcher loses the library under it, which is why
    # `remedy run` scrubs at the device for one (the second variant is what it sets).
    for label, children, forced in (("scrub at load", False, SCRUB_AT_LOAD), ("as remedy run sets it", False, None),
                                    ("no scrub", True, None)):
        argv, pairs = injected(inj, report.library, family, snippet, inject_children=children, scrub=forced)
        env = {**report.stock_env, **pairs, "CAPSCAN_INTERPOSER_VERBOSE": "1"}
        start = time.monotonic()
        r = Runner(env, timeout=120).run(argv)
        h.timings_ms.append(round((time.monotonic() - start) * 1000))
        logs.append(BundleLog(label=f"framework python ({label})", hypothesis=h.name, command=h.command,
                              returncode=r.returncode, text=_tail(r.stderr + r.stdout)))
        answer = ProbeRun(label, r.returncode, r.stdout, r.stderr).supports(family)
        got.append(f"{label}: {_yn(answer)}" + ("" if r.ok else f" (exit {r.returncode})"))
        if forced is not None:
            continue
        if not r.ok:
            status = "error"
        elif answer is not True and status != "error":
            status = "fail"
    h.actual, h.status = f"{exe}: " + "; ".join(got), status  # type: ignore[assignment]
    if status != "pass":
        h.why = h.actual
    return h


def injected(inj: plat.Injection, library: str, family: int, argv: list[str], *, inject_children: bool,
             scrub: str | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and variables `remedy run` would use for ``argv`` (its launcher recognition decides the
    scrub: at the device for a framework Python or a run wrapper, else at load), or ``scrub`` when given."""
    if scrub is None:
        from analyzer.remedy.preflight import find_launcher, resolve_target

        target, _check = resolve_target(argv[0], os.environ)
        launcher = find_launcher(target, argv, plat.system())
        scrub = SCRUB_AT_DEVICE if launcher is not None and not inject_children else SCRUB_AT_LOAD
    return argv, injection_vars(inj, library, family, inject_children=inject_children, scrub=scrub)


def _framework(python: str) -> bool:
    """python.org's and Homebrew's Pythons: a launcher that re-execs Python.app, told by what the file is
    (preflight.framework_interpreter), not by its name."""
    from analyzer.remedy.preflight import framework_interpreter

    try:
        return framework_interpreter(Path(python), plat.system()) is not None
    except OSError:
        return False


def remedied_llama_bench(report: Report, exe: str | None, logs: list[BundleLog]) -> Hypothesis:
    sip = report.facts.get("sip")
    h = Hypothesis(name="remedy-run-llama-bench", claim="the remedy speeds up a real llama-bench "
                   f"(SIP: {sip})", expected="the remedied run's own log shows simdgroup reduction and matrix "
                   "multiply on, and every test is faster than stock (ratio > 1)", actual=None, status="not-run")
    if exe is None:
        h.why = "no llama-bench on PATH (pass --llama-bench PATH -m MODEL)"
        return h
    bench = report.bench or {}
    args = bench.get("args")
    h.command = [exe, *args] if isinstance(args, list) else [exe]
    for label in ("stock", "capscan", "other-shim"):
        if label in report.bench_logs:
            logs.append(BundleLog(label=f"llama-bench {label}", hypothesis=h.name, command=h.command,
                                  returncode=bench.get(f"{label}_returncode"), text=_tail(report.bench_logs[label])))
    if "skipped" in bench or not bench:
        h.why = bench.get("skipped") or report.reason
        return h
    speed = bench.get("capscan_speedup") or {}
    after = bench.get("capscan_after") or {}
    flags = {k: after.get(k) for k in ("simdgroup_reduction", "simdgroup_mm")}
    h.actual = "; ".join(f"{t}: {s['before']} -> {s['after']} t/s ({s['ratio']}x)" for t, s in speed.items()) or (
        f"no speed to compare (stock exit {bench.get('stock_returncode')}, remedied exit "
        f"{bench.get('capscan_returncode')})")
    if after:
        h.actual += "; remedied: " + ", ".join(f"{k}={_yn(v)}" for k, v in flags.items())
    if speed and all(s["ratio"] > 1 for s in speed.values()) and all(v is True for v in flags.values()):
        h.status = "pass"
    else:
        h.status = "fail" if speed else "error"
        h.why = h.actual
    return h


def backend_ops(report: Report, build: str | None, logs: list[BundleLog]) -> list[Hypothesis]:
    """llama.cpp's own test of each op llama.cpp gates on the family, under the library: what a pass of
    capscan's kernel check does not prove."""
    out = []
    exe = _backend_ops_exe(build) if build else None
    for op in BACKEND_OPS:
        h = Hypothesis(name=f"test-backend-ops.{op}", claim=f"with the library, llama.cpp's Metal {op} kernels "
                       "give the CPU's results", expected="exit 0, every case OK, no FAIL", actual=None,
                       status="not-run")
        out.append(h)
        if build is None and report.stand_in:
            h.status, h.why = "not-run-here", MAC_ONLY
            continue
        if build is None:
            h.why = "no llama.cpp build directory given (--llama-build DIR)"
            continue
        if report.stand_in:   # a Linux llama.cpp has no Metal backend: only the harness is exercised
            h.claim += " (Linux stand-in: no Metal backend here, so this runs the check, it proves nothing of Metal)"
        if exe is None:
            h.status, h.why = "error", f"no test-backend-ops under {build} (bin/ or the directory itself)"
            continue
        if report.stock_env is None or report.library is None or report.family is None or report.verdict != WORKS:
            h.why = f"the library was not shown working here: {report.reason or report.verdict}"
            continue
        inj = plat.injection(plat.system())
        assert inj is not None   # report.library is set only where there is an injection
        h.command, pairs = injected(inj, report.library, report.family, [exe, "-o", op], inject_children=False)
        env = {**report.stock_env, **pairs}
        start = time.monotonic()
        r = Runner(env, timeout=BACKEND_OPS_TIMEOUT).run(h.command)
        h.timings_ms.append(round((time.monotonic() - start) * 1000))
        text = r.stderr + r.stdout
        fails = [ln.strip() for ln in text.splitlines() if re.search(r"\bFAIL\b", ln)]
        summary = [ln.strip() for ln in text.splitlines() if re.search(r"tests passed|Backend \S+: (OK|FAIL)", ln)]
        h.actual = "; ".join(summary[-3:]) or (text.strip().splitlines() or ["no output"])[-1]
        if r.returncode in (124, 126, 127) or (r.returncode != 0 and not fails and not summary):
            h.status, h.why = "error", f"exit {r.returncode}: {(text.strip().splitlines() or ['no output'])[-1]}"
        elif fails or r.returncode != 0:
            h.status, h.why = "fail", "; ".join(fails[:5]) or f"exit {r.returncode}"
        else:
            h.status = "pass"
        # the failing cases are the evidence; the whole output is thousands of OK lines
        h.actual = (h.actual + ("; " + " | ".join(fails[:20]) if fails else ""))[:8000]
    return out


def _backend_ops_exe(build: str) -> str | None:
    return next((str(p) for p in (Path(build) / "bin" / "test-backend-ops", Path(build) / "test-backend-ops")
                 if p.is_file() and os.access(p, os.X_OK)), None)


def host_default(report: Report, system: str, confirmed: bool) -> Hypothesis:
    """The host default alone (no library): guided, since only the user can set it on the host and restart
    the VM. Before: the stock probe here; after (--host-default-set): the stock probe must answer the cap."""
    family = report.family or 1007
    h = Hypothesis(name="host-default", claim="the host default (ForceUnrestrictedDeviceFeatureLevel) alone, after "
                   "a VM stop and start, makes the stock device answer the host chip's family",
                   expected=f"stock (no library) supports_family.{family}=true after the restart", actual=None,
                   status="not-run-here")
    stock = report.probes.get("stock")
    if system != "darwin":
        h.why = MAC_ONLY
        return h
    if report.facts.get("guest") is False:
        h.why = ("this is the host: run `capscan remedy host-default --apply` here, stop and start the VM, then in "
                 "the guest `capscan remedy selftest --bundle after.json --host-default-set`")
        return h
    answer = stock.supports(family) if stock is not None else None
    h.actual = f"stock supports_family.{family}={_yn(answer)}" + (" (the user confirms the default was set and the "
                                                                   "VM restarted)" if confirmed else "")
    if not confirmed:
        h.status = "not-run"
        h.why = ("guided: this is the 'before'. On the host: `capscan remedy host-default --apply`; stop and start "
                 "this VM (a guest reboot is not enough); then here: `capscan remedy selftest --bundle after.json "
                 "--host-default-set`")
        return h
    h.status = "pass" if answer else "fail"
    if not answer:
        h.why = "the stock device still answers below the cap with the default set (published tests saw the same)"
    return h


def _yn(v: bool | None) -> str:
    return "unknown" if v is None else "true" if v else "false"


def _tail(text: str) -> str:
    return text if len(text) <= MAX_LOG else "[... cut ...]\n" + text[-MAX_LOG:]


# --------------------------------------------------------------------------- the bundle


def build_bundle(report: Report, *, runner: Runner, llama_bench: str | None, python: str | None,
                 llama_build: str | None, host_default_set: bool, redact: bool) -> Bundle:
    """The hypotheses (running what the self-test did not), the logs, redacted unless asked not to. The runs
    the self-test stored stay in the store; the bundle carries their logs."""
    system = report.platform
    logs: list[BundleLog] = []
    for label, p in report.probes.items():
        logs.append(BundleLog(label=f"{label} probe", hypothesis="library-hooks" if label == "capscan" else None,
                              command=[str(report.probe_path or "capscan-probe")], returncode=p.returncode,
                              text=_tail(p.stderr + p.stdout)))
    hyps = [library_hooks(report, report.family), kernels_stock(runner, report, logs), kernels_injected(report),
            framework_python(runner, report, system, python, logs), remedied_llama_bench(report, llama_bench, logs),
            *backend_ops(report, llama_build, logs), host_default(report, system, host_default_set)]
    f = report.facts
    machine = Machine(platform=system, stand_in=report.stand_in, guest=f.get("guest"), guest_how=f.get("guest_how"),
                      cpu=f.get("cpu"), sip=f.get("sip"), machine=f.get("machine"),
                      command_line_tools=f.get("command_line_tools"))
    red = Redactor(*identity(runner, system), on=redact)
    doc = {
        "capscan_version": getattr(analyzer, "__version__", "unknown"), "bundle": KIND, "bundle_version": VERSION,
        "created_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "redacted": redact,
        "machine": machine.model_dump(), "verdict": report.verdict, "reason": report.reason, "family": report.family,
        "hypotheses": [h.model_dump() for h in hyps], "logs": [lg.model_dump() for lg in logs],
        "selftest": report.to_json(), "send_to": SEND_TO,
    }
    return Bundle.model_validate(red(doc))
