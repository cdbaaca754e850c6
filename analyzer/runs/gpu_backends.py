"""Vulkan and CUDA/ROCm device lists: a new list starts a new run; the first device names the run's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.parsers.base import Event
from analyzer.runs.builder import MAX_LISTED, RunBuilder

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler


def _device_list_run(asm: Assembler, source: str) -> RunBuilder:
    run = asm.run
    if not run.registering(source):  # else the Metal block's process lists its other backend's devices
        run.gpu.source = source
    return run


def _list_header(asm: Assembler, ev: Event, source: str) -> None:
    """'found N Vulkan/CUDA devices': a device list begins, in a run of its own unless nothing named a device
    yet or the run is a process still registering its backends (``RunBuilder.registering``)."""
    run = asm.run
    if not run.registering(source):
        run.gpu.source = source
    run.touch(ev)


def on_vulkan_count(asm: Assembler, ev: Event) -> None:
    _list_header(asm, ev, "vulkan")


def on_vulkan_device(asm: Assembler, ev: Event) -> None:
    run = _device_list_run(asm, "vulkan")
    if len(run.facts.vulkan_devices) < MAX_LISTED:
        run.facts.vulkan_devices.append(ev.data)
    name = ev.data.get("name")
    if name:
        run.observe("gpu.name", name, ev, subject=name)
        if ev.data.get("uma") in (0, 1):
            run.observe("gpu.unified_memory", bool(ev.data["uma"]), ev, subject=name)
    if run.facts.device.name is None:
        run.facts.device.name = ev.data.get("name")
        if ev.data.get("uma") in (0, 1):
            run.facts.device.unified_memory = bool(ev.data["uma"])
        if ev.data.get("bf16") in (0, 1):  # VK_KHR_shader_bfloat16, printed since 2025-07
            run.facts.capabilities.bfloat = bool(ev.data["bf16"])
    run.touch(ev)


def on_vulkan_none(asm: Assembler, ev: Event) -> None:
    asm.run.touch(ev)


def on_vulkan_cpu_device(asm: Assembler, ev: Event) -> None:
    asm.run.touch(ev)


def on_cuda_count(asm: Assembler, ev: Event) -> None:
    _list_header(asm, ev, "cuda")


def on_cuda_device(asm: Assembler, ev: Event) -> None:
    run = _device_list_run(asm, "cuda")
    if len(run.facts.cuda_devices) < MAX_LISTED:
        run.facts.cuda_devices.append(ev.data)
    if ev.data.get("name"):
        run.observe("gpu.name", ev.data["name"], ev, subject=ev.data["name"])
    if run.facts.device.name is None:
        run.facts.device.name = ev.data.get("name")
    run.touch(ev)


def on_cuda_failed(asm: Assembler, ev: Event) -> None:
    asm.run.facts.cuda_failed = ev.data.get("message")
    asm.run.touch(ev)


def on_device_info(asm: Assembler, ev: Event) -> None:
    # a device list like --list-devices': one that names only the CPU is positive evidence of no GPU
    if asm.run.facts.listed_devices is None:
        asm.run.facts.listed_devices = []
    asm.run.touch(ev, evidence=False)


def on_device_info_device(asm: Assembler, ev: Event) -> None:
    """A device_info entry: a Vulkan or CUDA/ROCm/MUSA one is read as that backend's device line (the run's
    GPU); any other GPU backend's names the device in passing; the CPU entry is not a GPU."""
    d = ev.data
    entry = {"index": d.get("index", 0), "name": d["name"]}
    for key in ("driver", "vram_mib"):
        if key in d:
            entry[key] = d[key]
    listed = {"Vulkan": asm.run.facts.vulkan_devices}.get(d["backend"], asm.run.facts.cuda_devices)
    if d["backend"] in ("Vulkan", "CUDA", "ROCm", "MUSA") and any(
            x.get("index") == entry["index"] and x.get("name") == entry["name"] for x in listed):
        asm.run.touch(ev)  # the backend's own init lines listed it already: one device, not two
    elif d["backend"] == "Vulkan":
        asm.handle(Event("vulkan.device", ev.line, ev.text, entry))  # meets the device list's boundary
    elif d["backend"] in ("CUDA", "ROCm", "MUSA"):
        asm.handle(Event("cuda.device", ev.line, ev.text, entry))
    elif d["backend"] in ("CPU", "BLAS", "RPC"):
        asm.run.touch(ev)
    else:
        asm.run.hint_device(ev, d["name"])


HANDLERS: dict[str, Handler] = {
    "device_info": on_device_info,
    "device_info.device": on_device_info_device,
    "vulkan.count": on_vulkan_count,
    "vulkan.device": on_vulkan_device,
    "vulkan.none": on_vulkan_none,
    "vulkan.cpu_device": on_vulkan_cpu_device,
    "cuda.count": on_cuda_count,
    "cuda.device": on_cuda_device,
    "cuda.failed": on_cuda_failed,
}
