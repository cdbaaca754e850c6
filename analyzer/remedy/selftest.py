"""`capscan remedy selftest`: prove the remedy on this machine in one command.

Runs capscan's capability probe stock, then with the interposer injected (and,
optionally, with another shim), stores each as a run linked to the stock one,
optionally runs a short llama-bench stock and remedied, and gives one verdict:

- works: the interposer loaded, and the device now answers the capped family
- interposing-disabled: dyld did not apply the library's hooks (AMFI, or the
  variable was dropped), so Metal answered stock
- refused-by-hardened-runtime: a program to inject is hardened without the
  entitlement, or the loader said so
- arm64e-missing: an arm64e program on the launch path would halt (the
  library has no arm64e slice where one is needed)
- not-a-vm: bare metal already reports its real family; nothing to fix
- inconclusive: something else went wrong (the reason says what)

On Linux the same flow runs against the LD_PRELOAD stand-in and the fake Metal
device, and the report says so. The JSON report names no path the user did not
pass: capscan's own directories become <capscan>, the home directory ~.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import analyzer
from analyzer.remedy import dylib as dylibmod
from analyzer.remedy import kernels as km
from analyzer.remedy import launch as L
from analyzer.remedy import platform as plat
from analyzer.remedy import preflight as pf
from analyzer.remedy.check import Check
from analyzer.remedy.runner import Runner
from analyzer.store import remedy_records as records

if TYPE_CHECKING:
    from analyzer.store.db import Database

WORKS, OFF, HARDENED, ARM64E, NOT_VM, INCONCLUSIVE = (
    "works", "interposing-disabled", "refused-by-hardened-runtime", "arm64e-missing", "not-a-vm", "inconclusive")
KERNELS_FAIL, OVERCLAIM = "kernels-fail", "claims-beyond-kernels"
MEANING = {
    WORKS: "the interposer loaded and the paravirtual device now answers the host chip's family: llama.cpp's fast "
           "Metal kernels can run (capscan remedy run -- llama-bench ... shows the speed-up)",
    OFF: "the library was given to the program but its hooks never took, so Metal answered stock: dyld dropped the "
         "variable or AMFI disabled interposing (check csrutil status; SIP off is the state every published shim "
         "result used)",
    HARDENED: "a program to inject has the hardened runtime without allow-dyld-environment-variables, so dyld drops "
              "the variable: use a build without it (build llama.cpp yourself) or an ad-hoc re-signed copy",
    ARM64E: "an arm64e program on the launch path would halt: the library has no arm64e slice, and with SIP "
            "off dyld halts an arm64e process it cannot load it into; use a library with arm64e (make macos-native "
            "on a Mac; the prebuilt one capscan ships has arm64 + x86_64 only) or start the program directly",
    NOT_VM: "this is bare metal: the GPU already reports its real family, so there is nothing to fix",
    INCONCLUSIVE: "the self-test could not decide; the reason and the stored runs say what happened",
    KERNELS_FAIL: "the GPU behind this VM failed a kernel llama.cpp's fast paths use (capscan-probe --kernels), so "
                  "nothing was injected: forcing the family would give wrong results or crash",
    OVERCLAIM: "with the interposer loaded the device answers families whose kernels did not pass here: the cap "
               "claims more than the hardware runs; choose a lower --family",
}
SEND_BACK = ("attach the file `capscan remedy selftest --bundle FILE` writes (every check only a Mac can settle, "
             "redacted) to an issue, or `capscan remedy selftest --json`: the verdict, the capability matrix, the "
             "interposer's own lines and the machine's facts, and no path or prompt beyond what you passed")
RELATION = "selftest"
ALL_FAMILIES = (*range(1001, 1011), 2001, 2002, 3001, 3002, 3003, 4001, 4002, 5001, 5002)
BENCH_ARGS = ["-p", "128", "-n", "32", "-r", "2"]
# dyld's words when it cannot put the library into an arm64e process ("... incompatible architecture (have
# 'arm64', need 'arm64e')"); an exit 134 (-6: killed by SIGABRT) alone says only that something aborted
ARM64E_WORDS = re.compile(r"need 'arm64e'|incompatible architecture")
ABORTED = (134, -6)
_LINE = re.compile(r"^(?P<key>[a-z_]+(?:\.\d+)?)=(?P<value>.*)$")


@dataclass
class ProbeRun:
    label: str
    returncode: int
    stdout: str
    stderr: str
    run_ids: list[int] = field(default_factory=list)

    @property
    def values(self) -> dict[str, str]:
        out = {}
        for line in self.stdout.splitlines():
            m = _LINE.match(line.strip())
            if m:
                out[m.group("key")] = m.group("value")
        return out

    def supports(self, family: int) -> bool | None:
        v = self.values.get(f"supports_family.{family}")
        return None if v is None else v == "true"

    def kernels(self, db: Database) -> km.KernelCheck:
        """The kernel results this probe run printed (``--kernels``), read back from its stored run."""
        return km.from_runs(db, self.run_ids) or km.KernelCheck(error="this probe run printed no kernel results")

    @property
    def interposer_lines(self) -> list[str]:
        return [ln.strip() for ln in self.stderr.splitlines() if "[capscan-interposer]" in ln][:20]

    def matrix(self) -> dict[str, Any]:
        v = self.values
        apple = [f for f in range(1001, 1011) if self.supports(f)]
        fam = {f: self.supports(f) for f in ALL_FAMILIES}
        a7, a6, m3 = fam.get(1007), fam.get(1006), fam.get(5001)
        tg = v.get("max_threadgroup_memory")
        return {
            "device": v.get("device"),
            "apple_family": max(apple) if apple else None,
            "families": {str(f): s for f, s in fam.items() if s is not None},
            "metal3": m3, "metal4": fam.get(5002),
            "max_threadgroup_memory": int(tg) if tg and tg.isdigit() else None,
            # what llama.cpp's ggml-metal derives from these answers
            "simdgroup_reduction": None if a7 is None else bool(a7 or m3),
            "simdgroup_mm": a7,
            "bfloat": None if a6 is None else bool(m3 or a6),
        }


@dataclass
class Report:
    platform: str
    stand_in: bool
    verdict: str = INCONCLUSIVE
    reason: str = ""
    family: int | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)
    probes: dict[str, ProbeRun] = field(default_factory=dict)
    bench: dict[str, Any] | None = None
    args: dict[str, Any] = field(default_factory=dict)
    kernels: dict[str, Any] | None = None  # the stock kernel check (analyzer.remedy.kernels), before injecting
    # what the bundle (analyzer.remedy.bundle) runs its further checks with; not in the JSON
    probe_path: Path | None = None
    stock_env: dict[str, str] | None = None
    library: str | None = None
    bench_logs: dict[str, str] = field(default_factory=dict)  # label -> the llama-bench run's stderr + stdout

    def to_json(self) -> dict[str, Any]:
        doc = {
            "capscan_version": getattr(analyzer, "__version__", None),
            "selftest": 1,
            "platform": self.platform,
            "stand_in": self.stand_in,
            "verdict": self.verdict,
            "meaning": MEANING[self.verdict],
            "reason": self.reason,
            "family": self.family,
            "facts": self.facts,
            "runs": {label: {"run_ids": p.run_ids, "returncode": p.returncode, "matrix": p.matrix(),
                             "interposer_lines": p.interposer_lines} for label, p in self.probes.items()},
            "kernels": self.kernels,
            "llama_bench": self.bench,
            "checks": [{"name": c.name, "status": c.status, "reason": c.reason} for c in self.checks],
            "arguments": self.args,
            "send_back": SEND_BACK,
        }
        return redact(doc)


def redact(obj: Any) -> Any:
    """capscan's own directories -> <capscan>, the home directory -> ~ (the user's own paths stay)."""
    root = str(Path(analyzer.__file__).resolve().parent.parent)
    home = os.path.expanduser("~")

    def one(text: str) -> str:
        text = text.replace(root, "<capscan>")
        if home and home != "/" and len(home) > 1:
            text = text.replace(home + "/", "~/")
        return text

    if isinstance(obj, str):
        return one(obj)
    if isinstance(obj, list):
        return [redact(x) for x in obj]
    if isinstance(obj, dict):
        return {k: redact(v) for k, v in obj.items()}
    return obj


def _ingest_text(db: Database, name: str, text: str) -> list[int]:
    import io

    from analyzer.pipeline import store_input
    from analyzer.read.reader import Input, InputError

    try:
        return list(store_input(db, Input(name, io.BytesIO(text.encode())), force=True).run_ids)
    except InputError:
        return []


def run_probe(runner: Runner, db: Database, probe: Path, label: str, env: dict[str, str], *,
              kernels: bool = False) -> ProbeRun:
    r = Runner(env, timeout=120).run([str(probe), *(["--kernels"] if kernels else [])])
    p = ProbeRun(label, r.returncode, r.stdout, r.stderr)
    p.run_ids = _ingest_text(db, f"capscan remedy selftest: {label} probe", r.stderr + r.stdout)
    return p


def decide(report: Report, stock: ProbeRun, remedied: ProbeRun, family: int, inj: plat.Injection) -> None:
    text = remedied.stderr
    lines = remedied.interposer_lines
    # Only dyld's own words make an abort a missing arm64e slice: any crash (an assertion, Metal's
    # validation layer, a bug of ours) also ends in SIGABRT, exit 134, and must be reported as itself.
    if ARM64E_WORDS.search(text):
        report.verdict, report.reason = ARM64E, next(ln for ln in text.splitlines() if ARM64E_WORDS.search(ln))
        return
    if re.search(r"hardened process|into hardened", text):
        report.verdict, report.reason = HARDENED, next(ln for ln in text.splitlines() if "hardened" in ln)
        return
    got = remedied.supports(family)
    banner = any(" enabled for " in ln for ln in lines)
    off = next((ln for ln in lines if "interposing is disabled" in ln), None)
    if remedied.returncode != 0:
        how = (f"aborted (exit {remedied.returncode}, SIGABRT) without dyld's arm64e line, so a crash, not a "
               "missing slice" if remedied.returncode in ABORTED else f"exited {remedied.returncode}")
        report.verdict, report.reason = INCONCLUSIVE, (f"the remedied probe {how}: "
                                                       + (text.strip().splitlines() or ["no output"])[-1])
        return
    if banner and got:
        report.verdict = WORKS
        via = next((ln for ln in lines if "patched device class" in ln), "")
        report.reason = (f"the device answers supportsFamily:{family} = true (stock: "
                         f"{'true' if stock.supports(family) else 'false'}); " + (via or lines[0])
                         + ("; note: " + off if off else ""))
        return
    # the banner and the family decide; the self-check line is a cause only when it says the answers stayed
    # stock (with the init hook in place it is a verbose note: devices are still patched)
    stock_off = off if off and "still patched" not in off else None
    if stock_off or not lines:
        report.verdict = OFF
        report.reason = stock_off or (f"no [capscan-interposer] line at all: {inj.loader} never loaded the library "
                                      f"({inj.env_var} dropped: SIP, a hardened runtime, or AMFI)")
        return
    report.verdict = INCONCLUSIVE
    report.reason = "; ".join(lines[:3]) or "the interposer loaded but the device's answers did not change"


def run_selftest(db: Database, *, runner: Runner, family_spec: str = "auto", dylib_path: str | None = None,
                 probe_path: str | None = None, llama_bench: str | None = None, model: str | None = None,
                 compare_shim: str | None = None) -> Report:
    """Stock probe, preflight, remedied probe (and optionally another shim and llama-bench), one verdict.
    Every early return leaves the reason in the report."""
    system = plat.system()
    inj = plat.injection(system)
    report = Report(system, system != "darwin")
    report.args = {k: v for k, v in (("family", family_spec), ("dylib", dylib_path), ("probe", probe_path),
                                     ("llama_bench", llama_bench), ("model", model),
                                     ("compare_shim", compare_shim)) if v is not None}
    if inj is None:
        report.reason = f"{system} has no capscan interposer"
        return report
    guest, how = _machine_facts(report, runner, system)
    probe = _probe_binary(report, runner, system, inj, probe_path)
    if probe is None:
        return report
    report.probe_path = probe

    clean = plat.stock_env(runner.env)
    report.stock_env = clean
    stock = run_probe(runner, db, probe, "stock", clean)
    report.probes["stock"] = stock
    if stock.returncode != 0:
        report.reason = f"the stock probe failed: {(stock.stderr.strip().splitlines() or ['no output'])[-1]}"
        return report
    if system == "darwin" and guest is False:
        report.verdict, report.reason = NOT_VM, f"{how}"
        return report

    # (with the clean environment the self-test gives its children: a shim already set in this shell is
    # not "injected twice" here, since no child inherits it)
    chosen = _preflight(report, db, probe, Runner(clean, timeout=runner.timeout), system=system,
                        family_spec=family_spec, dylib_path=dylib_path, llama_bench=llama_bench)
    if chosen is None:
        return report
    family, lib = chosen
    report.library = str(lib.choice.path)

    env = {**clean, inj.env_var: str(lib.choice.path), plat.FAMILY_VAR: str(family), "CAPSCAN_INTERPOSER_VERBOSE": "1"}
    remedied = run_probe(runner, db, probe, "capscan", env, kernels=True)
    report.probes["capscan"] = remedied
    if stock.run_ids and remedied.run_ids:
        records.link_runs(db, remedied.run_ids, stock.run_ids[-1], RELATION, None)
    decide(report, stock, remedied, family, inj)
    if report.verdict == WORKS:  # the families it now answers promise only kernels that pass, run again injected
        beyond = km.claims_beyond_kernels(remedied.matrix(), remedied.kernels(db))
        if beyond:
            report.verdict = OVERCLAIM
            report.reason = ("with the interposer the device answers families that turn on " + ", ".join(beyond)
                             + f" in llama.cpp; a cap of {family} claims what this GPU does not run")
    if system == "darwin":
        child = apple_child(env, report.facts.get("sip", "unknown"))
        report.facts["apple_child"] = child
        if child.get("halted"):
            report.reason += (f"; {child['program']}, an Apple arm64e program, halts on this library here "
                              f"(exit {child['returncode']}): leave out --inject-children (capscan's default keeps the library "
                              "out of what the workload starts)")
    report.facts["library_archs"] = lib.archs
    report.facts["library_choice"] = lib.choice.kind    # native | packaged | given | linux
    report.facts["library_sha256"] = lib.sha256

    shim_env = _other_shim_env(clean, inj, compare_shim, family) if compare_shim else None
    if shim_env is not None:
        shim_run = run_probe(runner, db, probe, "other-shim", shim_env)
        report.probes["other-shim"] = shim_run
        if stock.run_ids and shim_run.run_ids:
            records.link_runs(db, shim_run.run_ids, stock.run_ids[-1], RELATION, None)

    if llama_bench and report.verdict != WORKS:
        report.bench = {"skipped": "the probe did not show the remedy working, so llama-bench was not run"}
    elif llama_bench:
        report.bench = bench(db, llama_bench, model, clean, env, shim_env, logs=report.bench_logs)
    return report


# An Apple arm64e program: what the workload's shells, env and tee are
APPLE_CHILD = "/usr/bin/true"


def apple_child(env: dict[str, str], sip: str, program: str = APPLE_CHILD) -> dict[str, Any]:
    """With SIP not fully on, Apple's arm64e programs that a workload starts inherit the variable: run one
    with the injection and say whether it halts (dyld's 'terminating because inserted dylib ... could not be
    loaded', exit 134), which only --inject-children exposes them to. With SIP on they drop the variable."""
    if sip == "enabled":
        return {"program": program, "skipped": "SIP is enabled: Apple's programs drop DYLD_* variables"}
    result = Runner(env, timeout=30).run([program])
    said = next((ln for ln in result.stderr.splitlines() if L.LOADER_ERRORS.search(ln)), None)
    # halted by the library only when dyld says so: an exit 134 alone is any abort
    return {"program": program, "returncode": result.returncode, "halted": said is not None, "loader_said": said}


def _machine_facts(report: Report, runner: Runner, system: str) -> tuple[bool | None, str]:
    """What the machine is (guest or not, and how that is known; CPU; SIP; tools), into report.facts."""
    brand = plat.brand_string(runner)
    guest, how = plat.is_guest(runner, brand) if system == "darwin" else (None, "Linux stand-in")
    sip = pf.sip_state(runner)[0] if system == "darwin" else "n/a"
    report.facts = {"guest": guest, "guest_how": how, "cpu": brand, "sip": sip,
                    "machine": plat.machine(), "command_line_tools": plat.developer_tools(runner)}
    return guest, how


def _probe_binary(report: Report, runner: Runner, system: str, inj: plat.Injection,
                  probe_path: str | None) -> Path | None:
    """capscan's own probe (built with the library when missing), or the one given; None with the reason."""
    if probe_path:
        return Path(probe_path)
    if system == "darwin":
        probe, missing = dylibmod.probe_binary(runner)
        if missing:
            report.reason = f"no usable capscan-probe: {missing}"
            return None
        return probe
    build = dylibmod.build(runner, inj) if not (dylibmod.build_dir(inj) / "capscan-probe").exists() else None
    if build is not None and build.failed:
        report.reason = build.reason
        return None
    return dylibmod.build_dir(inj) / "capscan-probe"


def _preflight(report: Report, db: Database, probe: Path, clean_runner: Runner, *, system: str, family_spec: str,
               dylib_path: str | None, llama_bench: str | None) -> tuple[int, Any] | None:
    """Preflight for the probe (and llama-bench): library, arm64e, launch chain, hardened runtime.
    Returns (family, library) or None, with the verdict and reason set from the first failed check."""
    spec = family_spec
    if spec == "auto" and system != "darwin":
        spec = "1007"   # the fake device names no host chip; 1007 (M1) is the stand-in's cap
    checks, inj, family, lib = pf.run_preflight(db, cmd=[str(probe)], family_spec=spec, diag=None, stock_shim=None,
                                                dylib_path=dylib_path, runner=clean_runner, kernels=True)
    kernel = next((c for c in checks if c.name == km.NAME), None)
    report.kernels = kernel.data if kernel is not None else None
    report.checks = checks
    if llama_bench:
        more, *_ = pf.run_preflight(db, cmd=[llama_bench], family_spec=spec, diag=None, stock_shim=None,
                                    dylib_path=dylib_path, runner=clean_runner, record_checksum=False)
        names = {c.name for c in checks}
        report.checks += [c for c in more if c.name not in names or c.failed]
    report.family = family
    bad = [c for c in report.checks if c.failed]
    if not bad and family is not None and lib is not None and lib.choice is not None and inj is not None:
        return family, lib
    first = bad[0] if bad else None
    if first is not None and first.name == "guest":
        report.verdict = NOT_VM
    elif first is not None and first.name in ("arm64e slice", "launch chain") and "arm64e" in first.reason:
        report.verdict = ARM64E
    elif first is not None and first.name in (km.NAME, km.INJECTED_NAME):
        report.verdict = KERNELS_FAIL
    elif any(c.name in ("hardened runtime", "library validation") for c in bad):
        report.verdict = HARDENED
        first = next(c for c in bad if c.name in ("hardened runtime", "library validation"))
    report.reason = (f"preflight refused: {first.name}: {first.reason}" if first else
                     "preflight could not choose a family or a library")
    return None


def _other_shim_env(clean: dict[str, str], inj: plat.Injection, shim: str, family: int) -> dict[str, str]:
    """The environment that injects another shim (Lume, Tart, Anka) capped at the same family, for an A/B."""
    return {**clean, inj.env_var: shim, "LUME_METAL_APPLE_FAMILY_MAX": str(family),
            "TART_METAL_APPLE_FAMILY_MAX": str(family)}


def bench(db: Database, exe: str, model: str | None, stock_env: dict[str, str], remedied_env: dict[str, str],
          shim_env: dict[str, str] | None, *, logs: dict[str, str] | None = None) -> dict[str, Any]:
    """A short llama-bench stock, remedied (and with the other shim): runs stored and linked, speed-ups.
    ``logs`` receives each run's output (stderr, then stdout) by label, for the bundle."""
    import io

    from analyzer.pipeline import diagnose_and_store

    cmd = [exe, *(["-m", model] if model else []), *BENCH_ARGS]
    out: dict[str, Any] = {"args": [a for a in cmd[1:]]}
    runs = {}
    with open(os.devnull, "wb") as sink:
        for label, env in (("stock", stock_env), ("capscan", remedied_env), ("other-shim", shim_env)):
            if env is None:
                continue
            so, se = (io.BytesIO(), io.BytesIO()) if logs is not None else (sink, sink)
            outcome = L.launch(db, cmd, env, out=so, err=se)
            if logs is not None:
                logs[label] = (se.getvalue() + so.getvalue()).decode("utf-8", "replace")  # type: ignore[union-attr]
            out[f"{label}_run_ids"] = outcome.run_ids
            out[f"{label}_returncode"] = outcome.returncode
            found = diagnose_and_store(db, outcome.run_ids, refresh_peers=False)
            runs[label] = L._main_run(found)
    stock = runs.get("stock")
    if stock is not None:
        for label in ("capscan", "other-shim"):
            new = runs.get(label)
            if new is not None:
                records.link_runs(db, [new.id], stock.id, RELATION, None)
                cmp = L.compare(stock, new)
                out[f"{label}_speedup"] = cmp["throughput"]
                out[f"{label}_after"] = cmp["after"]  # the new log's own capability lines (the bundle verifies them)
    return out
