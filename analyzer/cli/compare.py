"""``compare``: two runs side by side, or the gap decomposition of three."""

from __future__ import annotations

from typing import Any, Iterator, TextIO

import click

from analyzer.cli.exits import CapscanError
from analyzer.cli.options import Options, extra_install, no_runs_stored, open_existing_db
from analyzer.cli.output import Result, output_options, verdict_of
from analyzer.cli.runs import resolve_run

COLUMNS = ("a", "b", "test", "a_tok_s", "b_tok_s", "ratio", "per_token_ms")


PLOT_SUFFIXES = (".svg", ".png")


@click.command()
@click.argument("run_refs", metavar="RUN_A RUN_B [RUN_C]", nargs=-1, required=True)
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write the chart as an image to attach: FILE.svg, or FILE.png (needs capscan[png]).")
@output_options("db", "formats", "fail_on")
def compare(opts: Options, run_refs: tuple[str, ...], plot_path: str | None) -> Result:
    """Capability diff, throughput ratios (B/A) and per-token cost of two runs;
    with three runs of one model (stock guest, remedied guest, host), the gap
    decomposition.

    Examples:

    \b
    $ capscan compare 1 2                 # guest (A) against host (B)
    $ capscan compare 1 2 3               # stock guest, remedied guest, host
    $ capscan compare 1 2 --markdown      # for a PR comment"""
    from analyzer.rules.compare import assign_roles, compare_runs, decompose

    if len(run_refs) not in (2, 3):
        raise click.UsageError("compare takes two runs (or three: stock guest, remedied guest, host)")
    if plot_path is not None and not plot_path.lower().endswith(PLOT_SUFFIXES):
        raise click.UsageError(f"--plot writes .svg or .png, not {plot_path!r}")
    database = open_existing_db(opts)
    if database is None:
        raise no_runs_stored(opts)
    ids = [resolve_run(database, r) for r in run_refs]
    if len(set(ids)) != len(ids):
        twice = next(i for i in ids if ids.count(i) > 1)
        raise click.UsageError(f"run {twice} is given twice; compare takes different runs")
    from analyzer.pipeline import diagnose_to_read
    from analyzer.store.queries import load_run

    loaded = [load_run(database, i) for i in ids]
    runs_ = [diagnose_to_read(database, r) for r in loaded if r is not None]  # a reading command: no write
    if len(runs_) != len(ids):
        found = {r.id for r in runs_}
        raise CapscanError("no run " + ", ".join(str(i) for i in ids if i not in found))
    doc: dict = {"pairs": []}
    if len(runs_) == 2:
        doc["pairs"].append(compare_runs(runs_[0], runs_[1]))
    else:
        roles = assign_roles(runs_)
        if roles is None:
            raise CapscanError("three runs need one bare-metal host and two guests of the same model "
                               "(see their environments with `capscan show`)")
        stock, remedied, host = roles
        doc["pairs"] = [compare_runs(host, stock), compare_runs(host, remedied)]
        doc["decomposition"] = decompose(stock, remedied, host)
    if plot_path is not None:
        write_plot(plot_path, doc)

    def human(out: TextIO) -> None:
        from analyzer.output.report import console, render_compare

        render_compare(console(out), doc)

    def markdown(out: TextIO) -> None:
        out.write(markdown_compare(doc))

    return Result(human=human, doc=doc, columns=COLUMNS, rows=rows_of(doc), markdown=markdown,
                  verdicts=[verdict_of(r) for r in runs_])


def write_plot(path: str, doc: dict[str, Any]) -> None:
    """The chart as SVG or PNG by the file's suffix, written whole (temp file + rename)."""
    from analyzer.cli.output import write_atomically
    from analyzer.output.chart import chart_groups
    from analyzer.output.chart_image import chart_png, chart_svg

    groups = chart_groups(doc)
    if path.lower().endswith(".png"):
        try:
            data = chart_png(groups)
        except ImportError:
            raise CapscanError(f"--plot FILE.png needs Pillow: {extra_install('png', 'pillow')}; or write FILE.svg"
                               ) from None
        write_atomically(path, lambda fh: fh.buffer.write(data), prefix=".capscan-plot-", suffix=".png",
                         what="the chart")
        size = len(data)
    else:
        svg = chart_svg(groups)
        write_atomically(path, lambda fh: fh.write(svg), prefix=".capscan-plot-", suffix=".svg", what="the chart")
        size = len(svg.encode())
    click.echo(f"capscan: wrote {path} (the chart of {len(groups)} test(s), {size:,} bytes)", err=True)


def rows_of(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One row per pair and test in common."""
    for pair in doc["pairs"]:
        for t in pair["tests"]:
            yield {"a": pair["a"], "b": pair["b"], "test": t["test"], "a_tok_s": t["a_tok_s"], "b_tok_s": t["b_tok_s"],
                   "ratio": t["ratio"], "per_token_ms": t["per_token_s"] * 1000}


def markdown_compare(doc: dict[str, Any]) -> str:
    """Like llama.cpp's compare-llama-bench: per pair a table of test, both speeds and B/A, in the terminal's
    words and figures (a ratio of 0.09 read as a "speedup" hid an 11x slowdown); '-' where a value is missing."""
    import io

    from analyzer.output import tabular
    from analyzer.output.display import cell

    def shown(value: Any) -> Any:
        return "-" if value is None else value

    buf = io.StringIO()
    for pair in doc["pairs"]:
        buf.write(f"### run {pair['a']} (A) vs run {pair['b']} (B)\n\n")
        differs = [row for row in pair["capabilities"] if row["differs"]]
        if differs:
            buf.write("capabilities that differ: " + ", ".join(
                f"{tabular.markdown_cell(r['field'])} {tabular.markdown_cell(cell(r['a']))} → "
                f"{tabular.markdown_cell(cell(r['b']))}" for r in differs) + "\n\n")
        rows = [{"test": t["test"], f"A: run {pair['a']} t/s": shown(t["a_tok_s"]),
                 f"B: run {pair['b']} t/s": shown(t["b_tok_s"]), "B/A": f"{t['ratio']:.1%}",
                 "B - A per token": f"{t['per_token_s'] * 1000:+.3f} ms"}
                for t in pair["tests"]]
        if rows:
            cols = list(rows[0])
            tabular.write_markdown(buf, cols, rows, right=cols[1:])
        else:
            buf.write("no test in common\n")
        buf.write("\n")
    dec = doc.get("decomposition")
    if dec:
        buf.write(f"### gap decomposition: stock run {dec['stock']}, remedied run {dec['remedied']}, "
                  f"host run {dec['host']}\n\n")
        rows = [{"test": r["test"], "stock t/s": shown(r["stock_tok_s"]), "remedied t/s": shown(r["remedied_tok_s"]),
                 "host t/s": shown(r["host_tok_s"]), "excess/token": f"{r['excess_s'] * 1000:.3f} ms",
                 "downgrade": f"{r['downgrade_share']:.1%}", "residual": f"{r['residual_share']:.1%}"}
                for r in dec["tests"]]
        if rows:
            cols = list(rows[0])
            tabular.write_markdown(buf, cols, rows, right=cols[1:])
    return buf.getvalue()
