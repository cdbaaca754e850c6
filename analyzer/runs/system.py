"""Process-level lines: program start and build footer, ``system_info``, the device list,
model metadata, offload counts, ollama's compute and offload lines.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from analyzer.chips import ARM_CPU_FEATURES, X86_CPU_FEATURES, isa_of_target, os_of_target
from analyzer.parsers.base import Event
from analyzer.runs.builder import MAX_LISTED, MAX_NAMES, MAX_TEXT

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler
    from analyzer.runs.builder import RunBuilder


def on_hint_process(asm: Assembler, ev: Event) -> None:
    names = asm.run.facts.processes
    if len(names) < MAX_NAMES and ev.data["name"] not in names:  # at most MAX_NAMES compared per line
        names.append(ev.data["name"])


def on_model_device(asm: Assembler, ev: Event) -> None:
    if re.fullmatch(r"MTL\d+|Metal", ev.data.get("device") or ""):
        asm.run.facts.backend = asm.run.facts.backend or "metal"
    asm.run.facts.model_device = ev.data.get("description")
    asm.run.hint_device(ev, ev.data.get("description"))


def on_process_start(asm: Assembler, ev: Event) -> None:
    """'main: build = N (commit)': the first line of a 2023-24 example program (a run boundary)."""
    run = asm.run
    run.facts.build_commit = run.facts.build_commit or ev.data.get("commit")
    _build_number(run, ev)
    run.touch(ev)


def on_build_footer(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if not run.span.content:
        return  # nothing before it in this input: a footer alone is not a run
    run.facts.build_commit = run.facts.build_commit or ev.data["commit"]
    _build_number(run, ev)
    run.touch(ev)


def on_system_info(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.program.saw_system_info = True
    run.facts.system_backends = ev.data.get("backends") or None
    run.facts.x86_cpu_features = sorted(k for k, v in (ev.data.get("features") or {}).items()
                                        if k in X86_CPU_FEATURES and v == "1")
    on = {k for k, v in (ev.data.get("features") or {}).items() if v == "1"}
    if on & X86_CPU_FEATURES:
        run.observe("process.isa", "x86_64", ev)
    if on & ARM_CPU_FEATURES:
        run.observe("process.isa", "arm64", ev)
        # the same line shows macOS (Accelerate, or a Metal backend): an arm64 macOS process, which runs only
        # on Apple silicon; Arm features alone could be any Arm machine's
        if on & {"ACCELERATE", "METAL"} or any(b.lower() == "metal" for b in ev.data.get("backends") or ()):
            run.observe("process.arm64_macos", True, ev)
    run.touch(ev)


def _build_number(run: RunBuilder, ev: Event) -> None:
    if run.facts.build_number is None and ev.data.get("number"):
        run.facts.build_number = int(ev.data["number"])


def on_build_version(asm: Assembler, ev: Event) -> None:
    """--version's first line: 'version: N (commit)' or, since 2026-08, 'version: X.Y.Z (build N, commit H)'."""
    run = asm.run
    run.facts.build_commit = run.facts.build_commit or ev.data["commit"]
    _build_number(run, ev)
    run.facts.release = run.facts.release or ev.data.get("release")
    if ev.data.get("program") and run.program.name in (None, "llama.cpp", "llama-server"):
        run.program.name = ev.data["program"]  # (llama-cli's banner: its in-process server prints slot lines)
    run.touch(ev)


def on_command_line(asm: Assembler, ev: Event) -> None:
    """A pasted command that starts a llama.cpp program ('$ llama serve -m ...') names the run it opens.
    It is not a line of that process's output: after another process's lines it opens the next run
    (runs.boundaries), which it names."""
    run = asm.run
    if run.span.content:
        return
    run.program.name = run.program.name or ev.data["program"]
    run.facts.launcher = run.facts.launcher or ev.data.get("launcher")


def on_program_named(asm: Assembler, ev: Event) -> None:
    """A line only one program prints (llama-simple's 'main: decoded N tokens in ...') names its run."""
    run = asm.run
    if run.program.name in (None, "llama.cpp"):
        run.program.name = ev.data["program"]
    run.touch(ev)


def on_llama_macos(asm: Assembler, ev: Event) -> None:
    """A line of Llama-macOS's os_log subsystem: its server is `llama serve`, started without -lv."""
    run = asm.run
    run.facts.launcher = "Llama-macOS"
    run.program.name = run.program.name or "llama-server"
    run.touch(ev)


def on_whisper_gpu(asm: Assembler, ev: Event) -> None:
    """whisper.cpp (2024-11 on) says which backend it uses: 'using MTL0 backend'."""
    run = asm.run
    run.program.name = run.program.name or "whisper.cpp"
    if re.fullmatch(r"MTL\d+|Metal", ev.data["backend"]):
        run.facts.backend = run.facts.backend or "metal"
    run.touch(ev)


def on_whisper_device(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.program.name = run.program.name or "whisper.cpp"
    run.touch(ev, evidence=False)


def on_backend_loaded(asm: Assembler, ev: Event) -> None:
    asm.run.touch(ev)


def on_devices_header(asm: Assembler, ev: Event) -> None:
    asm.run.facts.listed_devices = []
    asm.run.touch(ev)


def on_devices_item(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.facts.listed_devices is None:
        run.facts.listed_devices = []
    if len(run.facts.listed_devices) < MAX_LISTED:
        run.facts.listed_devices.append(f"{ev.data['id']}: {ev.data['description']}"[:MAX_TEXT])
    run.saw_device(ev.data["description"])
    run.observe("gpu.name", ev.data["description"], ev, subject=ev.data["id"])
    run.touch(ev)


def on_devices_none(asm: Assembler, ev: Event) -> None:
    asm.run.facts.listed_devices = []
    asm.run.touch(ev, evidence=False)


def on_build_target(asm: Assembler, ev: Event) -> None:
    """'main: built with C for T' (2023-24, after 'main: build =') or common_init()'s 'build: N (commit)
    with C for T' (2024-09 on), printed first by every program that calls common_init (a run boundary)."""
    run = asm.run
    if ev.data.get("commit"):
        run.facts.build_commit = run.facts.build_commit or ev.data["commit"]
    _build_number(run, ev)
    target = ev.data["target"]
    system, _, arch = target.partition(" ")
    if system == "Darwin" and arch:  # CMake's 'Darwin x86_64': the triple clang prints elsewhere
        target = f"{arch}-apple-darwin"
    run.facts.build_target = run.facts.build_target or target  # shown; every one is observed
    run.observe("build.target", target, ev)
    isa = isa_of_target(target)
    if isa:
        run.observe("process.isa", isa, ev)
    system = os_of_target(target)
    if system:
        run.observe("process.os", system, ev)
    run.touch(ev)


def on_model_name(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.facts.model is None:
        run.facts.model = ev.data["name"]
    run.touch(ev)


def on_model_ftype(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.facts.quant is None:
        run.facts.quant = ev.data["ftype"]
    run.touch(ev)


def on_model_size(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.facts.model_size_bytes is None:
        run.facts.model_size_bytes = ev.data["bytes"]
    run.touch(ev)


def on_offload(asm: Assembler, ev: Event) -> None:
    asm.run.facts.offload = (ev.data["offloaded"], ev.data["total"])
    asm.run.touch(ev)


def _ollama_load(asm: Assembler, ev: Event, step: str) -> RunBuilder:
    """The run of the model load ``step`` (its 'offload' line, its runner's start) belongs to: each load
    is a runner process, so a run of its own (runs.boundaries), with what the server printed once."""
    run = asm.run
    run.program.ollama_steps.add(step)
    run.program.name = "ollama"
    return run


def on_gpu_disabled(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if "whisper_" in ev.text:
        run.program.name = run.program.name or "whisper.cpp"
    if run.facts.gpu_disabled is None:
        run.facts.gpu_disabled = ev.data["why"] + (" = 0" if ev.data["why"] == "use gpu" else "")
    run.touch(ev)


def on_model_load_failed(asm: Assembler, ev: Event) -> None:
    if asm.run.facts.model_load_failed is None:
        asm.run.facts.model_load_failed = ev.data["why"][:160]
    asm.run.touch(ev)


def on_whisper_weights(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.program.name = run.program.name or "whisper.cpp"
    if ev.data["backend"] not in run.facts.whisper_weights and len(run.facts.whisper_weights) < 8:
        run.facts.whisper_weights.append(ev.data["backend"])
    run.touch(ev)


def on_ollama_runner(asm: Assembler, ev: Event) -> None:
    # a runner with a model is a load; one without (0.12+ GPU discovery at start-up) is the server's
    run = _ollama_load(asm, ev, "runner") if "--model" in ev.data["cmd"] else asm.run
    run.program.name = "ollama"
    if ev.data.get("engine"):
        run.facts.ollama_engine = ev.data["engine"]
        if ev.data["engine"] == "mlx":
            run.facts.backend = "mlx"  # not ggml-metal: the family clamp does not reach it
    if "/Ollama.app/" in ev.data["cmd"]:
        run.facts.ollama_app = True  # the official app's bundle (hardened runtime)
    run.touch(ev)


def on_ollama_compute(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.program.name = "ollama"
    lib = ev.data["library"]
    if ev.data.get("description"):
        run.observe("gpu.name", ev.data["description"], ev, subject=ev.data["description"])
    if run.facts.ollama_library is None or lib != "cpu":
        run.facts.ollama_library = lib
        run.facts.ollama_description = ev.data.get("description")
    run.saw_device(ev.data.get("description"))
    run.touch(ev)


def on_ollama_offload(asm: Assembler, ev: Event) -> None:
    run = _ollama_load(asm, ev, "offload")
    d = ev.data
    run.facts.offload = (d["offloaded"], d["total"])
    if d.get("library") and (run.facts.ollama_library is None or d["library"] != "cpu"):
        run.facts.ollama_library = d["library"]
    run.touch(ev)


HANDLERS: dict[str, Handler] = {
    "hint.process": on_hint_process,
    "model.device": on_model_device,
    "process.start": on_process_start,
    "build.footer": on_build_footer,
    "system_info": on_system_info,
    "backend.loaded": on_backend_loaded,
    "devices.header": on_devices_header,
    "devices.item": on_devices_item,
    "devices.none": on_devices_none,
    "build.target": on_build_target,
    "model.name": on_model_name,
    "model.ftype": on_model_ftype,
    "offload": on_offload,
    "gpu.disabled": on_gpu_disabled,
    "whisper.weights": on_whisper_weights,
    "model.load_failed": on_model_load_failed,
    "model.size": on_model_size,
    "ollama.compute": on_ollama_compute,
    "ollama.offload": on_ollama_offload,
    "ollama.runner": on_ollama_runner,
    "build.version": on_build_version,
    "command.line": on_command_line,
    "program.named": on_program_named,
    "app.llama_macos": on_llama_macos,
    "whisper.gpu": on_whisper_gpu,
    "whisper.device": on_whisper_device,
}
