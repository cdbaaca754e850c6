"""A run's diagnosis in plain words, for the first line of its report: what
happens, why, and whether capscan can fix it, before any jargon; and what the
confidence level rests on, in one clause.

Pure functions over a stored run's facts, throughput and diagnosis (analyzer.diagnosis); imports
nothing else heavy, so the report and the TUI can both use it."""

from __future__ import annotations

from typing import Any

from analyzer.diagnosis import UNDIAGNOSED, Diagnosis
from analyzer.verdicts import NO_CLAMP_BLOCK, NO_HOST_CHIP, NO_VM_GUEST

_RUNTIME = {"llama-bench": "llama.cpp", "llama-server": "llama.cpp", "llama.cpp": "llama.cpp", "ollama": "ollama",
            "whisper.cpp": "whisper.cpp", "mlx_lm": "MLX", "koboldcpp": "koboldcpp"}


def runtime_name(program: str | None) -> str:
    """The inference runtime as a user knows it (llama-bench and llama-server are llama.cpp)."""
    return _RUNTIME.get(program or "", program or "inference")


def _runs(environment: str | None, rt: str, would: bool = False) -> str:
    """'This VM runs llama.cpp', 'llama.cpp runs', 'Inference runs'; for a probe's output, where no model ran,
    'In this VM, llama.cpp would run'."""
    if would:
        return f"In this VM, {rt} would run" if environment == "vm" else f"{rt} would run"
    if environment == "vm":
        return f"This VM runs {rt}"
    return f"{rt if rt != 'inference' else 'Inference'} runs"


def best_speeds(throughput: list[dict[str, Any]]) -> dict[str, float]:
    """test -> the best finite tok/s of the run."""
    best: dict[str, float] = {}
    for t in throughput:
        value = t.get("tok_s")
        if isinstance(value, (int, float)) and value > 0 and value != float("inf"):
            best[t["test"]] = max(best.get(t["test"], 0.0), float(value))
    return best


def _prefer_generation(tests: list[str]) -> str | None:
    """The test a user feels most: token generation (tg, generation) before prompt processing."""
    for test in tests:
        if test.startswith("tg") or test in ("generation", "eval"):
            return test
    return tests[0] if tests else None


def _times(factor: float) -> str:
    return f"{factor:.0f}x" if factor >= 2 else f"{factor:.1f}x"


def speed_gap(diag: Diagnosis, throughput: list[dict[str, Any]]) -> tuple[float, str] | None:
    """How many times faster this run could be, and against what: the remedied speed
    predicted for it ("it could"), else a bare-metal run of the same model ("its host")."""
    mine = best_speeds(throughput)
    predicted = {p.test: p.predicted_tok_s for p in diag.prediction if p.test in mine}
    test = _prefer_generation(list(predicted))
    if test and (p := predicted[test]) is not None and p > mine[test]:
        return p / mine[test], "it could"
    paired = {t.test: t.ratio for t in (diag.paired.tests if diag.paired else []) if t.ratio}
    test = _prefer_generation(list(paired))
    if test and (ratio := paired[test]) is not None and ratio < 1:
        return 1 / ratio, "its host"
    return None


def headline(program: str | None, diag: Diagnosis | None, throughput: list[dict[str, Any]]) -> str:
    """One sentence a newcomer understands: what happens, why, and what capscan can do. A run that crashed
    says so first (a downgrade's sentence says it itself)."""
    diag = diag or UNDIAGNOSED
    text = _headline(program, diag, throughput)
    prefix = diag.headline_notes.get("prefix")
    if diag.verdict != "capability-downgrade" and prefix:
        who = runtime_name(program) if program else "The program"
        return f"{prefix.format(who=who, rt=runtime_name(program))} {text}"
    return text


def _headline(program: str | None, diag: Diagnosis, throughput: list[dict[str, Any]]) -> str:
    verdict = diag.verdict
    notes = diag.headline_notes  # the fired rules' own words (analyzer.rules.catalog.Rule.headline)
    rt = notes.get("runtime") or runtime_name(program)
    vm = diag.environment == "vm"
    would = notes.get("mood") == "would"  # a probe's output: no model ran
    runs = _runs(diag.environment, rt, would=would)
    if verdict == "capability-downgrade":
        gap = speed_gap(diag, throughput)
        how = f"about {_times(gap[0])} slower than {gap[1]}" if gap else "on slow fallback paths"
        how = notes.get("how") or how  # a crash: it did not run slowly, it stopped
        gpu = "its virtual GPU" if vm else "the GPU"
        text = f"{runs} {how}, because {gpu} under-reports what it can do"
        if diag.fixable and notes.get("fixable"):
            return text + notes["fixable"]
        if diag.fixable:
            return text + "; capscan can fix that."
        if diag.fixable_reason == "the runtime does not gate on the family":
            return text + f"; the fix does not apply to {rt}."
        why = diag.fixable_reason
        if why == NO_CLAMP_BLOCK:
            return text + "; capscan offers the fix only once the log shows the GPU's own capability block."
        if why and why not in (NO_HOST_CHIP, NO_VM_GUEST):
            return text + f"; capscan does not offer the fix here: {why}."  # a contrary sign, or a contradiction
        return text + "; capscan offers the fix only once the log shows an Apple-silicon host."
    if verdict == "hardware-limit":
        return (f"This GPU really lacks the features {rt}'s fast paths need: nothing is misconfigured, "
                "and forcing them would give wrong results.")
    if verdict == "no-gpu-offload":
        if would:  # a device listing: nothing ran
            return f"{rt} would run on the CPU: it sees no GPU device."
        return f"Everything ran on the CPU: {rt} did not use the GPU."
    if verdict == "virtualization-overhead":
        gap = speed_gap(diag, throughput)
        pace = f"at {1 / gap[0]:.0%} of its host's speed" if gap else "slower than its host"
        return (f"{runs} {pace} with full GPU capabilities: the rest is the virtual GPU's own cost, "
                "which no capability fix removes.")
    if verdict == "healthy":
        if vm:
            return f"This VM's GPU shows its full capabilities to {rt}: nothing to fix."
        if would:
            return f"The GPU shows its full capabilities to {rt}: nothing to fix."
        return f"The GPU runs {rt} with its full capabilities: nothing to fix."
    if notes.get("unknown"):
        return notes["unknown"].format(rt=rt, who=rt)
    return f"capscan cannot tell from this log what limits {rt}: the lines it needs are missing."


# how a backend names itself to a reader (the stored backend is lower case)
_BACKEND_WORDS = {"cuda": "CUDA", "rocm": "ROCm", "vulkan": "Vulkan", "sycl": "SYCL", "opencl": "OpenCL",
                  "cpu": "CPU", "kompute": "Kompute", "cann": "CANN", "musa": "MUSA", "hip": "HIP"}


def confidence_clause(diag: Diagnosis | None, capabilities_printed: bool, *, backend: str | None = None,
                      families_printed: bool = True) -> str | None:
    """'medium confidence: ...', what the level rests on, in one clause. The backend and whether the log
    printed a GPU family keep the words true: a Vulkan run prints no Metal family to infer from."""
    level = diag and diag.confidence
    if not diag or not level:
        return None
    basis = diag.basis  # what the decisive rule rests on (analyzer.rules.catalog.Rule.basis)
    if basis == "speed":
        why = ("read from the speed against the host chip's bandwidth, not from printed capabilities "
               "(llama-bench -o json 2>&1 would print them)")
    elif basis == "symptoms":
        why = "read from symptoms such as the speed gap or skipped kernels, not from printed capabilities"
        if diag.host_family:
            why += "; the host chip is known"
    elif basis == "reported":  # an imported run (analyzer.rules.origin): its origin's level, not this store's
        why = "as its origin reported it; capscan here did not read the log"
    elif level == "high":
        why = "the log prints the deciding facts itself"
    elif diag.verdict == "capability-downgrade" and capabilities_printed:
        why = "the log does not name the host chip"
    elif backend and backend != "metal":
        name = _BACKEND_WORDS.get(backend, backend)
        why = (f"the {name} backend prints no GPU family or capability flags (only Metal does); the verdict "
               "rests on the devices and rows it printed")
    elif not families_printed:
        why = "the log prints no GPU family; capabilities are inferred from the chip's name"
    else:
        why = "some capabilities are inferred from the printed GPU family, not printed"
    return f"{level} confidence: {why}"
