"""Where one run ends and the next begins: the one place that decides it.

A run is what one process showed about one device. Before the assembler hands an event to its
handler it asks `starts_run`; a reason back means the event belongs to a new process, so the
current run is closed and a new one opened. Only the kinds in `BOUNDARIES` can start a run, and each
one's function returns the reason (a short phrase) or `None`; every other event joins the run that
is open. `docs/reference/run-boundaries.md` is this table, generated, and
`tests/runs/test_boundaries.py` shows each boundary firing on a real log shape.

Kinds that carry several rows (`bench.row_list`, `bench.rows`, `bench.md_row`) and
`device_info.device` are handed on by their handler as the kind they stand for, one row at a time,
so that each row meets the same boundary as any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from analyzer.parsers.base import Event
from analyzer.runs.builder import RunBuilder, backend_from_bench, same_device

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler

Decide = Callable[["Assembler", Event], "str | None"]


@dataclass(frozen=True)
class Boundary:
    kinds: tuple[str, ...]
    decide: Decide
    # facts the next run keeps from the one this event closes (what a server printed once at its start)
    carry: tuple[str, ...] = ()


# -- what the predicates share -----------------------------------------------------------------------------

# What an app or the argument parser prints before the program's 'main: build =' line: an app's own
# 'GPU:' / 'Arch:' header, the ignored --n-gpu-layers warning
BEFORE_MAIN = frozenset(("app.gpu", "app.arch", "gpu.disabled"))
# llama.cpp's argument parser prints these before anything else of the process
ARGS_WARNINGS = ("not compiled with GPU offload support", "no usable GPU found")
# Timing blocks a process prints once, at its exit (llama-cli, main): a block that directly follows a complete
# one is the same command repeated (a loop grepping its timings: one configuration, one run, its median); one
# separated from it by other lines (a heading, a fence, a command: f16, then q8_0, pasted each under its own
# heading) is another process. Between two blocks printed back to back there are at most the first one's
# `total time` (and `graphs reused`) and the next one's `load time` lines. llama-server and ollama print a
# block per request: their blocks stay one run.
ONCE_PER_PROCESS = frozenset(("llama_print_timings", "llama_perf_context_print", "common_perf_print",
                              "llama_perf_sampler_print"))
BACK_TO_BACK = 4  # most lines from a block's eval line to the next block's first timing line, for a repeat
_OWN_RUN = ("probe", "sysprof")  # device sources whose output is a run of its own
# Lines a program prints while it starts, before it measures anything (its model load, backends, devices,
# a benchmark's header). After a finished run, one that measured, such a line is the next program's start
# (`cat *.log | capscan`): a process does not load again after its results, except llama-bench, which
# reloads per test, so after its rows only a header or a line of its own start opens a run.
STARTING = frozenset(("model.name", "model.ftype", "model.size", "model.device", "offload", "model.buffer",
                      "kv.buffer", "layer.device", "backend.loaded", "whisper.weights", "ollama.compute",
                      "mlx.device", "wrapper.gpu_layers", "device_info", "app.gpu", "app.arch",
                      "metal.library_loaded", "bench.csv_header", "bench.table_header"))
# llama-bench prints these once, at its start: after its own rows they are another invocation's
BENCH_START = frozenset(("bench.csv_header", "bench.table_header", "backend.loaded"))
# What llama-bench prints again between its rows (-v: the model loaded for each test)
BENCH_RELOADS = frozenset(("model.name", "model.ftype", "model.size", "model.device", "offload", "model.buffer",
                           "kv.buffer", "layer.device", "metal.library_loaded"))
# Lines of another program that llama-bench never prints (2023's `main: build =`, system_info, llama-server's
# slots): a llama-bench header or row after them is the next invocation's. (Not common_init's build line: a log
# may carry it before a table as the same machine's, and a false split there could only lose a fix.)
NOT_BENCH = frozenset(("process.start", "system_info", "server.slot"))


def before_main(run: RunBuilder) -> bool:
    """Does the run hold only what a process prints before 'main: build =' (a shim banner from a
    constructor, the argument parser's GPU-offload warning)? Then that line is the same process's."""
    if run.span.kinds <= BEFORE_MAIN:
        return True
    return ((run.facts.shim is not None or run.facts.gpu_disabled is not None) and run.gpu.source is None
            and not run.has_results and not run.program.saw_system_info and run.gpu.metal_blocks == 0)


def other_backend(run: RunBuilder) -> bool:
    """The run is another backend's, and not one process registering both (`registering`), or its llama-bench
    rows name backends without Metal (a CANN or CPU build's table prints no Metal block)."""
    if run.gpu.source not in (None, "metal") and not run.registering("metal"):
        return True
    return backend_from_bench(run.facts.bench_backends) not in (None, "metal")


# What a program prints once it has read its arguments and build line: its model load and context (buffers, the
# legacy Metal block, printed per context). A build line after these is another program's: llama.cpp prints its
# build line first (backend registration, `load_backend:`, the CUDA/Vulkan device lists and the M4-era Metal
# block, may come before it). Not so a llama-bench header: with -v it follows the first test's model load.
LOADED = frozenset(("model.name", "model.ftype", "model.size", "model.device", "offload", "model.buffer", "kv.buffer",
                    "layer.device", "whisper.weights", "metal.block_start", "metal.found_device",
                    "metal.picking_device"))


# Of those, what only follows a backend's registration (its devices listed, the M4-era Metal block): the
# weights placed, a context made. (A model's name alone is not: a llava clip model is named before CUDA starts.)
PLACED = frozenset(("offload", "model.buffer", "kv.buffer", "layer.device", "whisper.weights"))
# Lines of a backend's registration, printed once per process before any model is placed
REGISTERING = frozenset(("backend.loaded", "ollama.compute", "device_info"))


def placed(run: RunBuilder) -> bool:
    """Has the run's process placed weights or made a context? Its backends registered before that."""
    return not run.span.kinds.isdisjoint(PLACED) or (run.gpu.block_device is not None and run.facts.metal_era == "legacy")


def loaded(run: RunBuilder) -> bool:
    """Has the run's process loaded a model or made a context (or measured)? (LOADED holds PLACED.)"""
    return run.has_results or placed(run) or not run.span.kinds.isdisjoint(LOADED)


# Who printed a timing line, by its source: engines that never print each other's lines. llama.cpp's own
# blocks (llama-cli, llama-server, whisper.cpp, and the wrappers that embed them: koboldcpp, webui, ollama's
# runner) are one family.
TIMING_FAMILY = {"ollama": "ollama", "mlx_lm": "mlx_lm"}


def timing_family(source: str) -> str:
    return TIMING_FAMILY.get(source, "llama.cpp")


# Programs whose results are a family of their own (every other program's: llama.cpp's)
RUN_FAMILY = {"llama-bench": "llama-bench", "mlx_lm": "mlx_lm", "ollama": "ollama", "normiebench": "normiebench",
              "obench (ollama)": "obench"}


def run_family(run: RunBuilder) -> str | None:
    """The family of what the run measured (None before a result): llama-bench rows are a family of their own."""
    if not run.has_results:
        return None
    return RUN_FAMILY.get(run.program.name or "", "llama.cpp")


def finished(run: RunBuilder) -> bool:
    """Has the run measured? A process prints its start before its results: what starts after them is
    the next program's (llama-bench's per-test reloads and llama-server's per-request blocks excepted by
    the boundaries that meet them)."""
    return run.has_results


# -- the boundaries ----------------------------------------------------------------------------------------

def _start_after_results(asm: Assembler, ev: Event) -> str | None:
    """A line of a program's start (model load, backends, devices, a benchmark's header) after a run that
    measured is the next program's."""
    run = asm.run
    if not finished(run):
        if ev.kind in BENCH_START and ev.kind != "backend.loaded" and not run.span.kinds.isdisjoint(NOT_BENCH):
            return "a llama-bench header after another program's start"
        if ev.kind in REGISTERING and placed(run):
            return "a backend's registration after another program's model load"
        return None
    if run.program.name == "llama-bench" and ev.kind in BENCH_RELOADS and not run.bench.closed:
        run.bench.reloaded = True  # (a repeated test after this load is the next invocation's: _bench_row)
        return None  # llama-bench loads the model again for each test: its loader lines follow its rows
    return "a program's start after a finished run"


def _process_start(asm: Assembler, ev: Event) -> str | None:
    """'main: build = N' is the first line a 2023-24 example program prints: what came before was an
    earlier process (a shim banner, the argument parser's warning or an app's header stay with this one)."""
    run = asm.run
    return "a program's first line" if run.span.content and not before_main(run) else None


def _build_target(asm: Assembler, ev: Event) -> str | None:
    """common_init's 'build: N (commit) with C for T' (2024-09 on) after a result or a legacy Metal block
    (printed per context, after common_init: an earlier process's); not after an M4-era block alone, which
    a process's backends may print before it (they did until 2026-03-31)."""
    run = asm.run
    if "number" in ev.data and (run.has_results or (run.gpu.block_device is not None and run.facts.metal_era == "legacy")):
        return "common_init's build line after a result or a legacy Metal block"
    if "number" in ev.data and (loaded(run) or run.program.saw_system_info):
        return "a build line after another program's model load"
    if finished(run) and ev.text.lstrip().startswith("built with"):
        return "a program's start after a finished run"  # `--version`'s second line: that program runs nothing
    return None


def _system_info(asm: Assembler, ev: Event) -> str | None:
    """A process prints `system_info` once: a second one is another process."""
    # (not after results alone: a contrary sign there must stay with the run it vetoes, whatever its order:
    # tests/rules/test_same_process_signs.py)
    return "a second system_info line" if asm.run.program.saw_system_info else None


def _devices_header(asm: Assembler, ev: Event) -> str | None:
    """A process lists its devices ('Available devices:') once, and `--list-devices` measures nothing: a second
    list, or one after results, is another process."""
    if asm.run.facts.listed_devices is not None:
        return "a second device list"
    return "a program's start after a finished run" if finished(asm.run) else None


def _gpu_disabled(asm: Assembler, ev: Event) -> str | None:
    """The argument parser's GPU warning is printed before anything else of the process: after another
    process's device, results or system_info it is the next process's."""
    run = asm.run
    if ev.data["why"] in ARGS_WARNINGS and (run.has_results or run.gpu.source is not None or run.program.saw_system_info):
        return "the argument parser's warning after another process's lines"
    if ev.data["why"] == "no GPU found" and run.gpu.source is not None:
        # whisper.cpp's backend init, once per context: a context that found no GPU after one that used a GPU
        # device is another (a later launch of the app, field 266), never the same device's
        return "whisper.cpp finding no GPU after a GPU device"
    return None


def _ollama_load(asm: Assembler, ev: Event) -> str | None:
    """ollama's server.log holds one model load after another, each a runner process: a load's step (its
    runner start with a model, its offload line) seen again, or one after the model initialised its Metal
    block or measured, is the next load's."""
    if ev.kind == "ollama.runner" and "--model" not in ev.data["cmd"]:
        return None  # a runner without a model (0.12+ GPU discovery at start-up) is the server's, no load
    run = asm.run
    step = "runner" if ev.kind == "ollama.runner" else "offload"
    if step in run.program.ollama_steps or run.gpu.metal_blocks or run.has_results:
        return "the next ollama model load"
    return None


def _shim_banner(asm: Assembler, ev: Event) -> str | None:
    """A shim banner is printed by a constructor before `main`: after a device, a result or another
    banner it opens the next process."""
    run = asm.run
    if run.gpu.source is not None or run.has_results or run.facts.shim is not None:
        return "a shim banner after another process's lines"
    return None


def probe_program(ev: Event) -> str:
    """The program a probe's line stands for: capscan-probe's header, a metal-capabilities style device
    line, or the JSON probe that names itself."""
    if ev.kind == "probe.start":
        return "capscan-probe"
    if ev.kind == "probe.device":
        return "metal-capabilities"
    return ev.data.get("probe", "probe")


def continues_probe_header(run: RunBuilder) -> bool:
    """Is the run capscan-probe's header still waiting for its device line?"""
    return run.gpu.source == "probe" and run.facts.program == "capscan-probe" and run.facts.device.name is None


def _probe(asm: Assembler, ev: Event) -> str | None:
    """A probe's output (capscan-probe, metal-capabilities style, its JSON) is a run of its own; a shim
    banner before it stays with it, and its device line continues the capscan-probe header before it."""
    run = asm.run
    if ev.kind == "probe.device" and continues_probe_header(run):
        return None
    program = probe_program(ev)
    banner_only = run.facts.shim is not None and run.gpu.source is None and not run.has_results
    fresh_probe = run.gpu.source == "probe" and run.facts.program == program and run.facts.probe == {}
    return "a probe's output" if run.span.content and not (banner_only or fresh_probe) else None


def _sysprof(asm: Assembler, ev: Event) -> str | None:
    """system_profiler's output is a run of its own."""
    run = asm.run
    return "system_profiler's output" if run.gpu.source != "sysprof" and run.span.content else None


def _metal_line(asm: Assembler, ev: Event) -> str | None:
    """A Metal block's line (its start, a family, a flag, the working set) in another backend's run is
    another process's (unless that process is still registering both backends)."""
    run = asm.run
    if other_backend(run):
        return "a Metal block after another backend's device"
    if ev.kind == "metal.block_start" and run.gpu.metal_blocks and run.has_results and run.facts.metal_era != "M4":
        return "a legacy Metal block after results"
    if ev.kind == "metal.block_start" and finished(run) and (run.program.name != "llama-bench" or run.bench.closed):
        return "a program's start after a finished run"  # a context is made before its results
    return None


def _metal_device(asm: Assembler, ev: Event) -> str | None:
    """The Metal block's GPU name line decides whether its block is this process's. M4 era (printed once
    per process at start-up): a block after another block or after results is the next process's, except
    `MTL1`, `MTL2`... (the extra devices of `GGML_METAL_DEVICES`). Legacy (printed per context): a
    block naming another device, or following results, is the next process's."""
    run, d = asm.run, ev.data
    name = d.get("name")
    if d.get("era") == "M4":
        if d.get("index", 0) >= 1 and run.facts.metal_era == "M4" and run.gpu.metal_blocks and not run.has_results:
            return None
        if placed(run) and not run.registering("metal"):
            return "a backend's registration after another program's model load"
        if asm.pending_gate:
            return "a second M4-era Metal block"
        if run.gpu.m4_open and run.gpu.metal_blocks == 0:
            return None  # the tensor-gate line already opened this block
        if run.gpu.metal_blocks or other_backend(run) or run.has_results:
            return "a second M4-era Metal block"
        return None
    if other_backend(run):
        return "a Metal block after another backend's device"
    if run.gpu.metal_blocks and run.gpu.block_device and name and name != run.gpu.block_device:
        return "a legacy Metal block naming another device"
    if run.gpu.metal_blocks and run.has_results and run.facts.metal_era == "legacy" and name != run.gpu.block_device:
        return "a legacy Metal block after results"
    return None


def _device_list(asm: Assembler, ev: Event) -> str | None:
    """A Vulkan or CUDA device list ('found N devices', a device line) is one process's: in a run that named
    another device, or measured, it starts the next, unless that run is a process still registering its
    backends (a Metal block and another backend's list with no result between them are one process)."""
    run = asm.run
    source = ev.kind.partition(".")[0]
    if run.registering(source):
        return None  # the Metal block's process lists its other backend's devices: one run
    if ev.kind.endswith(".count") and placed(run):
        return "a backend's registration after another program's model load"
    if ev.kind.endswith(".count"):
        return "another device list" if run.gpu.source is not None else None
    if run.gpu.source is not None and (run.gpu.source != source or run.gpu.metal_blocks or run.has_results):
        return "another device list"
    return None


def _bench_md_header(asm: Assembler, ev: Event) -> str | None:
    """llama-bench prints its table header once per process: a header after a table's rows is another
    invocation's table (several backends' tables pasted in one log)."""
    run = asm.run
    if run.has_results and run.program.name == "llama-bench":
        return "a llama-bench header after rows"
    if run.has_results:
        return "a program's start after a finished run"
    # (not after a model load: llama-bench -v prints its header with its first row, after the first test's load)
    return "a llama-bench header after another program's start" if not run.span.kinds.isdisjoint(NOT_BENCH) else None


def _bench_row(asm: Assembler, ev: Event) -> str | None:
    """A llama-bench row carries its device and build. A JSON/CSV/SQL row of another configuration, or
    naming another GPU than the run's Metal/Vulkan/CUDA device, starts a run; a markdown row of another
    backend column too (one build prints one backend for all its rows). After a probe or system_profiler
    block any row does."""
    run, row = asm.run, ev.data
    if run.bench.closed:
        return "a llama-bench row after its JSON array closed"
    if run.bench.reloaded and row.get("setup") is not None and (row["setup"], row["test"]) in run.bench.seen:
        # one invocation prints each test of a setup once, after its model load (-v): a repeat after a load is
        # the next invocation's (rows back to back, with no load between, are a loop appending to one file)
        return "a llama-bench row repeating a test of its setup"
    if row["format"] != "md":
        key = row["key"]
        if key == run.bench.key and run.bench.model == row["model"] and run.bench.format == row["format"]:
            return None  # another row of the same benchmark (files hold millions): the hot path
        if run.bench.key is not None and run.bench.key != key:
            return "a llama-bench row of another configuration"
        if run.gpu.source in _OWN_RUN:
            return "a llama-bench row after a probe"
        if run.has_results and run.program.name not in ("llama-bench", None, "llama.cpp"):
            return "a llama-bench row after another program's results"
        if run.has_results and run.bench.format not in (None, row["format"]):
            return "a llama-bench row in another output format"
        if run.bench.key is None and not run.span.kinds.isdisjoint(NOT_BENCH):
            return "a llama-bench header after another program's start"
        gpu = row.get("gpu_info")
        if run.gpu.source in ("metal", "vulkan", "cuda") and gpu and run.facts.device.name \
                and not same_device(gpu, run.facts.device.name):
            return "a llama-bench row naming another GPU"
        return None
    if run.gpu.source in _OWN_RUN:
        return "a llama-bench row after a probe"
    if run.has_results and run.program.name not in ("llama-bench", None, "llama.cpp"):
        return "a llama-bench row after another program's results"
    if run.has_results and run.bench.format not in (None, "md"):
        return "a llama-bench row in another output format"  # one invocation prints one format (-o)
    if run.has_results and run.facts.bench_backends is not None and row.get("backend") \
            and row["backend"] != run.facts.bench_backends:
        return "a llama-bench row of another backend"
    return None


def _timing(asm: Assembler, ev: Event) -> str | None:
    """A timing line after a probe or system_profiler block is another program's. A once-per-process timing
    block (llama-cli, main) that opens more than a few lines after the last one closed is another
    process's (llama-server's blocks, one per request, stay one run)."""
    run, d = asm.run, ev.data
    if run.gpu.source in _OWN_RUN:
        return "timings after a probe"
    family = run_family(run)
    # ollama's token counts ('prompt eval count:') carry no source: their text says whose they are
    source = d.get("source") or ("ollama" if ev.kind == "timing.count" and "eval count:" in ev.text else None)
    if family is not None and source is not None:
        mine = timing_family(source)
        # llama.cpp's own blocks also come from ollama's runner and from llama-bench -v (a block per test)
        if mine != family and not (mine == "llama.cpp" and family in ("ollama", "llama-bench")
                                   and not run.bench.closed):
            return "timings of another program after a finished run"
    if ev.kind == "timing" and d.get("source", "") in ONCE_PER_PROCESS and run.timing.closed_at is not None \
            and d["phase"] != "eval" and ev.line - run.timing.closed_at > BACK_TO_BACK \
            and run.program.name != "llama-server":
        return "a timing block of another process"
    return None


def _program_start(asm: Assembler, ev: Event) -> str | None:
    """The 2026 llama-server's first line ('llama_server: initializing'): after another program's model load,
    results, device list or system_info it opens the next run (its own backends may register before it)."""
    run = asm.run
    if loaded(run) or run.program.saw_system_info or run.facts.listed_devices is not None:
        return "a program's first line"
    return None


def _server_listening(asm: Assembler, ev: Event) -> str | None:
    """A server listens once, before its first request: after results it is another server's."""
    return "a program's start after a finished run" if finished(asm.run) else None


def _bench_sql_header(asm: Assembler, ev: Event) -> str | None:
    """llama-bench -o sql prints its CREATE TABLE once, before its rows: after rows it is another invocation's."""
    return "a llama-bench header after rows" if finished(asm.run) else None


def _server_slot(asm: Assembler, ev: Event) -> str | None:
    """llama-server's slot lines, per request: after a benchmark's or mlx_lm's results they are a server's."""
    return "a program's start after a finished run" if run_family(asm.run) in ("llama-bench", "mlx_lm") else None


def _build_version(asm: Assembler, ev: Event) -> str | None:
    """'version: 0.5.0 (build N, commit H)' (a program's first line since 2026) and the 2026 llama-cli banner's
    'build      : bN-H', which comes after its model load: each after a finished run is the next program's."""
    run = asm.run
    if ev.data.get("program") == "llama-cli":
        return "a program's start after a finished run" if finished(run) else None
    # (a build's backends register, and may print their devices, before its version line: only a process that
    # loaded a model or measured is over)
    return "a program's first line" if loaded(run) else None


def _program_named(asm: Assembler, ev: Event) -> str | None:
    """llama-completion's first line ('llama_completion: llama backend init') starts it like llama-server's."""
    if ev.data.get("program") != "llama-completion" or "backend init" not in ev.text:
        return None
    return _program_start(asm, ev)


def _command(asm: Assembler, ev: Event) -> str | None:
    """A pasted shell command that starts a llama.cpp program ('$ llama-bench -m ...') after a process that
    loaded a model or measured: the user typed the next one, so it opens the next run (and names it). Not after
    what a user pastes about the machine first (`sw_vers`, `file`, `--version`, `--list-devices`): that is the
    context of the run it introduces."""
    return "a pasted command after another process's run" if loaded(asm.run) else None


def _wrapper_start(asm: Assembler, ev: Event) -> str | None:
    """A wrapper's result (normiebench's or mlx_lm's JSON, obench's 'Running benchmark' or table header) and
    koboldcpp's per-reply line: after another program's results they are the next invocation's."""
    run = asm.run
    if not finished(run):
        return None
    if ev.kind == "wrapper.kobold_total" and run.program.name == "koboldcpp":
        return None  # one koboldcpp server, a line per reply
    if ev.kind == "wrapper.obench" and "model" not in ev.data and run.program.name == "obench (ollama)":
        return None  # its table's header, after its own 'Running benchmark' line... or another table of it
    return "a wrapper's result after a finished run"


BOUNDARIES: tuple[Boundary, ...] = (
    Boundary(("process.start",), _process_start),
    Boundary(("build.target",), _build_target),
    Boundary(("system_info",), _system_info),
    Boundary(("devices.header",), _devices_header),
    Boundary(("gpu.disabled",), _gpu_disabled),
    Boundary(("ollama.runner", "ollama.offload"), _ollama_load,
             carry=("ollama_library", "ollama_description", "ollama_app")),
    Boundary(("shim.banner",), _shim_banner),
    Boundary(("probe.start", "probe.device", "probe.json"), _probe),
    Boundary(("sysprof.chipset",), _sysprof),
    Boundary(("metal.block_start", "metal.family", "metal.flag", "metal.working_set"), _metal_line),
    Boundary(("metal.device",), _metal_device),
    Boundary(("vulkan.count", "vulkan.device", "cuda.count", "cuda.device"), _device_list),
    Boundary(("bench.md_header",), _bench_md_header),
    Boundary(("bench.row",), _bench_row),
    Boundary(("timing", "timing.pair", "timing.trial", "timing.count", "timing.setup"), _timing),
    Boundary(tuple(sorted(STARTING)), _start_after_results),
    Boundary(("server.slot",), _server_slot),
    Boundary(("program.start",), _program_start),
    Boundary(("server.listening",), _server_listening),
    Boundary(("bench.sql_header",), _bench_sql_header),
    Boundary(("build.version",), _build_version),
    Boundary(("program.named",), _program_named),
    Boundary(("command.line",), _command),
    Boundary(("wrapper.json", "wrapper.obench", "wrapper.kobold_total"), _wrapper_start),
)
BY_KIND: dict[str, Boundary] = {kind: b for b in BOUNDARIES for kind in b.kinds}


def starts_run(asm: Assembler, ev: Event) -> tuple[str, Boundary] | None:
    """Why `ev` opens a new run, with its boundary; `None` when it joins the run that is open."""
    boundary = BY_KIND.get(ev.kind)
    if boundary is None:
        return None
    why = boundary.decide(asm, ev)
    return (why, boundary) if why else None

