"""A grammar of whole, plausible single-machine logs, for the property tests in
tests/rules/test_pasted_logs_property.py (hypothesis strategies).

A log is drawn in three steps: a **machine** (what really ran), a few **sections** (what the user
captured: one command's output or several), and a **wrapping** (how it was pasted). Every line a
machine prints agrees with every other: one device, one build target, one CPU, one unified-memory
answer. So any two logs of the grammar pasted together are two machines' lines, and whatever capscan
makes of the mix can only cost a fix, never create one (the property). Each log also knows what its
lines can prove: ``Log.guest_like`` when a guest on an Apple-silicon host running arm64 programs (the
only machine a forced Apple7 family helps) could have printed exactly these lines, by rendering the
same sections for that twin and comparing; ``Log.host_proof`` when, besides, one of them proves the
host from inside the guest (issue 21's closed list: arm64 build target, NEON, cpu_info, ``Chip:``).

Machines (reference: /work/shared/reference/vm-gpu-landscape.md §2.2, §5.5; log-formats.md §1.7, §10)
    guest-apple     macOS guest on an Apple-silicon host: "Apple Paravirtual device", Apple5 + Common3,
                    no Metal line, reduction/mm/bfloat false, unified memory true; arm64 build, NEON;
                    llama-bench ``cpu_info`` "Accelerate, Apple M1 Ultra (Virtual)"; ``Chip: ... (Virtual)``.
    guest-rosetta   the same guest running an x86_64 build under Rosetta (AVX features): never fixable,
                    since every build target must be arm64.
    guest-intel     macOS guest on an Intel Mac: the same paravirtual name, unified memory false,
                    x86_64 build, ``cpu_info`` "Intel(R) Core(TM) i9-9980HK ... (Virtual)".
    host-apple      bare-metal Apple silicon (Apple7-9, Metal3/Metal4, every flag true).
    intel-igpu      Intel Mac iGPU: Common3 + Metal3, no Apple family, reduction true, mm false,
                    unified memory true (Intel iGPUs have it); 2026 builds name it only ``MTL0``.
    amd-mac         Intel Mac with an AMD GPU (Common3 + Metal3, unified memory false; llama.cpp#10003).

Sections (any non-empty subset, in this order; each is one command's output)
    version         ``llama-cli --version``: ``version: N (commit)`` + ``built with CC for TARGET`` (§2).
    process         one llama.cpp process. Era ``legacy`` (M2 2024: ``ggml_metal_init:`` with
                    ``... support`` flag names and ``hasUnifiedMemory``), ``m3`` (2025 flag names), or
                    ``m4`` (``ggml_metal_device_init:`` block at registration, before the build line,
                    GPU name ``MTL0 (NAME)``, the 2026-02..04 bare ``MTL0``, or 2025's bare NAME) (§1.2).
                    Build line in both forms: ``build: N (commit) with CC for TARGET`` (common_init) or
                    ``main: build = N (commit)`` + ``main: built with CC for TARGET`` (old main, §2).
                    Optional: a MoltenVK Vulkan device list registered beside Metal
                    (``ggml_vulkan: 0 = NAME (MoltenVK) | uma: 0/1 | ...``, §3), ``using device``,
                    ``offloaded N/23 layers to GPU``, the per-context ``found device``/``picking default
                    device`` lines, ``system_info`` (per-backend layout, or the fixed 2024 list with
                    NEON vs AVX2/SSE3, §5), then a timing result, an ``unsupported op`` crash (clamped
                    devices, §1.4) or an AGX compiler error domain (bare-metal Apple only).
    list-devices    ``--list-devices``: ``Available devices:`` + ``  MTL0: NAME (N MiB, N MiB free)``
                    (``  Metal: NAME (...)`` before 2026-02) (§2).
    probe           capscan-probe key=value (``probe=capscan-probe 1``, ``device=``,
                    ``supports_family.N=``, ``has_unified_memory=``), capscan-probe --json, the Lume/Tart
                    4-line probe, the Anka one-line JSON (analyzer/parsers/probes.py samples).
    bench           llama-bench ``-o json`` (array), ``-o jsonl`` or the markdown table with its
                    ``build:`` footer (§6): ``cpu_info``, ``gpu_info``, ``backends`` of the machine.
    hardware        system_profiler SPHardwareDataType's Hardware Overview: ``Chip:`` (Apple silicon,
                    "(Virtual)" in a guest) or ``Processor Name:`` (Intel), and sysctl's brand string.

Wrappings (analyzer/read/normalize.py strips each): plain, llama.cpp's common-logger timestamps
(``0.00.012.345 I ``, only on the llama process's lines), ``kubectl logs --prefix``, CRI container
logs, GitHub Actions timestamps, CRLF.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import strategies as st


@dataclass(frozen=True)
class Machine:
    kind: str
    gpu: str                  # the Metal device's name
    apple: int | None         # highest Apple family (1005 ...), None on Intel/AMD GPUs
    metal: int | None         # 5001/5002 or None
    reduction: bool
    mm: bool
    unified: bool
    arch: str                 # arm64 | x86_64
    cpu_info: str             # llama-bench cpu_info
    chip_line: str            # Hardware Overview line
    brand: str | None         # sysctl machdep.cpu.brand_string (Intel only)
    working_set: str
    chip: str | None = None   # a guest's host chip (what cpu_info and Chip: name)

    @property
    def paravirtual(self) -> bool:
        return self.gpu == "Apple Paravirtual device"



GUEST_CHIPS = ("Apple M1 Ultra", "Apple M2 Max", "Apple M4 Max")
HOST_CHIPS = (("Apple M1 Ultra", 1007, 5002), ("Apple M2 Max", 1008, 5001), ("Apple M3 Pro", 1009, 5002))


def _guest(kind: str, chip: str) -> Machine:
    on_intel = kind == "guest-intel"
    cpu = "Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz (Virtual)" if on_intel else f"Accelerate, {chip} (Virtual)"
    return Machine(kind, "Apple Paravirtual device", 1005, None, False, False, unified=not on_intel,
                   arch="arm64" if kind == "guest-apple" else "x86_64", cpu_info=cpu,
                   chip_line="Processor Name: 8-Core Intel Core i9" if on_intel else f"Chip: {chip} (Virtual)",
                   brand="Intel(R) Core(TM) i9-9980HK CPU @ 2.40GHz" if on_intel else None,
                   working_set="11453.25" if not on_intel else " 5010.80", chip=None if on_intel else chip)


KINDS = ("guest-apple", "guest-rosetta", "guest-intel", "host-apple", "intel-igpu", "amd-mac")


@st.composite
def machines(draw, kinds: tuple[str, ...] = KINDS) -> Machine:
    kind = draw(st.sampled_from(kinds))
    if kind.startswith("guest"):
        return _guest(kind, draw(st.sampled_from(GUEST_CHIPS)))
    if kind == "host-apple":
        chip, fam, metal = draw(st.sampled_from(HOST_CHIPS))
        return Machine(kind, chip, fam, metal, True, True, True, "arm64", f"Accelerate, {chip}", f"Chip: {chip}",
                       None, "115448.73")
    if kind == "intel-igpu":
        return Machine(kind, "Intel(R) Iris(TM) Plus Graphics", None, 5001, True, False, True, "x86_64",
                       "Intel(R) Core(TM) i5-1038NG7 CPU @ 2.00GHz", "Processor Name: Quad-Core Intel Core i5",
                       "Intel(R) Core(TM) i5-1038NG7 CPU @ 2.00GHz", " 1610.61")
    return Machine(kind, "AMD Radeon Pro 5500M", None, 5001, True, False, False, "x86_64",
                   "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz", "Processor Name: 8-Core Intel Core i9",
                   "Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz", " 8573.16")


def _b(v: bool) -> str:
    return "true" if v else "false"


def _target(m: Machine, darwin: str) -> str:
    return f"{m.arch}-apple-darwin{darwin}"


CC = "Apple clang version 17.0.0 (clang-1700.0.13.5)"


def build_lines(m: Machine, form: str, number: int, commit: str, darwin: str) -> list[str]:
    if form == "common_init":
        return [f"build: {number} ({commit}) with {CC} for {_target(m, darwin)}"]
    return [f"main: build = {number} ({commit})", f"main: built with {CC} for {_target(m, darwin)}"]


def metal_block(m: Machine, era: str, name_form: str) -> list[str]:
    """The capability block as each era prints it; family lines only for families the device has."""
    if era == "m4":
        p = "ggml_metal_device_init: "
        name = {"mtl0-paren": f"MTL0 ({m.gpu})", "mtl0-only": "MTL0", "bare": m.gpu}[name_form]
        out = [p + "tensor API disabled for pre-M5 and pre-A19 devices",
               "ggml_metal_library_init: using embedded metal library",
               p + f"GPU name:   {name}"]
    else:
        p = "ggml_metal_init: "
        out = [p + "allocating", p + f"found device: {m.gpu}", p + f"picking default device: {m.gpu}",
               p + "using embedded metal library", p + f"GPU name:   {m.gpu}"]
    if m.apple:
        out.append(p + f"GPU family: MTLGPUFamilyApple{m.apple - 1000}  ({m.apple})")
    out.append(p + "GPU family: MTLGPUFamilyCommon3 (3003)")
    if m.metal:
        out.append(p + f"GPU family: MTLGPUFamilyMetal{m.metal - 5000 + 2}  ({m.metal})")
    bfloat = bool(m.metal) or bool(m.apple and m.apple >= 1006)
    if era == "legacy":
        out += [p + f"simdgroup reduction support   = {_b(m.reduction)}",
                p + f"simdgroup matrix mul. support = {_b(m.mm)}",
                p + f"hasUnifiedMemory              = {_b(m.unified)}"]
    elif era == "m3":
        out += [p + f"simdgroup reduction   = {_b(m.reduction)}", p + f"simdgroup matrix mul. = {_b(m.mm)}",
                p + f"has bfloat            = {_b(bfloat)}", p + "use bfloat            = false",
                p + f"hasUnifiedMemory      = {_b(m.unified)}"]
    else:
        out += [p + f"simdgroup reduction   = {_b(m.reduction)}", p + f"simdgroup matrix mul. = {_b(m.mm)}",
                p + f"has unified memory    = {_b(m.unified)}", p + f"has bfloat            = {_b(bfloat)}",
                p + "has tensor            = false", p + f"use shared buffers    = {_b(m.unified)}"]
    out.append(p + f"recommendedMaxWorkingSetSize  = {m.working_set} MB")
    return out


def vulkan_lines(m: Machine) -> list[str]:
    uma = 1 if m.unified else 0
    warp = 64 if m.kind == "amd-mac" else 32
    return ["ggml_vulkan: Found 1 Vulkan devices:",
            f"ggml_vulkan: 0 = {m.gpu} (MoltenVK) | uma: {uma} | fp16: 1 | warp size: {warp} | "
            "shared memory: 32768 | int dot: 0 | matrix cores: none"]


def system_info(m: Machine, layout: str) -> str:
    arm = m.arch == "arm64"
    if layout == "per-backend":
        cpu = ("NEON = 1 | ARM_FMA = 1 | FP16_VA = 1 | MATMUL_INT8 = 1 | DOTPROD = 1 | ACCELERATE = 1 | REPACK = 1 |"
               if arm else "SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
                           "LLAMAFILE = 1 | ACCELERATE = 1 | REPACK = 1 |")
        return f"system_info: n_threads = 8 (n_threads_batch = 8) / 8 | Metal : EMBED_LIBRARY = 1 | CPU : {cpu}"
    x, a = ("0", "1") if arm else ("1", "0")
    return (f"system_info: n_threads = 8 (n_threads_batch = 8) / 8 | AVX = {x} | AVX2 = {x} | AVX512 = 0 | "
            f"FMA = {x} | NEON = {a} | ARM_FMA = {a} | F16C = {x} | FP16_VA = {a} | BLAS = 1 | SSE3 = {x} | "
            f"SSSE3 = {x} | MATMUL_INT8 = {a} | LLAMAFILE = 1 | ")


def speeds(m: Machine) -> tuple[float, float]:
    """(pp512, tg128) tokens/s, plausible for the machine (vm-gpu-landscape.md §2)."""
    return {"guest-apple": (431.86, 12.63), "guest-rosetta": (431.86, 12.63), "guest-intel": (36.0, 2.88),
            "host-apple": (4871.99, 286.71), "intel-igpu": (48.5, 9.7), "amd-mac": (310.4, 41.2)}[m.kind]


RESULT = ("llama_perf_context_print:        eval time =    {ms:.2f} ms /    50 runs   ({per:8.2f} ms per token, "
          "{tps:8.2f} tokens per second)")


@st.composite
def process_params(draw, eras=("m4", "legacy", "m3"), names=("mtl0-only", "mtl0-paren", "bare"),
                   backends=("metal", "metal+vulkan", "vulkan"), build=(True, True, False), extras=True,
                   endings=("result", "result", "crash", "none")) -> dict:
    """extras=False: only what llama-bench prints on stderr (the registration block, no loader lines)."""
    return {"era": draw(st.sampled_from(eras)), "name_form": draw(st.sampled_from(names)),
            "backend": draw(st.sampled_from(backends)), "build": draw(st.sampled_from(build)),
            "build_form": draw(st.sampled_from(("common_init", "main"))), "number": draw(st.integers(3000, 9999)),
            "commit": draw(st.sampled_from(("1a2b3c4d", "0320ac526", "ee3d1b54c"))),
            "darwin": draw(st.sampled_from(("23.6.0", "25.3.0"))),
            "ngl0": draw(st.integers(0, 7)) == 0, "loader": extras and draw(st.booleans()),
            "context": extras and draw(st.booleans()),
            "info": draw(st.sampled_from((None, "per-backend", "fixed-2024"))) if extras else None,
            "ending": draw(st.sampled_from(endings))}


def process_lines(m: Machine, p: dict) -> list[str]:
    era = p["era"]
    build = build_lines(m, p["build_form"], p["number"], p["commit"], p["darwin"]) if p["build"] else []
    block = metal_block(m, era, p["name_form"]) if "metal" in p["backend"] else []
    vulkan = vulkan_lines(m) if "vulkan" in p["backend"] else []
    dev = ("MTL0" if era == "m4" else "Metal") if block else "Vulkan0"
    loader = [f"llama_model_load_from_file_impl: using device {dev} ({m.gpu}) - 10922 MiB free",
              f"load_tensors: offloaded {0 if p['ngl0'] else 23}/23 layers to GPU"] if p["loader"] else []
    context = (["ggml_metal_init: allocating", f"ggml_metal_init: found device: {m.gpu}",
                f"ggml_metal_init: picking default device: {m.gpu}"] if era == "m4" and block and p["context"] else [])
    info = [system_info(m, p["info"])] if p["info"] else []
    tg = speeds(m)[1]
    if p["ending"] == "crash" and not m.reduction and block:
        tail = ["llama_context: graph splits = 1",
                ("ggml_metal_op_encode_impl" if era == "m4" else "ggml_metal_graph_compute_block_invoke")
                + ": error: unsupported op 'RMS_NORM'"]
    elif p["ending"] == "crash" and m.kind == "host-apple" and block:
        tail = ["ggml_metal_library_compile_pipeline: error: Error Domain=AGXMetalG16X Code=3 \"Compiler encountered "
                "an internal error\" UserInfo={NSLocalizedDescription=Compiler encountered an internal error}"]
    elif p["ending"] == "none":
        tail = []
    else:
        tail = [RESULT.format(ms=50_000 / tg, per=1000 / tg, tps=tg)]
    if era == "m4":  # registration (Vulkan list, then the Metal block) comes before common_init
        return vulkan + block + build + loader + context + info + tail
    return build + vulkan + loader + block + info + tail


def version_lines(m: Machine, p: dict) -> list[str]:
    return ["version: 6021 (b3a89c3a)", f"built with {CC} for {_target(m, '24.6.0')}"]


def list_devices_lines(m: Machine, p: dict) -> list[str]:
    return ["Available devices:", f"  {p['label']}: {m.gpu} (10922 MiB, 10922 MiB free)"]


def _families(m: Machine) -> dict[int, bool]:
    fams = {c: bool(m.apple and c <= m.apple) for c in range(1001, 1011)}
    fams |= {3001: True, 3002: True, 3003: True, 5001: bool(m.metal), 5002: m.metal == 5002}
    return fams


def probe_lines(m: Machine, p: dict) -> list[str]:
    form = p["form"]
    fams = _families(m)
    if form == "capscan-kv":
        return (["probe=capscan-probe 1", f"device={m.gpu}"]
                + [f"supports_family.{c}={_b(v)}" for c, v in sorted(fams.items())]
                + ["max_threadgroup_memory=32768", f"has_unified_memory={_b(m.unified)}"])
    if form == "capscan-json":
        return [json.dumps({"probe": "capscan-probe", "version": 1, "device": m.gpu,
                            "supports_family": {str(c): v for c, v in sorted(fams.items())},
                            "max_threadgroup_memory": 32768, "has_unified_memory": m.unified},
                           separators=(",", ":"))]
    if form == "lume":
        return [f"device={m.gpu}", "family=1009", f"supports_family={_b(fams[1009])}", "max_threadgroup_memory=32768"]
    return [json.dumps({"device": m.gpu, "family": 1007, "supports_family": fams[1007],
                        "max_threadgroup_memory": 32768}, separators=(",", ":"))]


def _bench_row(m: Machine, test: tuple[int, int], tps: float) -> dict:
    return {"build_commit": "ee3d1b54c", "build_number": 10167, "cpu_info": m.cpu_info, "gpu_info": m.gpu,
            "backends": "MTL,BLAS", "model_filename": "/Users/admin/models/tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf",
            "model_type": "llama 1B Q4_K - Medium", "model_size": 667078656, "model_n_params": 1100048384,
            "n_threads": 8, "n_gpu_layers": -1, "n_prompt": test[0], "n_gen": test[1], "n_depth": 0,
            "test_time": "2026-08-09T18:13:03Z", "avg_ns": int(1e9 * sum(test) / tps), "stddev_ns": 5614648,
            "avg_ts": tps, "stddev_ts": 1.2}


def bench_lines(m: Machine, p: dict) -> list[str]:
    pp, tg = speeds(m)
    rows = [_bench_row(m, (512, 0), pp), _bench_row(m, (0, 128), tg)]
    if p["form"] == "json":
        return json.dumps(rows, indent=2).split("\n")
    if p["form"] == "jsonl":
        return [json.dumps(r) for r in rows]
    return ["| model                          |       size |     params | backend    | threads |          test |"
            "                  t/s |",
            "| ------------------------------ | ---------: | ---------: | ---------- | ------: | ------------: |"
            " -------------------: |",
            f"| llama 1B Q4_K - Medium         | 636.18 MiB |     1.10 B | MTL,BLAS   |       8 |         pp512 |"
            f" {pp:12.2f} ± 2.04 |",
            f"| llama 1B Q4_K - Medium         | 636.18 MiB |     1.10 B | MTL,BLAS   |       8 |         tg128 |"
            f" {tg:12.2f} ± 1.21 |", "", "build: ee3d1b54c (10167)"]


def hardware_lines(m: Machine, p: dict) -> list[str]:
    out = ["Hardware:", "", "    Hardware Overview:", "", "      Model Name: MacBook Pro", f"      {m.chip_line}"]
    if m.brand and p["brand"]:
        out += ["", f"machdep.cpu.brand_string: {m.brand}"]
    return out


SECTIONS = ("version", "process", "list-devices", "probe", "bench", "hardware")

WRAPS = {
    "plain": lambda line, llama: line,
    "common-log": lambda line, llama: ("0.00.012.345 I " + line) if llama else line,
    "kubectl": lambda line, llama: "[pod/llama-0/llama] " + line,
    "cri": lambda line, llama: "2026-01-01T00:00:00.000000000Z stderr F " + line,
    "gh-actions": lambda line, llama: "2026-07-14T09:12:03.4411820Z " + line,
    "crlf": lambda line, llama: line + "\r",
}


@dataclass(frozen=True)
class Log:
    machine: Machine
    sections: tuple[str, ...]
    wrap: str
    lines: tuple[str, ...]
    guest_like: bool   # these exact lines could come from a guest on an Apple-silicon host (arm64)
    host_proof: bool   # ... and among them is a line that proves that host (HOST_PROOF)

    @property
    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)

    def __repr__(self) -> str:  # what a falsifying example shows: the machine and the log itself
        return (f"Log({self.machine.kind}, {'+'.join(self.sections)}, {self.wrap}, guest_like={self.guest_like},"
                f" host_proof={self.host_proof}):\n" + "".join(f"    | {line}\n" for line in self.lines))

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis's pretty printer
        p.text(repr(self))


SECTION_PARAMS = {
    "version": st.just({}),
    "process": process_params(),
    "list-devices": st.fixed_dictionaries({"label": st.sampled_from(("MTL0", "Metal"))}),
    "probe": st.fixed_dictionaries({"form": st.sampled_from(("capscan-kv", "capscan-json", "lume", "anka"))}),
    "bench": st.fixed_dictionaries({"form": st.sampled_from(("json", "jsonl", "md"))}),
    "hardware": st.fixed_dictionaries({"brand": st.booleans()}),
}
RENDER = {"version": version_lines, "process": process_lines, "list-devices": list_devices_lines,
          "probe": probe_lines, "bench": bench_lines, "hardware": hardware_lines}
# Sections whose lines name the host as Apple silicon from inside the guest (issue 21's closed list):
# an arm64 build target, NEON in system_info, llama-bench's cpu_info, the Hardware Overview's Chip:.
HOST_PROOF = {"version", "process", "bench", "hardware"}


@st.composite
def logs(draw, machine: st.SearchStrategy[Machine] | None = None, sections: tuple[str, ...] = SECTIONS,
         max_sections: int = 4, process: st.SearchStrategy[dict] | None = None) -> Log:
    """One machine's log: one to four of the given sections (small logs are what get pasted beside others)."""
    m = draw(machine if machine is not None else machines())
    chosen = draw(st.lists(st.sampled_from(sections), min_size=1, max_size=max_sections, unique=True))
    sections = tuple(s for s in SECTIONS if s in chosen)
    wrap = draw(st.sampled_from(tuple(WRAPS)))
    params = tuple(draw(process if s == "process" and process is not None else SECTION_PARAMS[s]) for s in sections)
    lines: list[str] = []
    twin = _guest("guest-apple", m.chip or GUEST_CHIPS[0])
    guest_like = True  # could a guest on an Apple-silicon host have printed exactly these lines?
    for s, p in zip(sections, params, strict=True):
        part = RENDER[s](m, p)
        guest_like = guest_like and part == RENDER[s](twin, p)
        lines += [WRAPS[wrap](x, s == "process") for x in part]
    proof = guest_like and bool(HOST_PROOF.intersection(sections))
    return Log(m, sections, wrap, tuple(lines), guest_like, proof)


# -- pairs --------------------------------------------------------------------------------------------
# Independent pairs (logs(), logs()) rarely put the one disagreeing line beside the one log it misleads, so most pairs
# are drawn as two machines that disagree on exactly one fact a merged run would have to reconcile
# (issue 21, item 2), each log small, in the variant where that fact is easiest to lose:
#   device   a Metal block naming its GPU only "MTL0" (2026-02..04), beside another machine's output
#            that names a device (--list-devices, llama-bench, a probe, a Vulkan list): issue 21 (a).
#   target   a process of one architecture beside another's build line (--version, common_init's
#            build line, old main's "built with"): issue 21 (b).
#   unified  a log answering "unified memory" one way (a Vulkan-only process's uma:, a probe, a
#            Metal block) beside a machine that answers it the other way: issue 21 (c).
ANONYMOUS = process_params(eras=("m4",), names=("mtl0-only",), backends=("metal",), build=(False,), extras=False)
NAMING = ("list-devices", "bench", "probe", "process")
VULKAN_ONLY = process_params(backends=("vulkan",), build=(False,), extras=False, endings=("none", "result"))


@st.composite
def device_pairs(draw) -> tuple[Log, Log]:
    a = draw(logs(machines(("intel-igpu", "amd-mac", "host-apple", "guest-intel", "guest-apple")),
                  sections=("process",), process=ANONYMOUS))
    others = tuple(k for k in KINDS if k != a.machine.kind)
    b = draw(logs(machines(others), sections=NAMING, max_sections=1, process=VULKAN_ONLY))
    return a, b


@st.composite
def target_pairs(draw) -> tuple[Log, Log]:
    a = draw(logs(machines(("guest-rosetta", "guest-apple", "guest-intel", "intel-igpu")), sections=("process",),
                  process=process_params(build=(True,), extras=False)))
    kinds = ("guest-apple", "host-apple") if a.machine.arch == "x86_64" else ("guest-rosetta", "intel-igpu")
    b = draw(logs(machines(kinds), sections=("version", "process"), max_sections=1,
                  process=process_params(backends=("vulkan",), build=(True,), extras=False)))
    return a, b


@st.composite
def unified_pairs(draw) -> tuple[Log, Log]:
    a = draw(logs(machines(("guest-intel", "guest-apple", "guest-rosetta")), sections=("process", "probe"),
                  max_sections=1, process=VULKAN_ONLY))
    kinds = tuple(k for k in ("guest-apple", "guest-rosetta", "guest-intel", "intel-igpu", "amd-mac", "host-apple")
                  if k != a.machine.kind and (k in ("guest-intel", "amd-mac")) == a.machine.unified)
    b = draw(logs(machines(kinds), sections=("process",), process=ANONYMOUS))
    return a, b


def interleave(a: tuple[str, ...], b: tuple[str, ...], block: int) -> list[str]:
    """a's and b's lines alternating in blocks of ``block`` lines (two terminals' output in one paste)."""
    out: list[str] = []
    for i in range(0, max(len(a), len(b)), block):
        out += a[i:i + block] + b[i:i + block]
    return out
