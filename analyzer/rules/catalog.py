"""The rules: data (an id, the verdict it argues for, a severity) plus one
small predicate each. A predicate returns a finding (message + evidence
lines) or None. Facts: shared/reference/vm-gpu-landscape.md, log-formats.md.

Safety: the hardware-limit rules veto "fixable" whatever else fires, and a
capability-downgrade is fixable only on positive evidence of an Apple-silicon
host (see RunView.host_proof and RunView.remedy_decision)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from analyzer import chips
from analyzer.model import like_pairs
from analyzer.rules import baseline
from analyzer.rules.advice import CONFIRM_HOST, device_advice, evidence_advice
from analyzer.rules.view import KERNEL_COULD_NOT_RUN, KERNEL_WORDS, RunView, kernel_failure
from analyzer.verdicts import NO_HOST_CHIP

Finding = dict[str, Any]


@dataclass(frozen=True)
class Rule:
    id: str
    verdict: str | None  # None: an informational or warning rule
    severity: str  # error | warning | info
    check: Callable[[RunView], Finding | None]
    # What a verdict this rule decides rests on: "printed" (the log's own capability lines), "symptoms"
    # (a speed gap, skipped kernels: the downgrade read from its effects) or "speed" (a speed against the
    # host chip's bandwidth). The confidence and the headline's "why" follow it (engine, output.headline).
    basis: str = "printed"
    # An informative reading that says why a run is unknown when no rule decides (its message is the summary).
    explains_unknown: bool = False
    # Its own next step when it fired: (view, verdict) -> steps, or None to leave them to the verdict's.
    next_step: Callable[[RunView, str], list[str] | None] | None = None
    # A step added to whatever the verdict's steps are.
    extra_step: str | None = None
    # The headline's nuance (analyzer.output.headline): "prefix" (before the sentence), "how" (a downgrade's
    # manner), "fixable" (a fixable downgrade's ending), "unknown" (an unknown run's sentence); {who}, {rt};
    # "runtime" (the runtime the sentence names, when the program is not one) and "mood" ("would": no model ran).
    headline: dict[str, str] = field(default_factory=dict)
    # The report shows its message under this label when the diagnosis lacks that fact ("environment").
    report_line: str | None = None


def finding(message: str, evidence: list[dict[str, Any]], **extra: Any) -> Finding:
    return {"message": message, "evidence": evidence, **extra}


# ---------------------------------------------------------------------------
# environment and capability readings (informational)
# ---------------------------------------------------------------------------


ENVIRONMENT_DECIDERS = ("the Metal start-up block (its `GPU name:` line), llama-bench `-o json` (its cpu_info reads "
                        "'(Virtual)' in a guest) or `capscan probe` run on the same machine")


def _environment(v: RunView) -> Finding | None:
    if v.environment == "vm":
        host = f" on an {v.host_chip} host" if v.host_chip else ""
        return finding(f"Runs in a virtual machine{host} ({v.vm_signs[0][0]}).", v.vm_evidence[:3])
    if v.environment == "bare-metal":
        why, lines = v.bare_metal_signs[0]
        # (why is a clause that may hold parentheses of its own: "a physical GPU is named (Tesla T4)")
        return finding(f"Runs on bare metal ({v.host_chip})." if v.host_chip else f"Runs on bare metal: {why}.",
                       lines)
    if v.contradictions:
        return None  # contradictory-evidence says what the run shows
    if v.on_a_mac is False:
        return None  # only a macOS guest's Metal GPU is clamped: on another system the question does not arise
    if not (v.is_metal or v.on_a_mac or v.facts.metal_errors or v.facts.skipped_kernels or v.facts.unsupported_ops):
        # nothing in the log is a Mac's: no Metal words for what may be a Linux or Windows machine
        return finding("Whether this ran in a VM or on bare metal is not shown, and nothing in the log shows a Mac: "
                       "only a macOS guest's GPU can be clamped; on a Mac, `capscan probe` run on the same machine "
                       "would decide it.", [])
    return finding("Whether this ran in a VM or on bare metal is not shown; " + ENVIRONMENT_DECIDERS + " would decide "
                   "it.", [])


def _kernel_checks(v: RunView) -> Finding | None:
    """Which kernels capscan-probe --kernels ran on this device and what they returned."""
    if not v.kernel_results:
        return None
    f = v.facts
    how = ", ".join(x for x in (f.kernel_msl_version and f"MSL {f.kernel_msl_version}",
                                f.kernel_elapsed_ms is not None and f"{f.kernel_elapsed_ms} ms") if x)
    parts = [f"{KERNEL_WORDS[cap]} {r['result']}" for cap, r, _ in v.kernel_results]
    could_not = any(r["result"] in KERNEL_COULD_NOT_RUN for _, r, _ in v.kernel_results)
    return finding(f"Kernel checks (capscan-probe --kernels{', ' + how if how else ''}): {', '.join(parts)}. They "
                   "prove what the GPU computes correctly, not how fast."
                   + (" A crash or a timeout means the check could not run: proof neither way, run it again."
                      if could_not else ""),
                   [ln for _, _, lines in v.kernel_results for ln in lines])


def _kernel_failed(v: RunView) -> Finding | None:
    """A kernel llama.cpp would run failed on this GPU: never force it, whatever the family says."""
    failed = v.failed_kernels
    if not failed:
        return None
    cap, r, _ = failed[0]
    words = kernel_failure(cap, r)
    return finding(f"{words[0].upper()}{words[1:]}: do not force it, whatever family it reports or a shim claims.",
                   [ln for _, _, ls in failed for ln in ls])


def _contradictory(v: RunView) -> Finding | None:
    if not v.contradictions:
        return None
    parts = [what for what, _ in v.contradictions]
    lines = [line for _, ls in v.contradictions for line in ls]
    return finding("The run's evidence contradicts itself: " + "; ".join(parts) + ". Lines of two machines or "
                   "processes were probably merged (pasted or interleaved logs); capscan never picks one by order, "
                   "so nothing here is marked fixable. Ingest each machine's log on its own.", lines)


def _inferred_capabilities(v: RunView) -> Finding | None:
    if not v.inferred or not v.is_metal:
        return None
    parts = [f"{flag.replace('_', ' ')} = {str(getattr(v.caps, flag)).lower()} (needs {why})"
             for flag, why in v.inferred.items()]
    if v.family_basis == "chip":
        basis = (f"the log prints no GPU family; {v.host_chip} is {chips.family_name(v.host_family)}, so with "
                 "llama.cpp's own logic")
        ev = v.lines("bench.device", "metal.device", "sysprof.chipset", limit=1)
    else:
        basis = "not printed by this llama.cpp era; inferred from the reported GPU families with llama.cpp's own logic"
        ev = v.lines("metal.family", "probe.family", "probe.json", limit=4)
    return finding(basis[0].upper() + basis[1:] + ": " + "; ".join(parts) + ".", ev)


# ---------------------------------------------------------------------------
# hardware-limit: never fixable
# ---------------------------------------------------------------------------

# GPUs of Intel Macs: Metal runs on them, Apple families do not.
MAC_DISCRETE = frozenset({"amd", "intel", "nvidia"})

_DO_NOT_FORCE = ("Do not force capabilities with a shim here: this GPU really lacks the features, and forcing "
                 "simdgroup kernels would give wrong results or crashes.")


def _non_apple_gpu(v: RunView) -> Finding | None:
    if not v.is_metal:
        return None
    if v.unnamed_non_apple_gpu:
        return finding(f"The Metal device is not named ('MTL0' only), but it reports {chips.family_name(v.metal_family)} "
                       "with no Apple family" + (", has no unified memory" if v.facts.device.unified_memory is False else "")
                       + ((f", and the build targets {v.facts.build_target}") if (v.facts.build_target or "").startswith(
                           "x86_64") else "") + ": an AMD or Intel GPU of an Intel Mac, so llama.cpp rightly runs "
                       "without simdgroup matrix multiply. " + _DO_NOT_FORCE,
                       v.lines("metal.device", "metal.family", "metal.flag", "build.target", limit=5))
    if not (MAC_DISCRETE & v.vendors):
        return None
    kind = "AMD" if "amd" in v.vendors else "NVIDIA" if "nvidia" in v.vendors else "Intel"
    return finding(f"{kind} GPU on an Intel Mac: it is not an Apple GPU and has no Apple7 family, so llama.cpp rightly "
                   f"runs without simdgroup matrix multiply. " + _DO_NOT_FORCE,
                   v.lines("metal.device", "sysprof.chipset", "bench.device", "metal.flag", "metal.family", limit=4))


def _old_apple_gpu(v: RunView) -> Finding | None:
    if v.environment != "bare-metal" or "apple" not in v.vendors:
        return None
    fam = v.host_family or v.apple_family
    if fam is None or fam >= chips.APPLE7:
        return None
    return finding(f"{v.host_chip or 'This Apple GPU'} is {chips.family_name(fam)}, older than the Apple7 (A14/M1) "
                   f"that llama.cpp's simdgroup kernels need. " + _DO_NOT_FORCE,
                   v.lines("metal.device", "metal.family", "probe.device", limit=3))


def _intel_host_vm(v: RunView) -> Finding | None:
    if not v.intel_host:
        return None
    return finding("A paravirtual GPU on an Intel-Mac host (no unified memory, or an Intel CPU): the hardware under "
                   "the VM is an Intel or AMD GPU without Apple7 features. " + _DO_NOT_FORCE,
                   v.lines("metal.flag", contains="unified", limit=1) + v.vm_evidence[:2])


# ---------------------------------------------------------------------------
# no-gpu-offload
# ---------------------------------------------------------------------------


def _no_metal_device(v: RunView) -> Finding | None:
    """A Mac's log with no Metal device: an empty device list, or an x86_64 build under Rosetta."""
    f = v.facts
    x86 = v.x86_build is not None
    if f.listed_devices == [] and not v.device_names and v.on_a_mac:
        why = ""
        if x86:
            why = (" (an x86_64 build: under Rosetta on Apple silicon it cannot use Metal, install an arm64 build; on an "
                   "Intel Mac it lists the AMD or Intel GPU when it has Metal)")
        if v.device_listing:  # --list-devices ran nothing
            return finding("No Metal device is listed" + why + ": llama.cpp would run on the CPU only.",
                           v.lines("devices.header", "build.target", limit=2))
        return finding("No Metal device was found: everything ran on the CPU" + why + ".",
                       v.lines("devices.header", "build.target", limit=2))
    if x86 and not v.device_names and f.metal_era is None and v.apple_silicon_signs and not v.intel_mac_signs:
        return finding(f"An x86_64 build on Apple silicon ({v.apple_silicon_signs[0]}): it runs under Rosetta, where "
                       "Metal is unavailable, so everything ran on the CPU. Install an arm64 build.",
                       v.lines("build.target", limit=1))
    return None


def _no_gpu_device(v: RunView) -> Finding | None:
    """No GPU device where the log does not show a Mac: an empty device list (`--list-devices`, or a
    device_info block naming only the CPU), a CUDA backend that found none, or a software rasterizer."""
    f = v.facts
    if f.listed_devices == [] and not v.device_names and not v.on_a_mac:
        lines = v.lines("devices.header", "device_info.device", "backend.loaded", limit=2)
        if v.device_listing:
            return finding("The device listing (`--list-devices`) names no GPU: this build sees none, so a run would "
                           "use only the CPU.", lines)
        return finding("The device list names no GPU, only the CPU: the model ran on the CPU.", lines)
    if f.cuda_failed and not v.device_names:
        return finding(f"The CUDA backend found no device ({f.cuda_failed}): everything ran on the CPU.",
                       v.lines("cuda.failed", limit=1))
    if "software" in v.vendors:
        return finding("The only Vulkan device is a software rasterizer (llvmpipe/lavapipe): the GPU is not used.",
                       v.lines("vulkan.device", "vulkan.cpu_device", limit=2))
    return None


def _device_listing(v: RunView) -> Finding | None:
    if not v.device_listing:
        return None
    listed = ", ".join(v.facts.listed_devices or []) or "no GPU"
    return finding(f"A device listing (`--list-devices`: {listed}): no model ran, so the verdict says what llama.cpp "
                   "would use.", v.lines("devices.header", "devices.item", limit=3))


def _x86_build(v: RunView) -> Finding | None:
    """An x86_64 macOS build is an Intel Mac's (or a Hackintosh's), or Rosetta's on Apple silicon: which,
    the machine the log names decides. Its AMD or Intel GPU is amd-intel-gpu's (a hardware limit, not
    "no offload under Rosetta"); with nothing that names the machine, this says what would."""
    target = v.x86_build
    if target is None:
        return None
    if v.intel_mac_signs:
        return finding(f"An x86_64 build ({target}) on an Intel Mac or a Hackintosh ({', '.join(v.intel_mac_signs[:2])}): "
                       "not Rosetta; Metal runs here, on a GPU without Apple7 features.",
                       v.lines("build.target", limit=1))
    if v.apple_silicon_signs or v.device_names or v.facts.metal_era is not None:
        return None
    return finding(f"An x86_64 build ({target}): on an Intel Mac it can use the AMD or Intel GPU through Metal, under "
                   "Rosetta on Apple silicon it cannot use Metal at all; the log names neither the GPU nor the CPU. "
                   "`sysctl -n machdep.cpu.brand_string` names the CPU; on Apple silicon install an arm64 build.",
                   v.lines("build.target", limit=1))


def _metal_library_failed(v: RunView) -> Finding | None:
    f = v.facts
    if not f.metal_library_failed or not _ran_on(v):
        return None
    return finding(f"The Metal library did not load ({f.metal_library_failed}): Metal was never used, whatever the GPU. "
                   "This is a packaging or toolchain problem, not a capability one.",
                   v.lines("metal.library_failed", limit=3))


def _ran_on(v: RunView) -> bool:
    """Did anything run after the Metal failure? llama.cpp's context fails with its Metal backend
    (`llama_new_context_with_model: failed to initialize Metal backend`), so without a speed nothing ran: the
    GPU is then not shown unused, only never reached. whisper.cpp falls back to the CPU and runs on."""
    context_failed = v.lines("metal.library_failed", contains="llama_new_context_with_model", limit=1) or v.lines(
        "metal.library_failed", contains="failed to initialize the context", limit=1)
    return bool(v.throughput) or not context_failed


def _metal_failed_nothing_ran(v: RunView) -> Finding | None:
    f = v.facts
    if not f.metal_library_failed or _ran_on(v):
        return None
    return finding(f"The Metal backend failed to start ({f.metal_library_failed}) and nothing ran after it: the GPU is "
                   "neither shown unused nor shown slow. This is a packaging or toolchain problem, not a capability "
                   "one.", v.lines("metal.library_failed", limit=3))


def _crashed(v: RunView) -> Finding | None:
    """The process stopped (an assertion, an abort): said first, with its line, whatever the verdict."""
    f = v.facts
    if not f.crash:
        return None
    why = (f" after Metal rejected {', '.join(f.unsupported_ops[:3])} as unsupported" if f.unsupported_ops else "")
    return finding(f"The run crashed{why}: {f.crash}", v.lines("run.crash", limit=3) +
                   v.lines("metal.unsupported_op", limit=2), crash=f.crash)


def _zero_layers(v: RunView) -> Finding | None:
    f = v.facts
    if f.offload and f.offload[0] == 0 and f.offload[1] > 0:
        return finding(f"0 of {f.offload[1]} layers were offloaded to the GPU: the model ran on the CPU.",
                       v.lines("offload", limit=1))
    if f.n_gpu_layers == 0:
        if f.wrapper_virtualised:
            return finding("The app forced gpu_layers=0: the model ran on the CPU.", v.lines("wrapper.gpu_layers", limit=1))
        if v.lines("ollama.ps", contains="100% CPU", limit=1):
            return finding("`ollama ps` shows the model 100% on the CPU (its PROCESSOR column): no layer is on a GPU.",
                           v.lines("ollama.ps", limit=1))
        # an app's own line (node-llama-cpp's gpuLayers=0 or its CPU fallback), not a llama-bench row
        if v.lines("wrapper.gpu_layers", limit=1):
            return finding("The app ran with no layer on the GPU (gpu_layers=0, or it fell back to the CPU): the model "
                           "ran on the CPU.", v.lines("wrapper.gpu_layers", limit=2))
        return finding("llama-bench ran with n_gpu_layers = 0: the model ran on the CPU.",
                       v.lines("bench.device", limit=1))
    if f.bench_devices == "none":  # llama-bench -dev none: no GPU device, whatever the backend column says
        return finding("llama-bench ran with -dev none (its dev column): no GPU device was used, the model ran on "
                       "the CPU.", v.lines("bench.device", limit=1))
    if f.ollama_library == "cpu":
        return finding("ollama chose library=cpu: no GPU was used.", v.lines("ollama.compute", limit=1))
    return None


def _zero_layers_step(v: RunView, verdict: str) -> list[str] | None:
    """A GPU the run found and put no layer on is not one to make visible: the layers were not asked for, or
    (ollama, which picks them itself) did not fit. Without a GPU named, the verdict's advice stands."""
    f = v.facts
    # (a GPU's name, of a known vendor: a device list's "CPU" or a CPU's model name is not one)
    if verdict != "no-gpu-offload" or not v.physical_gpus or f.wrapper_virtualised or _whisper(v):
        return None
    gpu = v.physical_gpus[0]
    if f.bench_devices == "none":
        return [f"llama-bench ran with -dev none, so {gpu} was left out: drop -dev none (or name the GPU's device, "
                "as `llama-bench --list-devices` lists it) and run again."]
    if f.program == "ollama":
        return [f"ollama found {gpu} but put no layer on it: it does that when a layer does not fit in the GPU's free "
                "memory. A smaller model or context (num_ctx), or closing what holds GPU memory, lets it offload; "
                "`OLLAMA_DEBUG=1 ollama serve` logs how it decided."]
    return [f"The GPU ({gpu}) was found, but no layer was put on it: ask for the layers, `-ngl 99` "
            "(--n-gpu-layers) with llama.cpp, n_gpu_layers=-1 with llama-cpp-python. If they stay on the CPU, the "
            "lines before the offload line say why (too little free GPU memory)."]


def _cpu_only_build_step(v: RunView, verdict: str) -> list[str] | None:
    """A build without a GPU backend: -ngl changes nothing until the build has one; on a machine without a GPU
    it is the right build."""
    if verdict != "no-gpu-offload":
        return None
    if v.platform == "mac-arm":
        return ["A CPU-only build: use one with Metal, which the default macOS arm64 build has (Homebrew's llama.cpp, "
                "or cmake without -DGGML_METAL=OFF); llama-bench's backend column then reads MTL or Metal, and "
                "-ngl 99 puts the layers on the GPU."]
    return ["A CPU-only build: where the machine has a GPU, use a build with its backend (CUDA: -DGGML_CUDA=ON, "
            "ROCm: -DGGML_HIP=ON, Vulkan: -DGGML_VULKAN=ON, Metal on an Apple-silicon Mac, or a release built with "
            "it); llama-bench's backend column then names it, and -ngl 99 puts the layers on the GPU. Without a GPU "
            "(a CPU server, a single-board computer) this is the right build and there is nothing to fix."]


def _whisper(v: RunView) -> bool:
    return v.facts.program == "whisper.cpp"


def _gpu_disabled_step(v: RunView, verdict: str) -> list[str] | None:
    """whisper.cpp offloads the whole model unless told not to (-ng / --no-gpu) and has no -ngl flag: its
    advice is its own. A llama.cpp build without a GPU backend gets the verdict's (a build with one, -ngl 99)."""
    f = v.facts
    if verdict != "no-gpu-offload" or not _whisper(v):
        return None
    intel = (" On an Intel Mac the CPU is often as fast, and Metal there has failed for whisper.cpp: -ng can be "
             "the right choice." if v.platform in ("mac-intel", "mac-x86") else "")
    if f.gpu_disabled == "use gpu = 0":
        return ["whisper.cpp ran with its GPU turned off: drop -ng / --no-gpu (use_gpu = false in the bindings). "
                "whisper.cpp puts the whole model on the GPU by default; it has no -ngl flag." + intel]
    return ["whisper.cpp used no GPU: use a whisper.cpp build with your GPU's backend (Metal is in the default "
            "macOS arm64 build; -DGGML_CUDA=1 or -DGGML_VULKAN=1 elsewhere) and do not pass -ng / --no-gpu. "
            "whisper.cpp puts the whole model on the GPU by default; it has no -ngl flag." + intel]


_GPU_BUFFER = re.compile(r"(?:CUDA|ROCm|HIP|MUSA|Vulkan|SYCL|CANN|OpenCL|MTL|Metal)\d*")


def gpu_buffer(name: str) -> bool:
    """A model buffer on a GPU device ('CUDA0', 'Vulkan1', 'MTL0'), not the CPU's or pinned host memory."""
    return bool(_GPU_BUFFER.fullmatch(name))


def _ollama_app(v: RunView) -> Finding | None:
    if not v.facts.ollama_app:
        return None
    return finding("The official Ollama.app ran this (its runner under /Applications/Ollama.app): the app is signed "
                   "with the hardened runtime, so dyld drops DYLD_INSERT_LIBRARIES for it and its runner, and "
                   "capscan's interposer cannot load there.", v.lines("ollama.runner", limit=1))


def _gpu_disabled(v: RunView) -> Finding | None:
    """The process said so itself: llama.cpp's argument parser ignoring --n-gpu-layers, whisper.cpp's
    'use gpu = 0' or 'no GPU found', or whisper.cpp's weights on the CPU only. A GPU the same run
    names or initialises outweighs it (two processes pasted together, or a wrapper's later retry)."""
    f = v.facts
    # a Metal device that fell back for lack of family 7 put the weights on the CPU too: its rules say why
    if v.device_names or f.metal_era is not None or f.probe or f.family_fallback:
        return None
    if f.gpu_disabled:
        why = {"not compiled with GPU offload support": "the build has no GPU backend, so --n-gpu-layers is ignored",
               "no usable GPU found": "the build found no usable GPU (or has no GPU backend), so --n-gpu-layers is "
                                      "ignored",
               "use gpu = 0": "whisper.cpp ran with the GPU turned off (-ng / --no-gpu)",
               "no GPU found": "whisper.cpp found no GPU device to use"}.get(f.gpu_disabled, f.gpu_disabled)
        return finding(f"The program runs on the CPU: {why}.",
                       v.lines("gpu.disabled", limit=2))
    # (a cut may start after the GPU's layers: the model buffers, printed after every assignment, must be seen)
    if (f.layer_devices and all(d == "CPU" for d in f.layer_devices) and f.weight_buffers
            and not any(map(gpu_buffer, f.weight_buffers))):
        return finding("Every layer assignment the log shows names the CPU, and no model buffer is on a GPU: the model "
                       "ran on the CPU.", v.lines("layer.device", "model.buffer", limit=2))
    # both loads seen (so a cut that ends mid-load cannot fire it): a GPU build that offloads names its device
    # in one of them, and only a GPU build prints the 'offloaded N/M layers' line
    # (and the weakest sign: a device list, an x86_64 build or a CUDA failure says why, in its own rule)
    if (f.weight_buffers and f.kv_buffers and f.offload is None and f.listed_devices is None
            and v.x86_build is None and not f.cuda_failed
            and not any(map(gpu_buffer, f.weight_buffers + f.kv_buffers))):
        return finding("The model's weights and its KV cache both sit in CPU buffers: nothing was offloaded to a GPU.",
                       v.lines("model.buffer", "kv.buffer", limit=2))
    if f.whisper_weights and all(b.upper() == "CPU" for b in f.whisper_weights):
        return finding("whisper.cpp put its model weights on the CPU: no GPU backend was used "
                       "(built without one, or run with -ng / --no-gpu).", v.lines("whisper.weights", limit=1))
    return None


# A hand-edited backend cell naming a CPU build by its instruction set ('CPU AVX2', 'CPU AVX512'): still the CPU
_CPU_BUILD_CELL = re.compile(r"CPU [A-Z][A-Z0-9_]*")


def _cpu_only_build(v: RunView) -> Finding | None:
    """llama-bench's backend column lists every registered backend (CPU only when there is no other): a
    positive sign. system_info is not (see _cpu_features_only)."""
    f = v.facts
    bench_cpu = f.bench_backends is not None and all(
        p.strip().upper() in ("CPU", "BLAS", "ACCELERATE") or _CPU_BUILD_CELL.fullmatch(p.strip().upper())
        for p in f.bench_backends.split(","))
    # an x86_64 build not shown to be an Intel Mac's: no-metal-device or x86-build says why (Rosetta, or
    # which machine it is), not "no backend"; on an Intel Mac a CPU-only build is one
    rosetta = v.x86_build is not None and not v.intel_mac_signs
    if bench_cpu and not v.device_names and f.metal_era is None and not rosetta:
        return finding("A CPU-only build: llama-bench's backend column names no GPU backend.",
                       v.lines("bench.device", limit=1))
    return None


def _cpu_features_only(v: RunView) -> Finding | None:
    """system_info lists the features of the CPU, CUDA (HIP, MUSA), Metal and zDNN backends only: a Vulkan,
    SYCL, OpenCL, CANN or WebGPU build that offloaded everything prints the same line as a CPU-only build."""
    f = v.facts
    sys_cpu = bool(f.system_backends) and all(b.upper() in ("CPU", "BLAS", "ACCELERATE") for b in f.system_backends or [])
    rosetta = v.x86_build is not None and not v.intel_mac_signs
    # (a device list, GPU or none, says more: its own rules read it)
    if not sys_cpu or v.device_names or f.listed_devices is not None or f.metal_era is not None or rosetta:
        return None
    return finding("system_info lists CPU features only, but it never names Vulkan, SYCL, OpenCL, CANN or WebGPU: a "
                   "build with one of those that offloaded everything prints the same line as a CPU-only build, so "
                   "whether a GPU was used is not shown.", v.lines("system_info", limit=1))


def _cpu_features_step(v: RunView, verdict: str) -> list[str] | None:
    return [device_advice(v)] if verdict == "unknown" else None


# ---------------------------------------------------------------------------
# capability-downgrade
# ---------------------------------------------------------------------------


def _paravirtual_clamp(v: RunView) -> Finding | None:
    if not v.is_metal or not v.paravirtual or v.remedied:
        return None
    caps = v.caps
    below = v.apple_family is None or v.apple_family < chips.APPLE7
    disabled = caps.simdgroup_reduction is False or caps.simdgroup_mm is False
    if not (disabled or (below and (v.apple_family is not None or v.facts.probe))):
        return None
    fam = chips.family_name(v.apple_family) if v.apple_family else "no Apple family"
    off = [chips.METAL_FLAG[n].words for n in chips.KERNEL_FLAGS if getattr(caps, n) is False]
    host = f" {v.host_chip} (really {chips.family_name(v.host_family)})" if v.host_family else ""
    turned = "turns" if v.probe_only else "turned"  # a probe ran no model: llama.cpp would, reading this family
    msg = (f"The VM's paravirtual GPU reports {fam}, so llama.cpp {turned} off {', '.join(off) or 'its fast kernels'} "
           f"and runs slow fallback or CPU paths; the host{host or ' GPU'} can do better.")
    ev = v.lines("metal.device", "probe.device", "probe.json", limit=1) + v.lines("metal.family", "probe.family",
                                                                                  limit=2)
    ev += v.lines("metal.flag", contains="= false", limit=3)
    return finding(msg, ev)


def _symptom(v: RunView) -> tuple[str, str, list[dict[str, Any]]] | None:
    """(what was seen, what it means in a VM, lines) for the visible consequences of a clamp, or None.
    Only when no capability block decides (a printed reduction flag)."""
    f = v.facts
    if f.metal_era is not None and f.capabilities.simdgroup_reduction is not None or v.family_basis == "printed":
        return None  # the capability block decides
    if f.unsupported_ops:
        return (f"Metal rejected op(s) {', '.join(f.unsupported_ops)} as unsupported",
                "the device reports no simdgroup reduction, the signature of a VM's paravirtual GPU (Apple5)",
                v.lines("metal.unsupported_op", limit=3))
    if f.skipped_kernels_non_bf16 >= 50:
        return (f"{f.skipped_kernels} Metal kernels were skipped as unsupported ({f.skipped_kernels_non_bf16} not "
                "bf16)", "the device lacks simdgroup reduction/matrix multiply, the signature of a VM's paravirtual "
                "GPU", v.lines("metal.skip_kernel", limit=3))
    if f.family_fallback:
        return ("whisper.cpp fell back to the CPU because the GPU does not report family 7",
                "the paravirtual GPU reports Apple5", v.lines("metal.family_fallback", limit=1))
    return None


def _downgrade_symptoms(v: RunView) -> Finding | None:
    """No capability block, but the consequences of one are visible, in a VM."""
    if MAC_DISCRETE & v.vendors or v.environment != "vm":
        return None  # the same symptoms elsewhere decide nothing: _symptoms_without_vm says so
    seen = _symptom(v)
    if seen is None:
        return None
    what, meaning, lines = seen
    return finding(f"{what} in a VM guest: {meaning}.", lines + v.vm_evidence[:1])


def _symptoms_without_vm(v: RunView) -> Finding | None:
    """The symptoms of a clamp without evidence of a VM: AMD/Intel Mac GPUs and pre-M1 Apple GPUs
    lack simdgroup reduction too, so the symptoms alone decide nothing."""
    if v.environment == "vm" or MAC_DISCRETE & v.vendors:
        return None
    seen = _symptom(v)
    if seen is None:
        return None
    what, _, lines = seen
    if v.environment == "bare-metal":
        return finding(f"{what}, on bare metal ({v.host_chip or v.device_names[0]}): not a VM's family clamp and "
                       "nothing a shim could restore; an op this llama.cpp build does not run on this GPU, or a broken "
                       "build.", lines)
    return finding(f"{what}, but nothing in the log names the device: a VM's paravirtual GPU (Apple5) does this, and "
                   "so do AMD/Intel Mac GPUs and pre-M1 Apple GPUs, so capscan does not guess.", lines,
                   next="start-up-block")


def _slower_than_cpu(v: RunView) -> Finding | None:
    """A stock guest on Metal slower than the same guest on the CPU (Anka M3 Pro: pp64 9.26 vs 13.33)."""
    if v.environment != "vm" or not v.paravirtual or v.remedied or not v.gpu_offload:
        return None
    mine = v.best()
    for p in v.peers:
        if p.environment == "vm" and not p.gpu_offload and p.model == v.facts.model and p.quant == v.facts.quant \
                and v.host_chip is not None and p.host_chip == v.host_chip:
            slower = [(t, o) for t, o in like_pairs(mine, p.throughput, ignore=("ngl",))
                      if mine[t] < p.throughput[o]]
            if slower:
                t, o = slower[0]
                return finding(f"On Metal this guest is slower than on its CPU ({v.figure_name(t)}: {mine[t]:.2f} vs "
                               f"{p.throughput[o]:.2f} tok/s in run {p.id}): Metal is crippled, not slow.",
                               v.lines("bench.device", limit=1), peer=p.id)
    return None


def _gap_to_host(v: RunView) -> Finding | None:
    """No family shown (e.g. llama-bench JSON only), but a bare-metal run of the same
    model is present: a gap far beyond the virtual GPU's per-dispatch cost (which
    keeps guests at 70-99% of the host) means the capability clamp."""
    if v.environment != "vm" or not v.paravirtual or v.remedied or v.apple_family is not None:
        return None
    if v.caps.simdgroup_reduction is not None or not v.gpu_offload:
        return None
    base = bare_metal_baseline(v)
    if base is None:
        return None
    peer, test, _, ratio = base
    if ratio >= 0.25:
        return None
    return finding(f"{v.figure_name(test)} runs at {ratio:.1%} of the bare-metal run {peer.id} of the same model: far beyond the "
                   "virtual GPU's own overhead (guests with full capabilities reach 70-99%), the signature of the "
                   "paravirtual family clamp.", v.lines("bench.device", limit=1), peer=peer.id, ratio=ratio)


def _near_bare_metal(v: RunView) -> Finding | None:
    """The family is not shown, but the speed says the clamp is not there."""
    if v.environment != "vm" or not v.paravirtual or v.caps.simdgroup_reduction is not None or not v.gpu_offload:
        return None
    base = bare_metal_baseline(v)
    if base is None or base[3] < 0.5:
        return None
    peer, test, _, ratio = base
    return finding(f"{v.figure_name(test)} reaches {ratio:.1%} of bare-metal run {peer.id} of the same model: a clamped guest "
                   "manages 4-15%, so this guest's capabilities are probably already restored; the log does not "
                   "show them (pipe stderr too, 2>&1, to know).", v.lines("bench.device", limit=1), peer=peer.id,
                   ratio=ratio)


# ---------------------------------------------------------------------------
# already remedied, over-claiming shims, runtimes that do not gate
# ---------------------------------------------------------------------------


def _device_probe(v: RunView) -> Finding | None:
    """A probe's output (capscan-probe, a JSON probe, system_profiler): it measured the device, no model ran.
    The verdict is what llama.cpp would make of that device, so the headline speaks of llama.cpp."""
    if not v.probe_only:
        return None
    return finding(f"No model ran: {v.facts.program or 'a probe'} measured the GPU, and the verdict says what llama.cpp "
                   "would do with what it reports.",
                   v.lines("probe.device", "probe.json", "sysprof.chipset", limit=1))


def _remedied(v: RunView) -> Finding | None:
    if not v.paravirtual or not v.remedied:
        return None
    f = v.facts
    if f.shim:
        msg = f"The capability shim {f.shim.name} is active (apple_family_max={f.shim.apple_family_max})"
        ev = v.lines("shim.banner", limit=1)
    else:
        msg = f"The paravirtual GPU reports {chips.family_name(v.apple_family)}, above the stock Apple5"
        ev = v.lines("metal.family", limit=1)
    if v.full_caps:
        msg += ": llama.cpp's simdgroup kernels are on."
    else:
        msg += ", yet llama.cpp's simdgroup kernels are still off."
    return finding(msg, ev + v.lines("metal.flag", contains="simdgroup", limit=2))


def _shim_not_in_effect(v: RunView) -> Finding | None:
    """A shim's banner (a Tart image's agent injects one by default) beside family lines that still show the
    stock Apple5: the verdict reads the lines, and this says why the banner did not count."""
    f = v.facts
    if f.shim is None or not v.paravirtual or v.remedied:
        return None
    cap = f" with apple_family_max={f.shim.apple_family_max}" if f.shim.apple_family_max is not None else ""
    return finding(f"{f.shim.name} says it is enabled{cap}, yet the device's own family lines still show the stock "
                   f"{chips.family_name(v.apple_family) if v.apple_family else 'clamp'}: the shim did not take in this "
                   "process (a family cap of 0, or a hardened agent that drops DYLD_* for its children). The verdict "
                   "reads the family lines, not the banner.",
                   v.lines("shim.banner", limit=1) + v.lines("metal.family", contains="Apple", limit=1))


def _training_aborts(v: RunView) -> Finding | None:
    """Fine-tuning on a device without simdgroup reduction: ggml's scheduler refuses the optimizer step on the
    weight's Metal buffer and aborts (OPT_STEP_ADAMW/SGD are gated on it, llama.cpp #16529)."""
    f = v.facts
    if not f.op_refused:
        return None
    op, _, buffer = f.op_refused.partition(" on ")
    train = op.startswith("OPT_STEP")
    what = "Training aborts, it does not only slow down" if train else "The run aborted"
    return finding(f"{what}: the {op} op was refused on the weights' {buffer} buffer, whose device does not run it "
                   "(it needs simdgroup reduction: a VM's paravirtual GPU reporting Apple5 lacks it, and so do "
                   "AMD/Intel Mac GPUs).", v.lines("run.op_refused", limit=1), op=op)


def _shim_overclaim(v: RunView) -> Finding | None:
    if v.environment != "vm":
        return None
    problems, ev = [], []
    shim_max = v.facts.shim.apple_family_max if v.facts.shim else None
    if shim_max and shim_max >= chips.METAL3:
        problems.append(f"the shim is configured to claim up to {chips.family_name(shim_max)} (familyMax={shim_max}), "
                        "beyond every Apple family")
    apple_claims = [c for c in (v.apple_family, shim_max) if c and c in range(1001, 2000)]
    claimed = max(apple_claims, default=None)
    if claimed and claimed > chips.HIGHEST_KNOWN_APPLE:
        problems.append(f"it claims {chips.family_name(claimed)}, which no GPU has")
    elif claimed and v.host_family and claimed > v.host_family:
        problems.append(f"it claims {chips.family_name(claimed)} on an {v.host_chip} host, which is "
                        f"{chips.family_name(v.host_family)}: Apple8/9-only paths (SIMD shift-and-fill, 64-bit "
                        f"atomics) may be taken; cap it at {v.host_family}")
    if v.paravirtual and v.metal_family:
        problems.append(f"the guest advertises {chips.family_name(v.metal_family)}, which breaks MLX's residency sets "
                        "and hides the one honest VM tell")
        ev += v.lines("metal.family", contains="Metal", limit=1)
    if not problems:
        return None
    ev = v.lines("shim.banner", limit=1) + v.lines("metal.family", contains="Apple", limit=1) + ev
    return finding("The VM's capabilities are over-claimed: " + "; ".join(problems) + ".", ev)


def _mlx(v: RunView) -> Finding | None:
    if v.gates_on_family:
        return None
    return finding("MLX does not gate its kernels on supportsFamily (it tunes from the GPU architecture name), so "
                   "the family clamp does not slow it and the capability remedy does not apply.",
                   v.lines("timing", limit=2))


def _wrapper_disabled_gpu(v: RunView) -> Finding | None:
    f = v.facts
    if not f.wrapper_virtualised:
        return None
    return finding(f"The app itself says the Metal device looks virtualised ({f.wrapper_virtualised}) and runs on the "
                   "CPU: it gave up on the GPU because the VM's paravirtual device under-reports its family. With the "
                   "remedy the device reports the host chip's real family, and the app can offload again.",
                   v.lines("wrapper.virtualised", "wrapper.gpu_layers", limit=2))


def _macos14_mmap(v: RunView) -> Finding | None:
    f = v.facts
    if v.environment != "vm" or not f.mmap or not (f.macos_version or "").startswith("14."):
        return None
    return finding(f"A macOS {f.macos_version} guest reads the weights through memory-mapped (no-copy) buffers: on "
                   "macOS 14 paravirtual GPUs this has been reported to give wrong output (stale data). Run with "
                   "--no-mmap.", v.lines("host.macos", "model.buffer", limit=2), next="--no-mmap")


def _venus(v: RunView) -> Finding | None:
    if "venus" not in v.vendors:
        return None
    return finding("Linux guest on Venus (Vulkan over MoltenVK): no family clamp applies here and no capability "
                   "override exists; expect roughly 75-80% of native Metal.", v.lines("vulkan.device", limit=1))


# ---------------------------------------------------------------------------
# healthy and virtualization-overhead
# ---------------------------------------------------------------------------


def bare_metal_baseline(v: RunView):
    """The guest's bare-metal baseline (same model and quantization, same host chip; see
    analyzer.rules.baseline): (peer, my figure, its figure, my_tok_s / its_tok_s) on the first
    figure both have, like for like (same test and stated configuration, model.like_pairs;
    generation first), or None."""
    found = baseline.choose(v)
    if found is None or found.peer is None:
        return None
    peer, mine = found.peer, v.best()
    shared = [(t, o) for t, o in like_pairs(mine, peer.throughput) if peer.throughput[o] > 0]
    gen = [(t, o) for t, o in shared if t.startswith("tg") or t == "generation"]
    if not shared:
        return None
    t, o = (gen or shared)[0]
    return peer, t, o, mine[t] / peer.throughput[o]


def _virtualization_overhead(v: RunView) -> Finding | None:
    if v.environment != "vm" or not v.gpu_offload:
        return None
    if not (v.full_caps or (v.remedied and v.full_caps is not False) or "venus" in v.vendors or not v.gates_on_family):
        return None
    base = bare_metal_baseline(v)
    if base is None:
        return None
    peer, test, other, ratio = base
    if ratio >= 0.97:
        return None
    mine = v.best()[test]
    theirs = peer.throughput[other]
    cost = 1 / mine - 1 / theirs
    return finding(f"Full capabilities, yet {v.figure_name(test)} reaches {ratio:.1%} of bare-metal run {peer.id} ({mine:.2f} vs "
                   f"{theirs:.2f} tok/s): about {cost * 1000:.2f} ms per token is the virtual GPU's per-dispatch "
                   "cost, not something a shim can remove.", v.lines("bench.device", "timing", limit=1),
                   peer=peer.id, ratio=ratio, per_token_s=cost)


# A paravirtual guest whose capabilities nothing printed (llama-bench JSON alone): its token generation
# against the host chip's bandwidth ceiling (RunView.generation_share). A stock guest runs its matrix work on
# the guest's CPUs, so its speed is the CPUs' and depends on the configuration (fa, KV types, threads): the
# band is the one measured on stock guests across configurations. Stock: the field corpus's M1 Ultra guests
# 1.0, 2.9, 4.7% of the ceiling (at most 38.7 GB/s of weights: Muse 30B, 2.31 tok/s x 16.7 GB); a GitHub
# macos-15 M1 runner's llama-bench sweep (edge-inference-bench: fa 0/1, KV f16/q8_0, 2-3 threads) 7.2 to
# 16.3% (at most 11.2 GB/s). With full capabilities: the shim guests 16.7, 16.8, 42% (138-392 GB/s);
# bare-metal TinyLlama's 286.7 t/s is 23%. The clamp: below CLAMPED_SHARE, or below STOCK_SHARE and
# STOCK_BYTES_S together (a low-bandwidth host's CPU-run guest). The fast kernels: FULL_SHARE and more, with
# the weights streamed at twice the fastest stock guest's rate (fa and KV types move it by 2x). In between
# the speed decides nothing. A speed never makes a run fixable, and a stored bare-metal baseline
# (gap-to-bare-metal, near-bare-metal) outranks it.
CLAMPED_SHARE = 0.11
STOCK_SHARE = 0.20
STOCK_BYTES_S = 39e9
FULL_SHARE = 0.15
STOCK_TOP_BYTES_S = 2 * STOCK_BYTES_S
# Below this, a model's generation is bound by the per-token dispatch cost, not by bandwidth
SPEED_MIN_BYTES = 512 * 2**20

_PROOF_LOG = ("Only the guest's own Metal block proves the clamp and makes it fixable: run it with `-lv 4` (or "
              "`-v`) and `2>&1` so the Metal block is printed, and pipe that in.")


def _speed_share(v: RunView) -> tuple[str, float, float, float, str] | None:
    share = v.generation_share
    if share is None or (v.facts.model_size_bytes or 0) < SPEED_MIN_BYTES:
        return None
    if bare_metal_baseline(v) is not None:
        return None  # a measured host run of the same model outranks a published ceiling
    key, tok_s, frac = share
    ceiling, basis = v.bandwidth_ceiling or (0.0, "")
    return v.figure_name(key), tok_s, frac, ceiling, basis


def _stock_reach(v: RunView, tok_s: float) -> bool:
    """Could a stock guest's CPUs stream the weights this fast? (see STOCK_TOP_BYTES_S)"""
    return tok_s * (v.facts.model_size_bytes or 0) < STOCK_TOP_BYTES_S


def _stock_band(v: RunView, tok_s: float, frac: float) -> bool:
    """Within the speeds measured on stock guests: a low share of the ceiling, or a share stock guests reach
    with the weights streamed no faster than the fastest stock guest's CPUs streamed them."""
    return frac < CLAMPED_SHARE or (frac < STOCK_SHARE and tok_s * (v.facts.model_size_bytes or 0) < STOCK_BYTES_S)


def _slow_as_clamped(v: RunView) -> Finding | None:
    found = _speed_share(v)
    if found is None or not _stock_band(v, found[1], found[2]):
        return None
    name, tok_s, frac, ceiling, basis = found
    rate = tok_s * (v.facts.model_size_bytes or 0) / 1e9
    return finding(f"No capability block, but {name} at {tok_s:.2f} tok/s ({frac:.1%} of the {ceiling:.0f} tok/s that "
                   f"{basis} allows, {rate:.1f} GB/s of weights) is the speed of a stock paravirtual guest, whose matrix "
                   "work runs on its CPUs (measured stock guests, across fa, KV types and threads: 1-16% of the "
                   "ceiling), not of the fast kernels (16.7% and more, at 138 GB/s and more). " + _PROOF_LOG,
                   v.vm_evidence[:1] + v.lines("bench.device", "timing", limit=1), share=frac)


def _fast_as_full(v: RunView) -> Finding | None:
    found = _speed_share(v)
    # a mixture-of-experts model's share is inflated (its ceiling counts every expert): only its low side decides
    if found is None or found[2] < FULL_SHARE or v.mixture_of_experts or _stock_reach(v, found[1]):
        return None
    name, tok_s, frac, ceiling, basis = found
    return finding(f"No capability block, but {name} at {tok_s:.2f} tok/s is {frac:.1%} of the {ceiling:.0f} tok/s that "
                   f"{basis} allows, faster than a stock guest's CPUs stream the weights: a speed only llama.cpp's fast "
                   "kernels reach, so nothing points to a capability clamp.",
                   v.vm_evidence[:1] + v.lines("bench.device", "timing", limit=1), share=frac)


def _speed_undecided(v: RunView) -> Finding | None:
    """Between the two bands, or fast only for a guest whose CPUs could be that fast: the speed decides nothing."""
    found = _speed_share(v)
    if found is None or _stock_band(v, found[1], found[2]):
        return None
    name, tok_s, frac, ceiling, basis = found
    if found[2] >= FULL_SHARE and not v.mixture_of_experts and not _stock_reach(v, tok_s):
        return None
    return finding(f"No capability block, and {name} at {tok_s:.2f} tok/s ({frac:.1%} of the {ceiling:.0f} tok/s that "
                   f"{basis} allows) fits both a stock guest, whose matrix work runs on its CPUs, and one with full "
                   "capabilities: the speed decides nothing. " + _PROOF_LOG,
                   v.vm_evidence[:1] + v.lines("bench.device", "timing", limit=1), share=frac)


# llama-bench backend cells of GPU backends no capability clamp touches (OpenCL: Adreno, Mali; CANN: Ascend)
_GPU_BENCH_BACKENDS = frozenset({"CUDA", "ROCM", "HIP", "MUSA", "VULKAN", "SYCL", "OPENCL", "CANN"})
# what "no capability clamp applies" means, in words a reader who is no GPU expert follows (issue 41)
_NO_CLAMP = ("capscan's fix (for a VM whose GPU reports itself as an older model than it is) does not apply to "
             "this backend: nothing to fix.")


def _healthy(v: RunView) -> Finding | None:
    f = v.facts
    if not v.gpu_offload or f.unsupported_ops or f.metal_library_failed or f.model_load_failed:
        return None  # a run that crashed on an op, whose Metal library failed or whose model never loaded is not healthy
    if not v.gates_on_family and v.environment == "vm" and v.throughput:
        return finding("MLX in a VM: MLX does not gate its kernels on supportsFamily, so the paravirtual GPU's family "
                       "does not slow it; nothing to remedy.", v.vm_evidence[:1] + v.lines("timing", limit=1))
    if v.is_metal and v.full_caps and not (MAC_DISCRETE & v.vendors):
        return finding("Full capabilities: simdgroup reduction and matrix multiply are on.",
                       v.lines("metal.flag", contains="simdgroup", limit=2) or v.lines("metal.family", limit=1))
    # (a device list alone, a `--version` output or an abort before the first row, shows a GPU, not a run)
    if (f.cuda_devices or (f.vulkan_devices and "software" not in v.vendors)) and v.work_begun:
        return finding(f"The GPU ({v.device_names[0]}) is used; " + _NO_CLAMP,
                       v.lines("cuda.device", "vulkan.device", limit=1))
    # no device list in the cut, but every layer offloaded into a CUDA/ROCm/Vulkan/SYCL device's buffer
    # (a Metal one needs its capability block)
    gpus = [b for b in f.weight_buffers if gpu_buffer(b) and not b.startswith(("MTL", "Metal"))]
    if gpus and f.offload and f.offload[0] == f.offload[1] > 0:
        return finding(f"Every layer ({f.offload[0]}/{f.offload[1]}) was offloaded into {', '.join(gpus)}: the GPU is "
                       "used; " + _NO_CLAMP, v.lines("offload", "model.buffer", limit=2))
    # llama-bench rows of a CUDA/ROCm/Vulkan/SYCL build with layers on the GPU, no device list in the cut
    gpu_backend = {b.strip().upper() for b in (f.bench_backends or "").split(",")} & _GPU_BENCH_BACKENDS
    if ((f.backend in ("cuda", "rocm", "vulkan", "sycl") or gpu_backend) and f.bench_backends
            and f.n_gpu_layers not in (None, 0) and v.throughput and "software" not in v.vendors):
        return finding(f"The rows ran on the {f.bench_backends} backend with layers on the GPU (ngl {f.n_gpu_layers}); "
                       + _NO_CLAMP, v.lines("bench.device", "bench.row", limit=1))
    return None


def _metal_library_step(v: RunView, verdict: str) -> list[str] | None:
    if verdict not in ("no-gpu-offload", "unknown"):
        return None
    return ["The Metal library did not load: use a build with the library embedded (GGML_METAL_EMBED_LIBRARY=ON, "
            "the default of release builds), or set GGML_METAL_PATH_RESOURCES to the folder holding "
            "default.metallib / ggml-metal.metal; compile errors need matching Xcode command line tools. Then "
            "run again and pipe the log in."]


def _wrapper_gave_up_step(v: RunView, verdict: str) -> list[str] | None:
    if verdict != "no-gpu-offload" or v.environment != "vm":
        return None
    cap = v.host_family or chips.APPLE7
    if v.vetoes is None and v.host_proof:
        return [f"The app gave up on the VM's GPU: capscan remedy plan --run {v.id}, then "
                f"capscan remedy run --family {cap} -- <the app> and let it offload "
                "again (drop the forced gpu_layers=0)."]
    if v.vetoes:
        return [f"The app gave up on the VM's GPU, and {v.vetoes}: do not force capabilities here."]
    return [f"The app gave up on the VM's GPU, but {NO_HOST_CHIP}: {CONFIRM_HOST}. Only on an Apple-silicon host "
            "can the remedy let it offload again."]


def _symptoms_step(v: RunView, verdict: str) -> list[str] | None:
    return [evidence_advice(v)] if verdict == "unknown" and v.environment is None else None


RULES: tuple[Rule, ...] = (
    Rule("environment", None, "info", _environment, report_line="environment"),
    Rule("contradictory-evidence", None, "warning", _contradictory, explains_unknown=True),
    Rule("kernel-check-failed", None, "error", _kernel_failed),
    Rule("kernel-checks", None, "info", _kernel_checks),
    Rule("capabilities-inferred", None, "info", _inferred_capabilities),
    Rule("amd-intel-gpu", "hardware-limit", "error", _non_apple_gpu),
    Rule("old-apple-gpu", "hardware-limit", "error", _old_apple_gpu),
    Rule("intel-host-vm", "hardware-limit", "error", _intel_host_vm),
    Rule("x86-build", None, "info", _x86_build, explains_unknown=True),
    Rule("no-metal-device", "no-gpu-offload", "error", _no_metal_device),
    Rule("no-gpu-device", "no-gpu-offload", "error", _no_gpu_device),
    # (a CPU-only build's ngl column says nothing: its rows at -ngl 99 ran on the CPU too, so the build decides)
    Rule("cpu-only-build", "no-gpu-offload", "error", _cpu_only_build, next_step=_cpu_only_build_step),
    Rule("zero-layers-offloaded", "no-gpu-offload", "error", _zero_layers, next_step=_zero_layers_step),
    Rule("cpu-features-only", None, "info", _cpu_features_only, explains_unknown=True, next_step=_cpu_features_step),
    Rule("gpu-disabled", "no-gpu-offload", "error", _gpu_disabled, next_step=_gpu_disabled_step),
    Rule("metal-library-failed", "no-gpu-offload", "error", _metal_library_failed, next_step=_metal_library_step),
    Rule("metal-failed-nothing-ran", None, "error", _metal_failed_nothing_ran, explains_unknown=True,
         next_step=_metal_library_step),
    Rule("crashed", None, "error", _crashed,
         headline={"prefix": "{who} crashed before it finished (the evidence has the line).",
                   "how": "until it crashed on an op its Metal fallback paths do not support"}),
    Rule("paravirtual-family-clamp", "capability-downgrade", "error", _paravirtual_clamp),
    Rule("downgrade-symptoms", "capability-downgrade", "error", _downgrade_symptoms, basis="symptoms"),
    Rule("speed-of-fallback-kernels", "capability-downgrade", "warning", _slow_as_clamped, basis="speed"),
    Rule("symptoms-without-vm", None, "info", _symptoms_without_vm, explains_unknown=True, next_step=_symptoms_step),
    Rule("metal-slower-than-cpu", "capability-downgrade", "error", _slower_than_cpu, basis="symptoms"),
    Rule("gap-to-bare-metal", "capability-downgrade", "warning", _gap_to_host, basis="symptoms"),
    Rule("near-bare-metal", None, "info", _near_bare_metal, explains_unknown=True),
    Rule("already-remedied", None, "info", _remedied),
    Rule("device-probe", None, "info", _device_probe, headline={"runtime": "llama.cpp", "mood": "would"}),
    Rule("device-listing", None, "info", _device_listing, headline={"runtime": "llama.cpp", "mood": "would"}),
    Rule("capability-overclaim", None, "warning", _shim_overclaim),
    Rule("shim-not-in-effect", None, "warning", _shim_not_in_effect,
         extra_step="capscan never stacks its interposer on another shim: run the command once without the image's "
                    "(TART_METAL_APPLE_FAMILY_MAX=0, or DYLD_INSERT_LIBRARIES unset for it), ingest that stock log, "
                    "and remedy that run."),
    Rule("training-aborts", None, "error", _training_aborts, explains_unknown=True,
         extra_step="To train now, hide the Metal device so every op runs on the CPU: GGML_METAL_DEVICES=0 before "
                    "the training command (cleaner than -ngl 0, which still puts optimizer state on Metal)."),
    Rule("mlx-unaffected", None, "info", _mlx, explains_unknown=True,
         headline={"unknown": "{rt} is not slowed by a VM's capability clamp, so capscan has nothing to fix here."}),
    Rule("venus-guest", None, "info", _venus, explains_unknown=True),
    Rule("wrapper-disabled-gpu", None, "warning", _wrapper_disabled_gpu, next_step=_wrapper_gave_up_step),
    Rule("ollama-app-hardened", None, "info", _ollama_app,
         headline={"fixable": "; capscan can fix that, but not inside the official Ollama.app (its hardened "
                              "runtime drops the injection): the next steps say what works."}),
    Rule("macos14-mmap", None, "warning", _macos14_mmap,
         extra_step="Run with --no-mmap: macOS 14 guests have read stale weights through no-copy mmap buffers."),
    Rule("virtualization-overhead", "virtualization-overhead", "warning", _virtualization_overhead),
    Rule("full-capabilities", "healthy", "info", _healthy),
    Rule("speed-of-full-kernels", "healthy", "info", _fast_as_full, basis="speed"),
    Rule("speed-undecided", None, "info", _speed_undecided, explains_unknown=True),
)

RULE_BY_ID = {r.id: r for r in RULES}
