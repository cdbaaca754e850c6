"""The state of one run while its events arrive, and what it becomes (RunFacts).

A RunBuilder records facts, evidence lines (capped per kind and in total so
hostile input stays bounded), measured speeds (handed to the store in batches)
and contradictions (a flag printed with two values is kept, never resolved by
order). ``finalize`` derives what the events imply together: the backend, the
program, the Apple family.
"""


from __future__ import annotations

import math
import re
import statistics
from array import array
from collections import Counter
from dataclasses import dataclass, field

from analyzer.model import (
    GUEST_PROCESS,
    MAX_ROWS_SHOWN,
    Evidence,
    Observation,
    Provenance,
    RunFacts,
    Throughput,
)
from analyzer.parsers.base import Event

SPILL_AT = 5000
_EVIDENCE_CAP = {"metal.skip_kernel": 5, "probe.family": 40, "timing": 20, "cuda.device": 16, "vulkan.device": 16,
                 "devices.item": 16}
_EVIDENCE_TOTAL = 300
# ggml has about a hundred ops; a log naming more distinct ones is noise or hostile: the first ones are kept
MAX_UNSUPPORTED_OPS = 256
# Names a run lists as it reads them (process names of an NSLog prefix, system_profiler chipsets): a real
# run has a few; the first ones are kept, so a line costs the same however many came before
MAX_NAMES = 16
# Per-run lists of what a log repeats (Metal errors, shim messages, listed, Vulkan and CUDA devices): the first
# ones are kept, each message cut to MAX_TEXT characters, so stored facts stay small whatever the input
MAX_LISTED = 32
MAX_TEXT = 300
_APPLE = range(1001, 2000)
# One observation per distinct (fact, subject, value, block): a run that shows more than this many
# distinct readings is hostile or many machines merged; the first ones are kept (and a contradiction
# among them is still seen), the rest dropped.
MAX_OBSERVATIONS = 256


def backend_from_bench(backends: str | None) -> str | None:
    if not backends:
        return None
    parts = {p.strip().upper() for p in backends.split(",")}
    if parts & {"MTL", "METAL"}:
        return "metal"
    for name in ("VULKAN", "CUDA", "ROCM", "SYCL", "KOMPUTE", "MUSA", "RPC"):
        if name in parts:
            return name.lower()
    return "cpu"


def same_device(gpu_info: str, name: str) -> bool:
    """llama-bench gpu_info ('Apple Paravirtual device', 'A, B') against a device line's name."""
    a, b = gpu_info.lower(), name.lower()
    return a in b or b in a or any(part.strip() and part.strip() in b for part in a.split(","))


@dataclass(slots=True)
class Span:
    """Which lines made the run."""

    first_line: int | None = None
    last_line: int | None = None
    content: bool = False  # a line joined it: a run without one is never emitted (nor emitted twice)
    kinds: set[str] = field(default_factory=set)  # the event kinds that made it (what a process printed before main)


@dataclass(slots=True)
class Figures:
    """The measured speeds: handed to the store in batches, kept per figure for the run's summary."""

    pending: list[Throughput] = field(default_factory=list)  # not yet handed to the store
    count: int = 0
    # (model, test, kind, config) -> (every speed, the first MAX_ROWS_SHOWN + 1 rows as (tok_s, stddev, line)):
    # a figure per configuration (threads, batch, type_k, fa, ngl ... as the row states them, see
    # analyzer.parsers.bench), each row as printed, never a mean over several
    series: dict[tuple, tuple[array, list[tuple[float, float | None, int | None]]]] = field(default_factory=dict)
    trials: list[Throughput] = field(default_factory=list)  # mlx_lm.benchmark trials, superseded by its Averages


@dataclass(slots=True)
class GpuReading:
    """The device being read and the blocks that describe it (runs/metal, probes, gpu_backends)."""

    source: str | None = None  # metal | vulkan | cuda | bench | probe | sysprof
    metal_blocks: int = 0
    m4_open: bool = False  # an M4 block opened by its tensor-gate line, GPU name pending
    # The device a Metal block's own GPU name line named. A device named in passing (a 'found device:'
    # of the enumeration before it, a loader line) is not the block's: another name there opens no run.
    block_device: str | None = None
    # The device block being read: 1, 2, ... at each Metal block's GPU name line (MTL1 of GGML_METAL_DEVICES
    # included) or probe's device; the lines of a block describe that block's device only.
    block: int = 0
    families: set[int] = field(default_factory=set)
    flag_seen: dict[str, tuple[bool, int]] = field(default_factory=dict)  # flag -> (first value printed, its line)
    unsupported_seen: set[str] = field(default_factory=set)  # facts.unsupported_ops as a set (O(1) membership)


@dataclass(slots=True)
class ProgramReading:
    """What the process said of itself: the program it named, and the start-up lines it printed once."""

    name: str | None = None  # the program a line named (finalize falls back on shim and process names)
    saw_system_info: bool = False
    wrapper_model: str | None = None  # the model a wrapper is running (obench: several in turn, each its figures)
    ollama_steps: set[str] = field(default_factory=set)  # the steps of the ollama model load being read


@dataclass(slots=True)
class BenchReading:
    """The llama-bench table being read: its last row's configuration and model, and its output format."""

    key: tuple | None = None
    model: str | None = None  # with key: the fast path of the next row
    format: str | None = None  # md, json, csv, sql: one invocation prints one (runs.boundaries)
    # -o json closed its array (']'): the invocation is over, whatever follows is the next's
    closed: bool = False
    # (setup, test) of the rows seen (up to runs.bench.MAX_SEEN): one invocation prints a test of one setup once,
    # so a repeat after a model load is the next invocation's (runs.boundaries)
    seen: set[tuple] = field(default_factory=set)
    reloaded: bool = False  # a model load (llama-bench -v) since its last row


@dataclass(slots=True)
class TimingReading:
    """Timing lines waiting for their partner (runs/timings)."""

    # Token counts printed apart from their rate (ollama 'prompt eval count:', server JSON 'prompt_n'),
    # waiting for the rate line of the same phase; mlx_lm.benchmark's 'Timing with ...' counts.
    pending_counts: dict[str, int] = field(default_factory=dict)
    setup_counts: dict[str, int] = field(default_factory=dict)
    # phase -> (the last timing figure, its source, whether another printing of it was already folded in)
    last: dict[str, tuple[Throughput, str, bool]] = field(default_factory=dict)
    stream: tuple | None = None  # (prompt_n, prompt_ms, predicted_n, prompt, generation) of the last server chunk
    running_task: str | None = None  # the task of the last streaming slot's running rate
    closed_at: int | None = None  # the eval line of a once-per-process timing block


class RunBuilder:
    """One run's state, in named pieces: its lines (``span``), its speeds (``figures``), the device being
    read (``gpu``), what the process said of itself (``program``), the llama-bench table (``bench``) and
    timing lines awaiting their partner (``timing``); ``facts`` is what it becomes."""

    __slots__ = ("seq", "started_by", "facts", "evidence", "span", "figures", "gpu", "program", "bench", "timing",
                 "_ev_counts", "_observed")

    def __init__(self, seq: int, started_by: str | None = None):
        self.seq = seq
        self.started_by = started_by  # the boundary that opened it (runs.boundaries), None for the first
        self.facts = RunFacts(first_line=0, last_line=0)
        self.evidence: list[Evidence] = []
        self.span = Span()
        self.figures = Figures()
        self.gpu = GpuReading()
        self.program = ProgramReading()
        self.bench = BenchReading()
        self.timing = TimingReading()
        self._ev_counts: Counter[str] = Counter()
        self._observed: set[tuple] = set()  # (fact, subject, value, block, provenance) already in facts.observations

    def observe(self, fact: str, value, ev: Event, *, subject: str | None = None, block: int | None = None,
                provenance: Provenance = GUEST_PROCESS) -> None:
        """Keep one reading as read (see model.Observation); nothing is overwritten. ``block`` defaults to
        the Metal block being read when the line is one of a Metal block's (``metal.*``), else 0.
        ``provenance``: whose line it is (a compare table's columns are another machine's)."""
        if block is None:
            block = self.gpu.block if ev.kind.startswith(("metal.", "probe.")) else 0
        key = (fact, subject, value, block, provenance)
        if key in self._observed:
            return
        if len(self._observed) >= MAX_OBSERVATIONS:
            return
        self._observed.add(key)
        # model_construct: the parsers' own readings, already typed; no validation per line
        self.facts.observations.append(Observation.model_construct(fact=fact, value=value, line=ev.line, kind=ev.kind,
                                                                   block=block, subject=subject,
                                                                   provenance=provenance))

    def registering(self, other: str) -> bool:
        """Is this run a process still registering its backends, so that ``other``'s device list or
        Metal block belongs to it? Every backend a build has registers before any result (llama.cpp's
        backend registry): a Vulkan or CUDA list and a Metal block with no result between them are
        one process, and one run, so a GPU either names is evidence for the other (a contrary sign
        never escapes into a run of its own)."""
        if self.has_results or self.gpu.source in (None, other):
            return False
        if other == "metal":
            return self.gpu.source in ("vulkan", "cuda") and self.gpu.metal_blocks == 0
        return self.gpu.source == "metal" and other in ("vulkan", "cuda")

    def saw_device(self, name: str | None) -> None:
        """Keep every GPU name the run mentions (evidence of the machine, even when not the chosen device)."""
        if name and name not in self.facts.seen_devices and len(self.facts.seen_devices) < 32:
            self.facts.seen_devices.append(name)

    def saw_host_cpu(self, name: str, ev: Event) -> None:
        """Every processor named is kept (two that differ are two machines: never one picked by order)."""
        self.observe("host.cpu", name, ev)
        if name not in self.facts.host_cpus and len(self.facts.host_cpus) < 8:
            self.facts.host_cpus.append(name)

    def hint_device(self, ev: Event, name: str | None) -> None:
        """A line naming the GPU in passing (a loader, a memory breakdown, a wrapper): it names the
        device only when nothing better did, and is kept as evidence of the machine either way."""
        if name and not re.fullmatch(r"MTL\d+|Metal|CPU", name):
            if self.facts.device.name is None:
                self.facts.device.name = name
            self.saw_device(name)
            self.observe("gpu.name", name, ev, subject=name, block=0)
        self.touch(ev)

    def saw_flag(self, flag: str, value: bool, line: int) -> None:
        """A flag printed again with another value is a contradiction, recorded, never resolved by order."""
        first = self.gpu.flag_seen.get(flag)
        if first is None:
            self.gpu.flag_seen[flag] = (value, line)
        elif first[0] != value and not any(c["flag"] == flag for c in self.facts.flag_conflicts):
            self.facts.flag_conflicts.append({"flag": flag, "value": first[0], "line": first[1], "other": value,
                                              "other_line": line})

    # -- bookkeeping --------------------------------------------------------
    def touch(self, ev: Event, evidence: bool = True) -> None:
        span = self.span
        span.content = True
        if len(span.kinds) < 64:
            span.kinds.add(ev.kind)
        if span.first_line is None:
            span.first_line = ev.line
        span.last_line = max(span.last_line or ev.line, ev.line)
        if evidence and ev.text:
            if self._ev_counts[ev.kind] < _EVIDENCE_CAP.get(ev.kind, 50) and len(self.evidence) < _EVIDENCE_TOTAL:
                self.evidence.append(Evidence(line=ev.line, kind=ev.kind, text=ev.text[:500], inner=ev.inner))
            self._ev_counts[ev.kind] += 1

    def add_throughput(self, tp: Throughput, config: str | None = None) -> None:
        self.add_many((tp,), config)

    def add_many(self, tps, config: str | None = None) -> None:
        """Record measured speeds (the store gets them at the next spill) and keep
        each (model, test, kind, config)'s rows for the run's summary."""
        series = self.figures.series
        pending = self.figures.pending
        isfinite = math.isfinite
        for tp in tps:
            if not isfinite(tp.tok_s):
                continue  # 'inf tokens per second' (0 ms measured) is not a rate
            pending.append(tp)
            self.figures.count += 1
            group = (tp.model, tp.test, tp.kind, config)
            found = series.get(group)
            if found is None:
                series[group] = (array("d", (tp.tok_s,)), [(tp.tok_s, tp.stddev, tp.line)])
            else:
                found[0].append(tp.tok_s)
                if len(found[1]) <= MAX_ROWS_SHOWN:
                    found[1].append((tp.tok_s, tp.stddev, tp.line))

    def replace(self, old: Throughput, new: Throughput, config: str | None = None) -> bool:
        """One measurement printed again (more precisely, or as a stream's later running total): ``new``
        takes the place of ``old``, which stays a single figure. False when ``old`` was already handed to
        the store (the caller then adds ``new`` as a figure of its own)."""
        pending = self.figures.pending
        for i in range(len(pending) - 1, max(-1, len(pending) - 65), -1):  # a timing figure is among the last
            if pending[i] is old:
                break
        else:
            return False
        pending[i] = new
        found = self.figures.series.get((old.model, old.test, old.kind, config))
        if found is not None:
            values, kept = found
            for j in range(len(values) - 1, -1, -1):
                if values[j] == old.tok_s:
                    values[j] = new.tok_s
                    break
            for j in range(len(kept) - 1, -1, -1):
                if kept[j][2] == old.line and kept[j][0] == old.tok_s:
                    kept[j] = (new.tok_s, new.stddev, new.line)
                    break
        return True

    def add_bench_rows(self, model: str | None, rows: list[tuple], start: int = 0, config: str | None = None) -> None:
        """``add_many`` for the dense path's rows of one configuration,
        ``(line, test, tok_s, stddev, n_prompt, n_gen, n_depth)`` from ``rows[start]`` on:
        the same Throughput rows and series, with no per-row group key (a batch
        holds a few tests, each looked up once)."""
        isfinite, make = math.isfinite, tuple.__new__
        pending, series = self.figures.pending, self.figures.series
        found_of: dict[str, tuple[array, list]] = {}  # test -> its series
        added = 0
        for i in range(start, len(rows)):
            line, test, tok_s, stddev, n_prompt, n_gen, n_depth = rows[i]
            if not isfinite(tok_s):
                continue  # 'inf tokens per second' (0 ms measured) is not a rate
            pending.append(make(Throughput, (test, tok_s, stddev, model, line, "bench", n_prompt, n_gen, n_depth)))
            found = found_of.get(test)
            if found is None:
                found = series.get((model, test, "bench", config))
                if found is None:
                    found = series[(model, test, "bench", config)] = (array("d"), [])
                found_of[test] = found
            found[0].append(tok_s)
            if len(found[1]) <= MAX_ROWS_SHOWN:
                found[1].append((tok_s, stddev, line))
            added += 1
        self.figures.count += added

    def throughput_summary(self) -> list[dict]:
        """The run's figures in the order they were printed: each row as printed (its tok/s, its
        ``stddev``, its ``line``, its configuration as ``config``, None where the row states none,
        ``n`` 1, ``reduced`` None). A (model, test, kind, configuration) printed more than
        MAX_ROWS_SHOWN times (a bench file may give a run a million rows; the store keeps every row)
        is one entry instead: the median of its rows, a printed value (``median_low``, never the mean
        of the middle two), ``n`` the rows, ``reduced`` ``{"by": "median", "of": n}``."""
        out = []
        for (model, test, kind, config), (values, kept) in self.figures.series.items():
            n = len(values)
            if n > MAX_ROWS_SHOWN:
                out.append({"test": test, "tok_s": statistics.median_low(values), "stddev": None, "model": model,
                            "kind": kind, "n": n, "line": kept[0][2], "config": config,
                            "reduced": {"by": "median", "of": n}})
                continue
            out.extend({"test": test, "tok_s": tok_s, "stddev": stddev, "model": model, "kind": kind, "n": 1,
                        "line": line, "config": config, "reduced": None} for tok_s, stddev, line in kept)
        # rows in the order of their lines (a figure's rows and another's interleave as printed); stable, so
        # two figures of one line (prompt and generation) keep their order
        out.sort(key=lambda e: e["line"] if e["line"] is not None else -1)
        return out

    @property
    def has_results(self) -> bool:
        return self.figures.count > 0

    def finalize(self) -> RunFacts:
        f = self.facts
        f.throughput_summary = self.throughput_summary()
        f.first_line = self.span.first_line or 0
        f.last_line = self.span.last_line or f.first_line
        f.device.families = sorted(self.gpu.families)
        apple = [c for c in self.gpu.families if c in _APPLE]
        f.device.apple_family = max(apple) if apple else None
        if f.backend is None:
            if self.gpu.source in ("metal", "probe", "sysprof"):
                f.backend = "metal"
            elif f.vulkan_devices:
                f.backend = "vulkan"
            elif f.cuda_devices:
                f.backend = "rocm" if any("arch" in d for d in f.cuda_devices) else "cuda"
            elif f.bench_backends:
                f.backend = backend_from_bench(f.bench_backends)
            elif f.ollama_library:
                f.backend = f.ollama_library
        if f.program is None:
            f.program = self.program.name or (f.shim.process if f.shim and f.shim.process else None) or (
                f.processes[0] if f.processes else None)
            if f.program is None and (self.gpu.metal_blocks or self.figures.count):
                f.program = "llama.cpp"
        return f
