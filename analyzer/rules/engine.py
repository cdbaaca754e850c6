"""Run every rule over a run and reduce the findings to one diagnosis.

Within a run the verdict follows the evidence in this order: a real hardware
limit beats everything (and vetoes "fixable"), then no GPU offload at all,
then a capability downgrade, then virtualization overhead, then healthy. A
downgrade is fixable only on positive evidence of an Apple-silicon host and a
runtime that gates on the family."""

from __future__ import annotations

from typing import Any, Collection

from analyzer import chips
from analyzer.diagnosis import Diagnosis
from analyzer.model import figure_key, figure_parts, like_pairs
from analyzer.rules import baseline
from analyzer.rules.advice import CONFIRM_HOST, START_UP_BLOCK, evidence_advice  # noqa: F401 - re-exported
from analyzer.rules.catalog import RULE_BY_ID, RULES
from analyzer.rules.compare import per_token_cost
from analyzer.rules.version import RULES_VERSION
from analyzer.rules.view import RunView

_PRECEDENCE = ("hardware-limit", "no-gpu-offload", "capability-downgrade", "virtualization-overhead", "healthy")

SUMMARY = {
    "capability-downgrade": "The VM's GPU under-reports its capabilities, so llama.cpp runs slow fallback paths.",
    "hardware-limit": "This GPU really lacks the features llama.cpp's fast Metal kernels need.",
    "no-gpu-offload": "The GPU is not used at all: inference ran on the CPU.",
    "virtualization-overhead": "Capabilities are complete; the remaining gap to bare metal is the virtual GPU's own "
                               "per-dispatch cost.",
    "healthy": "Full capabilities: nothing to fix.",
    "unknown": "Not enough evidence in this log to say.",
}


def diagnose(view: RunView) -> Diagnosis:
    """The run's diagnosis. Built as plain data, then validated into the model (Diagnosis.load): pydantic's
    validation, in Rust, costs less than building each part with model_construct, and checks the rules'
    output on the way."""
    findings: list[dict[str, Any]] = []
    fired: dict[str, str] = {}
    for rule in RULES:
        result = rule.check(view)
        if result is None:
            continue
        findings.append({"rule": rule.id, "severity": rule.severity, "message": result.pop("message"),
                         "evidence": result.pop("evidence"), **({"data": result} if result else {})})
        if rule.verdict and rule.verdict not in fired:
            fired[rule.verdict] = rule.id
    verdict = next((v for v in _PRECEDENCE if v in fired), "unknown")
    if (verdict == "healthy" and not view.full_caps and view.is_metal and view.paravirtual and view.gates_on_family
            and RULE_BY_ID[fired["healthy"]].basis != "speed"):
        verdict = "unknown"  # never call a clamped guest healthy (its speed can show it is not one)
    fixable, why_fixable = False, None
    proof: list[dict[str, Any]] = []
    missing: list[str] = []
    if verdict == "capability-downgrade":
        proof, why_fixable, missing = view.remedy_decision
        if "hardware-limit" in fired:
            proof, missing = [], ["no-hardware-limit"]
            why_fixable = why_fixable or "a hardware-limit finding applies to this run"
        elif not view.gates_on_family:
            proof, missing, why_fixable = [], ["gates-on-family"], "the runtime does not gate on the family"
        fixable = bool(proof)
        if fixable:  # in words, the host sign (the clamp is the verdict itself); `proof` lists every sign
            why_fixable = view.host_proof[0]["sign"]
    confidence = _confidence(view, verdict, fired)
    fired_ids = [r.id for r in RULES if any(f["rule"] == r.id for f in findings)]  # catalogue order
    # Findings that argue for other verdicts are kept, but ranked after the decisive one.
    decisive = fired.get(verdict)
    findings.sort(key=lambda f: (f["rule"] != decisive, {"error": 0, "warning": 1, "info": 2}[f["severity"]]))
    return Diagnosis.load({
        "verdict": verdict,
        "fixable": fixable,
        "fixable_reason": why_fixable,
        "proof": proof,
        "proof_missing": missing,
        "confidence": confidence,
        "environment": view.environment,
        "host_chip": view.host_chip,
        "host_family": view.host_family,
        "capabilities": view.caps.as_dict(),
        "capabilities_inferred": sorted(view.inferred),
        "summary": _summary(view, verdict, fixable, why_fixable, findings[0] if decisive else None, findings),
        "findings": findings,
        "next_steps": next_steps(view, verdict, fixable, why_fixable, fired_ids, missing)
        + [RULE_BY_ID[r].extra_step for r in fired_ids if RULE_BY_ID[r].extra_step],
        # the headline's nuances (crashed, an app that drops the injection, ...): the fired rules' own words
        "headline_notes": {k: v for r in reversed(fired_ids) for k, v in RULE_BY_ID[r].headline.items()},
        # lines the report shows under a label when the verdict lacks that fact (what would decide it)
        "report_lines": {RULE_BY_ID[f["rule"]].report_line: f["message"] for f in findings
                         if RULE_BY_ID[f["rule"]].report_line},
        **(base := _baseline(view)),
        "reference": reference(view) if not (base.get("baseline") or {}).get("run") else [],
        "rules_version": RULES_VERSION,
        # what the decisive rule rests on (printed, symptoms, speed): the headline's "why" reads it
        "basis": RULE_BY_ID[decisive].basis if decisive else None,
    })


def _baseline(view: RunView) -> dict[str, Any]:
    """`baseline`: which bare-metal run a guest is measured against and why (or why none);
    `paired`: per shared test, the ratio and the per-token cost 1/vm - 1/host."""
    found = baseline.choose(view)
    if found is None:
        return {"baseline": None, "paired": None}
    peer, mine = found.peer, view.best()
    # each figure is the best printed row of its configuration: ``rows`` says of how many (issue 38)
    rows: dict[str, int] = {}
    for t in view.throughput:
        key = figure_key(t["test"], t.get("config"))
        rows[key] = rows.get(key, 0) + (t.get("n") or 1)
    # like with like: a figure per test and configuration, paired with the baseline's of the same test
    # and the same stated parameters (threads, batch, KV types, fa, ngl)
    tests = [] if peer is None else [
        {"test": figure_parts(t)[0], "config": figure_parts(t)[1], "tok_s": mine[t], "rows": rows.get(t, 1),
         "baseline_tok_s": peer.throughput[p], "baseline_config": figure_parts(p)[1],
         "ratio": mine[t] / peer.throughput[p], "per_token_s": per_token_cost(mine[t], peer.throughput[p])}
        for t, p in like_pairs(mine, peer.throughput) if peer.throughput[p] > 0 and mine[t] > 0]
    paired = {"run": peer.id, "why": found.why, "tests": tests} if tests and peer is not None else None
    return {"baseline": found.as_dict(view), "paired": paired}


def reference(view: RunView) -> list[dict[str, Any]]:
    """Where a guest stands without a stored host run: the published bare-metal result of the same benchmark
    on its chip (RunView.published_bare_metal), and the bandwidth ceiling (RunView.bandwidth_ceiling), the
    same for every token-generation figure. Estimates, never a baseline and never a reason for "fixable"."""
    tests = dict.fromkeys(t["test"] for t in view.throughput)  # the ceiling is the same for every configuration
    out: list[dict[str, Any]] = []
    published = view.published_bare_metal
    if published is not None:
        chip, figures = published
        out += [{"test": test, "ceiling_tok_s": figures[test],
                 "basis": f"published: {chip} on bare metal, Llama 2 7B Q4_0 {test} "
                          f"(llama.cpp discussion #4167)"} for test in tests if test in figures]
    found = view.bandwidth_ceiling
    if found is not None:
        ceiling, basis = found
        out += [{"test": test, "ceiling_tok_s": round(ceiling, 1), "basis": basis}
                for test in tests if test.startswith("tg") or test == "generation"]
    return out


def _confidence(view: RunView, verdict: str, fired: dict[str, str]) -> str | None:
    if verdict == "unknown":
        return None
    basis = RULE_BY_ID[fired[verdict]].basis if verdict in fired else "printed"
    if basis == "speed":
        return "low"  # a speed against a published ceiling stands in for the capability block
    if basis == "symptoms":
        return "low" if view.host_family is None else "medium"
    if view.contradictions:
        return "low"  # two machines' lines: whichever verdict they give is a guess
    if verdict == "capability-downgrade":
        if view.kernel_proof:
            return "high"  # the GPU itself ran the kernels the family only promises
        printed = view.facts.capabilities.simdgroup_reduction is not None or view.facts.probe
        return "high" if printed and view.host_family else "medium"
    if view.inferred:
        return "medium"
    return "high"


_EXPLAINS_UNKNOWN = tuple(r.id for r in RULES if r.explains_unknown)


def _summary(view: RunView, verdict: str, fixable: bool, why: str | None, decisive: dict | None,
             view_findings: list[dict]) -> str:
    """One sentence of why: the decisive finding, else the verdict's meaning."""
    if decisive is None and verdict == "unknown":
        # nothing decides, but an informative reading may still explain the run
        decisive = next((f for f in view_findings if f["rule"] in _EXPLAINS_UNKNOWN), None)
    text = decisive["message"] if decisive else SUMMARY[verdict]
    if verdict == "capability-downgrade":
        text += f" Fixable, because {why}." if fixable else f" Not marked fixable: {why}."
    return text


def OLLAMA_APP_ROUTES(run_id: int, cap: int) -> list[str]:
    """What works for a log of the official Ollama.app, whose hardened runtime refuses the injection."""
    return [f"The official Ollama.app refuses the injection (hardened runtime). What works: an ollama from Homebrew "
            f"or built yourself (its `ollama runner` child, which does the GPU work, inherits the library): capscan "
            f"remedy run --run {run_id} --family {cap} --inject-children -- \"$(brew --prefix)/bin/ollama\" serve",
            f"Or llama-server from Homebrew or source on the same model: capscan remedy run --run {run_id} --family "
            f"{cap} -- llama-server -m MODEL.gguf",
            "Inside the app itself nothing works: the host default ForceUnrestrictedDeviceFeatureLevel alone left "
            "guests at Apple5 in published tests (`capscan remedy host-default --status` on the host says more)."]


NO_OFFLOAD_ADVICE = {
    "mac-arm": "Make the GPU visible: an arm64 build with Metal (`llama-cli --list-devices` should list it), and "
               "-ngl 99 (or ollama with a Metal library).",
    "mac-intel": "This is an Intel Mac: Metal on its AMD or Intel GPU runs llama.cpp's fallback kernels (no simdgroup "
                 "matrix multiply), so the CPU build is often as fast; try a Metal build with -ngl 99 and compare, "
                 "or use an Apple-silicon Mac.",
    "mac-rosetta": "This is an x86_64 build running under Rosetta on an Apple-silicon Mac, where Metal is not "
                   "available to it: use an arm64 build (`file $(command -v llama-cli)` says arm64) with Metal, "
                   "and -ngl 99.",
    "mac-x86": "This is an x86_64 Mac build: on an Apple-silicon Mac it runs under Rosetta without Metal (use an "
               "arm64 build, -ngl 99); on an Intel Mac the CPU build is often as fast as Metal on its GPU.",
    "linux-windows": "Make the GPU visible: a build with your GPU's backend (CUDA: -DGGML_CUDA=ON, ROCm: "
                     "-DGGML_HIP=ON, Vulkan: -DGGML_VULKAN=ON, or a release built with it), `llama-cli "
                     "--list-devices` should list the GPU, then -ngl 99.",
    None: "Make the GPU visible: a build with your GPU's backend (Metal on a Mac; CUDA, ROCm or Vulkan on Linux "
          "and Windows), `llama-cli --list-devices` should list it, then -ngl 99.",
}


def platform_of(view: RunView) -> str | None:
    """Where the log ran (RunView.platform), or None when it does not say: the no-offload advice never
    assumes a Mac."""
    return view.platform


def next_steps(view: RunView, verdict: str, fixable: bool, why: str | None,
               findings: Collection[str] = frozenset(), missing: list[str] | None = None) -> list[str]:
    """What to do next. A remedy is offered only from the one decision (``RunView.remedy_decision``):
    a fixable downgrade, or a guest whose app gave up on the GPU with the same proof of its host."""
    cap = view.host_family or chips.APPLE7
    missing = missing or []
    if verdict == "capability-downgrade" and fixable and view.facts.ollama_app:
        return OLLAMA_APP_ROUTES(view.id, cap)
    if verdict == "capability-downgrade" and fixable:
        why = ("the host's real one" if view.host_family else
               "the lowest of any Apple-silicon host, and all llama.cpp needs")
        if view.facts.program == "ollama":  # its runner child does the GPU work: children must inherit
            return [f"capscan remedy plan --run {view.id}",
                    f"capscan remedy run --family {cap} --inject-children -- \"$(brew --prefix)/bin/ollama\" serve   "
                    f"(a Homebrew or self-built ollama; caps the family at {chips.family_name(cap)}, {why})"]
        return [f"capscan remedy plan --run {view.id}",
                f"capscan remedy run --family {cap} -- <your llama.cpp command>   (caps the family at "
                f"{chips.family_name(cap)}, {why})"]
    if verdict == "capability-downgrade" and "clamp" in missing:
        steps = [evidence_advice(view)]
        if "host" in missing:
            steps.append(f"Confirm the host too: {CONFIRM_HOST}.")
        return steps
    if verdict == "capability-downgrade" and missing == ["host"]:
        return [f"Confirm the host first ({why}): {CONFIRM_HOST}."]
    if verdict == "capability-downgrade":
        return [f"Nothing to remedy while {why}: do not force capabilities. Ingest each machine's log on its own "
                "and diagnose again."]
    if verdict == "hardware-limit":
        return ["Nothing to remedy: do not force capabilities on this GPU. For speed, use a smaller or more "
                "quantized model, or an Apple-silicon Mac."]
    for rule in RULES:  # a fired rule's own next step (the catalogue's), in catalogue order
        own = rule.next_step(view, verdict) if rule.next_step and rule.id in findings else None
        if own:
            return own
    if verdict == "no-gpu-offload":
        return [NO_OFFLOAD_ADVICE.get(platform_of(view)) or NO_OFFLOAD_ADVICE[None]]
    if verdict == "virtualization-overhead":
        return ["Nothing to fix in capabilities. Fewer, larger dispatches help: bigger batches (-b/-ub), "
                "larger models amortise the fixed per-token cost."]
    if verdict == "unknown" and not view.gates_on_family:
        return ["Nothing to remedy for MLX. To check llama.cpp on the same machine, run llama-bench and pipe "
                "it in: llama-bench -m model.gguf 2>&1 | capscan"]
    if verdict == "unknown":
        return [evidence_advice(view)]
    return []
