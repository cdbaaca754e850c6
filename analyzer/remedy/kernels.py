"""The kernel check before any injection: does the GPU behind this guest really run what the cap claims?

A family is a number (the device's, a user's, the host chip's); `capscan-probe --kernels` compiles
one Metal kernel per capability llama.cpp gates on and checks its answer against the CPU. The
remedy refuses when any of them fails, and after injecting it checks that the families the device
now answers promise nothing the kernels did not pass. The probe's output is stored as a run (the
evidence), and reused for the rest of the boot: the GPU does not change under a running guest."""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analyzer.remedy import platform as plat
from analyzer.remedy.check import Check, failed, passed, warned
from analyzer.remedy.runner import Runner
from analyzer.rules.view import KERNEL_FAILURES as FAILURES
from analyzer.rules.view import KERNEL_WORDS as WORDS
from analyzer.rules.view import kernel_failure

if TYPE_CHECKING:
    from analyzer.store.db import Database

CAPABILITIES = tuple(WORDS)  # in llama.cpp's order
NAME = "kernel check"
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

    @property
    def failures(self) -> list[tuple[str, dict[str, Any]]]:
        return [(cap, r) for cap, r in self.results.items() if r.get("result") in FAILURES]

    def passes(self, capability: str) -> bool:
        return (self.results.get(capability) or {}).get("result") == "pass"

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
        if found is not None:
            found.cached = True
            return found
    result = runner.run([str(probe), "--kernels"])
    if not result.found:
        return KernelCheck(error=f"{probe}: not found")
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        return KernelCheck(error=f"{probe.name} --kernels failed: {last}")
    try:
        stored = store_input(db, Input(name, io.BytesIO(result.stdout.encode())), force=True)
    except InputError as exc:
        return KernelCheck(error=str(exc))
    return from_runs(db, stored.run_ids) or KernelCheck(
        error=f"{probe.name} printed no kernel results (a probe older than --kernels)")


def check(kc: KernelCheck) -> Check:
    """The preflight line: refuse on any failed kernel, pass when both simdgroup kernels passed."""
    data = kc.to_json()
    if kc.error:
        return warned(NAME, f"not run: {kc.error}",
                      "run `capscan probe --kernels` in the guest to prove the GPU runs the kernels", data=data)
    if kc.failures:
        cap, r = kc.failures[0]
        return failed(NAME, kernel_failure(cap, r),
                      "do not force the family: llama.cpp's simdgroup kernels would give wrong results here; attach "
                      "`capscan probe --kernels --json` to an issue", data=data)
    ran = [WORDS[c] for c in CAPABILITIES if kc.passes(c)]
    if not (kc.passes("simdgroup_reduction") and kc.passes("simdgroup_mm")):
        return warned(NAME, "the simdgroup kernels were not both run: " + ", ".join(
            f"{WORDS[c]} {r.get('result')}" for c, r in kc.results.items()), data=data)
    when = " (this boot's earlier check)" if kc.cached else ""
    return passed(NAME, f"the paravirtual device ran {', '.join(ran)} kernels and got the right answers{when}",
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
