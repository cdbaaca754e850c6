"""The per-run report (`capscan` after an ingest, `show`, `diagnose`) as styled lines.

It imports neither rich nor anything heavy: ``analyzer.output.styled`` writes the
lines plain where no style would show (a pipe, a file, NO_COLOR) and through the
report's SafeConsole on a terminal (``analyzer.output.report.console``)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from analyzer.chips import METAL_FLAG
from analyzer.diagnosis import UNDIAGNOSED, Diagnosis
from analyzer.model import GUEST_PROCESS, figure_key, line_ref, provenance_words, split_figure
from analyzer.output.display import VERDICT_STYLE, cell, fmt_tps, source_span
from analyzer.output.headline import confidence_clause, headline
from analyzer.output.styled import StyledLines
from analyzer.safe_text import clean

if TYPE_CHECKING:
    from analyzer.model import StoredRun


NOT_IN_LOG = "not in the log"
# the verdicts a VM-or-bare-metal answer can change: a clamp is a VM's, and unknown may be one
ENVIRONMENT_MATTERS = frozenset({"capability-downgrade", "unknown"})


def facts_lines(run: StoredRun) -> list[str]:
    """What the log showed, compactly (used under the verdict)."""
    f = run.facts
    lines = []
    # a reader who is no GPU expert reads "not in the log" where a table would print "-"
    dev = f.device.name or "name not in the log"
    fam = ", ".join(str(c) for c in f.device.families) or "not in the log"
    lines.append(f"device     {dev}   families {fam}" + (f"   x{f.device_count}" if f.device_count > 1 else ""))
    caps = f.capabilities
    label = {name: METAL_FLAG[name].label for name in ("simdgroup_reduction", "bfloat", "tensor", "unified_memory")}
    flags = [(label["simdgroup_reduction"], caps.simdgroup_reduction), ("simdgroup mm", caps.simdgroup_mm),
             (label["bfloat"], caps.bfloat), (label["tensor"], caps.tensor),
             (label["unified_memory"], f.device.unified_memory)]
    if all(value is None for _, value in flags):
        lines.append("printed    no capability flags in the log")
    else:
        lines.append("printed    " + ", ".join(f"{name} {NOT_IN_LOG if value is None else cell(value)}"
                                               for name, value in flags))
    extra = []
    if f.cpu_info:
        extra.append(f"cpu_info {f.cpu_info!r}")
    if f.gpu_info:
        extra.append(f"gpu_info {f.gpu_info!r}")
    if f.ollama_app:
        extra.append("the official Ollama.app (hardened runtime: it drops DYLD_* variables)")
    if f.shim:
        extra.append(f"shim {f.shim.name} (apple_family_max={f.shim.apple_family_max})")
    if f.skipped_kernels:
        extra.append(f"{f.skipped_kernels} kernels skipped ({f.skipped_kernels_non_bf16} not bf16)")
    if f.unsupported_ops:
        extra.append("unsupported ops " + ", ".join(f.unsupported_ops))
    if f.offload:
        extra.append(f"offloaded {f.offload[0]}/{f.offload[1]} layers")
    if f.listed_devices is not None:
        extra.append("listed devices: " + (", ".join(f.listed_devices) or "none"))
    if extra:
        lines.append("seen       " + "; ".join(extra))
    if run.throughput:
        parts = []
        for t, config in zip(run.throughput[:8], distinguishing_configs(run.throughput), strict=False):
            sd = t.get("stddev")
            parts.append(f"{t['test']}{f' [{config}]' if config else ''} {fmt_printed(t['tok_s'])}"
                         + (f" ± {fmt_printed(sd)}" if isinstance(sd, (int, float)) else "") + " t/s"
                         + (f" ({reduced_words(t)})" if reduced_words(t) else ""))
        more = f" (+{len(run.throughput) - 8} more)" if len(run.throughput) > 8 else ""
        lines.append("throughput " + ", ".join(parts) + more)
    return lines


def fmt_printed(value: float | None) -> str:
    """A figure as the log printed it: its own digits (412.377, 940.5 as 940.50), never rounded to two
    places nor grouped (the report shows printed figures; fmt_tps is for tables of computed ones)."""
    if not isinstance(value, (int, float)) or not math.isfinite(value) or abs(value) >= 1e9:
        return fmt_tps(value)
    text = repr(float(value))
    if "e" in text:
        return fmt_tps(value)
    return text if len(text.partition(".")[2]) > 2 else f"{value:.2f}"


def reduced_words(entry: dict[str, Any]) -> str | None:
    """'median of 200 rows' for an entry standing for several printed rows (None for a printed row)."""
    reduced = entry.get("reduced")
    if isinstance(reduced, dict) and isinstance(reduced.get("of"), int):
        return f"{reduced.get('by') or 'median'} of {reduced['of']} rows"
    n = entry.get("n")
    return f"median of {n} rows" if isinstance(n, int) and n > 1 else None  # a summary stored before issue 38


def best_of(throughput: list[dict[str, Any]]) -> dict[str, tuple[float, int]]:
    """test -> (its best finite tok/s, how many rows it is the best of)."""
    best: dict[str, tuple[float, int]] = {}
    for t in throughput:
        v = t.get("tok_s")
        if isinstance(v, (int, float)) and 0 < v < math.inf:
            top, n = best.get(t["test"], (0.0, 0))
            best[t["test"]] = (max(top, float(v)), n + (t.get("n") or 1))
    return best


def distinguishing_configs(throughput: list[dict[str, Any]]) -> list[str | None]:
    """Per throughput entry, the parameters of its configuration that tell it apart from the other
    entries of the same test (``threads=4``): each printed figure is one configuration, and this is
    how to find its rows. None where the test has one configuration."""
    parsed = [split_figure(figure_key(t["test"], t.get("config")))[1] for t in throughput]
    # One pass per test: per parameter, how many of the test's figures state it and its first two
    # values. It varies when two values differ or some figure does not state it (comparing each
    # figure with every other was quadratic: a compare table of 40,000 builds took 94 s).
    count: dict[str, int] = {}
    seen: dict[tuple[str, str], tuple[int, set[str]]] = {}
    for t, config in zip(throughput, parsed, strict=True):
        test = t["test"]
        count[test] = count.get(test, 0) + 1
        for p, v in config.items():
            n, values = seen.get((test, p), (0, set()))
            if len(values) < 2:
                values.add(v)
            seen[(test, p)] = (n + 1, values)
    out: list[str | None] = []
    for t, config in zip(throughput, parsed, strict=True):
        test = t["test"]
        varying = [p for p in config
                   if len(seen[(test, p)][1]) > 1 or seen[(test, p)][0] < count[test]]
        out.append(" ".join(f"{p}={config[p]}" for p in varying) or None)
    return out


def run_lines(run: StoredRun, *, max_evidence: int = 10) -> StyledLines:
    """One run's report: headline, where it ran, the verdict and why, what the log showed,
    the baseline, the evidence lines and the next steps."""
    out = StyledLines()
    f = run.facts
    diagnosed = run.diagnosis is not None
    diag = run.diagnosis or UNDIAGNOSED
    verdict = diag.verdict
    out.add(headline(f.program, run.diagnosis, run.throughput), style="bold")
    where = ([f.program or "program not in the log", f.backend or "backend not in the log"]
             if f.program or f.backend else ["program and backend not in the log"])
    if diag.environment:
        where.append(diag.environment + (f" on {diag.host_chip}" if diag.host_chip else ""))
    # The source is a file name, which may hold a newline or an escape: one line, cleaned as log text is.
    span = source_span(clean(run.source or ""), f.first_line, f.last_line, run.source_lines)
    out.add((f"run {run.id}", "bold"), f"  {span}  " + " / ".join(where))
    if diagnosed:
        caps = f.capabilities
        printed = caps.simdgroup_reduction is not None or bool(f.probe)
        notes = ["fixable" if diag.fixable else None, confidence_clause(diag, printed, backend=f.backend,
                                                                          families_printed=bool(f.device.families))]
        present = [n for n in notes if n]
        out.add("  ", (verdict.upper(), VERDICT_STYLE.get(verdict, "")),
                "  (" + ", ".join(present) + ")" if present else "")
        out.add("  " + (diag.summary or ""))
        if diag.fixable and diag.proof:
            # each positive sign the fix rests on, with its line and whose line it is (RunView.remedy_decision):
            # said once when every sign is the guest's own, else per sign
            own = all(p.provenance == GUEST_PROCESS for p in diag.proof)
            out.add("  proof: (each from the guest's own lines)" if own else "  proof:")
            for p in diag.proof:
                at = f"{p.line:>6}" if isinstance(p.line, int) else "     -"
                whose = "" if own else "  [" + clean(provenance_words(str(p.provenance or "not stated"),
                                                                      p.instance)) + "]"
                out.add((f"    {at}  ", "cyan"), clean(str(p.sign or "")) + whose)
        for fnd in diag.findings[1:]:
            if fnd.severity in ("error", "warning"):
                out.add((f"  {fnd.severity}: ", "yellow"), fnd.message)
        if not diag.environment and verdict in ENVIRONMENT_MATTERS:
            # environment is shown only on evidence: say what would decide it, where the answer would change
            # something (a CPU-only run or a hardware limit is the same in a VM and on bare metal)
            env = diag.report_lines.get("environment")
            if env:
                out.add("  environment: ", env, style="dim")
    for line in facts_lines(run):
        out.add("  " + line, style="dim" if diagnosed else "")
    for line in baseline_lines(diag):
        out.add("  " + line, style="dim" if diag.verdict != "virtualization-overhead" else "")
    for line in reference_lines(diag, run.throughput):
        out.add("  " + line, style="dim")
    evidence = _evidence_for(run, diag)
    if evidence:
        out.add("  evidence:")
        for line_no, inner, text in evidence[:max_evidence]:
            out.add((f"    {line_ref(line_no, inner):>6}  ", "cyan"), text[:160])
        if len(evidence) > max_evidence:
            out.add(f"    ... {len(evidence) - max_evidence} more (capscan show {run.id})", style="dim")
    if diag.next_steps:
        out.add("  next:")
        for step in diag.next_steps:
            out.add("    " + step)
    for pred in diag.prediction:
        out.add(f"    expected after the remedy: {pred.test} ~{fmt_tps(pred.predicted_tok_s)} tok/s (bare metal "
                f"{fmt_tps(pred.host_tok_s)}, plus {(pred.per_token_s or 0) * 1000:.2f} ms/token of virtual-GPU "
                f"cost measured on {', '.join(pred.from_models)})", style="dim")
    return out


def reference_lines(diag: Diagnosis, throughput: list[dict[str, Any]]) -> list[str]:
    """A guest without a stored host run, against the bandwidth ceiling (an estimate, never a baseline)."""
    best = best_of(throughput)
    out = []
    for r in diag.reference:
        mine, n = best.get(r.test, (None, 0))
        ceiling = r.ceiling_tok_s
        # the best of several rows is said to be one (a printed figure, never their mean)
        figure = f"{fmt_printed(mine)} t/s" + (f" (best of {n} rows)" if n > 1 else "")
        if mine and ceiling and r.basis.startswith("published: "):
            out.append(f"reference  {r.test} {figure}: {mine / ceiling:.0%} of the {ceiling:,g} t/s published "
                       f"for {r.basis.removeprefix('published: ')}")
        elif mine and ceiling:
            out.append(f"reference  {r.test} {figure}: {mine / ceiling:.0%} of the {ceiling:,.0f} t/s "
                       f"the host's memory bandwidth allows ({r.basis}; an estimate, not a measured host run)")
    return out


def baseline_lines(diag: Diagnosis) -> list[str]:
    """Which bare-metal run a guest is measured against and why (or why none), then the ratios."""
    base = diag.baseline
    if not base:
        return []
    if base.run is None:
        return [f"baseline   none: {base.why}"]
    lines = [f"baseline   bare-metal run {base.run}: {base.why}"]
    paired = diag.paired
    if paired:
        # a figure that is the best of several printed rows says so (issue 38)
        parts = [f"{t.test} {t.ratio or 0:.1%} ({(t.per_token_s or 0) * 1000:+.2f} ms/token"
                 + (f", best of {t.rows} rows" if (t.rows or 1) > 1 else "") + ")"
                 for t in paired.tests[:4]]
        lines.append(f"{'vs run ' + str(paired.run):<10} " + ", ".join(parts))
    return lines


def _evidence_for(run: StoredRun, diag: Diagnosis) -> list[tuple[int, int | None, str]]:
    # one entry per line read, not per physical line: a log inside one JSON string (a CI artifact's
    # stderr_tail) holds many lines on one physical line, and each is evidence of its own
    seen: set[tuple[int, str]] = set()
    out: list[tuple[int, int | None, str]] = []
    for finding in diag.findings:
        for ev in finding.evidence:
            if (ev.line, ev.text) not in seen:
                seen.add((ev.line, ev.text))
                out.append((ev.line, ev.inner, ev.text))
    if not out:  # one line can carry several events (prompt and generation speed): show it once
        out = list(dict.fromkeys((e.line, e.inner, e.text) for e in run.evidence))
    return sorted(out, key=lambda e: e[0])  # (stable: a physical line's inner lines stay in their order)
