"""What the Metal backend's start-up block means for the run: device, GPU families, capability
flags, skipped kernels, unsupported ops, errors. Legacy (``ggml_metal_init``) and M4-era
(``ggml_metal_device_init``) blocks decide run boundaries differently (see the assembler).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.model import Capabilities
from analyzer.parsers.base import Event
from analyzer.runs.boundaries import other_backend, placed
from analyzer.runs.builder import MAX_LISTED, MAX_TEXT, MAX_UNSUPPORTED_OPS, RunBuilder

if TYPE_CHECKING:
    from analyzer.runs.assembler import Assembler, Handler


def _metal_run(asm: Assembler) -> RunBuilder:
    asm.run.gpu.source = "metal"
    return asm.run


def on_metal_tensor_gate(asm: Assembler, ev: Event) -> None:
    """First line of an M4 block. Whether it opens a new process or is
    the next GGML_METAL_DEVICES device of this one is known only at the
    GPU name line, so it waits there."""
    run = asm.run
    if run.gpu.metal_blocks or other_backend(run) or run.has_results or (placed(run) and not run.registering("metal")):
        asm.pending_gate.append(ev)
        return
    run.gpu.source = "metal"
    run.facts.metal_era = "M4"
    run.gpu.m4_open = True  # the GPU name line that follows belongs to this block
    run.touch(ev)


def on_metal_block_start(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.gpu.block_device is not None:
        # Another context of this process, or the next process's first block (a log without results
        # between them): its GPU name line decides, and its enumeration waits for it, so that a GPU
        # the next machine lists is never lent to this run.
        asm.held.append(ev)
        return
    run.gpu.source = "metal"
    if run.facts.metal_era is None:
        run.facts.metal_era = "legacy"
        run.gpu.metal_blocks = max(run.gpu.metal_blocks, 1)
    run.touch(ev)


def on_metal_device(asm: Assembler, ev: Event) -> None:
    d = ev.data
    run = asm.run
    era = d.get("era")
    name = d.get("name")
    if era == "M4":
        gate, asm.pending_gate = asm.pending_gate, []
        if d.get("index", 0) >= 1 and run.facts.metal_era == "M4" and run.gpu.metal_blocks and not run.has_results:
            run.facts.device_count += 1  # GGML_METAL_DEVICES: another virtual device, same process
            for pending in gate:
                run.touch(pending)
            run.gpu.block += 1
            if name:
                run.observe("gpu.name", name, ev, subject=name)
            run.touch(ev)
            return
        for pending in gate:  # the block's first lines, which waited for this name (a new run: boundaries)
            run.touch(pending)
            if pending.kind == "metal.library_loaded":
                run.facts.library_load_s = float(pending.data["seconds"])
    if asm.held:
        release_held(asm, run)
    run.gpu.m4_open = False
    run.gpu.source = "metal"
    run.gpu.metal_blocks += 1
    run.gpu.block += 1
    run.facts.device_count = max(run.facts.device_count, 1)
    if run.facts.metal_era is None or era == "M4":
        run.facts.metal_era = era
    if name:
        run.facts.device.name = name
        run.gpu.block_device = name
        run.saw_device(name)
        run.observe("gpu.name", name, ev, subject=name)
    run.touch(ev)


def release_held(asm: Assembler, run: RunBuilder) -> None:
    """A reopened legacy block's held lines (``on_metal_block_start``) join ``run``: the one its GPU name
    line chose or, when no GPU name line follows them, the run they were printed in (as if never held)."""
    held, asm.held = asm.held, []
    for ev in held:
        if ev.kind in ("metal.found_device", "metal.picking_device"):
            run.hint_device(ev, ev.data.get("name"))
        else:
            run.touch(ev)


def on_metal_family(asm: Assembler, ev: Event) -> None:
    run = _metal_run(asm)
    run.gpu.families.add(ev.data["code"])
    run.observe("gpu.family", ev.data["code"], ev, subject=run.gpu.block_device)
    run.touch(ev)


def on_metal_flag(asm: Assembler, ev: Event) -> None:
    run = _metal_run(asm)
    flag, value = ev.data["flag"], ev.data["value"]
    if flag in Capabilities.field_names() or flag == "unified_memory":
        run.saw_flag(flag, value, ev.line)
        run.observe(f"gpu.{flag}", value, ev, subject=run.gpu.block_device)
    if flag in Capabilities.field_names():
        setattr(run.facts.capabilities, flag, value)
    elif flag == "unified_memory":
        run.facts.device.unified_memory = value
    elif flag == "use_bfloat":
        run.facts.use_bfloat = value
    run.touch(ev)


def on_metal_working_set(asm: Assembler, ev: Event) -> None:
    run = _metal_run(asm)
    run.facts.device.working_set_mb = ev.data["mb"]
    run.observe("gpu.working_set_mb", ev.data["mb"], ev, subject=run.gpu.block_device)
    run.touch(ev)


def on_metal_skip_kernel(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.facts.skipped_kernels += 1
    if "bf16" not in ev.data["kernel"]:
        run.facts.skipped_kernels_non_bf16 += 1
    run.touch(ev)


def on_metal_unsupported_op(asm: Assembler, ev: Event) -> None:
    run = asm.run
    op = ev.data["op"]
    if op not in run.gpu.unsupported_seen and len(run.gpu.unsupported_seen) < MAX_UNSUPPORTED_OPS:
        run.gpu.unsupported_seen.add(op)
        run.facts.unsupported_ops.append(op)
    run.touch(ev)


def on_metal_enumerated_device(asm: Assembler, ev: Event) -> None:
    """'found device: X' and 'picking default device: X' of a legacy block's enumeration."""
    if asm.held:
        asm.held.append(ev)  # the enumeration of a block whose GPU name line is still to come
        return
    asm.run.hint_device(ev, ev.data.get("name"))


def on_metal_family_fallback(asm: Assembler, ev: Event) -> None:
    asm.run.facts.family_fallback = True
    asm.run.program.name = asm.run.program.name or "whisper.cpp"
    asm.run.touch(ev)


def on_metal_error(asm: Assembler, ev: Event) -> None:
    if len(asm.run.facts.metal_errors) < MAX_LISTED:
        asm.run.facts.metal_errors.append(ev.data["message"][:MAX_TEXT])
    asm.run.touch(ev)


def on_crash(asm: Assembler, ev: Event) -> None:
    """The process stopped: the first such line is the run's crash, kept as evidence (every one is)."""
    run = asm.run
    if run.facts.crash is None:
        run.facts.crash = ev.data["what"][:MAX_TEXT]
    run.touch(ev)


def on_op_refused(asm: Assembler, ev: Event) -> None:
    """'pre-allocated tensor (...) in a buffer (MTL0) that cannot run the operation (OPT_STEP_ADAMW)', then
    GGML_ABORT: the process stopped on an op its weight's device does not run."""
    run = asm.run
    if run.facts.op_refused is None:
        run.facts.op_refused = f"{ev.data['op']} on {ev.data['buffer']}"[:MAX_TEXT]
    on_crash(asm, ev)


def on_metal_library_failed(asm: Assembler, ev: Event) -> None:
    run = asm.run
    if run.facts.metal_library_failed is None:
        run.facts.metal_library_failed = ev.data["what"][:160]
    run.touch(ev)


def on_metal_agx_error(asm: Assembler, ev: Event) -> None:
    run = asm.run
    run.facts.agx_domain = run.facts.agx_domain or ev.data["domain"]
    run.observe("gpu.driver", ev.data["domain"], ev)
    if len(run.facts.metal_errors) < MAX_LISTED:
        run.facts.metal_errors.append(ev.text[:MAX_TEXT])
    run.touch(ev)


def on_metal_library_loaded(asm: Assembler, ev: Event) -> None:
    if asm.pending_gate:
        asm.pending_gate.append(ev)
        return
    asm.run.facts.library_load_s = float(ev.data["seconds"])
    asm.run.touch(ev)


HANDLERS: dict[str, Handler] = {
    "metal.tensor_gate": on_metal_tensor_gate,
    "metal.block_start": on_metal_block_start,
    "metal.device": on_metal_device,
    "metal.family": on_metal_family,
    "metal.flag": on_metal_flag,
    "metal.working_set": on_metal_working_set,
    "metal.skip_kernel": on_metal_skip_kernel,
    "metal.unsupported_op": on_metal_unsupported_op,
    "metal.found_device": on_metal_enumerated_device,
    "metal.picking_device": on_metal_enumerated_device,
    "metal.family_fallback": on_metal_family_fallback,
    "metal.error": on_metal_error,
    "run.crash": on_crash,
    "run.op_refused": on_op_refused,
    "metal.library_failed": on_metal_library_failed,
    "metal.agx_error": on_metal_agx_error,
    "metal.library_loaded": on_metal_library_loaded,
}
