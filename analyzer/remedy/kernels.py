"""The kernel check before the workload: does the GPU behind this guest really run what the cap claims?

A family is a number (the device's, a user's, the host chip's); `capscan-probe --kernels` compiles
small Metal kernels per capability llama.cpp gates on and checks their answers against the CPU. The
remedy runs it stock, then again with the library loaded, before the workload. What each result means:

- ``fail`` (the kernel ran and gave wrong numbers) is the only hardware verdict: do not force;
- ``compile-error`` is this guest's Metal compiler refusing that one kernel: a fact about that
  feature only (a simdgroup one refuses the remedy; bfloat alone is the remedy with
  ``GGML_METAL_BF16_DISABLE=1``, llama.cpp's own switch, in the workload's environment);
- ``crash`` and ``timeout`` mean the check could not run: a warning, never "do not force".

A stock check that passed is stored as a run (the evidence) and reused for the rest of the boot:
the GPU does not change under a running guest. Nothing else is reused, so a check that could not
run, or failed, runs again next time."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from analyzer.remedy import platform as plat
from analyzer.remedy.check import Check, failed, passed, warned
from analyzer.remedy.runner import Runner
from analyzer.rules.view import KERNEL_COULD_NOT_RUN, kernel_failure
from analyzer.rules.view import KERNEL_WORDS as WORDS

if TYPE_CHECKING:
    from analyzer.store.db import Database

CAPABILITIES = tuple(WORDS)  # in llama.cpp's order
SIMDGROUP = ("simdgroup_reduction", "simdgroup_mm")
NAME = "kernel check"
INJECTED_NAME = "kernel check (library loaded)"
WRONG, REFUSED = ("fail",), ("compile-error",)  # together the rules' KERNEL_FAILURES
COULD_NOT_RUN = KERNEL_COULD_NOT_RUN
BF16_DISABLE = "GGML_METAL_BF16_DISABLE"  # llama.cpp: getenv(...) != NULL turns has_bfloat off
SOURCE = "capscan remedy: kernel check"  # + the boot's key: the stored run a later remedy reuses
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")  # Linux (the stand-in)


@dataclass
class KernelCheck:
    results: dict[str, dict[str, Any]] = field(default_factory=dict)  # capability -> {"result", "message"}
    msl_version: str | None = None
    elapsed_ms: int | None = None
    run_id: int | None = None
    cached: bool = False
    error: str | None = None  # why there are no results

    def having(self, results: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
        return [(cap, r) for cap, r in self.results.items() if r.get("result") in results]

    def passes(self, capability: str) -> bool:
        return (self.results.get(capability) or {}).get("result") == "pass"

    @property
    def all_passed(self) -> bool:
        """Both simdgroup kernels passed and bfloat passed or was not run (MSL below 3.1): the only result
        worth reusing for the boot."""
        return (not self.error and all(self.passes(c) for c in SIMDGROUP)
                and all((r.get("result") in ("pass", "not-run")) for r in self.results.values()))

    def to_json(self) -> dict[str, Any]:
        return {"results": {cap: {"result": r.get("result"), "message": r.get("message")}
                            for cap, r in self.results.items()},
                "msl_version": self.msl_version, "elapsed_ms": self.elapsed_ms, "run_id": self.run_id,
                "cached": self.cached, "error": self.error}


def boot_key(runner: Runner, system: str) -> str | None:
    """What changes when the guest reboots (kern.boottime; Linux's boot_id), with the stand-in's fake
    selections, hashed; None when unknown (no caching then)."""
    if system == "darwin":
        r = runner.run(["/usr/sbin/sysctl", "-n", "kern.boottime"])
        boot = r.stdout.strip() if r.ok else ""
    else:
        try:
            boot = BOOT_ID.read_text().strip()
        except OSError:
            boot = ""
    if not boot:
        return None
    fake = sorted((k, v) for k, v in runner.env.items() if k.startswith("CAPSCAN_FAKE_"))  # stand-in tests vary these
    return hashlib.sha256(repr((boot, fake)).encode()).hexdigest()[:16]


def from_run(db: Database, run_id: int) -> KernelCheck | None:
    from analyzer.store.queries import load_run

    run = load_run(db, run_id)
    if run is None or not run.facts.kernels:
        return None
    f = run.facts
    kernels = f.kernels or {}
    return KernelCheck({cap: {"result": r.get("result"), "message": r.get("message")} for cap, r in kernels.items()},
                       f.kernel_msl_version, f.kernel_elapsed_ms, run_id)


def from_runs(db: Database, run_ids: list[int]) -> KernelCheck | None:
    """The kernel results of the last of these stored runs that has any (a probe's output is one run)."""
    return next((found for rid in reversed(run_ids) if (found := from_run(db, rid)) is not None), None)


def run_kernel_check(db: Database, runner: Runner, probe: Path, system: str) -> KernelCheck:
    """`capscan-probe --kernels` in this guest (stock: no injection), stored as a run, or this boot's earlier
    one. A probe that fails or prints no kernel lines (an older probe) gives a KernelCheck with ``error``."""
    from analyzer.pipeline import store_input
    from analyzer.read.reader import Input, InputError
    from analyzer.store.queries import newest_run_of_source

    key = boot_key(runner, system)
    name = f"{SOURCE} ({key})" if key else SOURCE
    if key is not None:
        rid = newest_run_of_source(db, name)
        found = from_run(db, rid) if rid is not None else None
        if found is not None and found.all_passed:  # a fail, a crash or a timeout is checked again
            found.cached = True
            return found
    output = _probe_kernels(runner, probe)
    if isinstance(output, KernelCheck):
        return output
    try:
        stored = store_input(db, Input(name, io.BytesIO(output.encode())), force=True)
    except InputError as exc:
        return KernelCheck(error=str(exc))
    return from_runs(db, stored.run_ids) or _no_results(probe)


def run_injected_check(runner: Runner, probe: Path) -> KernelCheck:
    """`capscan-probe --kernels` with the library loaded (``runner``'s env: the stock environment plus the
    injection, no scrub, so the probe's exec'd check process loads it too). Read in memory, never stored: a
    probe run that answers raised families is no evidence for a diagnosis, and never reused."""
    output = _probe_kernels(runner, probe)
    if isinstance(output, KernelCheck):
        return output
    return parse_lines(output) or _no_results(probe)


def _probe_kernels(runner: Runner, probe: Path) -> str | KernelCheck:
    """The probe's --kernels output, or a KernelCheck saying why there is none (not found, a failed run)."""
    result = runner.run([str(probe), "--kernels"])
    if not result.found:
        return KernelCheck(error=f"{probe}: not found")
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        return KernelCheck(error=f"{probe.name} --kernels failed: {last}")
    return result.stdout


def _no_results(probe: Path) -> KernelCheck:
    return KernelCheck(error=f"{probe.name} printed no kernel results (a probe older than --kernels)")


def parse_lines(text: str) -> KernelCheck | None:
    """The probe's ``kernel.<cap>=<result>`` and ``kernel.<cap>.message=`` lines (its own format)."""
    kc = KernelCheck()
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or not key.startswith("kernel."):
            continue
        cap, _, sub = key[len("kernel."):].partition(".")
        if cap in CAPABILITIES and not sub:
            kc.results.setdefault(cap, {"result": None, "message": None})["result"] = value
        elif cap in CAPABILITIES and sub == "message":
            kc.results.setdefault(cap, {"result": None, "message": None})["message"] = value
        elif cap == "msl_version" and not sub:
            kc.msl_version = value or None
        elif cap == "elapsed_ms" and not sub and value.isdigit():
            kc.elapsed_ms = int(value)
    return kc if kc.results else None


def _said(r: dict[str, Any]) -> str:
    message = r.get("message")
    return f"{r.get('result')}{': ' + message if message else ''}"


def bf16_disabled(env: Mapping[str, str]) -> bool:
    """llama.cpp turns bfloat off when the variable exists at all (getenv != NULL), whatever its value."""
    return BF16_DISABLE in env


def check(kc: KernelCheck, *, env: Mapping[str, str] | None = None, name: str = NAME) -> Check:
    """The preflight line. Wrong numbers of a simdgroup kernel refuse ("do not force"); a compile error of one
    refuses for that feature; bfloat alone asks for GGML_METAL_BF16_DISABLE=1 in the workload's environment
    (env: the workload's); a crash or a timeout is a warning (the check could not run); pass when both
    simdgroup kernels passed."""
    data = kc.to_json()
    off = bf16_disabled(env or {})
    if kc.error:
        return warned(name, f"not run: {kc.error}",
                      "run `capscan probe --kernels` in the guest to prove the GPU runs the kernels", data=data)
    simd_wrong = [(c, r) for c, r in kc.having(WRONG) if c in SIMDGROUP]
    if simd_wrong:
        cap, r = simd_wrong[0]
        return failed(name, kernel_failure(cap, r),
                      "do not force the family: llama.cpp's simdgroup kernels would give wrong results here; attach "
                      "`capscan probe --kernels --json` to an issue", data=data)
    simd_refused = [(c, r) for c, r in kc.having(REFUSED) if c in SIMDGROUP]
    if simd_refused:
        cap, r = simd_refused[0]
        return failed(name, f"this guest's Metal compiler refused capscan's {WORDS[cap]} kernel ({_said(r)}): "
                      f"a fact about {WORDS[cap]} on this driver only, not wrong numbers, but llama.cpp's "
                      f"{WORDS[cap]} kernels need the same feature, so forcing the family would hand them to a "
                      "compiler that refuses it",
                      "do not force the family here; attach `capscan probe --kernels --json` to an issue (the "
                      "compiler's message says which construct it refused)", data=data)
    bad_bf16 = [(c, r) for c, r in kc.having(WRONG + REFUSED) if c == "bfloat"]
    could_not = kc.having(COULD_NOT_RUN)
    if could_not:
        return warned(name, "the check could not run, which says nothing about the GPU: " + "; ".join(
            f"{WORDS[c]} {_said(r)}" for c, r in could_not),
            "run `capscan probe --kernels` again; if it keeps crashing or timing out attach "
            "`capscan probe --kernels --json` to an issue (CAPSCAN_PROBE_KERNEL_TIMEOUT_MS raises the deadline)",
            data=data)
    if not all(kc.passes(c) for c in SIMDGROUP):
        return warned(name, "the simdgroup kernels were not both run: " + ", ".join(
            f"{WORDS[c]} {r.get('result')}" for c, r in kc.results.items()), data=data)
    if bad_bf16:
        cap, r = bad_bf16[0]
        what = "got wrong numbers from" if r.get("result") == "fail" else "could not compile"
        if off:
            return passed(name, f"the paravirtual device ran the simdgroup kernels right; it {what} the bfloat "
                          f"kernel ({_said(r)}), and {BF16_DISABLE} is set, so llama.cpp keeps bfloat off",
                          data=data)
        return failed(name, f"the simdgroup kernels passed, but the GPU behind this VM {what} the bfloat kernel "
                      f"({_said(r)}): bfloat only",
                      f"run the remedy with {BF16_DISABLE}=1 in the workload's environment (llama.cpp then keeps "
                      f"`has bfloat = false` and uses the simdgroup kernels that passed): "
                      f"{BF16_DISABLE}=1 capscan remedy run -- CMD", data=data)
    ran = [WORDS[c] for c in CAPABILITIES if kc.passes(c)]
    when = " (this boot's earlier check)" if kc.cached else ""
    return passed(name, f"the paravirtual device ran {', '.join(ran)} kernels and got the right answers{when}",
                  data=data)


def claims_beyond_kernels(matrix: dict[str, Any], kc: KernelCheck) -> list[str]:
    """What the device's answers now make llama.cpp turn on (``ProbeRun.matrix``) that its kernels did not
    pass. bfloat not run (a language version below 3.1) is no claim llama.cpp acts on there."""
    out = []
    for cap in CAPABILITIES:
        if matrix.get(cap) is not True:
            continue
        result = (kc.results.get(cap) or {}).get("result")
        if result == "pass" or (cap == "bfloat" and result == "not-run"):
            continue
        out.append(f"{WORDS[cap]} (kernel check: {result or 'not run'})")
    return out


def probe_for_kernels(runner: Runner, system: str) -> tuple[Path | None, str | None]:
    """The probe that runs the check: capscan's own on macOS, the Linux stand-in's where it is built."""
    from analyzer.remedy import dylib as dylibmod

    if system == "darwin":
        path, missing = dylibmod.probe_binary(runner)
        return (None, missing) if missing else (path, None)
    inj = plat.injection(system)
    if inj is None:
        return None, f"{system} has no capscan probe"
    path = dylibmod.build_dir(inj) / "capscan-probe"
    return (path, None) if path.exists() else (None, f"the Linux stand-in is not built ({path}): make -C "
                                                     "native/interposer linux")
