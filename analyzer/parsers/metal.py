"""ggml-metal: the capability block of every era (2023 ``ggml_metal_init:`` to
2025+ ``ggml_metal_device_init:``), kernel skips, unsupported-op errors.
See shared/reference/log-formats.md section 1."""

from __future__ import annotations

import regex

from analyzer.chips import METAL_FLAGS
from analyzer.parsers.base import LEGACY_HEAD, M4_HEAD, Format, Pattern, Sample, rx, to_bool, to_float

# MTLGPUFamilyMetal3 = 5001, Metal4 = 5002: the Metal group starts at 3.
_FAMILY_BASE = {"Apple": 1000, "Mac": 2000, "Common": 3000, "MacCatalyst": 4000, "Metal": 4998}

# Printed labels of each era (analyzer.chips.METAL_FLAGS), mapped to one capability name.
FLAG_LABELS = {label: flag.name for flag in METAL_FLAGS for label in flag.printed}
# longest first, so that a label is never cut to a shorter one it starts with
_LABELS = "|".join(regex.escape(label) for label in sorted(FLAG_LABELS, key=len, reverse=True))


_MTL_NAME = regex.compile(r"MTL(\d+)(?: \((.+)\))?")
_SPACES = regex.compile(r"\s+")


def _device(m: regex.Match) -> dict:
    raw = m.group("raw").strip()
    func = m.group("func")
    mm = _MTL_NAME.fullmatch(raw)
    # a block pasted without its prefix: only the 2026 'MTL0' names say which era it is
    m4 = func == "ggml_metal_device_init" or (func is None and mm is not None)
    data: dict = {"era": "M4" if m4 else "legacy"}
    if mm:
        data["index"] = int(mm.group(1))
        if mm.group(2):
            data["name"] = mm.group(2).strip()
    else:
        data["name"] = raw
    return data


def _family(m: regex.Match) -> dict | None:
    group, n, code = m.group("group"), int(m.group("n")), int(m.group("code"))
    if _FAMILY_BASE[group] + n != code:
        return None  # inconsistent (cut or mangled) line: never invent a family
    return {"code": code, "group": group}


def _flag(m: regex.Match) -> dict | None:
    label = _SPACES.sub(" ", m.group("label").strip())
    name = FLAG_LABELS.get(label)
    value = to_bool(m.group("value"))
    if name is None or value is None:
        return None
    return {"flag": name, "value": value}


def _working_set(m: regex.Match) -> dict:
    value = to_float(m.group("value"))
    unit = m.group("unit")
    # Nov-Dec 2023 printed MiB; every other era divides by 1e6 and says MB.
    if unit == "MiB" and value is not None:
        value = round(value * 1048576 / 1e6, 2)
    return {"mb": value, "unit": unit}


# A function name starts a word, or follows an escaped newline ("...\\nggml_metal_init: ..." quoted in a
# line): not inside a run of glued `ggml_metal_x` tokens, each of which `\w++` would scan to the run's end.
METAL = Format(
    name="metal",
    description="ggml-metal capability block, kernel skips and op errors (2023-2026)",
    # the bare capability labels let through a block pasted without its ggml_metal_*: prefix
    literals=("ggml_metal", "Metal GPU does not support", "GPU name:", "GPU family: MTLGPUFamily", "GPU family: Apple",
              "simdgroup ",
              "hasUnifiedMemory", "has unified memory", "has bfloat", "has tensor", "recommendedMaxWorkingSetSize",
              "AGXMetal", "Metal backend"),
    patterns=(
        Pattern("metal.device",
                rx(r"(?:^|(?P<func>(?:\b|(?<=\\n))ggml_metal_\w++): )GPU name:\s+(?P<raw>\S(?:.*\S)?+)\s*+$"), _device,
                heads=(M4_HEAD, LEGACY_HEAD)),
        Pattern(
            "metal.family",
            rx(r"(?:^|(?:\b|(?<=\\n))ggml_metal_\w++: )GPU family:\s+MTLGPUFamily(?P<group>Apple|Common|Metal|Mac)(?P<n>\d+)"
               r"\s+\((?P<code>\d+)\)\s*$"),
            _family,
        ),
        # a probe script's own wording of the same fact ('GPU family: Apple 6', the highest family it supports)
        Pattern("metal.family", rx(r"^\s*+GPU family:\s*+Apple ?(?P<n>[1-9]\d?)\s*+$"),
                lambda m: {"code": 1000 + int(m.group("n")), "group": "Apple"}),
        Pattern(
            "metal.flag",
            rx(
                r"(?:^|(?:\b|(?<=\\n))ggml_metal_\w++:\s+)"
                rf"(?P<label>{_LABELS})\s*=\s*(?P<value>true|false)\s*$"
            ),
            _flag,
        ),
        Pattern(
            "metal.working_set",
            rx(r"(?:^|(?:\b|(?<=\\n))ggml_metal_\w++:\s+)recommendedMaxWorkingSetSize\s*=\s*(?P<value>[\d.,]+)\s+(?P<unit>MB|MiB)\s*$"),
            _working_set,
        ),
        Pattern("metal.skip_kernel", rx(r"(?:\b|(?<=\\n))ggml_metal_\w++: skipping (?P<kernel>kernel_\w+)\s+\(not supported\)")),
        Pattern("metal.unsupported_op", rx(r"(?P<func>(?:\b|(?<=\\n))ggml_metal_\w++): error: unsupported op '(?P<op>\w+)'")),
        Pattern("metal.found_device", rx(r"(?:\b|(?<=\\n))ggml_metal_\w++: found device: (?P<name>\S(?:.*\S)?+)\s*+$"),
                heads=(LEGACY_HEAD,)),
        Pattern("metal.picking_device",
                rx(r"(?:\b|(?<=\\n))ggml_metal_\w++: picking default device: (?P<name>\S(?:.*\S)?+)\s*+$"),
                heads=(LEGACY_HEAD,)),
        Pattern("metal.block_start", rx(r"(?P<func>ggml_metal_init): (?P<what>allocating|using MPS)\s*$")),
        Pattern("metal.tensor_gate", rx(r"ggml_metal_device_init: (?P<what>tensor API disabled for pre-M5[^\n]*)$"),
                heads=(M4_HEAD,)),
        Pattern("metal.library_loaded", rx(r"(?:\b|(?<=\\n))ggml_metal_\w++: loaded in (?P<seconds>[\d.]+) sec"),
                heads=(M4_HEAD,)),
        Pattern(
            "metal.family_fallback",
            rx(r"\b(?P<func>\w++): Metal GPU does not support family (?P<family>\d+) - falling back to CPU"),
        ),
        # an error domain of Apple's own GPU driver: a physical Apple GPU (never the paravirtual one)
        Pattern("metal.agx_error", rx(r"Error Domain=(?P<domain>AGXMetal\w+)")),
        # the Metal library not loading: a packaging/toolchain problem, whatever the GPU
        Pattern("metal.library_failed", rx(r"(?:\b|(?<=\\n))ggml_metal_\w++: (?P<what>loading '\(null\)'|error compiling source"
                                           r"|error: failed to create library|error: failed to initialize the Metal library"
                                           r"|error: Error Domain=(?:MTLLibraryErrorDomain|NSCocoaErrorDomain)[^\n]*)")),
        Pattern("metal.library_failed",
                rx(r"(?:\b|(?<=\\n))(?P<func>llama_\w++): "
                   r"(?P<what>(?:failed to initialize the context: )?failed to initialize Metal "
                   r"backend)")),
        Pattern("metal.error", rx(r"(?P<func>(?:\b|(?<=\\n))ggml_metal_\w++): error: (?P<message>\S(?:.*\S)?+)\s*+$")),
    ),
    samples=(
        Sample("ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)", "metal.device",
               {"index": 0, "name": "Apple Paravirtual device", "era": "M4"}),
        Sample("ggml_metal_device_init: GPU name:   MTL0", "metal.device", {"index": 0, "era": "M4"}),
        # the block as people paste it: without the ggml_metal_*: prefix
        Sample("GPU name:   MTL0 (Apple Paravirtual device)", "metal.device",
               {"index": 0, "name": "Apple Paravirtual device", "era": "M4"}),
        Sample("GPU family: MTLGPUFamilyApple5  (1005)", "metal.family", {"code": 1005}),
        Sample("GPU family: Apple 6", "metal.family", {"code": 1006, "group": "Apple"}),
        Sample("  GPU family: Apple7", "metal.family", {"code": 1007}),
        Sample("simdgroup reduction   = false", "metal.flag", {"flag": "simdgroup_reduction", "value": False}),
        Sample("hasUnifiedMemory              = false", "metal.flag", {"flag": "unified_memory", "value": False}),
        Sample("ggml_metal_init: GPU name:   Apple M2 Max", "metal.device", {"name": "Apple M2 Max", "era": "legacy"}),
        Sample("ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)", "metal.family", {"code": 1005}),
        Sample("ggml_metal_init: GPU family: MTLGPUFamilyApple7 (1007)", "metal.family", {"code": 1007}),
        Sample("ggml_metal_init: GPU family: MTLGPUFamilyCommon3 (3003)", "metal.family", {"code": 3003}),
        Sample("ggml_metal_device_init: GPU family: MTLGPUFamilyMetal4  (5002)", "metal.family", {"code": 5002}),
        Sample("ggml_metal_init: simdgroup reduction support   = false", "metal.flag",
               {"flag": "simdgroup_reduction", "value": False}),
        Sample("ggml_metal_init: simdgroup matrix mul. support = true", "metal.flag", {"flag": "simdgroup_mm", "value": True}),
        Sample("ggml_metal_device_init: simdgroup reduction   = true", "metal.flag",
               {"flag": "simdgroup_reduction", "value": True}),
        Sample("ggml_metal_device_init: simdgroup matrix mul. = false", "metal.flag", {"flag": "simdgroup_mm", "value": False}),
        Sample("ggml_metal_init: has bfloat            = true", "metal.flag", {"flag": "bfloat", "value": True}),
        Sample("ggml_metal_init: use bfloat            = false", "metal.flag", {"flag": "use_bfloat", "value": False}),
        Sample("ggml_metal_device_init: has tensor            = false", "metal.flag", {"flag": "tensor", "value": False}),
        Sample("ggml_metal_init: hasUnifiedMemory              = true", "metal.flag", {"flag": "unified_memory", "value": True}),
        Sample("ggml_metal_device_init: has unified memory    = true", "metal.flag", {"flag": "unified_memory", "value": True}),
        Sample("ggml_metal_device_init: recommendedMaxWorkingSetSize  = 11453.25 MB", "metal.working_set",
               {"mb": 11453.25, "unit": "MB"}),
        Sample("ggml_metal_init: skipping kernel_soft_max_f32                   (not supported)", "metal.skip_kernel",
               {"kernel": "kernel_soft_max_f32"}),
        Sample("ggml_metal_op_encode_impl: error: unsupported op 'RMS_NORM'", "metal.unsupported_op", {"op": "RMS_NORM"}),
        Sample("ggml_metal_graph_compute_block_invoke: error: unsupported op 'RMS_NORM'", "metal.unsupported_op",
               {"op": "RMS_NORM"}),
        Sample("ggml_metal_init: found device: Apple M1 Pro", "metal.found_device", {"name": "Apple M1 Pro"}),
        Sample("ggml_metal_init: using MPS", "metal.block_start", {"what": "using MPS"}),
        Sample("ggml_metal_library_init: loaded in 8.931 sec", "metal.library_loaded", {"seconds": "8.931"}),
        Sample("whisper_backend_init: Metal GPU does not support family 7 - falling back to CPU", "metal.family_fallback",
               {"family": "7"}),
        Sample("ggml_metal_init: loading '(null)'", "metal.library_failed", {"what": "loading '(null)'"}),
        Sample("ggml_metal_library_init: error: failed to create library", "metal.library_failed",
               {"what": "error: failed to create library"}),
        Sample("llama_new_context_with_model: failed to initialize Metal backend", "metal.library_failed",
               {"what": "failed to initialize Metal backend"}),
        Sample("ggml_metal_library_compile_pipeline: error: Error Domain=AGXMetalG16X Code=3 \"Compiler encountered an "
               "internal error\"", "metal.agx_error", {"domain": "AGXMetalG16X"}),
        Sample("ggml_metal_init: error: failed to allocate buffer, size =   512.00 MiB", "metal.error",
               {"message": "failed to allocate buffer, size =   512.00 MiB"}),
    ),
)
