"""One run: verdict and why, the capability matrix, findings with their
evidence lines, throughput against the host, and the remedy plan."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any, cast

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from analyzer.model import StoredRun, line_ref
from analyzer.output.display import clean_run, source_span
from analyzer.output.headline import best_speeds, confidence_clause, headline
from analyzer.output.run_report import best_of, reduced_words
from analyzer.safe_text import clean, clean_deep
from analyzer.store import browse
from analyzer.store.queries import load_run
from analyzer.tui.messages import PlanLoaded, RunLoaded
from analyzer.tui.model import (
    VERDICT_STYLE,
    bar,
    capability_matrix,
    fmt_tps,
    host_info,
    source_name,
    utc_minutes,
)
from analyzer.tui.screens.base import CapscanScreen

if TYPE_CHECKING:
    from rich.console import JustifyMethod

SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow", "info": "cyan"}
STATUS_STYLE = {"downgraded": "bold red", "clamped": "bold red", "not on this chip": "magenta", "on": "green"}
MAX_EVIDENCE = 12


class DetailScreen(CapscanScreen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("space", "mark", "mark"),
        Binding("c", "app.compare", "compare"),
        Binding("y", "copy_plan", "copy commands"),
        Binding("n", "neighbour(True)", "next run", show=False),
        Binding("p", "neighbour(False)", "previous run", show=False),
    ]

    def __init__(self, run_id: int) -> None:
        super().__init__()
        self.run_id = run_id
        self.run: StoredRun | None = None
        self.baseline: StoredRun | None = None
        self.plan: dict[str, Any] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="detail"):
            yield Static(f"loading run {self.run_id}…", id="head")
            yield Static(id="verdict")
            yield Static(id="caps", classes="section")
            yield Static(id="findings", classes="section")
            yield Static(id="throughput", classes="section")
            yield Static("remedy plan: loading…", id="remedy", classes="section")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#detail").focus()
        self._load()

    # -- workers ------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="detail", exit_on_error=False)
    def _load(self) -> None:
        with self.capscan.store.database() as db:
            run = load_run(db, self.run_id)
            baseline = None
            if run is not None:
                from analyzer.pipeline import diagnose_to_read

                diagnose_to_read(db, run)  # a stored verdict is a claim: decided again, as `show` does
                bid = browse.baseline_for(db.conn, run.id, run.facts.model, run.diagnosis)
                baseline = load_run(db, bid) if bid is not None else None
        # log text is shown only cleaned (older databases may hold escape sequences)
        self.post_message(RunLoaded(clean_run(run) if run is not None else None,
                                    clean_run(baseline) if baseline is not None else None))
        if run is not None:
            self._load_plan()

    @work(thread=True, exclusive=True, group="plan", exit_on_error=False)
    def _load_plan(self) -> None:
        try:
            from analyzer.remedy.plan import build_plan
        except ImportError:
            self.post_message(PlanLoaded(None, "the remedy planner (analyzer.remedy.plan) is not in this build"))
            return
        try:
            with self.capscan.store.database() as db:
                plan = build_plan(db, self.run_id)
        except Exception as exc:  # noqa: BLE001 - the plan is advice: show why it is missing, keep the screen
            self.post_message(PlanLoaded(None, clean(f"no plan: {exc}")))
            return
        self.post_message(PlanLoaded(clean_deep(plan), None))

    # -- rendering ----------------------------------------------------------------------

    def on_run_loaded(self, message: RunLoaded) -> None:
        self.run, self.baseline = message.run, message.baseline
        if self.run is None:
            self.query_one("#head", Static).update(Text(f"run {self.run_id} is not in this database", style="bold red"))
            self.query_one("#remedy", Static).update("")
            return
        run = self.run
        self.sub_title = f"run {run.id}"
        self.query_one("#head", Static).update(self._head(run))
        self.query_one("#verdict", Static).update(self._verdict(run))
        self.query_one("#caps", Static).update(self._caps(run))
        self.query_one("#findings", Static).update(self._findings(run))
        self.query_one("#throughput", Static).update(self._throughput(run))

    def on_plan_loaded(self, message: PlanLoaded) -> None:
        self.plan = message.plan
        self.query_one("#remedy", Static).update(self._remedy(message.plan, message.error))

    def _head(self, run: StoredRun) -> Text:
        f = run.facts
        t = Text(no_wrap=True, overflow="ellipsis")  # two lines at any width
        t.append(f"run {run.id}", style="bold")
        # (source_span: a piped input's name ends in a time, which ':1-62' would run into)
        t.append("  " + source_span(source_name(run.source), f.first_line, f.last_line, run.source_lines), style="cyan")
        t.append("  " + " / ".join(x for x in (f.program, f.backend) if x) if (f.program or f.backend) else "")
        t.append(f"\n{f.device.name or 'no device named'}")
        if f.model:
            t.append(f"  ·  {f.model}")
        t.append(f"  ·  ingested {utc_minutes(run.created_at)} UTC", style="dim")
        return t

    def _verdict(self, run: StoredRun) -> Text:
        diag = run.diagnosis
        verdict = diag.verdict if diag else "not diagnosed"
        t = Text()
        t.append(f" {verdict.upper()} ", style=VERDICT_STYLE.get(verdict, "") + " reverse")
        caps = run.facts.capabilities
        printed = caps.simdgroup_reduction is not None or bool(run.facts.probe)
        notes = [diag and diag.environment and (diag.environment + (f" on {diag.host_chip}" if diag.host_chip else "")),
                 "fixable" if diag and diag.fixable else None, confidence_clause(diag, printed, backend=run.facts.backend,
                                                                    families_printed=bool(run.facts.device.families))]
        present = [n for n in notes if n]
        if present:
            t.append("  " + " · ".join(present))
        if diag:
            t.append("\n" + headline(run.facts.program, diag, run.throughput), style="bold")
        speeds = self._speeds(run)
        if speeds:
            t.append("\n")
            t.append(speeds)
        t.append("\n" + ((diag and diag.summary) or "This run has not been diagnosed yet (`capscan show "
                                                       f"{run.id}` diagnoses it)."))
        if diag and diag.fixable and diag.proof:  # the signs the fix rests on (RunView.remedy_decision)
            t.append("\nproof:", style="bold")
            for p in diag.proof:
                line = p.line
                t.append(f"\n  {line:>6}  " if isinstance(line, int) else "\n       -  ", style="cyan")
                t.append(clean(str(p.sign or "")))
        return t

    def _speeds(self, run: StoredRun) -> Text | None:
        """The best speed per test, against the host's when a bare-metal baseline is known."""
        mine = best_speeds(run.throughput)
        if not mine:
            return None
        host = best_speeds(self.baseline.throughput) if self.baseline is not None else {}
        rows = best_of(run.throughput)
        t = Text("best ", style="dim")
        for i, (test, tok_s) in enumerate(list(mine.items())[:4]):
            if i:
                t.append("  ·  ", style="dim")
            t.append(f"{test} ")
            t.append(f"{fmt_tps(tok_s)} tok/s", style="bold")
            if rows.get(test, (0, 1))[1] > 1:  # one figure standing for several printed rows says so
                t.append(f" (best of {rows[test][1]} rows)", style="dim")
            if host.get(test):
                t.append(f" ({tok_s / host[test]:.0%} of host)", style="dim")
        return t

    def _caps(self, run: StoredRun) -> Group:
        host = host_info(run, self.baseline)
        table = Table(box=None, header_style="bold", pad_edge=False, expand=False)
        for col in ("capability", "device reported", "host chip supports", "runtime turned on", ""):
            table.add_column(col, no_wrap=True)
        for row in capability_matrix(run, host):
            status = row["status"]
            table.add_row(row["capability"], row["device"], row["host"], row["runtime"],
                          Text(status, style=STATUS_STYLE.get(status, "")))
        title = Text("Capabilities", style="bold underline")
        where = Text(f"host: {host.chip or 'unknown'} ({host.basis})", style="dim")
        return Group(title, where, table)

    def _findings(self, run: StoredRun) -> Group:
        title = Text("Findings", style="bold underline")
        findings = run.diagnosis.findings if run.diagnosis else []
        if not findings:
            return Group(title, Text("none", style="dim"))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1)
        for fnd in findings:
            body = Text()
            body.append(fnd.rule, style="bold")
            body.append(f"  {fnd.message}")
            grid.add_row(Text(fnd.severity, style=SEVERITY_STYLE.get(fnd.severity, "")), body)
            ev = fnd.evidence
            for e in ev[:MAX_EVIDENCE]:
                line = Text(f"{line_ref(e.line, e.inner):>6} │ ", style="cyan")
                line.append(e.text[:200])
                grid.add_row("", line)
            if len(ev) > MAX_EVIDENCE:
                grid.add_row("", Text(f"… {len(ev) - MAX_EVIDENCE} more lines (capscan show {run.id})", style="dim"))
        return Group(title, grid)

    def _throughput(self, run: StoredRun) -> Group:
        from analyzer.model import figure_key, like_pairs
        from analyzer.rules.compare import best_by_test

        title = Text("Throughput", style="bold underline")
        if not run.throughput:
            return Group(title, Text("no throughput lines in this log", style="dim"))
        host = best_by_test(self.baseline) if self.baseline else {}
        table = Table(box=None, header_style="bold", pad_edge=False)
        # without a stored host there is nothing to be a share of: no "of host" column, and a bar only
        # against the same test's fastest row (a full-width bar per row said "as fast as the host")
        for col, just in (("test", "left"), ("tok/s", "right"), ("±", "right"), ("n", "right"), ("line", "right"),
                          ("", "left"), *((("of host", "right"),) if host else ())):
            table.add_column(col, justify=cast("JustifyMethod", just), no_wrap=True)
        fastest: dict[str, float] = {}
        for t in run.throughput:
            v = t["tok_s"]
            if v is not None and v == v and v != float("inf"):
                fastest[t["test"]] = max(fastest.get(t["test"], 0.0), v)
        style = VERDICT_STYLE.get(run.diagnosis.verdict if run.diagnosis else "", "").replace("bold ", "") or "white"
        configs: dict[str, set] = {}  # a test's configuration is shown only when it tells two figures apart
        for t in run.throughput:
            configs.setdefault(t["test"], set()).add(t.get("config"))
        for t in run.throughput:
            key = figure_key(t["test"], t.get("config"))
            paired = dict(like_pairs({key: 0.0}, host))
            h = host[paired[key]] if key in paired else None
            if host:
                scale = max(v for v in (t["tok_s"], h) if v is not None and v == v and v != float("inf")) \
                    if t["tok_s"] not in (None, float("inf")) else 0
            else:  # the test's own fastest row; a test of one row gets no bar
                scale = fastest.get(t["test"], 0) if len(configs[t["test"]]) > 1 else 0
            name = key if len(configs[t["test"]]) > 1 else t["test"]
            # a printed row (n 1), or one entry standing for many rows of one configuration: 'median of 200'
            rows = (reduced_words(t) or "").removesuffix(" rows") or str(t.get("n") or 1)
            share = (f"{t['tok_s'] / h:.1%}" if h and t["tok_s"] else "",) if host else ()
            table.add_row(name, fmt_tps(t["tok_s"]), fmt_tps(t["stddev"]) if t["stddev"] is not None else "",
                          rows, str(t["line"] or ""), Text(bar(t["tok_s"], scale) if scale else "", style=style),
                          *share)
            if h and self.baseline is not None:
                table.add_row(Text(f"  host run {self.baseline.id}", style="dim"), Text(fmt_tps(h), style="dim"),
                              "", "", "", Text(bar(h, scale), style="green"), "")
        base = run.diagnosis.baseline if run.diagnosis else None
        if self.baseline:
            note = Text(f"bars: this run against bare-metal run {self.baseline.id} "
                        f"({base.why if base else 'its baseline'})", style="dim")
        elif base and base.why:
            note = Text(f"no baseline: {base.why}", style="dim")
        else:
            note = Text("no bare-metal baseline for this run", style="dim")
        return Group(title, table, note)

    def _remedy(self, plan: dict[str, Any] | None, error: str | None) -> Group:
        title = Text("Remedy plan", style="bold underline")
        if plan is None:
            steps = self.run.diagnosis.next_steps if self.run and self.run.diagnosis else []
            parts: list = [title, Text(error or "no plan", style="dim")]
            if steps:
                parts.append(Text("next steps from the diagnosis:"))
                parts.extend(Text("  " + s) for s in steps)
            return Group(*parts)
        if not plan.get("actionable"):
            return Group(title, Text("nothing to run: " + (plan.get("refusal") or "this run needs no remedy"),
                                     style="yellow"))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(no_wrap=True)
        grid.add_column(ratio=1)
        for i, step in enumerate(plan.get("steps") or [], 1):
            grid.add_row(Text(f"{i}.", style="bold"), Text(step.get("title", ""), style="bold"))
            grid.add_row("", Text("$ " + _shell(step), style="green"))
            if step.get("check"):
                grid.add_row("", Text(step["check"], style="dim"))
        parts = [title, grid]
        if plan.get("where") == "guest":  # read off macOS: the steps are the guest's, not this machine's
            parts.insert(1, Text(f"in the macOS guest (this machine is {plan.get('platform')}):", style="bold"))
        for note in plan.get("notes") or []:
            parts.append(Text("note: " + note, style="dim"))
        parts.append(Text("y copies the commands (OSC 52; in macOS Terminal select them with the mouse instead)",
                          style="dim"))
        return Group(*parts)

    # -- actions ------------------------------------------------------------------------

    def action_mark(self) -> None:
        self.capscan.toggle_mark(self.run_id)
        self.notify(f"run {self.run_id} " + ("marked" if self.run_id in self.capscan.marked else "unmarked"), timeout=2)

    def action_copy_plan(self) -> None:
        steps = (self.plan or {}).get("steps") or []
        if not (self.plan or {}).get("actionable") or not steps:
            self.notify("no commands to copy for this run", timeout=3)
            return
        self.capscan.copy_to_clipboard("\n".join(_shell(s) for s in steps) + "\n")
        self.notify(f"copied {len(steps)} command(s)", timeout=3)

    def action_neighbour(self, older: bool) -> None:
        self._neighbour(older)

    @work(thread=True, exclusive=True, group="neighbour", exit_on_error=False)
    def _neighbour(self, older: bool) -> None:
        flt = self.capscan.runs_screen.flt
        with self.capscan.store.read() as conn:
            rid = browse.neighbour(conn, self.run_id, flt, older)
        if rid is not None:
            self.capscan.call_from_thread(self._switch, rid)

    def _switch(self, run_id: int) -> None:
        self.capscan.switch_screen(DetailScreen(run_id))


def _shell(step: dict[str, Any]) -> str:
    if step.get("shell"):
        return str(step["shell"])
    return shlex.join(str(a) for a in step.get("argv") or [])
