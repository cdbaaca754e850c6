"""The facts of one run, as stored and as shown.

pydantic models (the design card's library for the typed boundary): typed, checked
when a run's facts are decoded from the store (``load_facts``: wrong types are a load
error, never a silent value), written as JSON in one call (``facts_json``). Mutable:
the run builder fills them in attribute by attribute, unchecked, and the strict test
(tests/ingest/test_facts_typed.py) proves what it stores decodes back. Only commands
that read facts import this module (tests/cli/test_import_hygiene.py)."""

# (No ``from __future__ import annotations``: see analyzer.diagnosis, pydantic would eval every annotation.)
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from analyzer.diagnosis import Diagnosis, Provenance, empty_list


class _Record(BaseModel):
    """Keyword-only fields, mutable (the run builder fills them in), compared field by field.
    Fields a newer or older capscan stored and this one does not know are ignored."""

    model_config = ConfigDict(extra="ignore")

    def as_dict(self) -> dict[str, Any]:
        """Plain data (nested records as dicts), what ``facts_from_dict`` reads back."""
        return self.model_dump(warnings=False)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(cls.model_fields)


class Device(_Record):
    name: str | None = None
    apple_family: int | None = None
    families: list[int] = Field(default_factory=empty_list)
    unified_memory: bool | None = None
    working_set_mb: float | None = None
    threadgroup_memory: int | None = None


class Capabilities(_Record):
    simdgroup_reduction: bool | None = None
    simdgroup_mm: bool | None = None
    bfloat: bool | None = None
    tensor: bool | None = None


class Shim(_Record):
    name: str
    apple_family_max: int | None = None
    process: str | None = None
    line: int | None = None


# Rows of one figure (model, test, kind, configuration) a run's summary lists one by one, as printed; a figure
# repeated more often (a loop appending to one file, a million-row bench file) is listed as their median, labelled
# (runs.builder while reading, store.queries for a run stored without its summary)
MAX_ROWS_SHOWN = 64


class Throughput(NamedTuple):
    """One measured speed. A plain tuple, not a Struct: a bench file can
    hold a million of these, and they are checked by their parser already.
    (The store inserts these fields in this order: see store/writer.py.)"""

    test: str
    tok_s: float
    stddev: float | None = None
    model: str | None = None
    line: int | None = None
    kind: str = "bench"  # bench | timing
    n_prompt: int | None = None
    n_gen: int | None = None
    n_depth: int | None = None


def figure_key(test: str, config: str | None) -> str:
    """One figure's name: the test, and the configuration its row states (``tg128 [threads=8]``)."""
    return f"{test} [{config}]" if config else test


def figure_parts(key: str) -> tuple[str, str | None]:
    """``figure_key`` read back: (test, configuration label or None)."""
    if key.endswith("]") and " [" in key:
        test, _, config = key[:-1].partition(" [")
        return test, config
    return key, None


def split_figure(key: str) -> tuple[str, dict[str, str]]:
    """``figure_key`` read back: (test, {parameter: value})."""
    test, config = figure_parts(key)
    return test, dict(part.partition("=")[::2] for part in config.split()) if config else {}


def like_pairs(mine: dict[str, float], theirs: dict[str, float], ignore: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Each of my figures with the one of theirs it compares with like for like: the same test, and
    the same value of every parameter both state (8 threads with 8 threads; a side that states no
    threads pairs with any). Of several candidates, the one agreeing on the most stated parameters,
    then the fastest. ``ignore``: parameters that are what the comparison is about (ngl of a GPU
    against a CPU run)."""
    parsed = {k: split_figure(k) for k in theirs}
    out = []
    for key in mine:
        test, config = split_figure(key)
        for p in ignore:
            config.pop(p, None)
        found = []
        for other, (t, c) in parsed.items():
            if t != test or any(c[p] != v for p, v in config.items() if p in c):
                continue
            found.append((sum(1 for p in config if p in c), theirs[other], other))
        if found:
            out.append((key, max(found)[2]))
    return out


class Evidence(_Record):
    """One log line kept as evidence. Read from SQLite rows (Python values, not JSON), so its
    text is strict: a blob stored where text belongs is a load error, never decoded as text;
    the line number stays lax (SQLite may hand back '12' for 12)."""

    model_config = ConfigDict(strict=True)

    line: int = Field(strict=False)
    kind: str
    text: str
    # the line's number inside a JSON string that held several lines on physical line ``line`` (20:5);
    # None for every other line, and for evidence stored before the store kept it
    inner: int | None = Field(default=None, strict=False)


# Where a claim comes from (Provenance, analyzer.diagnosis): only the guest's own process may prove a
# host or make a run fixable (rules.view: host_proof, remedy_decision).
GUEST_PROCESS: Provenance = "guest-process"
_PROVENANCE_WORDS: dict[str, str] = {
    "guest-process": "the guest's own lines", "other-machine": "another machine's lines in the same paste",
    "imported": "a record imported from another capscan", "database": "a record read from the database",
}


def provenance_words(provenance: str, instance: str | None = None) -> str:
    """A provenance in words: 'the guest's own lines', 'imported from guest-17'."""
    if provenance == "imported" and instance:
        return f"imported from {instance}"
    return _PROVENANCE_WORDS.get(provenance, provenance)


def claim(provenance: Provenance, instance: str | None = None) -> dict[str, str]:
    """A proof item's provenance fields (``provenance``, and ``instance`` for an imported record)."""
    return {"provenance": provenance, "instance": instance} if provenance == "imported" and instance else {
        "provenance": provenance}


class Observation(_Record):
    """One reading a parser made, kept as read: which fact, its value, the line that showed it
    and the block it came from. Observations are never overwritten; two of one fact with
    different values are a contradiction (rules/observed.py), never settled by order.

    ``block`` is the run's Metal block the line belongs to (1, 2, ...; 0 for a process-level
    line such as a build target or a listed device); ``subject`` is the device it describes,
    when it describes one (a block's GPU name, a listed device's id)."""

    fact: str
    value: str | int | float | bool | None
    line: int
    kind: str = ""  # the event kind that read it ("metal.flag", "vulkan.device", ...)
    block: int = 0
    subject: str | None = None
    provenance: Provenance = GUEST_PROCESS


class RunFacts(_Record):
    """Everything the log showed about one run. Fields it did not show stay
    None: nothing here is guessed (inference belongs to the rules)."""

    first_line: int
    last_line: int
    program: str | None = None
    backend: str | None = None
    metal_era: str | None = None  # "M4" (ggml_metal_device_init) or "legacy" (ggml_metal_init)
    device: Device = Field(default_factory=Device)
    device_count: int = 0
    capabilities: Capabilities = Field(default_factory=Capabilities)
    use_bfloat: bool | None = None
    shim: Shim | None = None
    shim_messages: list[str] = Field(default_factory=empty_list)
    model: str | None = None
    quant: str | None = None  # the model's quantization when printed apart from its name (`model ftype`)
    model_size_bytes: int | None = None  # the weights' size: llama-bench's model_size, the loader's model size
    # the model file the program names (llama-cli's 2026 banner 'model : ...', llama-server's "loading model '...'"):
    # the run's name when the log prints no model name
    model_file: str | None = None
    # when the log says its run began (llama-bench's test_time in JSON, CSV and SQL rows; UTC ISO 8601): the
    # run's name, rather than the time it was read
    log_time: str | None = None
    cpu_info: str | None = None
    gpu_info: str | None = None
    bench_backends: str | None = None
    n_gpu_layers: int | None = None
    # llama-bench's dev column (-dev, 2025 on) of the run's first row: 'none' ran on no GPU device, the CPU alone
    bench_devices: str | None = None
    build_commit: str | None = None
    build_number: int | None = None  # llama.cpp's build number: what orders builds, semantic versions or not
    release: str | None = None  # llama.cpp's semantic version (2026-08 on: 'version: 0.5.0 (build 11146, ...)')
    # what launched the program when the log says so ('Llama-macOS': ggml-org's app runs `llama serve` itself)
    launcher: str | None = None
    # the engine an ollama model load ran on: 'runner' (its vendored ggml, < 0.30), 'llama-server' (0.30 on),
    # 'mlx' (0.30 on, safetensors models: MLX never reads the Metal family)
    ollama_engine: str | None = None
    # the scheduler refused an op on its weight's device and aborted (fine-tuning: 'OPT_STEP_ADAMW on MTL0')
    op_refused: str | None = None
    skipped_kernels: int = 0
    skipped_kernels_non_bf16: int = 0
    unsupported_ops: list[str] = Field(default_factory=empty_list)
    metal_errors: list[str] = Field(default_factory=empty_list)
    crash: str | None = None  # the first line saying the process stopped (GGML_ASSERT, abort, segfault)
    family_fallback: bool = False
    host_chip_line: str | None = None  # 'Chip:' of a Hardware Overview (system_profiler SPHardwareDataType)
    host_model_name: str | None = None  # its 'Model Name:' ('MacBook Pro', 'Apple Virtual Machine 1')
    # Every processor the run names: a Hardware Overview's 'Processor Name:' (Intel Macs; Apple silicon
    # prints 'Chip:'), system_profiler -json's cpu_type, sysctl's machdep.cpu.brand_string.
    host_cpus: list[str] = Field(default_factory=empty_list)
    macos_version: str | None = None
    mmap: bool | None = None  # weights read through memory-mapped buffers (`*_Mapped model buffer`)
    wrapper_virtualised: str | None = None  # an app said the Metal device looks virtualised (and names it)
    metal_library_failed: str | None = None  # the first line saying the Metal library did not load
    # The process said it runs on the CPU whatever was asked (llama.cpp's 'not compiled with GPU offload
    # support' / 'no usable GPU found', whisper.cpp's 'use gpu = 0' / 'no GPU found'): its first wording
    gpu_disabled: str | None = None
    whisper_weights: list[str] = Field(default_factory=empty_list)  # the backends whisper.cpp put its weights on
    # llama.cpp's: the model buffers' devices ('CPU', 'CUDA0', 'MTL0'; '_Mapped' and CPU_* kinds read as their
    # device) and, at -v, the devices its layers were assigned to
    weight_buffers: list[str] = Field(default_factory=empty_list)
    model_load_failed: str | None = None  # 'error loading model: ...': nothing ran
    kv_buffers: list[str] = Field(default_factory=empty_list)  # the KV cache's buffers' devices, named as above
    layer_devices: list[str] = Field(default_factory=empty_list)
    agx_domain: str | None = None  # an AGXMetal* error domain: Apple's own GPU driver answered (bare metal)
    library_load_s: float | None = None
    offload: tuple[int, int] | None = None
    vulkan_devices: list[dict] = Field(default_factory=empty_list)
    cuda_devices: list[dict] = Field(default_factory=empty_list)
    cuda_failed: str | None = None
    listed_devices: list[str] | None = None  # None: no --list-devices output seen
    build_target: str | None = None
    system_backends: list[str] | None = None
    # x86-only CPU features system_info reports on (AVX2, SSE3, F16C...): an Intel CPU or an x86_64
    # build under Rosetta, never a native arm64 process.
    x86_cpu_features: list[str] = Field(default_factory=empty_list)
    ollama_library: str | None = None
    ollama_description: str | None = None
    # the official Ollama.app (signed with the hardened runtime: DYLD_* is dropped), named by its runner's path
    ollama_app: bool | None = None
    model_device: str | None = None
    probe: dict[int, bool] | None = None  # family code -> supportsFamily answer
    # capscan-probe --kernels: per capability llama.cpp gates on (simdgroup_reduction, simdgroup_mm, bfloat),
    # {"result": pass|fail|compile-error|timeout|crash|not-run, "message", "line"}; None: no kernel check shown
    kernels: dict[str, dict] | None = None
    kernel_msl_version: str | None = None  # the Metal language version the checks were compiled for
    kernel_elapsed_ms: int | None = None
    hv_vmm_present: bool | None = None  # sysctl kern.hv_vmm_present, as capscan-probe printed it
    sysprof_chipsets: list[str] = Field(default_factory=empty_list)
    sysprof_metal: str | None = None
    processes: list[str] = Field(default_factory=empty_list)
    # Every GPU name the run mentions (device, found/picking device, model device lines): a name that
    # is not the chosen device is still evidence of the machine (an AMD GPU listed beside others).
    seen_devices: list[str] = Field(default_factory=empty_list)
    # A flag printed twice in one run with different values (blocks of two machines merged):
    # {"flag", "value", "line", "other", "other_line"}. Never resolved by order.
    flag_conflicts: list[dict] = Field(default_factory=empty_list)
    # Every reading, as read (see Observation): the single-valued fields above are for display;
    # "fixable" and contradictions are decided from these. Bounded: one entry per distinct
    # (fact, subject, value), the first line that showed it (runs.builder.MAX_OBSERVATIONS).
    observations: list[Observation] = Field(default_factory=empty_list)
    # Per (model, test, kind): the speed (median of several rows), n, first line. None in
    # runs stored before it existed: readers then aggregate the throughput table.
    throughput_summary: list[dict] | None = None


@dataclass
class StoredRun:
    """A run as stored: its facts, throughput summary, evidence and, once diagnosed, its diagnosis."""

    id: int
    source_id: int
    source: str
    created_at: str
    facts: RunFacts
    throughput: list[dict[str, Any]] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    diagnosis: Diagnosis | None = None
    # Why the stored row did not load whole (written by an older capscan, or
    # damaged): the run is still listed and shown, and diagnosed as unknown.
    load_error: str | None = None
    # Imported from another capscan's export (analyzer.store.origins): where it was diagnosed, and
    # that diagnosis (``report``). None for a run stored from a log here.
    origin: dict[str, Any] | None = None
    # How many lines its source had ("lines 1-62 of 105"); None where not known (an import, a bare object).
    source_lines: int | None = None


def facts_json(facts: RunFacts) -> bytes:
    """The facts as stored (compact JSON, fields in declaration order). A value of the wrong
    type (a handler bug the strict test catches) is written as it is, without a warning."""
    return facts.model_dump_json(warnings=False).encode()


def load_facts(data: str | bytes) -> RunFacts:
    """Stored facts, type-checked (lax as to numbers written as strings or integral floats,
    which older capscans could store). Raises ``FactsError`` (pydantic's ``ValidationError``)
    on anything else, malformed JSON included."""
    return RunFacts.model_validate_json(data)


def facts_from_dict(data: dict[str, Any]) -> RunFacts:
    """Facts from plain data (``as_dict``'s shape), type-checked the same way."""
    return RunFacts.model_validate(data)


def line_ref(line: int, inner: int | None = None) -> str:
    """An evidence line's place as shown: ``20``, or ``20:5`` for the fifth line inside a JSON string on line 20."""
    return str(line) if inner is None else f"{line}:{inner}"


def evidence_from_rows(rows: Any) -> list[Evidence]:
    """Stored (line, kind, text[, inner]) rows as Evidence, type-checked as ``load_facts`` checks facts
    (a line number stored as text reads as meant; a blob or a word where text or a number
    belongs raises ``FactsError``)."""
    return [Evidence.model_validate({"line": r[0], "kind": r[1], "text": r[2], "inner": r[3] if len(r) > 3 else None})
            for r in rows]


FactsError = ValidationError
