"""The machine around the run, and wrappers: host chip and model name, macOS version, MLX's
device, the memory breakdown's devices, mmap, wrappers that say they run virtualised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.parsers.base import Event
from analyzer.runs.builder import MAX_NAMES, MAX_TEXT

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler


def on_host_chip(asm: Assembler, ev: Event) -> None:
    asm.run.facts.host_chip_line = asm.run.facts.host_chip_line or ev.data["chip"]
    asm.run.observe("host.cpu", ev.data["chip"], ev)
    asm.run.touch(ev)


def on_host_model_name(asm: Assembler, ev: Event) -> None:
    asm.run.facts.host_model_name = asm.run.facts.host_model_name or ev.data["name"]
    asm.run.touch(ev)


def on_host_processor(asm: Assembler, ev: Event) -> None:
    asm.run.saw_host_cpu(ev.data["name"], ev)
    asm.run.touch(ev)


def on_host_macos(asm: Assembler, ev: Event) -> None:
    asm.run.facts.macos_version = asm.run.facts.macos_version or ev.data["version"]
    asm.run.touch(ev)


def on_mlx_device(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.program.name = run.program.name or "mlx_lm"
    if run.facts.device.name is None:
        run.facts.device.name = ev.data["name"]
    run.saw_device(ev.data["name"])
    run.touch(ev)


def on_memory_device(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if ev.data["id"].startswith("MTL"):
        run.facts.backend = run.facts.backend or "metal"
    asm.run.hint_device(ev, ev.data["name"])


def on_app_gpu(asm: Assembler, ev: Event) -> None:
    asm.run.hint_device(ev, ev.data["name"])  # named in passing: evidence of the machine, never its block


def on_app_arch(asm: Assembler, ev: Event) -> None:
    arch = {"aarch64": "arm64", "arm64e": "arm64", "i386": "x86_64"}.get(ev.data["arch"], ev.data["arch"])
    asm.run.observe("process.isa", arch, ev)
    asm.run.touch(ev)


def _keep(names: list[str], name: str) -> None:
    """A device name once, the first MAX_NAMES of them (a line costs the same however many came before)."""
    if len(names) < MAX_NAMES and name not in names:
        names.append(name)


def on_model_buffer(asm: Assembler, ev: Event) -> None:
    f = asm.run.facts
    if ev.data["mapped"]:
        f.mmap = True
    _keep(f.weight_buffers, ev.data["buffer"])
    asm.run.touch(ev)


def on_kv_buffer(asm: Assembler, ev: Event) -> None:
    _keep(asm.run.facts.kv_buffers, ev.data["buffer"])
    asm.run.touch(ev)


def on_layer_device(asm: Assembler, ev: Event) -> None:
    _keep(asm.run.facts.layer_devices, ev.data["device"])
    asm.run.touch(ev)


def on_wrapper_virtualised(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.facts.wrapper_virtualised = ev.data["name"]
    asm.run.hint_device(ev, ev.data["name"])


def on_ollama_ps(asm: Assembler, ev: Event) -> None:
    """`ollama ps`'s PROCESSOR column: '100% CPU' is a model with no layer on a GPU; a GPU share names no device."""
    run = asm.run
    run.program.name = run.program.name or "ollama"
    if ev.data["processor"] == "100% CPU":
        run.facts.n_gpu_layers = 0
    run.touch(ev)


def on_model_file(asm: Assembler, ev: Event) -> None:
    asm.run.facts.model_file = asm.run.facts.model_file or ev.data["path"][:MAX_TEXT]
    asm.run.touch(ev)


def on_wrapper_gpu_layers(asm: Assembler, ev: Event) -> None:
    asm.run.facts.n_gpu_layers = ev.data["layers"]
    asm.run.touch(ev)


HANDLERS: dict[str, Handler] = {
    "host.chip": on_host_chip,
    "host.model_name": on_host_model_name,
    "host.processor": on_host_processor,
    "host.macos": on_host_macos,
    "mlx.device": on_mlx_device,
    "memory.device": on_memory_device,
    "app.gpu": on_app_gpu,
    "app.arch": on_app_arch,
    "model.buffer": on_model_buffer,
    "layer.device": on_layer_device,
    "kv.buffer": on_kv_buffer,
    "wrapper.virtualised": on_wrapper_virtualised,
    "wrapper.gpu_layers": on_wrapper_gpu_layers,
    "ollama.ps": on_ollama_ps,
    "model.file": on_model_file,
}
