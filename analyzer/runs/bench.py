"""llama-bench rows in every form (markdown, JSON, JSONL, CSV, SQL). A row carries its own
device and build: it joins the current run when they agree, else it starts one. Consecutive
rows of one configuration (the dense JSONL path) only add their numbers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.model import GUEST_PROCESS, Provenance, Throughput
from analyzer.parsers.base import Event
from analyzer.parsers.bench import bench_row_from, md_row_to_bench
from analyzer.runs.builder import SPILL_AT

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler


def on_bench_md_header(asm: Assembler, ev: Event) -> None:
    asm.md_columns = ev.data["columns"]


def on_bench_md_row(asm: Assembler, ev: Event) -> None:
    if not asm.md_columns:
        return
    row = md_row_to_bench(asm.md_columns, ev.data["cells"])
    if row:
        asm.handle(Event("bench.row", ev.line, ev.text, row))  # a row like any other, at its boundary


def on_bench_row(asm: Assembler, ev: Event) -> None:
    _bench(asm, ev, ev.data)


def on_bench_row_list(asm: Assembler, ev: Event) -> None:
    for row in ev.data["rows"]:  # one row at a time, each at its boundary
        asm.handle(Event("bench.row", ev.line, ev.text, row))


def on_bench_rows(asm: Assembler, ev: Event) -> None:
    """Consecutive llama-bench rows of one configuration (the dense JSONL path):
    the first decides the run like any row, the rest only add their numbers."""
    config, rows = ev.data["config"], ev.data["rows"]
    first = rows[0]
    asm.handle(Event("bench.row", first[0], "", bench_row_from(config, first[1:])))
    run = asm.run
    run.add_bench_rows(config["model"], rows, 1, config.get("config"))
    run.span.last_line = max(run.span.last_line or 0, rows[-1][0])
    asm.spill()


def on_bench_json_end(asm: Assembler, ev: Event) -> None:
    """llama-bench -o json's closing ']': after it, its invocation prints nothing more (runs.boundaries)."""
    run = asm.run
    if run.bench.format == "json":
        run.bench.closed = True
        run.touch(ev, evidence=False)


# the (setup, test) pairs a run remembers to tell a repeat (the next invocation) from its own rows
MAX_SEEN = 4096


def _bench(asm: Assembler, ev: Event, row: dict) -> None:
    run = asm.run
    f = run.facts
    setup = row.get("setup")
    if setup is not None and len(run.bench.seen) < MAX_SEEN:
        run.bench.seen.add((setup, row["test"]))
    run.bench.reloaded = False
    if row["format"] != "md":
        key = row["key"]
        if key == run.bench.key and run.bench.model == row["model"]:
            # Another row of the same benchmark (files hold up to millions): only its numbers are new.
            run.span.last_line = ev.line
            run.add_throughput(Throughput(row["test"], row["tok_s"], row["stddev"], row["model"], ev.line,
                                          "bench", row["n_prompt"], row["n_gen"], row["n_depth"]), row.get("config"))
            if len(run.figures.pending) >= SPILL_AT:
                asm.spill()
            return
        run.bench.key = key  # a row of another configuration or device opened a new run (boundaries)
        # once per configuration (the key holds both): the device and the host this row names
        row_ev = Event("bench.device", ev.line, "")
        # a compare-llama-bench table is a script's summary of results gathered anywhere, not this process's
        # own output: its columns may veto, never prove (model.Provenance)
        whose: Provenance = "other-machine" if row["format"] == "compare" else GUEST_PROCESS
        if row.get("gpu_info"):
            run.observe("gpu.name", row["gpu_info"], row_ev, subject=row["gpu_info"], provenance=whose)
        if row.get("cpu_info"):
            run.observe("host.cpu", row["cpu_info"], row_ev, provenance=whose)
        if (row.get("cpu_info") or row.get("gpu_info")) and f.cpu_info is None and f.gpu_info is None:
            # The row's device fields are evidence too (a JSON row spans many lines).
            run.touch(Event("bench.device", ev.line, f"llama-bench {row['format']} row: gpu_info "
                            f"{row.get('gpu_info')!r}, cpu_info {row.get('cpu_info')!r}, backends "
                            f"{row.get('backend')!r}, n_gpu_layers {row.get('n_gpu_layers')}"))
        # (assign only what changes: this runs once per row of files with a million rows)
        if f.cpu_info is None and row.get("cpu_info"):
            f.cpu_info = row["cpu_info"]
        if f.gpu_info is None and row.get("gpu_info"):
            f.gpu_info = row["gpu_info"]
        if f.model_size_bytes is None and row.get("model_size"):
            f.model_size_bytes = row["model_size"]
        if f.log_time is None and row.get("test_time"):
            f.log_time = row["test_time"]
        if f.build_commit is None and row.get("build_commit"):
            f.build_commit = row["build_commit"]
        if run.gpu.source is None and row.get("gpu_info"):
            run.gpu.source = "bench"
            f.device.name = row["gpu_info"]
    if f.bench_backends is None and row.get("backend"):
        f.bench_backends = row["backend"]
    if f.n_gpu_layers is None and row.get("n_gpu_layers") is not None:
        f.n_gpu_layers = row["n_gpu_layers"]
    if f.bench_devices is None and row.get("devices"):
        f.bench_devices = row["devices"]
        # the line that shows it: the rules cite it (a 'none' row ran on the CPU alone)
        run.touch(Event("bench.device", ev.line, ev.text))
    if f.model is None and row.get("model"):
        f.model = row["model"]
    run.program.name = "llama-bench"
    if f.program != "llama-bench":
        f.program = "llama-bench"
    run.bench.model = row.get("model")
    run.bench.format = row.get("format")
    run.touch(ev, evidence=False)
    label = row.get("label")  # rows of a hand-edited table told apart by a label ('master', 'PR')
    run.add_throughput(Throughput(
        test=row["test"], tok_s=row["tok_s"], stddev=row.get("stddev"),
        model=f"{row.get('model')} ({label})" if label else row.get("model"), line=ev.line,
        kind="bench", n_prompt=row.get("n_prompt"), n_gen=row.get("n_gen"), n_depth=row.get("n_depth")),
        row.get("config"))
    asm.spill()


def opens_block(asm: Assembler, ev: Event) -> None:
    """A JSON object, CSV table or compare-llama-bench table begins: its rows arrive as ``bench.row`` (or
    ``bench.row_list``) events and decide the run."""


HANDLERS: dict[str, Handler] = {
    "bench.json_start": opens_block,
    "bench.json_end": on_bench_json_end,
    "bench.csv_header": opens_block,
    "bench.table_header": opens_block,
    "bench.md_header": on_bench_md_header,
    "bench.md_row": on_bench_md_row,
    "bench.row": on_bench_row,
    "bench.row_list": on_bench_row_list,
    "bench.rows": on_bench_rows,
}
