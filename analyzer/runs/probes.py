"""capscan's own probe, ``metal-capabilities`` style probes, system_profiler, and shim banners:
each forms a run of its own (a shim banner, printed before ``main``, opens the process it belongs to).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.model import Shim
from analyzer.parsers.base import Event
from analyzer.runs.boundaries import continues_probe_header, probe_program
from analyzer.runs.builder import MAX_LISTED, MAX_NAMES, MAX_TEXT, RunBuilder

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler


def on_shim_banner(asm: Assembler, ev: Event) -> None:
    run = asm.run
    d = ev.data
    run.facts.shim = Shim(name=d["name"], apple_family_max=d.get("apple_family_max"), process=d.get("process"),
                          line=ev.line)
    run.touch(ev)


def on_shim_message(asm: Assembler, ev: Event) -> None:
    if len(asm.run.facts.shim_messages) < MAX_LISTED:
        asm.run.facts.shim_messages.append(ev.text[:MAX_TEXT])
    asm.run.touch(ev)


def _probe_run(asm: Assembler, program: str) -> RunBuilder:
    run = asm.run
    run.gpu.source = "probe"
    run.facts.program = program
    run.facts.probe = {}
    return run


def on_probe_start(asm: Assembler, ev: Event) -> None:
    _probe_run(asm, probe_program(ev)).touch(ev)


def on_probe_device(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if not continues_probe_header(run):
        run = _probe_run(asm, probe_program(ev))
    run.facts.device.name = ev.data["name"]
    run.gpu.block += 1
    run.observe("gpu.name", ev.data["name"], ev, subject=ev.data["name"])
    run.touch(ev)


def on_probe_json(asm: Assembler, ev: Event) -> None:
    d = ev.data
    run = _probe_run(asm, probe_program(ev))
    run.facts.device.name = d.get("name")
    run.gpu.block += 1
    if d.get("name"):
        run.observe("gpu.name", d["name"], ev, subject=d["name"])
    for code, ok in d.get("families", {}).items():
        _probe_answer(run, code, ok, ev)
    run.facts.device.threadgroup_memory = d.get("threadgroup_memory")
    run.facts.device.working_set_mb = d.get("working_set_mb")
    run.facts.device.unified_memory = d.get("unified_memory")
    if d.get("unified_memory") is not None:
        run.saw_flag("unified_memory", d["unified_memory"], ev.line)
        run.observe("gpu.unified_memory", d["unified_memory"], ev, subject=d.get("name"))
    if d.get("cpu_brand"):
        run.saw_host_cpu(d["cpu_brand"], ev)  # as a brand-string line (runs.context)
    if d.get("arch"):
        run.observe("process.isa", d["arch"], ev)
    if d.get("hv_vmm_present") is not None:
        _hv_vmm(run, d["hv_vmm_present"], ev)
    k = d.get("kernels")
    if k:
        run.facts.kernel_msl_version = k.get("msl_version")
        run.facts.kernel_elapsed_ms = k.get("elapsed_ms")
        for cap, r in k["results"].items():
            _kernel(run, cap, r["result"], ev)
            run.facts.kernels[cap]["message"] = r["message"]  # type: ignore[index]
    run.touch(ev)


def _hv_vmm(run: RunBuilder, value: bool, ev: Event) -> None:
    run.facts.hv_vmm_present = value
    run.observe("host.hv_vmm_present", value, ev)


def _kernel(run: RunBuilder, capability: str, result: str, ev: Event) -> None:
    """One kernel check's result, observed (two different results for one capability in one run are a
    contradiction, never settled by order)."""
    kernels = run.facts.kernels if run.facts.kernels is not None else {}
    run.facts.kernels = kernels
    kernels.setdefault(capability, {"result": result, "message": None, "line": ev.line})
    run.observe(f"gpu.kernel.{capability}", result, ev, subject=run.facts.device.name)


def on_probe_kernel(asm: Assembler, ev: Event) -> None:
    _kernel(asm.run, ev.data["capability"], ev.data["result"], ev)
    asm.run.touch(ev)


def on_probe_kernel_message(asm: Assembler, ev: Event) -> None:
    entry = (asm.run.facts.kernels or {}).get(ev.data["capability"])
    if entry is not None and entry["message"] is None:
        entry["message"] = ev.data["message"]
    asm.run.touch(ev)


def on_probe_kernel_info(asm: Assembler, ev: Event) -> None:
    f = asm.run.facts
    if "msl_version" in ev.data:
        f.kernel_msl_version = f.kernel_msl_version or ev.data["msl_version"]
    if "elapsed_ms" in ev.data:
        f.kernel_elapsed_ms = ev.data["elapsed_ms"]
    asm.run.touch(ev)


def on_probe_hv_vmm(asm: Assembler, ev: Event) -> None:
    _hv_vmm(asm.run, ev.data["value"], ev)
    asm.run.touch(ev)


def _probe_answer(run: RunBuilder, code: int, ok: bool, ev: Event) -> None:
    run.facts.probe = run.facts.probe if run.facts.probe is not None else {}
    run.facts.probe[code] = ok
    run.observe(f"gpu.supports.{code}", ok, ev, subject=run.facts.device.name)
    if ok:
        run.gpu.families.add(code)


def on_probe_family(asm: Assembler, ev: Event) -> None:
    run = asm.run
    _probe_answer(run, ev.data["code"], ev.data["supported"], ev)
    run.touch(ev)


def on_probe_threadgroup_memory(asm: Assembler, ev: Event) -> None:
    asm.run.facts.device.threadgroup_memory = ev.data["bytes"]
    asm.run.touch(ev)


def on_probe_working_set(asm: Assembler, ev: Event) -> None:
    asm.run.facts.device.working_set_mb = ev.data["mb"]
    asm.run.touch(ev)


def on_probe_unified_memory(asm: Assembler, ev: Event) -> None:
    asm.run.saw_flag("unified_memory", ev.data["value"], ev.line)
    asm.run.observe("gpu.unified_memory", ev.data["value"], ev, subject=asm.run.facts.device.name)
    asm.run.facts.device.unified_memory = ev.data["value"]
    asm.run.touch(ev)


def on_sysprof_chipset(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.gpu.source != "sysprof":
        run.gpu.source = "sysprof"
        run.facts.program = "system_profiler"
    chipsets, name = run.facts.sysprof_chipsets, ev.data["name"]
    run.observe("gpu.name", name, ev, subject=name)
    # One GPU names the device; with several (an Intel iGPU and an AMD dGPU) which one a program
    # uses is not shown, so none is picked (the first MAX_NAMES stay in sysprof_chipsets). O(1) a line:
    # the first name sets it, any other clears it for good.
    if not chipsets:
        run.facts.device.name = name
    elif name != chipsets[0]:
        run.facts.device.name = None
    if len(chipsets) < MAX_NAMES:
        chipsets.append(name)
    run.touch(ev)


def on_sysprof_metal(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.gpu.source == "sysprof":
        run.facts.sysprof_metal = run.facts.sysprof_metal or ev.data["support"]
        run.touch(ev)


HANDLERS: dict[str, Handler] = {
    "shim.banner": on_shim_banner,
    "shim.message": on_shim_message,
    "probe.start": on_probe_start,
    "probe.device": on_probe_device,
    "probe.json": on_probe_json,
    "probe.family": on_probe_family,
    "probe.threadgroup_memory": on_probe_threadgroup_memory,
    "probe.working_set": on_probe_working_set,
    "probe.unified_memory": on_probe_unified_memory,
    "probe.kernel": on_probe_kernel,
    "probe.kernel_message": on_probe_kernel_message,
    "probe.kernel_info": on_probe_kernel_info,
    "probe.hv_vmm": on_probe_hv_vmm,
    "sysprof.chipset": on_sysprof_chipset,
    "sysprof.metal": on_sysprof_metal,
}
