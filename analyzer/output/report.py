"""Human-readable output: the per-run report, the runs table, the formats list.

Colour only on a terminal, and never when NO_COLOR is set (rich handles both
when the Console is created with ``force_terminal=None``).

Log text is hostile (see ``analyzer.safe_text``). The console made here is a
``SafeConsole``, the output boundary for everything rich prints: it never reads
markup or emoji codes in what it is given (a device named ``[/]`` or
``[link=...]`` is printed as written), and every piece of text it renders is
cleaned of escape sequences, control and bidi characters, whatever built it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Iterable, TextIO, cast

from rich.console import Console
from rich.table import Table
from rich.text import Text

from analyzer.model import StoredRun
from analyzer.output.display import VERDICT_STYLE, cell, fmt_tps
from analyzer.output.headline import confidence_clause, headline
from analyzer.output.safe_console import SafeConsole
from analyzer.safe_text import unfiltered

if TYPE_CHECKING:
    from rich.console import JustifyMethod

EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE


class _Console(SafeConsole):
    def on_broken_pipe(self) -> None:
        """The reader went away (`capscan | head`). rich exits 1, which would read as a
        --fail-on hit; exit as a shell reports SIGPIPE instead."""
        self.quiet = True
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self.file.fileno())
        except (OSError, ValueError):
            pass
        raise SystemExit(EXIT_BROKEN_PIPE)


def console(file: TextIO) -> Console:
    """Styles only on a terminal; NO_COLOR (any value) turns every escape code off."""
    plain = bool(os.environ.get("NO_COLOR"))
    file = unfiltered(file)  # the console cleans its own output, and its style codes must survive
    return _Console(file=file, color_system=None if plain else "auto", highlight=False, soft_wrap=True,
                    width=max(100, Console(file=file).width) if file.isatty() else 120)


def _flag(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def facts_lines(run: StoredRun) -> list[str]:
    """What the log showed, compactly (used under the verdict)."""
    f = run.facts
    lines = []
    dev = f.device.name or "(not named)"
    fam = ", ".join(str(c) for c in f.device.families) or "-"
    lines.append(f"device     {dev}   families {fam}" + (f"   x{f.device_count}" if f.device_count > 1 else ""))
    caps = f.capabilities
    lines.append(
        f"printed    simdgroup reduction {_flag(caps.simdgroup_reduction)}, simdgroup mm {_flag(caps.simdgroup_mm)}, "
        f"bfloat {_flag(caps.bfloat)}, tensor {_flag(caps.tensor)}, unified memory {_flag(f.device.unified_memory)}")
    extra = []
    if f.cpu_info:
        extra.append(f"cpu_info {f.cpu_info!r}")
    if f.gpu_info:
        extra.append(f"gpu_info {f.gpu_info!r}")
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
        for t in run.throughput[:8]:
            parts.append(f"{t['test']} {fmt_tps(t['tok_s'])} t/s" + (f" (n={t['n']})" if t.get("n", 1) > 1 else ""))
        more = f" (+{len(run.throughput) - 8} more)" if len(run.throughput) > 8 else ""
        lines.append("throughput " + ", ".join(parts) + more)
    return lines


def render_run(out: Console, run: StoredRun, *, max_evidence: int = 10) -> None:
    f = run.facts
    diag = run.diagnosis or {}
    verdict = diag.get("verdict", "unknown")
    out.print(Text(headline(f.program, run.diagnosis, run.throughput), style="bold"))
    head = Text(f"run {run.id}", style="bold")
    where = [f.program or "?", f.backend or "?"]
    if diag.get("environment"):
        where.append(diag["environment"] + (f" on {diag['host_chip']}" if diag.get("host_chip") else ""))
    head.append(f"  {run.source}:{f.first_line}-{f.last_line}  " + " / ".join(where))
    out.print(head)
    if diag:
        v = Text("  ")
        v.append(verdict.upper(), style=VERDICT_STYLE.get(verdict, ""))
        caps = f.capabilities
        printed = caps.simdgroup_reduction is not None or bool(f.probe)
        notes = ["fixable" if diag.get("fixable") else None, confidence_clause(diag, printed)]
        present = [n for n in notes if n]
        if present:
            v.append("  (" + ", ".join(present) + ")")
        out.print(v)
        out.print("  " + diag.get("summary", ""))
        for fnd in diag.get("findings", [])[1:]:
            if fnd["severity"] in ("error", "warning"):
                out.print(Text(f"  {fnd['severity']}: ", style="yellow") + Text(fnd["message"]))
        if not diag.get("environment"):
            # environment is shown only on evidence: say what would decide it
            env = next((f for f in diag.get("findings", []) if f["rule"] == "environment"), None)
            if env:
                out.print(Text("  environment: ", style="dim") + Text(env["message"], style="dim"))
    for line in facts_lines(run):
        out.print("  " + line, style="dim" if diag else "")
    for line in baseline_lines(diag):
        out.print("  " + line, style="dim" if diag.get("verdict") != "virtualization-overhead" else "")
    evidence = _evidence_for(run, diag)
    if evidence:
        out.print("  evidence:")
        for line_no, text in evidence[:max_evidence]:
            out.print(Text(f"    {line_no:>6}  ", style="cyan") + Text(text[:160]))
        if len(evidence) > max_evidence:
            out.print(f"    ... {len(evidence) - max_evidence} more (capscan show {run.id})", style="dim")
    if diag.get("next_steps"):
        out.print("  next:")
        for step in diag["next_steps"]:
            out.print("    " + step)
    for p in diag.get("prediction", []):
        out.print(f"    expected after the remedy: {p['test']} ~{fmt_tps(p['predicted_tok_s'])} tok/s (bare metal "
                  f"{fmt_tps(p['host_tok_s'])}, plus {p['per_token_s'] * 1000:.2f} ms/token of virtual-GPU cost measured "
                  f"on {', '.join(p['from_models'])})", style="dim")


def baseline_lines(diag: dict[str, Any]) -> list[str]:
    """Which bare-metal run a guest is measured against and why (or why none), then the ratios."""
    base = diag.get("baseline")
    if not base:
        return []
    if base.get("run") is None:
        return [f"baseline   none: {base['why']}"]
    lines = [f"baseline   bare-metal run {base['run']}: {base['why']}"]
    paired = diag.get("paired")
    if paired:
        parts = [f"{t['test']} {t['ratio']:.1%} ({t['per_token_s'] * 1000:+.2f} ms/token)" for t in paired["tests"][:4]]
        lines.append(f"{'vs run ' + str(paired['run']):<10} " + ", ".join(parts))
    return lines


def _evidence_for(run: StoredRun, diag: dict[str, Any]) -> list[tuple[int, str]]:
    seen: set[int] = set()
    out: list[tuple[int, str]] = []
    for finding in diag.get("findings", []):
        for ev in finding.get("evidence", []):
            if ev["line"] not in seen:
                seen.add(ev["line"])
                out.append((ev["line"], ev["text"]))
    if not out:  # one line can carry several events (prompt and generation speed): show it once
        out = list({e.line: (e.line, e.text) for e in run.evidence}.values())
    return sorted(out)


def runs_table(rows: Iterable[dict[str, Any]]) -> Table:
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col, justify in (("id", "right"), ("when", "left"), ("source", "left"), ("program", "left"),
                         ("device", "left"), ("env", "left"), ("verdict", "left"), ("best pp", "right"),
                         ("best tg", "right")):
        table.add_column(col, justify=cast("JustifyMethod", justify), no_wrap=col != "source", overflow="ellipsis")
    for r in rows:
        verdict = r.get("verdict") or "-"
        table.add_row(str(r["id"]), (r["created_at"] or "")[:16].replace("T", " "), _short(r["source"], 28),
                      r["program"] or "-", _short(r["device"] or "-", 28), r.get("environment") or "-",
                      Text(verdict, style=VERDICT_STYLE.get(verdict, "")), fmt_tps(r["best_pp"]), fmt_tps(r["best_tg"]))
    return table


def _short(s: str, n: int) -> str:
    return s if len(s) <= n else "…" + s[-(n - 1):]


def render_compare(out: Console, doc: dict[str, Any]) -> None:
    for pair in doc["pairs"]:
        out.print(Text(f"run {pair['a']} (A) vs run {pair['b']} (B)", style="bold"))
        caps = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("", "A", "B"):
            caps.add_column(col)
        for row in pair["capabilities"]:
            style = "yellow" if row["differs"] else ""
            caps.add_row(row["field"], cell(row["a"]), cell(row["b"]), style=style)
        out.print(caps)
        if pair["tests"]:
            tp = Table(box=None, header_style="bold", pad_edge=False)
            for col in ("test", "A tok/s", "B tok/s", "B/A", "B - A per token"):
                tp.add_column(col, justify="left" if col == "test" else "right")
            for t in pair["tests"]:
                tp.add_row(t["test"], fmt_tps(t["a_tok_s"]), fmt_tps(t["b_tok_s"]), f"{t['ratio']:.1%}",
                           f"{t['per_token_s'] * 1000:+.3f} ms")
            out.print(tp)
        else:
            out.print("  no test in common", style="dim")
        out.print()
    dec = doc.get("decomposition")
    if dec:
        out.print(Text(f"gap decomposition: stock run {dec['stock']}, remedied run {dec['remedied']}, "
                       f"host run {dec['host']}", style="bold"))
        t = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("test", "stock", "remedied", "host", "excess/token", "downgrade", "residual"):
            t.add_column(col, justify="left" if col == "test" else "right")
        for row in dec["tests"]:
            t.add_row(row["test"], fmt_tps(row["stock_tok_s"]), fmt_tps(row["remedied_tok_s"]),
                      fmt_tps(row["host_tok_s"]), f"{row['excess_s'] * 1000:.3f} ms",
                      f"{row['downgrade_share']:.1%}", f"{row['residual_share']:.1%}")
        out.print(t)

