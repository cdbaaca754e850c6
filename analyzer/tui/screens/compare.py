"""Marked runs side by side: capability diff, throughput ratios and per-token
overhead (two runs), and the gap decomposition (three runs of one model:
stock guest, remedied guest, bare-metal host). The numbers come from
`analyzer.rules.compare`; this screen only lays them out."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from analyzer.model import StoredRun
from analyzer.output.display import cell as _cell  # noqa: E402
from analyzer.output.display import clean_run
from analyzer.store.queries import load_run
from analyzer.tui.messages import CompareLoaded
from analyzer.tui.model import VERDICT_STYLE, bar, fmt_tps, short, source_name
from analyzer.tui.screens.base import CapscanScreen

if TYPE_CHECKING:
    from rich.console import JustifyMethod


def _env(run: StoredRun) -> str | None:
    return run.diagnosis.environment if run.diagnosis else None


def order_pair(runs: list[StoredRun]) -> tuple[StoredRun, StoredRun]:
    """A is the baseline: the bare-metal run when exactly one of the two is."""
    a, b = runs[0], runs[1]
    if _env(b) == "bare-metal" and _env(a) != "bare-metal":
        a, b = b, a
    return a, b


class CompareScreen(CapscanScreen):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "back"),
        Binding("x", "swap", "swap A/B"),
    ]

    def __init__(self, run_ids: list[int]) -> None:
        super().__init__()
        self.run_ids = run_ids
        self.swapped = False
        self.loaded: CompareLoaded | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="compare"):
            # who, then the numbers (speeds, the gap decomposition), then the capabilities that explain them
            yield Static("comparing runs " + ", ".join(f"#{r}" for r in self.run_ids) + "…", id="who",
                         classes="section")
            yield Static(id="chart", classes="section")
            yield Static(id="ratios", classes="section")
            yield Static(id="decomposition", classes="section")
            yield Static(id="capdiff", classes="section")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = "compare " + " · ".join(f"#{r}" for r in self.run_ids)
        self.query_one("#compare").focus()
        self._load(self.swapped)

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False)
    def _load(self, swapped: bool) -> None:
        from analyzer.pipeline import diagnose_to_read
        from analyzer.rules.compare import assign_roles, compare_runs, decompose

        with self.capscan.store.database() as db:  # a stored verdict is a claim: decided again, as `compare` does
            runs = [clean_run(diagnose_to_read(db, r)) for r in (load_run(db, rid) for rid in self.run_ids)
                    if r is not None]
        note = None
        pair = dec = None
        if len(runs) < 2:
            note = "fewer than two of the marked runs are still in the database"
        elif len(runs) == 2:
            a, b = order_pair(runs)
            if swapped:
                a, b = b, a
            pair = compare_runs(a, b)
        else:
            roles = assign_roles(runs)
            if roles is None:
                note = ("the gap decomposition needs one bare-metal run and two VM runs (stock and remedied); "
                        "showing the first two marked runs")
                a, b = order_pair(runs[:2])
                pair = compare_runs(b, a) if swapped else compare_runs(a, b)
            else:
                stock, remedied, host = roles
                dec = decompose(stock, remedied, host)
                pair = compare_runs(host, stock) if not swapped else compare_runs(host, remedied)
        models = {r.facts.model for r in runs}
        if len(models) > 1:
            extra = "the runs are of different models: ratios compare apples to oranges"
            note = f"{note}; {extra}" if note else extra
        self.post_message(CompareLoaded(runs, pair, dec, note))

    def on_compare_loaded(self, message: CompareLoaded) -> None:
        self.loaded = message
        by_id = {r.id: r for r in message.runs}
        shown = [(label, by_id[rid]) for label, rid in self._labels(message).items() if rid in by_id]
        # the same source and device widths on every line, so the columns line up
        fixed = max((len(f"run {r.id}  {_env(r) or '-'}  {r.diagnosis.verdict if r.diagnosis else '-'}")
                     for _, r in shown), default=0)
        room = self._width() - 9 - fixed
        who = Group(*[self._who(label, run, room) for label, run in shown],
                    *([Text(message.note, style="yellow")] if message.note else []))
        self.query_one("#who", Static).update(who)
        self.query_one("#capdiff", Static).update(self._capdiff(message))
        self.query_one("#chart", Static).update(self._chart(message))
        self.query_one("#ratios", Static).update(self._ratios(message))
        self.query_one("#decomposition", Static).update(self._decomposition(message.decomposition))

    def _labels(self, m: CompareLoaded) -> dict[str, int]:
        if m.decomposition:
            d = m.decomposition
            return {"stock": d["stock"], "remedied": d["remedied"], "host": d["host"]}
        if m.pair:
            return {"A": m.pair["a"], "B": m.pair["b"]}
        return {}

    def _who(self, label: str, run: StoredRun, room: int) -> Text:
        """One line at any width: id, environment and verdict always; source and device as room allows."""
        verdict = run.diagnosis.verdict if run.diagnosis else "-"
        t = Text(no_wrap=True, overflow="ellipsis")
        t.append(f"{label:>8} ", style="bold")
        t.append(f"run {run.id}  ")
        if room >= 30:
            src = min(34, max(12, room // 2))
            t.append(f"{short(source_name(run.source), src, keep_end=True):<{src}}  ", style="cyan")
            dev = min(26, room - src - 4)
            if dev >= 10:
                t.append(f"{short(run.facts.device.name, dev):<{dev}}  ")
        t.append(f"{_env(run) or '-'}  ")
        t.append(verdict, style=VERDICT_STYLE.get(verdict, ""))
        return t

    def _width(self) -> int:
        """Cells a line may use: the screen less the padding and the scrollbar."""
        return (self.size.width or self.capscan.size.width) - 4

    def _capdiff(self, m: CompareLoaded) -> Group:
        title = Text("Capabilities", style="bold underline")
        if m.decomposition:
            from analyzer.rules.compare import compare_runs

            by_id = {r.id: r for r in m.runs}
            d = m.decomposition
            s_r = compare_runs(by_id[d["stock"]], by_id[d["remedied"]])["capabilities"]
            s_h = compare_runs(by_id[d["stock"]], by_id[d["host"]])["capabilities"]
            table = Table(box=None, header_style="bold", pad_edge=False)
            for col in ("", "stock", "remedied", "host"):
                table.add_column(col, no_wrap=True)
            for x, y in zip(s_r, s_h, strict=False):
                differs = x["differs"] or y["differs"]
                table.add_row(x["field"], _cell(x["a"]), _cell(x["b"]), _cell(y["b"]),
                              style="yellow" if differs else "")
            return Group(title, table)
        if not m.pair:
            return Group(title, Text("nothing to compare", style="dim"))
        table = Table(box=None, header_style="bold", pad_edge=False)
        for col in ("", f"A  run {m.pair['a']}", f"B  run {m.pair['b']}", ""):
            table.add_column(col, no_wrap=True)
        for row in m.pair["capabilities"]:
            table.add_row(row["field"], _cell(row["a"]), _cell(row["b"]),
                          Text("differs", style="bold yellow") if row["differs"] else "",
                          style="yellow" if row["differs"] else "")
        return Group(title, table)

    def _chart(self, m: CompareLoaded):
        from analyzer.output.chart import chart_groups, chart_table

        doc: dict[str, Any] = {"pairs": [m.pair] if m.pair else []}
        if m.decomposition:
            doc["decomposition"] = m.decomposition
        return chart_table(chart_groups(doc), columns=self._width())

    def _ratios(self, m: CompareLoaded) -> Group:
        pair = m.pair
        title = Text("Throughput" + ("  (B/A, and what B pays per token over A)" if pair else ""),
                     style="bold underline")
        if not pair:
            return Group(title)
        if not pair["tests"]:
            return Group(title, Text("no test in common", style="dim"))
        table = Table(box=None, header_style="bold", pad_edge=False)
        for col, just in (("test", "left"), (f"A #{pair['a']} tok/s", "right"), (f"B #{pair['b']} tok/s", "right"),
                          ("B/A", "right"),
                          ("", "left"), ("B − A per token", "right")):
            table.add_column(col, justify=cast("JustifyMethod", just), no_wrap=True)
        for t in pair["tests"]:
            ratio = t["ratio"]
            style = "green" if ratio >= 0.9 else "yellow" if ratio >= 0.5 else "red"
            table.add_row(t["test"], fmt_tps(t["a_tok_s"]), fmt_tps(t["b_tok_s"]), Text(f"{ratio:.1%}", style=style),
                          Text(bar(min(ratio, 1.0), 1.0, 20), style=style),
                          f"{t['per_token_s'] * 1000:+.3f} ms")
        return Group(title, table)

    def _decomposition(self, dec: dict[str, Any] | None) -> Group:
        if not dec:
            return Group()
        title = Text(f"Gap decomposition  (stock run {dec['stock']}, remedied run {dec['remedied']}, "
                     f"host run {dec['host']})", style="bold underline")
        if not dec["tests"]:
            return Group(title, Text("no test all three runs share", style="dim"))
        table = Table(box=None, header_style="bold", pad_edge=False)
        for col, just in (("test", "left"), ("stock", "right"), ("remedied", "right"), ("host", "right"),
                          ("excess/token", "right"), ("downgrade", "right"), ("residual", "right"), ("", "left")):
            table.add_column(col, justify=cast("JustifyMethod", just), no_wrap=True)
        width = min(24, self._width() - 76)  # the stacked bar only where the numbers leave room for it
        width = width if width >= 8 else 0
        for row in dec["tests"]:
            down = max(0.0, min(1.0, row["downgrade_share"]))
            resid = max(0.0, min(1.0 - down, row["residual_share"]))
            n_down = round(down * width)
            n_res = round(resid * width)
            stacked = Text("█" * n_down, style="red") + Text("█" * n_res, style="cyan")
            table.add_row(row["test"], fmt_tps(row["stock_tok_s"]), fmt_tps(row["remedied_tok_s"]),
                          fmt_tps(row["host_tok_s"]), f"{row['excess_s'] * 1000:.3f} ms",
                          Text(f"{row['downgrade_share']:.1%}", style="red"),
                          Text(f"{row['residual_share']:.1%}", style="cyan"), stacked)
        if not width:
            return Group(title, table)
        legend = Text.assemble(("█", "red"), " the capability downgrade (removed by the remedy)   ",
                               ("█", "cyan"), " the virtual GPU's own per-token cost", style="dim")
        return Group(title, table, legend)

    def action_swap(self) -> None:
        self.swapped = not self.swapped
        self._load(self.swapped)
