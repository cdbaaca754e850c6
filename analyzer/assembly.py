"""Turn a source's event stream into runs.

A run is what one process showed about one device: its capability block,
its benchmark rows and timings. Boundaries, in order of evidence:

- an M4-era ``ggml_metal_device_init`` block is printed once per process at
  start-up, so a second one starts a new run, except ``MTL1``, ``MTL2``...
  (extra virtual devices of ``GGML_METAL_DEVICES`` in the same process);
- a legacy ``ggml_metal_init`` block is printed per context, so it starts a
  new run only when it names another device, or follows measured results;
- a shim banner is printed by a constructor before ``main``: after a device
  it starts a new process;
- a llama-bench JSON/CSV/SQL row carries its own device and build: it joins
  the current run when they agree, else it starts one;
- probe and system_profiler output always form runs of their own;
- a second ``system_info`` line, or Vulkan/CUDA device list, starts a new run.

Throughput rows are handed to ``on_throughput`` in batches so that a file of
a million rows never sits in memory.
"""

from __future__ import annotations

import math
import re
import statistics
from array import array
from collections import Counter
from typing import Callable

from analyzer.models import Capabilities, Evidence, RunFacts, Shim, Throughput
from analyzer.parsers.base import Event
from analyzer.parsers.bench import bench_row_from, md_row_to_bench

SPILL_AT = 5000
_EVIDENCE_CAP = {"metal.skip_kernel": 5, "probe.family": 40, "timing": 20, "cuda.device": 16, "vulkan.device": 16,
                 "devices.item": 16}
_EVIDENCE_TOTAL = 300
_UNSET = object()
# ggml has about a hundred ops; a log naming more distinct ones is noise or hostile: the first ones are kept
MAX_UNSUPPORTED_OPS = 256
_APPLE = range(1001, 2000)


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


def _same_device(gpu_info: str, name: str) -> bool:
    """llama-bench gpu_info ('Apple Paravirtual device', 'A, B') against a device line's name."""
    a, b = gpu_info.lower(), name.lower()
    return a in b or b in a or any(part.strip() and part.strip() in b for part in a.split(","))


class RunBuilder:
    def __init__(self, seq: int):
        self.seq = seq
        self.first_line: int | None = None
        self.last_line: int | None = None
        self.facts = RunFacts(first_line=0, last_line=0)
        self.evidence: list[Evidence] = []
        self._ev_counts: Counter[str] = Counter()
        self.pending: list[Throughput] = []  # not yet handed to the store
        self.throughput_count = 0
        self.device_source: str | None = None  # metal | vulkan | cuda | bench | probe | sysprof
        self.metal_blocks = 0
        self.saw_system_info = False
        self.bench_key: tuple | None = None
        self.explicit_program: str | None = None
        self.families: set[int] = set()
        self.content = False
        self.m4_open = False  # an M4 block opened by its tensor-gate line, GPU name pending
        self.bench_model: str | None = None  # model of the last llama-bench row (with bench_key: the fast path)
        # Token counts printed apart from their rate (ollama 'prompt eval count:', server JSON 'prompt_n'),
        # waiting for the rate line of the same phase; mlx_lm.benchmark's 'Timing with ...' counts.
        self.pending_counts: dict[str, int] = {}
        self.setup_counts: dict[str, int] = {}
        self._series: dict[tuple, tuple[array, int | None, float | None]] = {}  # (model, test, kind) -> speeds
        self.trials: list[Throughput] = []  # mlx_lm.benchmark trials, superseded by its Averages line
        self.unsupported_seen: set[str] = set()  # facts.unsupported_ops as a set (O(1) membership)
        self.flag_seen: dict[str, tuple[bool, int]] = {}  # flag -> (first value printed, its line)

    def saw_device(self, name: str | None) -> None:
        """Keep every GPU name the run mentions (evidence of the machine, even when not the chosen device)."""
        if name and name not in self.facts.seen_devices and len(self.facts.seen_devices) < 32:
            self.facts.seen_devices.append(name)

    def saw_flag(self, flag: str, value: bool, line: int) -> None:
        """A flag printed again with another value is a contradiction, recorded, never resolved by order."""
        first = self.flag_seen.get(flag)
        if first is None:
            self.flag_seen[flag] = (value, line)
        elif first[0] != value and not any(c["flag"] == flag for c in self.facts.flag_conflicts):
            self.facts.flag_conflicts.append({"flag": flag, "value": first[0], "line": first[1], "other": value,
                                              "other_line": line})

    # -- bookkeeping --------------------------------------------------------
    def touch(self, ev: Event, evidence: bool = True) -> None:
        self.content = True
        if self.first_line is None:
            self.first_line = ev.line
        self.last_line = max(self.last_line or ev.line, ev.line)
        if evidence and ev.text:
            if self._ev_counts[ev.kind] < _EVIDENCE_CAP.get(ev.kind, 50) and len(self.evidence) < _EVIDENCE_TOTAL:
                self.evidence.append(Evidence(line=ev.line, kind=ev.kind, text=ev.text[:500]))
            self._ev_counts[ev.kind] += 1

    def add_throughput(self, tp: Throughput) -> None:
        self.add_many((tp,))

    def add_many(self, tps) -> None:
        """Record measured speeds (the store gets them at the next spill) and keep
        each (model, test, kind)'s series for the run's summary."""
        series = self._series
        pending = self.pending
        isfinite = math.isfinite
        for tp in tps:
            if not isfinite(tp.tok_s):
                continue  # 'inf tokens per second' (0 ms measured) is not a rate
            pending.append(tp)
            self.throughput_count += 1
            group = (tp.model, tp.test, tp.kind)
            found = series.get(group)
            if found is None:
                series[group] = (array("d", (tp.tok_s,)), tp.line, tp.stddev)
            else:
                found[0].append(tp.tok_s)

    def add_bench_rows(self, model: str | None, rows: list[tuple], start: int = 0) -> None:
        """``add_many`` for the dense path's rows of one configuration,
        ``(line, test, tok_s, stddev, n_prompt, n_gen, n_depth)`` from ``rows[start]`` on:
        the same Throughput rows and series, with no per-row group key (a batch
        holds a few tests, each looked up once)."""
        isfinite, make = math.isfinite, tuple.__new__
        pending, series = self.pending, self._series
        values_of: dict[str, array] = {}  # test -> its series' speeds
        added = 0
        for i in range(start, len(rows)):
            line, test, tok_s, stddev, n_prompt, n_gen, n_depth = rows[i]
            if not isfinite(tok_s):
                continue  # 'inf tokens per second' (0 ms measured) is not a rate
            pending.append(make(Throughput, (test, tok_s, stddev, model, line, "bench", n_prompt, n_gen, n_depth)))
            values = values_of.get(test)
            if values is None:
                found = series.get((model, test, "bench"))
                if found is None:
                    found = series[(model, test, "bench")] = (array("d"), line, stddev)
                values = values_of[test] = found[0]
            values.append(tok_s)
            added += 1
        self.throughput_count += added

    def throughput_summary(self) -> list[dict]:
        """One entry per (model, test, kind), in order of appearance: the row itself,
        or the median of several (a bench file may give a run a million rows; the
        store keeps every row, readers take this summary)."""
        out = []
        for (model, test, kind), (values, line, stddev) in self._series.items():
            n = len(values)
            out.append({"test": test, "tok_s": values[0] if n == 1 else statistics.median(values),
                        "stddev": stddev if n == 1 else None, "model": model, "kind": kind, "n": n, "line": line})
        return out

    @property
    def has_results(self) -> bool:
        return self.throughput_count > 0

    def finalize(self) -> RunFacts:
        f = self.facts
        f.throughput_summary = self.throughput_summary()
        f.first_line = self.first_line or 0
        f.last_line = self.last_line or f.first_line
        f.device.families = sorted(self.families)
        apple = [c for c in self.families if c in _APPLE]
        f.device.apple_family = max(apple) if apple else None
        if f.backend is None:
            if self.device_source in ("metal", "probe", "sysprof"):
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
            f.program = self.explicit_program or (f.shim.process if f.shim and f.shim.process else None) or (
                f.processes[0] if f.processes else None)
            if f.program is None and (self.metal_blocks or self.throughput_count):
                f.program = "llama.cpp"
        return f


class Assembler:
    def __init__(self, on_run: Callable[[RunBuilder], None],
                 on_throughput: Callable[[RunBuilder, list[Throughput]], None]):
        self.on_run = on_run
        self.on_throughput = on_throughput
        self.seq = 0
        self.run = RunBuilder(0)
        self.md_columns: list[str] | None = None
        self.closed = 0
        self.pending_gate: list[Event] = []  # M4 block start awaiting its GPU name line
        self._handlers: dict[str, Callable[[Event], None] | None] = {}

    # -- run lifecycle ------------------------------------------------------
    def new_run(self) -> RunBuilder:
        self.close_run()
        self.seq += 1
        self.run = RunBuilder(self.seq)
        return self.run

    def close_run(self) -> None:
        run = self.run
        if not run.content:
            return
        if run.trials:  # benchmark trials without their Averages line (cut off): the trials are the results
            for tp in run.trials:
                run.add_throughput(tp)
            run.trials = []
        run.finalize()
        self.on_run(run)
        if run.pending:
            self.on_throughput(run, run.pending)
            run.pending = []
        self.closed += 1
        run.content = False  # closed runs are never emitted twice

    def finish(self) -> None:
        if self.pending_gate:
            self._flush_gate(self.run)
        self.close_run()

    def _spill(self) -> None:
        run = self.run
        if len(run.pending) >= SPILL_AT:
            self.on_throughput(run, run.pending)
            run.pending = []

    # -- events ---------------------------------------------------------------
    def feed(self, events: list[Event]) -> None:
        handlers = self._handlers
        for ev in events:
            if self.pending_gate and ev.kind not in ("metal.device", "metal.library_loaded", "metal.tensor_gate"):
                self._flush_gate(self.run)
            handler = handlers.get(ev.kind, _UNSET)
            if handler is _UNSET:
                handler = handlers[ev.kind] = getattr(self, "_on_" + ev.kind.replace(".", "_"), None)
            if handler is not None:
                handler(ev)

    def _flush_gate(self, run: RunBuilder) -> None:
        for pending in self.pending_gate:
            run.touch(pending)
        self.pending_gate = []

    def _on_hint_process(self, ev: Event) -> None:
        if ev.data["name"] not in self.run.facts.processes:
            self.run.facts.processes.append(ev.data["name"])

    # Metal ------------------------------------------------------------------
    def _metal_run(self) -> RunBuilder:
        run = self.run
        if run.device_source not in (None, "metal"):
            run = self.new_run()
        run.device_source = "metal"
        return run

    def _on_metal_tensor_gate(self, ev: Event) -> None:
        """First line of an M4 block. Whether it opens a new process or is
        the next GGML_METAL_DEVICES device of this one is known only at the
        GPU name line, so it waits there."""
        run = self.run
        if run.metal_blocks or run.device_source not in (None, "metal") or run.has_results:
            self.pending_gate.append(ev)
            return
        run.device_source = "metal"
        run.facts.metal_era = "M4"
        run.m4_open = True  # the GPU name line that follows belongs to this block
        run.touch(ev)

    def _on_metal_block_start(self, ev: Event) -> None:
        run = self.run
        if run.device_source not in (None, "metal") or (run.metal_blocks and run.has_results and run.facts.metal_era != "M4"):
            run = self.new_run()
        run.device_source = "metal"
        if run.facts.metal_era is None:
            run.facts.metal_era = "legacy"
            run.metal_blocks = max(run.metal_blocks, 1)
        run.touch(ev)

    def _on_metal_device(self, ev: Event) -> None:
        d = ev.data
        run = self.run
        era = d.get("era")
        name = d.get("name")
        if era == "M4":
            gate, self.pending_gate = self.pending_gate, []
            if d.get("index", 0) >= 1 and run.facts.metal_era == "M4" and run.metal_blocks and not run.has_results:
                run.facts.device_count += 1  # GGML_METAL_DEVICES: another virtual device, same process
                for pending in gate:
                    run.touch(pending)
                run.touch(ev)
                return
            if gate:
                run = self.new_run()
                for pending in gate:
                    run.touch(pending)
                    if pending.kind == "metal.library_loaded":
                        run.facts.library_load_s = float(pending.data["seconds"])
            elif run.m4_open and run.metal_blocks == 0:
                pass  # the tensor-gate line already opened this block
            elif run.metal_blocks or run.device_source not in (None, "metal") or run.has_results:
                run = self.new_run()
        else:
            if run.device_source not in (None, "metal"):
                run = self.new_run()
            elif run.metal_blocks and run.facts.device.name and name and name != run.facts.device.name:
                run = self.new_run()
            elif run.metal_blocks and run.has_results and run.facts.metal_era == "legacy" and name != run.facts.device.name:
                run = self.new_run()
        run.m4_open = False
        run.device_source = "metal"
        run.metal_blocks += 1
        run.facts.device_count = max(run.facts.device_count, 1)
        if run.facts.metal_era is None or era == "M4":
            run.facts.metal_era = era
        if name:
            run.facts.device.name = name
            run.saw_device(name)
        run.touch(ev)

    def _on_metal_family(self, ev: Event) -> None:
        run = self._metal_run()
        run.families.add(ev.data["code"])
        run.touch(ev)

    def _on_metal_flag(self, ev: Event) -> None:
        run = self._metal_run()
        flag, value = ev.data["flag"], ev.data["value"]
        if flag in Capabilities.model_fields or flag == "unified_memory":
            run.saw_flag(flag, value, ev.line)
        if flag in Capabilities.model_fields:
            setattr(run.facts.capabilities, flag, value)
        elif flag == "unified_memory":
            run.facts.device.unified_memory = value
        elif flag == "use_bfloat":
            run.facts.use_bfloat = value
        run.touch(ev)

    def _on_metal_working_set(self, ev: Event) -> None:
        run = self._metal_run()
        run.facts.device.working_set_mb = ev.data["mb"]
        run.touch(ev)

    def _on_metal_skip_kernel(self, ev: Event) -> None:
        run = self.run
        run.facts.skipped_kernels += 1
        if "bf16" not in ev.data["kernel"]:
            run.facts.skipped_kernels_non_bf16 += 1
        run.touch(ev)

    def _on_metal_unsupported_op(self, ev: Event) -> None:
        run = self.run
        op = ev.data["op"]
        if op not in run.unsupported_seen and len(run.unsupported_seen) < MAX_UNSUPPORTED_OPS:
            run.unsupported_seen.add(op)
            run.facts.unsupported_ops.append(op)
        run.touch(ev)

    def _device_hint(self, ev: Event, name: str | None) -> None:
        run = self.run
        if name and not re.fullmatch(r"MTL\d+|Metal|CPU", name):
            if run.facts.device.name is None:
                run.facts.device.name = name
            run.saw_device(name)
        run.touch(ev)

    def _on_metal_found_device(self, ev: Event) -> None:
        self._device_hint(ev, ev.data.get("name"))

    def _on_metal_picking_device(self, ev: Event) -> None:
        self._device_hint(ev, ev.data.get("name"))

    def _on_model_device(self, ev: Event) -> None:
        if re.fullmatch(r"MTL\d+|Metal", ev.data.get("device") or ""):
            self.run.facts.backend = self.run.facts.backend or "metal"
        self.run.facts.model_device = ev.data.get("description")
        self._device_hint(ev, ev.data.get("description"))

    def _on_metal_family_fallback(self, ev: Event) -> None:
        self.run.facts.family_fallback = True
        self.run.explicit_program = self.run.explicit_program or "whisper.cpp"
        self.run.touch(ev)

    def _on_metal_error(self, ev: Event) -> None:
        self.run.facts.metal_errors.append(ev.data["message"])
        self.run.touch(ev)

    def _on_metal_library_failed(self, ev: Event) -> None:
        run = self.run
        if run.facts.metal_library_failed is None:
            run.facts.metal_library_failed = ev.data["what"][:160]
        run.touch(ev)

    def _on_metal_agx_error(self, ev: Event) -> None:
        run = self.run
        run.facts.agx_domain = run.facts.agx_domain or ev.data["domain"]
        run.facts.metal_errors.append(ev.text[:300])
        run.touch(ev)

    def _on_metal_library_loaded(self, ev: Event) -> None:
        if self.pending_gate:
            self.pending_gate.append(ev)
            return
        self.run.facts.library_load_s = float(ev.data["seconds"])
        self.run.touch(ev)

    # Shims ------------------------------------------------------------------
    def _on_shim_banner(self, ev: Event) -> None:
        run = self.run
        if run.device_source is not None or run.has_results or run.facts.shim is not None:
            run = self.new_run()
        d = ev.data
        run.facts.shim = Shim(name=d["name"], apple_family_max=d.get("apple_family_max"), process=d.get("process"),
                              line=ev.line)
        run.touch(ev)

    def _on_shim_message(self, ev: Event) -> None:
        self.run.facts.shim_messages.append(ev.text)
        self.run.touch(ev)

    # Vulkan / CUDA ----------------------------------------------------------
    def _device_list_run(self, source: str) -> RunBuilder:
        run = self.run
        if run.device_source is not None and (run.device_source != source or run.metal_blocks or run.has_results):
            run = self.new_run()
        run.device_source = source
        return run

    def _on_vulkan_count(self, ev: Event) -> None:
        run = self.run
        if run.device_source is not None:
            run = self.new_run()
        run.device_source = "vulkan"
        run.touch(ev)

    def _on_vulkan_device(self, ev: Event) -> None:
        run = self._device_list_run("vulkan")
        if run.facts.vulkan_devices and ev.data.get("index") == 0 and run.device_source == "vulkan" and run.has_results:
            run = self.new_run()
            run.device_source = "vulkan"
        run.facts.vulkan_devices.append(ev.data)
        if run.facts.device.name is None:
            run.facts.device.name = ev.data.get("name")
            if ev.data.get("uma") in (0, 1):
                run.facts.device.unified_memory = bool(ev.data["uma"])
            if ev.data.get("bf16") in (0, 1):  # VK_KHR_shader_bfloat16, printed since 2025-07
                run.facts.capabilities.bfloat = bool(ev.data["bf16"])
        run.touch(ev)

    def _on_vulkan_none(self, ev: Event) -> None:
        self.run.touch(ev)

    def _on_vulkan_cpu_device(self, ev: Event) -> None:
        self.run.touch(ev)

    def _on_cuda_count(self, ev: Event) -> None:
        run = self.run
        if run.device_source is not None:
            run = self.new_run()
        run.device_source = "cuda"
        run.touch(ev)

    def _on_cuda_device(self, ev: Event) -> None:
        run = self._device_list_run("cuda")
        run.facts.cuda_devices.append(ev.data)
        if run.facts.device.name is None:
            run.facts.device.name = ev.data.get("name")
        run.touch(ev)

    def _on_cuda_failed(self, ev: Event) -> None:
        self.run.facts.cuda_failed = ev.data.get("message")
        self.run.touch(ev)

    # Process-level ----------------------------------------------------------
    def _on_process_start(self, ev: Event) -> None:
        """'main: build = N (commit)': the first line of a 2023-24 example program, printed before any
        backend initialises, so whatever came before belongs to an earlier process (a shim banner,
        printed by a constructor before main, stays with this one)."""
        run = self.run
        banner_only = run.facts.shim is not None and run.device_source is None and not run.has_results
        if run.content and not banner_only:
            run = self.new_run()
        run.facts.build_commit = run.facts.build_commit or ev.data.get("commit")
        run.touch(ev)

    def _on_build_footer(self, ev: Event) -> None:
        run = self.run
        if not run.content:
            return  # nothing before it in this input: a footer alone is not a run
        run.facts.build_commit = run.facts.build_commit or ev.data["commit"]
        run.touch(ev)

    def _on_system_info(self, ev: Event) -> None:
        run = self.run
        if run.saw_system_info:
            run = self.new_run()
        run.saw_system_info = True
        run.facts.system_backends = ev.data.get("backends") or None
        run.touch(ev)

    def _on_backend_loaded(self, ev: Event) -> None:
        self.run.touch(ev)

    def _on_devices_header(self, ev: Event) -> None:
        run = self.run
        if run.facts.listed_devices is not None:
            run = self.new_run()
        run.facts.listed_devices = []
        run.touch(ev)

    def _on_devices_item(self, ev: Event) -> None:
        run = self.run
        if run.facts.listed_devices is None:
            run.facts.listed_devices = []
        run.facts.listed_devices.append(f"{ev.data['id']}: {ev.data['description']}")
        run.saw_device(ev.data["description"])
        run.touch(ev)

    def _on_devices_none(self, ev: Event) -> None:
        self.run.facts.listed_devices = []
        self.run.touch(ev, evidence=False)

    def _on_build_target(self, ev: Event) -> None:
        self.run.facts.build_target = ev.data["target"]
        self.run.touch(ev)

    def _on_model_name(self, ev: Event) -> None:
        run = self.run
        if run.facts.model is None:
            run.facts.model = ev.data["name"]
        run.touch(ev)

    def _on_model_ftype(self, ev: Event) -> None:
        run = self.run
        if run.facts.quant is None:
            run.facts.quant = ev.data["ftype"]
        run.touch(ev)

    def _on_offload(self, ev: Event) -> None:
        self.run.facts.offload = (ev.data["offloaded"], ev.data["total"])
        self.run.touch(ev)

    def _on_ollama_compute(self, ev: Event) -> None:
        run = self.run
        run.explicit_program = "ollama"
        lib = ev.data["library"]
        if run.facts.ollama_library is None or lib != "cpu":
            run.facts.ollama_library = lib
            run.facts.ollama_description = ev.data.get("description")
        run.saw_device(ev.data.get("description"))
        run.touch(ev)

    def _on_ollama_offload(self, ev: Event) -> None:
        run = self.run
        run.explicit_program = "ollama"
        d = ev.data
        run.facts.offload = (d["offloaded"], d["total"])
        if d.get("library") and (run.facts.ollama_library is None or d["library"] != "cpu"):
            run.facts.ollama_library = d["library"]
        run.touch(ev)

    # Context: the machine around the run, and wrappers ----------------------
    def _on_host_chip(self, ev: Event) -> None:
        self.run.facts.host_chip_line = self.run.facts.host_chip_line or ev.data["chip"]
        self.run.touch(ev)

    def _on_host_model_name(self, ev: Event) -> None:
        self.run.facts.host_model_name = self.run.facts.host_model_name or ev.data["name"]
        self.run.touch(ev)

    def _on_host_macos(self, ev: Event) -> None:
        self.run.facts.macos_version = self.run.facts.macos_version or ev.data["version"]
        self.run.touch(ev)

    def _on_mlx_device(self, ev: Event) -> None:
        run = self.run
        run.explicit_program = run.explicit_program or "mlx_lm"
        if run.facts.device.name is None:
            run.facts.device.name = ev.data["name"]
        run.saw_device(ev.data["name"])
        run.touch(ev)

    def _on_memory_device(self, ev: Event) -> None:
        run = self.run
        if ev.data["id"].startswith("MTL"):
            run.facts.backend = run.facts.backend or "metal"
        self._device_hint(ev, ev.data["name"])

    def _on_model_mapped(self, ev: Event) -> None:
        self.run.facts.mmap = True
        self.run.touch(ev)

    def _on_wrapper_virtualised(self, ev: Event) -> None:
        run = self.run
        run.facts.wrapper_virtualised = ev.data["name"]
        self._device_hint(ev, ev.data["name"])

    def _on_wrapper_gpu_layers(self, ev: Event) -> None:
        self.run.facts.n_gpu_layers = ev.data["layers"]
        self.run.touch(ev)

    # Benchmarks and timings --------------------------------------------------
    def _on_bench_md_header(self, ev: Event) -> None:
        self.md_columns = ev.data["columns"]

    def _on_bench_md_row(self, ev: Event) -> None:
        if not self.md_columns:
            return
        row = md_row_to_bench(self.md_columns, ev.data["cells"])
        if row:
            self._bench(ev, row)

    def _on_bench_row(self, ev: Event) -> None:
        self._bench(ev, ev.data)

    def _on_bench_row_list(self, ev: Event) -> None:
        for row in ev.data["rows"]:
            self._bench(ev, row)

    def _on_bench_rows(self, ev: Event) -> None:
        """Consecutive llama-bench rows of one configuration (the dense JSONL path):
        the first decides the run like any row, the rest only add their numbers."""
        config, rows = ev.data["config"], ev.data["rows"]
        first = rows[0]
        self._bench(Event("bench.row", first[0], "", {}), bench_row_from(config, first[1:]))
        run = self.run
        run.add_bench_rows(config["model"], rows, 1)
        run.last_line = max(run.last_line or 0, rows[-1][0])
        self._spill()

    def _bench(self, ev: Event, row: dict) -> None:
        run = self.run
        f = run.facts
        if row["format"] != "md":
            key = row["key"]
            if key == run.bench_key and run.bench_model == row["model"]:
                # Another row of the same benchmark (files hold up to millions): only its numbers are new.
                run.last_line = ev.line
                run.add_throughput(Throughput(row["test"], row["tok_s"], row["stddev"], row["model"], ev.line,
                                              "bench", row["n_prompt"], row["n_gen"], row["n_depth"]))
                if len(run.pending) >= SPILL_AT:
                    self._spill()
                return
            gpu = row.get("gpu_info")
            if run.bench_key is not None and run.bench_key != key:
                run = self.new_run()
            elif run.device_source in ("probe", "sysprof"):
                run = self.new_run()
            elif run.device_source in ("metal", "vulkan", "cuda") and gpu and f.device.name \
                    and not _same_device(gpu, f.device.name):
                run = self.new_run()
            run.bench_key = key
            f = run.facts
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
            if f.build_commit is None and row.get("build_commit"):
                f.build_commit = row["build_commit"]
            if run.device_source is None and row.get("gpu_info"):
                run.device_source = "bench"
                f.device.name = row["gpu_info"]
        elif run.device_source in ("probe", "sysprof"):
            run = self.new_run()
            f = run.facts
        if f.bench_backends is None and row.get("backend"):
            f.bench_backends = row["backend"]
        if f.n_gpu_layers is None and row.get("n_gpu_layers") is not None:
            f.n_gpu_layers = row["n_gpu_layers"]
        if f.model is None and row.get("model"):
            f.model = row["model"]
        run.explicit_program = "llama-bench"
        if f.program != "llama-bench":
            f.program = "llama-bench"
        run.bench_model = row.get("model")
        run.touch(ev, evidence=False)
        label = row.get("label")  # rows of a hand-edited table told apart by a label ('master', 'PR')
        run.add_throughput(Throughput(
            test=row["test"], tok_s=row["tok_s"], stddev=row.get("stddev"),
            model=f"{row.get('model')} ({label})" if label else row.get("model"), line=ev.line,
            kind="bench", n_prompt=row.get("n_prompt"), n_gen=row.get("n_gen"), n_depth=row.get("n_depth")))
        self._spill()

    def _timing_run(self) -> RunBuilder:
        run = self.run
        if run.device_source in ("probe", "sysprof"):
            run = self.new_run()
        return run

    def _timing(self, ev: Event, phase: str, tok_s: float | None, source: str, tokens: int | None = None,
                trial: bool = False) -> None:
        if tok_s is None or phase == "sample":
            return
        run = self._timing_run()
        key = "prompt" if phase == "prompt" else "eval"
        pending = run.pending_counts.pop(key, None)
        if tokens is None:
            tokens = pending if pending is not None else run.setup_counts.get(key)
        program = {"ollama": "ollama", "mlx_lm": "mlx_lm", "server-slot": "llama-server", "server-json": "llama-server",
                   "llama-cli": "llama-cli"}.get(source)
        if program and run.explicit_program in (None, "llama.cpp"):
            run.explicit_program = program
        tp = Throughput(test="prompt" if key == "prompt" else "generation", tok_s=tok_s, model=run.facts.model,
                        line=ev.line, kind="timing", n_prompt=tokens if key == "prompt" else None,
                        n_gen=tokens if key == "eval" else None)
        if trial:
            run.trials.append(tp)
        else:
            run.add_throughput(tp)
        run.touch(ev)

    def _on_timing(self, ev: Event) -> None:
        d = ev.data
        self._timing(ev, d["phase"], d.get("tok_s"), d.get("source", ""), d.get("tokens"))

    def _on_timing_pair(self, ev: Event) -> None:
        d = ev.data
        run = self._timing_run()
        run.trials = []  # an Averages line supersedes the trials before it
        self._timing(ev, "prompt", d.get("prompt_tok_s"), d.get("source", ""), d.get("prompt_n"))
        self._timing(ev, "eval", d.get("eval_tok_s"), d.get("source", ""), d.get("eval_n"))

    def _on_timing_trial(self, ev: Event) -> None:
        d = ev.data
        self._timing(ev, "prompt", d.get("prompt_tok_s"), d.get("source", ""), trial=True)
        self._timing(ev, "eval", d.get("eval_tok_s"), d.get("source", ""), trial=True)

    def _on_timing_count(self, ev: Event) -> None:
        run = self._timing_run()
        run.pending_counts[ev.data["phase"]] = ev.data["tokens"]
        run.touch(ev)

    def _on_timing_setup(self, ev: Event) -> None:
        run = self._timing_run()
        run.setup_counts = {"prompt": ev.data["prompt_n"], "eval": ev.data["eval_n"]}
        run.explicit_program = run.explicit_program or "mlx_lm"
        run.touch(ev)

    def _on_server_slot(self, ev: Event) -> None:
        self.run.explicit_program = "llama-server"
        self.run.touch(ev, evidence=False)

    def _on_whisper_timing(self, ev: Event) -> None:
        self.run.explicit_program = "whisper.cpp"
        self.run.touch(ev)

    # Probes and system_profiler ---------------------------------------------
    def _probe_run(self, program: str) -> RunBuilder:
        run = self.run
        banner_only = run.facts.shim is not None and run.device_source is None and not run.has_results
        fresh_probe = run.device_source == "probe" and run.facts.program == program and run.facts.probe == {}
        if run.content and not (banner_only or fresh_probe):
            run = self.new_run()
        run.device_source = "probe"
        run.facts.program = program
        run.facts.probe = {}
        return run

    def _on_probe_start(self, ev: Event) -> None:
        self._probe_run("capscan-probe").touch(ev)

    def _on_probe_device(self, ev: Event) -> None:
        run = self.run
        if not (run.device_source == "probe" and run.facts.program == "capscan-probe" and run.facts.device.name is None):
            run = self._probe_run("metal-capabilities")
        run.facts.device.name = ev.data["name"]
        run.touch(ev)

    def _on_probe_json(self, ev: Event) -> None:
        d = ev.data
        run = self._probe_run(d.get("probe", "probe"))
        run.facts.device.name = d.get("name")
        for code, ok in d.get("families", {}).items():
            self._probe_answer(run, code, ok)
        run.facts.device.threadgroup_memory = d.get("threadgroup_memory")
        run.facts.device.working_set_mb = d.get("working_set_mb")
        run.facts.device.unified_memory = d.get("unified_memory")
        run.touch(ev)

    @staticmethod
    def _probe_answer(run: RunBuilder, code: int, ok: bool) -> None:
        run.facts.probe = run.facts.probe if run.facts.probe is not None else {}
        run.facts.probe[code] = ok
        if ok:
            run.families.add(code)

    def _on_probe_family(self, ev: Event) -> None:
        run = self.run
        self._probe_answer(run, ev.data["code"], ev.data["supported"])
        run.touch(ev)

    def _on_probe_threadgroup_memory(self, ev: Event) -> None:
        self.run.facts.device.threadgroup_memory = ev.data["bytes"]
        self.run.touch(ev)

    def _on_probe_working_set(self, ev: Event) -> None:
        self.run.facts.device.working_set_mb = ev.data["mb"]
        self.run.touch(ev)

    def _on_probe_unified_memory(self, ev: Event) -> None:
        self.run.saw_flag("unified_memory", ev.data["value"], ev.line)
        self.run.facts.device.unified_memory = ev.data["value"]
        self.run.touch(ev)

    def _on_sysprof_chipset(self, ev: Event) -> None:
        run = self.run
        if run.device_source != "sysprof":
            if run.content:
                run = self.new_run()
            run.device_source = "sysprof"
            run.facts.program = "system_profiler"
        chipsets = run.facts.sysprof_chipsets
        chipsets.append(ev.data["name"])
        # One GPU names the device; with several (an Intel iGPU and an AMD dGPU) which one a program
        # uses is not shown, so none is picked (all stay in sysprof_chipsets).
        run.facts.device.name = chipsets[0] if len(set(chipsets)) == 1 else None
        run.touch(ev)

    def _on_sysprof_metal(self, ev: Event) -> None:
        run = self.run
        if run.device_source == "sysprof":
            run.facts.sysprof_metal = run.facts.sysprof_metal or ev.data["support"]
            run.touch(ev)
