"""What the rules read about one run: its facts plus a few derived readings
(vendor, environment, host chip, the capabilities the runtime turned on).

Derivations are conservative: each one returns None when the log does not
show enough, and records the lines it relied on.
"""

from __future__ import annotations

import copy
import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from analyzer import chips
from analyzer.model import (
    GUEST_PROCESS,
    Capabilities,
    Evidence,
    Observation,
    Provenance,
    RunFacts,
    claim,
    figure_key,
    figure_parts,
    provenance_words,
)
from analyzer.rules.observed import Block, Readings, word
from analyzer.verdicts import NO_CLAMP_BLOCK, NO_HOST_CHIP, NO_VM_GUEST

APPLE_RANGE = range(1001, 2000)
# capscan-probe --kernels checks, in llama.cpp's order, with their names in words
KERNEL_WORDS = {"simdgroup_reduction": "simdgroup reduction", "simdgroup_mm": "simdgroup matrix multiply",
                "bfloat": "bfloat"}
KERNEL_FAILURES = ("fail", "compile-error", "timeout")


def kernel_failure(cap: str, result: dict[str, Any]) -> str:
    """A failed kernel check in words, the same for the finding, the veto and the remedy's refusal:
    'the GPU behind this VM cannot compile the bfloat kernel (compile-error: program_source:...)'."""
    name = KERNEL_WORDS[cap]
    what = {"fail": f"does not run {name} correctly", "compile-error": f"cannot compile the {name} kernel",
            "timeout": f"did not finish the {name} kernel"}[result["result"]]  # one of KERNEL_FAILURES
    message = result.get("message")
    return f"the GPU behind this VM {what} ({result['result']}{': ' + message if message else ''})"


@dataclass
class Peer:
    """Another stored run, as a possible baseline."""

    id: int
    environment: str | None
    full_caps: bool | None
    host_family: int | None
    remedied: bool
    model: str | None
    backend: str | None
    gpu_offload: bool
    throughput: dict[str, float]  # figure (test and configuration, model.figure_key) -> best tok/s
    host_chip: str | None = None  # the hardware: a guest's host chip, a bare-metal run's own GPU
    quant: str | None = None
    build: str | None = None
    created_at: str | None = None


@dataclass
class RunView:
    id: int
    facts: RunFacts
    throughput: list[dict[str, Any]]
    evidence: list[Evidence]
    peers: list[Peer] = field(default_factory=list)
    created_at: str | None = None
    # Whose facts these are: the guest process's own lines (a log read here), or a record imported from
    # another capscan (``instance``: its origin). Only the guest's own may prove (remedy_decision).
    provenance: Provenance = GUEST_PROCESS
    instance: str | None = None

    # -- evidence helpers --------------------------------------------------
    def lines(self, *kinds: str, contains: str | None = None, limit: int = 6) -> list[dict[str, Any]]:
        out = []
        for e in self.evidence:
            if e.kind in kinds and (contains is None or contains.lower() in e.text.lower()):
                out.append({"line": e.line, "text": e.text})
                if len(out) >= limit:
                    break
        return out

    def line_of(self, o: Observation) -> dict[str, Any]:
        """An observation as an evidence line: its line number and the line's text (when kept)."""
        return self.line_at(o.line)

    def cite(self, o: Observation | None = None) -> dict[str, Any]:
        """A proof item's provenance: the observation's own, unless the whole run is not the guest's (an
        imported record), whose provenance then holds for every item."""
        mine = o.provenance if o is not None else GUEST_PROCESS
        return claim(mine if self.provenance == GUEST_PROCESS else self.provenance, self.instance)

    @cached_property
    def guest_said(self) -> frozenset[str] | None:
        """Every value the guest process's own lines showed (None for a run stored before observations,
        whose facts were all read from its own lines): a fact another machine's lines filled in
        (a compare table's CPU column) is not among them."""
        if not self.facts.observations:
            return None
        return frozenset(str(o.value) for o in self.facts.observations if o.provenance == GUEST_PROCESS)

    def line_at(self, line: int) -> dict[str, Any]:
        """A line number as an evidence line, with the line's text when it was kept."""
        return {"line": line, "text": next((e.text for e in self.evidence if e.line == line), "")}

    @cached_property
    def readings(self) -> Readings:
        return Readings(self.facts.observations)

    # -- device -------------------------------------------------------------
    @cached_property
    def device_names(self) -> list[str]:
        f = self.facts
        names = [n for n in (f.device.name, f.gpu_info, f.model_device, f.ollama_description) if n]
        names += f.sysprof_chipsets
        names += [d.get("name", "") for d in f.vulkan_devices + f.cuda_devices if d.get("name")]
        names += f.seen_devices
        return list(dict.fromkeys(names))

    @cached_property
    def vendors(self) -> set[str]:
        return {v for v in (chips.vendor(n) for n in self.device_names) if v}

    @property
    def is_metal(self) -> bool:
        f = self.facts
        return f.backend == "metal" or f.metal_era is not None or f.probe is not None or bool(f.sysprof_chipsets)

    @property
    def paravirtual(self) -> bool:
        return "paravirtual" in self.vendors

    @property
    def unnamed_non_apple_gpu(self) -> bool:
        """A Metal device that names no model (2026 builds print only 'MTL0') but lists its families with
        Metal3 or Metal4 and no Apple family at all: an AMD or Intel GPU of an Intel Mac."""
        f = self.facts
        if self.paravirtual or f.shim is not None or f.metal_era is None or self.vendors:
            return False
        return (self._full_family_listing and self.apple_family is None and self.metal_family is not None)

    # -- platform -------------------------------------------------------------
    @cached_property
    def platform(self) -> str | None:
        """Where the log ran, from what it prints (the build target, the CPU, the devices listed, the
        backend libraries loaded), or None when it does not say: words and advice never assume a Mac."""
        f = self.facts
        target = (f.build_target or "").lower()
        apple_cpu = chips.apple_chip(f.cpu_info)
        if "apple-darwin" in target or "apple-macos" in target or target.startswith("darwin"):
            if "x86_64" not in target:
                return "mac-arm"
            # an x86_64 Mac build: Rosetta on Apple silicon (no Metal there), or an Intel Mac
            return "mac-rosetta" if apple_cpu else "mac-intel" if chips.is_intel_cpu(f.cpu_info) else "mac-x86"
        if apple_cpu:
            return "mac-arm"
        if any(t in target for t in _OTHER_TARGETS) or target in ("x64", "x86"):
            return "linux-windows"
        if f.cuda_devices or f.vulkan_devices or f.cuda_failed:
            return "linux-windows"
        # backends macOS has no build of (Vulkan has one, through MoltenVK)
        backends = {b.strip().upper() for b in (f.bench_backends or "").split(",") + (f.system_backends or [])}
        if backends & _NON_MAC_BACKENDS:
            return "linux-windows"
        # a CPU no Mac has: device_info's CPU entry, a brand string (AMD Ryzen, EPYC, Threadripper)
        if any(_NON_MAC_CPU.search(e.text) for e in self.evidence if e.kind in ("device_info.device", "host.processor")):
            return "linux-windows"
        if chips.is_intel_cpu(f.cpu_info) and "mac" in (f.cpu_info or "").lower():
            return "mac-intel"
        if self.is_metal or f.metal_errors:
            return "mac"
        # ggml's dynamic backends (GGML_BACKEND_DL): libggml-cpu-haswell.so, ggml-cpu-alderlake.dll, .dylib
        libs = " ".join(e.text for e in self.evidence if e.kind == "backend.loaded").lower()
        if ".dylib" in libs:
            return "mac"
        if ".so" in libs or ".dll" in libs:
            return "linux-windows"
        return None

    @property
    def on_a_mac(self) -> bool | None:
        """True when the log shows macOS, False when it shows another system, None when it does not say."""
        p = self.platform
        return None if p is None else p.startswith("mac")

    @property
    def work_begun(self) -> bool:
        """The program did more than start: a speed, a model, layers, buffers or its system_info line. A device
        list alone (a `--version` output, a benchmark that aborted before its first row) shows a GPU exists,
        not that it ran anything."""
        f = self.facts
        return bool(self.throughput or f.model or f.offload or f.weight_buffers or f.kv_buffers or f.whisper_weights
                    or f.system_backends is not None or f.n_gpu_layers is not None)

    @property
    def device_listing(self) -> bool:
        """`--list-devices` alone: a device list and no model, no speed, no Metal block. It ran nothing."""
        f = self.facts
        return (f.listed_devices is not None and bool(self.lines("devices.header", limit=1)) and not self.throughput
                and not f.model and f.metal_era is None and f.offload is None and not f.weight_buffers
                and not f.kv_buffers)

    # -- environment ----------------------------------------------------------
    # Each reading is a list of signs: (what it shows, the lines that show it). A sign counts
    # wherever it appears in the run: contradictory evidence is never resolved by order.
    @cached_property
    def vm_signs(self) -> list[tuple[str, list[dict[str, Any]]]]:
        f = self.facts
        signs = []
        if self.paravirtual:
            signs.append(("the GPU is Apple's paravirtual device", self.lines(
                "metal.device", "metal.found_device", "model.device", "probe.device", "probe.json", "sysprof.chipset",
                "bench.device", "devices.item", "ollama.compute", "wrapper.virtualised", contains="paravirtual",
                limit=2)))
        if f.cpu_info and "(virtual)" in f.cpu_info.lower():
            signs.append((f"the CPU is named {f.cpu_info!r}", self.lines("bench.device", contains="(virtual)", limit=1)))
        if "venus" in self.vendors:
            signs.append(("the GPU is a Virtio-GPU Venus device",
                          self.lines("vulkan.device", contains="venus", limit=1) or self.lines("vulkan.device", limit=1)))
        if f.shim is not None:
            signs.append((f"the {f.shim.name} capability shim runs only in guests", self.lines("shim.banner", limit=1)))
        if self._hardware_overview_virtual is True:
            signs.append((f"the Hardware Overview reads {f.host_chip_line or f.host_model_name!r}",
                          self.lines("host.chip", "host.model_name", limit=1)))
        return signs

    @property
    def _hardware_overview_virtual(self) -> bool | None:
        """system_profiler SPHardwareDataType: 'Chip: Apple M1 Ultra (Virtual)' / 'Apple Virtual Machine' in a
        guest; a plain chip on a Mac. None when not shown."""
        f = self.facts
        if f.host_chip_line is None and f.host_model_name is None:
            return None
        text = f"{f.host_chip_line or ''} {f.host_model_name or ''}".lower()
        if "(virtual)" in text or "virtual machine" in text or "virtualmac" in text:
            return True
        return False if f.host_chip_line else None

    @property
    def vm_evidence(self) -> list[dict[str, Any]]:
        seen: dict[int, dict[str, Any]] = {}
        for _, lines in self.vm_signs:
            for line in lines:
                seen.setdefault(line["line"], line)
        return list(seen.values())

    @cached_property
    def bare_metal_signs(self) -> list[tuple[str, list[dict[str, Any]]]]:
        f = self.facts
        signs = []
        physical = [n for n in self.device_names
                    if chips.vendor(n) in ("apple", "amd", "intel", "nvidia")]
        if physical:
            signs.append((f"a physical GPU is named ({physical[0]})", self.lines(
                "metal.device", "metal.found_device", "metal.picking_device", "model.device", "bench.device",
                "vulkan.device", "cuda.device", "sysprof.chipset", "probe.device", "probe.json", "ollama.compute",
                "devices.item", contains=physical[0], limit=1)))
        if f.agx_domain:
            signs.append((f"Apple's own GPU driver answered ({f.agx_domain} error domain)",
                          self.lines("metal.agx_error", limit=1)))
        if self._hardware_overview_virtual is False:
            signs.append((f"the Hardware Overview names the Mac's chip, {f.host_chip_line}",
                          self.lines("host.chip", limit=1)))
        plain = self._plain_apple_cpu
        if plain is not None:
            signs.append((f"a CPU brand string names an Apple chip without \"(Virtual)\" ({plain[0]}), as a Mac's "
                          "own does", plain[1]))
        if not self.paravirtual and f.shim is None and f.device.name is None and f.metal_era is not None:
            never = [c for c in self.families if 1006 <= c <= 1999 or 5001 <= c <= 5999]
            if never:
                signs.append((f"the Metal device reports {chips.family_name(max(never))}, which a paravirtual GPU "
                              "never does", self.lines("metal.family", contains=str(max(never)), limit=1)))
        return signs

    @cached_property
    def _plain_apple_cpu(self) -> tuple[str, list[dict[str, Any]]] | None:
        """The first CPU name (a brand string, capscan-probe's cpu_brand, llama-bench's cpu_info, a compare
        table's CPU column, from any machine's lines) that names an Apple chip without "(Virtual)", which a
        guest's always carries: a Mac's own (the Hardware Overview's Chip: is read apart)."""
        f = self.facts
        if f.observations:
            named = [(str(o.value), [self.line_of(o)]) for o in self.readings.of("host.cpu") if o.kind != "host.chip"]
        else:  # a run stored before observations
            named = [(c, self.lines("bench.device", "host.processor", contains=c, limit=1))
                     for c in (f.cpu_info, *f.host_cpus) if c]
        return next(((text, lines) for text, lines in named
                     if chips.apple_chip(text) and "(virtual)" not in text.lower()), None)

    @cached_property
    def environment(self) -> str | None:
        """'vm' or 'bare-metal' only on evidence, and only when the run does not show both."""
        vm, bare = bool(self.vm_signs), bool(self.bare_metal_signs)
        if vm and not bare:
            return "vm"
        if bare and not vm:
            return "bare-metal"
        return None

    @cached_property
    def intel_cpus(self) -> list[str]:
        """The Intel processors the run names (Hardware Overview, system_profiler -json, sysctl)."""
        return [c for c in self.facts.host_cpus if chips.is_intel_cpu(c)]

    @cached_property
    def contrary_signs(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Intel-host or non-Apple signs anywhere in the run, and kernels the GPU failed to run: each one
        vetoes 'fixable'."""
        f = self.facts
        signs = [(f"{kernel_failure(cap, r)} in capscan-probe's kernel check: do not force it", lines)
                 for cap, r, lines in self.failed_kernels]
        for name in self.device_names:
            if chips.vendor(name) in ("amd", "intel", "nvidia"):
                signs.append((f"the log names an Intel-Mac GPU ({name})", self.lines(
                    "metal.device", "metal.found_device", "metal.picking_device", "model.device", "bench.device",
                    "sysprof.chipset", "ollama.compute", "vulkan.device", "cuda.device", contains=name, limit=1)))
        if chips.is_intel_cpu(f.cpu_info):
            signs.append((f"the host is an Intel Mac (CPU {f.cpu_info!r})", self.lines("bench.device", limit=1)))
        for cpu in self.intel_cpus:
            signs.append((f"the log names an Intel processor ({cpu})", self.lines("host.processor", contains=cpu, limit=1)))
        if f.x86_cpu_features:
            signs.append((f"system_info reports x86 CPU features ({', '.join(f.x86_cpu_features[:4])}), so an Intel "
                          "Mac or an x86_64 build under Rosetta", self.lines("system_info", limit=1)))
        non_apple = self.non_apple_blocks
        if non_apple:
            m = non_apple[0].metal
            signs.append((f"a Metal block reports {chips.family_name(int(m.value))} and no Apple family, so its "  # type: ignore[union-attr,arg-type]
                          "device is an Intel-Mac GPU (AMD or Intel)", [self.line_of(m)]))  # type: ignore[arg-type]
        elif self.unnamed_non_apple_gpu:  # a run stored before observations
            signs.append((f"the Metal device reports {chips.family_name(self.metal_family)} and no Apple family, so it "
                          "is an Intel-Mac GPU (AMD or Intel)", self.lines("metal.family", limit=2)))
        no_uma = [o for o in self.readings.of("gpu.unified_memory") if o.value is False]
        if no_uma or self.saw_value("unified_memory", False):
            signs.append(("the GPU has no unified memory, which every Apple-silicon host gives (an Intel-Mac GPU, "
                          "or a VM on an Intel host)", [self.line_of(o) for o in no_uma[:1]] or self.lines(
                              "metal.flag", "probe.unified_memory", contains="false", limit=1)))
        other_os = [o for o in self.readings.of("process.os") if o.value != "darwin"]
        if other_os and (self.is_metal or f.metal_errors or f.unsupported_ops or f.skipped_kernels):
            signs.append((f"the program is a {other_os[0].value} build, and Metal runs only on macOS: another "
                          "machine's lines", [self.line_of(other_os[0])]))
        x86 = [o for o in self.readings.of("process.isa") if o.value == "x86_64"]
        targets = [str(o.value) for o in self.readings.of("build.target") if chips.isa_of_target(str(o.value)) == "x86_64"]
        if targets or (not self.facts.observations and (f.build_target or "").startswith("x86_64")):
            target = targets[0] if targets else f.build_target
            signs.append((f"the program is an x86_64 build ({target}), so an Intel Mac or Rosetta",
                          [self.line_of(o) for o in x86 if o.kind == "build.target"][:1]
                          or self.lines("build.target", limit=1)))
        app_x86 = [o for o in x86 if o.kind == "app.arch"]
        if app_x86 and not targets:
            signs.append(("the app reports its architecture as x86_64, so an Intel Mac or Rosetta",
                          [self.line_of(app_x86[0])]))
        return signs

    @cached_property
    def x86_build(self) -> str | None:
        """The x86_64 macOS build target the log prints, if any."""
        targets = [str(o.value) for o in self.readings.of("build.target") if str(o.value).startswith("x86_64-apple")]
        target = self.facts.build_target or ""
        return targets[0] if targets else target if target.startswith("x86_64-apple") else None

    @cached_property
    def intel_mac_signs(self) -> list[str]:
        """What says this x86_64 build ran on an Intel Mac (or a Hackintosh), not under Rosetta: an AMD or
        Intel GPU registered (named, or a Metal block with no Apple family), an Intel CPU named."""
        f = self.facts
        signs = [f"the {name} GPU" for name in self.device_names if chips.vendor(name) in ("amd", "intel")]
        if self.non_apple_blocks or self.unnamed_non_apple_gpu:
            signs.append("a Metal device with no Apple family")
        if chips.is_intel_cpu(f.cpu_info) or self.intel_cpus:
            signs.append(f"the Intel CPU ({f.cpu_info if chips.is_intel_cpu(f.cpu_info) else self.intel_cpus[0]})")
        return signs

    @cached_property
    def apple_silicon_signs(self) -> list[str]:
        """What says this machine is Apple silicon (so an x86_64 build there runs under Rosetta): an Apple
        GPU or chip named, an arm64 process."""
        f = self.facts
        signs = [f"the {name} GPU" for name in self.device_names if chips.vendor(name) == "apple"]
        if chips.apple_chip(f.cpu_info):
            signs.append(f"the {chips.apple_chip(f.cpu_info)} CPU")
        signs += [f"the {c} CPU" for c in f.host_cpus if chips.apple_chip(c)]
        return signs

    @cached_property
    def non_apple_blocks(self) -> list[Block]:
        """Metal blocks that report Metal3/Metal4 and no Apple family: an AMD or Intel GPU's own block, whatever
        another line calls the device."""
        return [b for b in self.readings.blocks.values() if b.metal is not None and b.apple is None]

    def saw_value(self, flag: str, value: bool) -> bool:
        """Was this value printed for the flag anywhere in the run (not just last)?"""
        f = self.facts
        current = f.device.unified_memory if flag == "unified_memory" else getattr(f.capabilities, flag, None)
        return current is value or any(c["flag"] == flag and value in (c["value"], c["other"])
                                       for c in f.flag_conflicts)

    @cached_property
    def contradictions(self) -> list[tuple[str, list[dict[str, Any]]]]:
        """Evidence of two machines in one run (blocks merged, logs interleaved): every fact observed with
        two values that cannot coexist in one process (rules.observed), each named with both lines."""
        out = []
        for what, a, b in self.readings.contradictions():
            out.append((f"{what} is {word(a.value)} (line {a.line}) and {word(b.value)} (line {b.line})",
                        [self.line_of(a), self.line_of(b)]))
        for c in ([] if self.facts.observations else self.facts.flag_conflicts):  # runs stored before observations
            label = c["flag"].replace("_", " ")
            lines = [{"line": e.line, "text": e.text} for e in self.evidence
                     if e.line in (c["line"], c["other_line"]) and e.kind in ("metal.flag", "probe.unified_memory")]
            out.append((f"{label} is printed {str(c['value']).lower()} (line {c['line']}) and "
                        f"{str(c['other']).lower()} (line {c['other_line']})", lines))
        if self.vm_signs and self.bare_metal_signs:
            vm, bare = self.vm_signs[0], self.bare_metal_signs[0]
            out.append((f"it shows a VM guest ({vm[0]}) and bare metal ({bare[0]})", vm[1][:1] + bare[1][:1]))
        f = self.facts
        metal_output = (self.is_metal or f.skipped_kernels or f.unsupported_ops or f.family_fallback or f.metal_errors)
        if "venus" in self.vendors and metal_output:
            # Venus is a Linux guest's Vulkan GPU; Metal runs only on macOS: two machines' lines in one run
            out.append(("it shows a Linux guest's Virtio-GPU Venus device and Metal output, which only macOS prints",
                        self.lines("vulkan.device", contains="venus", limit=1)
                        + self.lines("metal.device", "metal.skip_kernel", "metal.unsupported_op", "metal.family",
                                     limit=1)))
        return out

    # -- host chip --------------------------------------------------------------
    @cached_property
    def host_chip(self) -> str | None:
        return self._host_chip[0]

    @property
    def host_chip_basis(self) -> str | None:
        """Where the host chip comes from, in words (for the report's baseline line)."""
        return self._host_chip[1]

    @cached_property
    def _host_chip(self) -> tuple[str | None, str | None]:
        f = self.facts
        if self.environment == "vm":
            # only the guest's own evidence names its host: its CPU name, its Venus device
            said = self.guest_said
            for text, basis in ((f.cpu_info, "the guest's cpu_info"),
                                *[(d.get("name"), "the guest's Venus device") for d in f.vulkan_devices],
                                (f.host_chip_line, "the guest's Hardware Overview"),
                                *[(c, "the guest's CPU brand string") for c in f.host_cpus]):
                chip = chips.apple_chip(text)
                if chip and (said is None or text in said):  # another machine's line names no guest's host
                    return chip, basis
            if chips.is_intel_cpu(f.cpu_info):
                return ((f.cpu_info or "").split(",")[-1].replace("(Virtual)", "").strip() or "Intel",
                        "the guest's cpu_info")
            if self.intel_cpus:
                return self.intel_cpus[0].replace("(Virtual)", "").strip(), "the processor the guest names"
            return None, None
        if self.environment == "bare-metal":
            for name in self.device_names:
                chip = chips.apple_chip(name)
                if chip:
                    return chip, "its GPU"
            chip = chips.apple_chip(f.host_chip_line)
            if chip and not self.vendors - {"apple"}:
                return chip, "the Mac's Hardware Overview"
            if "amd" in self.vendors or "intel" in self.vendors or "nvidia" in self.vendors:
                return next((n for n in self.device_names if chips.vendor(n) in ("amd", "intel", "nvidia")),
                            None), "its GPU"
        return None, None

    @property
    def host_family(self) -> int | None:
        return chips.chip_family(self.host_chip)

    @property
    def intel_host(self) -> bool:
        """A VM on an Intel Mac: an Intel CPU, or a paravirtual device that has no unified memory
        (consistently: a run that prints both is a contradiction, not a reading)."""
        f = self.facts
        if self.environment != "vm":
            return False
        if chips.is_intel_cpu(f.cpu_info) or self.intel_cpus:
            return True
        return self.paravirtual and f.device.unified_memory is False and not self.saw_value("unified_memory", True)

    @cached_property
    def vetoes(self) -> str | None:
        """Why nothing in this run may be remedied whatever else it shows: a contradiction or a contrary sign
        anywhere in it (the first one, in words), else None."""
        if self.contradictions:
            return "the run's evidence contradicts itself: " + self.contradictions[0][0]
        if self.contrary_signs:
            return self.contrary_signs[0][0]
        return None

    @cached_property
    def host_proof(self) -> list[dict[str, Any]]:
        """The guest's own evidence that its host is Apple silicon, as proof items (empty when none): a named
        Apple chip (llama-bench's cpu_info, a brand string, system_profiler's Chip:, capscan's probe), or the
        guest itself being an arm64 macOS process, since arm64 macOS runs only on Apple-silicon hosts.
        Unified memory proves nothing: Intel iGPUs have it, and so do paravirtual devices on other hosts."""
        if self.environment != "vm":
            return []
        if self.host_family is not None:
            named = [o for o in self.readings.host_chips if o.value == self.host_chip and o.provenance == GUEST_PROCESS]
            line = self.line_of(named[0]) if named else next(iter(self.lines(
                "bench.device", "host.chip", "vulkan.device", limit=1)), {"line": None, "text": ""})
            return self._guests_own([{"sign": f"the guest names its host chip, {self.host_chip} "
                                              f"({self.host_chip_basis})", **line, **self.cite(named[0] if named else None)}])
        # an arm64 macOS build target (an aarch64 Linux one proves nothing: Linux arm64 runs on any Arm machine)
        target = next((o for o in self.readings.of("build.target") if chips.isa_of_target(str(o.value)) == "arm64"
                       and chips.os_of_target(str(o.value)) == "darwin"
                       and o.provenance == GUEST_PROCESS), None)
        if target is not None:
            return self._guests_own([{"sign": f"the guest is an arm64 macOS build ({target.value}), and arm64 macOS "
                                              "runs only on Apple-silicon hosts", **self.line_of(target),
                                      **self.cite(target)}])
        mac = [o for o in self.readings.of("process.arm64_macos") if o.provenance == GUEST_PROCESS]
        if mac and self.is_metal:
            return self._guests_own([{"sign": "system_info reports Arm CPU features beside Accelerate or Metal, so "
                                              "an arm64 macOS process, and arm64 macOS runs only on Apple-silicon "
                                              "hosts", **self.line_of(mac[0]), **self.cite(mac[0])}])
        return []

    @staticmethod
    def _guests_own(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Only the guest's own lines prove its host: an item of any other provenance is dropped."""
        return [p for p in items if p["provenance"] == GUEST_PROCESS]

    @cached_property
    def kernel_results(self) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
        """capscan-probe --kernels, per capability in llama.cpp's order: (capability, result, its line)."""
        k = self.facts.kernels or {}
        out = []
        for cap in KERNEL_WORDS:
            if cap in k:
                line = k[cap].get("line")
                out.append((cap, k[cap], [self.line_at(line)] if line is not None else []))
        return out

    @cached_property
    def probe_only(self) -> bool:
        """A probe's output alone (capscan-probe, a JSON probe, system_profiler): it measured the device and
        ran no model, so what the run says of llama.cpp is what llama.cpp would do."""
        f = self.facts
        return not self.throughput and f.metal_era is None and (f.probe is not None or bool(f.sysprof_chipsets))

    @property
    def failed_kernels(self) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
        """Kernel checks that compiled wrong, computed wrong or never finished. A capability that was not run
        (bfloat below MSL 3.1) is no failure; two different results for one capability are a contradiction."""
        return [(cap, r, lines) for cap, r, lines in self.kernel_results if r["result"] in KERNEL_FAILURES]

    @cached_property
    def kernel_proof(self) -> list[dict[str, Any]]:
        """The strongest sign of all: the paravirtual device itself ran the kernels llama.cpp turned off
        (simdgroup reduction and matrix multiply, bfloat where the language version has it) and got the
        right answers. Empty unless both simdgroup kernels passed and none failed."""
        results = {cap: r["result"] for cap, r, _ in self.kernel_results}
        if not self.paravirtual or self.failed_kernels or any(
                results.get(cap) != "pass" for cap in ("simdgroup_reduction", "simdgroup_mm")):
            return []
        passed = [KERNEL_WORDS[cap] for cap, r in results.items() if r == "pass"]
        first = next((lines[0] for _, _, lines in self.kernel_results if lines), {"line": None, "text": ""})
        return [{"sign": "the paravirtual device ran " + ", ".join(passed) + " kernels and got the right answers "
                         "(capscan-probe --kernels)", **first, **self.cite()}]

    @cached_property
    def clamp_proof(self) -> list[dict[str, Any]]:
        """The paravirtual device's own block (or probe) reporting a family below Apple7, or its simdgroup
        flags false, as proof items (empty when no such block is shown)."""
        for b in self.readings.blocks.values():
            names = self.readings.block_names(b)
            if not any(chips.vendor(n) == "paravirtual" for n in names):
                continue
            apple = b.apple
            if apple is not None and int(apple.value) >= chips.APPLE7:  # type: ignore[arg-type]
                continue  # this block already reports the host's family (a shim or a remedied guest)
            items = []
            if apple is not None:
                items.append({"sign": f"the paravirtual device's own block reports {chips.family_name(int(apple.value))}"  # type: ignore[arg-type]
                                      " (below the Apple7 llama.cpp's simdgroup kernels need)", **self.line_of(apple),
                              **self.cite(apple)})
            no = b.supports.get(chips.APPLE7)
            if no is not None and no.value is False:
                items.append({"sign": "the paravirtual device answers supportsFamily(Apple7) = false",
                              **self.line_of(no), **self.cite(no)})
            off = [o for flag in ("simdgroup_reduction", "simdgroup_mm") for o in b.flags.get(flag, [])
                   if o.value is False]
            if off:
                items.append({"sign": "the paravirtual device's own block reports "
                                      + ", ".join(o.fact[4:].replace("_", " ") + " = false" for o in off),
                              **self.line_of(off[0]), **self.cite(off[0])})
            if items:
                return items
        if not self.facts.observations:
            return self._stored_clamp_proof()
        return []

    def _stored_clamp_proof(self) -> list[dict[str, Any]]:
        """The same reading for a run stored before observations, from its single-valued facts."""
        f = self.facts
        if not self.paravirtual or f.metal_era is None and f.probe is None:
            return []
        fam = self.apple_family
        if fam is not None and fam >= chips.APPLE7:
            return []
        off = f.capabilities.simdgroup_reduction is False or f.capabilities.simdgroup_mm is False
        if fam is None and not off:
            return []
        lines = self.lines("metal.family", "probe.family", limit=1) or self.lines("metal.flag", contains="false",
                                                                                    limit=1)
        what = chips.family_name(fam) if fam else "simdgroup flags false"
        return [{"sign": f"the paravirtual device's block reports {what}", **(lines[0] if lines else
                                                                                {"line": None, "text": ""}),
                 **self.cite()}]

    @cached_property
    def build_proof(self) -> list[dict[str, Any]]:
        """'every printed build target is arm64', when any is printed (an x86_64 one is a contrary sign)."""
        targets = self.readings.of("build.target")
        if not targets or any(chips.isa_of_target(str(o.value)) != "arm64" for o in targets):
            return []
        return [{"sign": "every build target printed is arm64 (" + ", ".join(
            dict.fromkeys(str(o.value) for o in targets)) + ")", **self.line_of(targets[0]), **self.cite(targets[0])}]

    @cached_property
    def remedy_decision(self) -> tuple[list[dict[str, Any]], str | None, list[str]]:
        """The one decision every remedy offer reads: (proof, why not, what is missing). ``proof`` is the
        closed list of positive signs, each with its line, and is non-empty only when all of them hold: the
        paravirtual device's own block shows the clamp, the guest's own evidence shows an Apple-silicon host,
        every printed build target is arm64, and no contrary sign or contradiction appears anywhere."""
        veto = self.vetoes
        if veto:
            return [], veto, ["no-contrary-sign"]
        if self.provenance != GUEST_PROCESS:
            return [], (f"these facts are {provenance_words(self.provenance, self.instance)}, not the guest's own "
                        "lines, and only those may make a run fixable"), ["guest-process"]
        if self.environment != "vm":
            if self.environment == "bare-metal":
                return [], "this run is on bare metal, where the GPU reports its real family", ["vm-guest"]
            return [], NO_VM_GUEST, ["vm-guest"]
        missing, why = [], None
        clamp, host = self.clamp_proof, self.host_proof
        if not clamp:
            missing.append("clamp")
            why = NO_CLAMP_BLOCK
        if not host:
            missing.append("host")
            why = why or NO_HOST_CHIP
        if missing:
            return [], why, missing
        proof = self.kernel_proof + clamp + host + self.build_proof
        foreign = next((p for p in proof if p["provenance"] != GUEST_PROCESS), None)
        if foreign is not None:  # only the guest's own lines may make a run fixable
            return [], (f"the proof comes from {provenance_words(foreign['provenance'], foreign.get('instance'))}, "
                        "not the guest's own lines"), ["guest-process"]
        return proof, None, []

    @property
    def apple_silicon_host(self) -> tuple[bool, str]:
        """(True, how we know) on the guest's own evidence of an Apple-silicon host and no veto; else
        (False, why not)."""
        if self.vetoes:
            return False, self.vetoes
        if self.environment != "vm":
            return False, self.remedy_decision[1] or NO_VM_GUEST
        host = self.host_proof
        return (True, host[0]["sign"]) if host else (False, NO_HOST_CHIP)

    # -- families and capabilities ------------------------------------------------
    @property
    def families(self) -> list[int]:
        return self.facts.device.families

    @property
    def apple_family(self) -> int | None:
        return self.facts.device.apple_family

    @property
    def metal_family(self) -> int | None:
        metal = [c for c in self.families if 5001 <= c <= 5999]
        return max(metal) if metal else None

    @cached_property
    def inferred(self) -> dict[str, str]:
        return self._effective()[1]

    @cached_property
    def caps(self) -> Capabilities:
        return self._effective()[0]

    def _supports(self, code: int) -> bool | None:
        """Does the device support a family, from what it printed or answered?"""
        f = self.facts
        if f.probe:
            if code in f.probe:
                return f.probe[code]
            # cumulative families: a YES for a higher member implies this one
            same = [c for c, ok in f.probe.items() if ok and c // 1000 == code // 1000 and c >= code]
            return True if same else None
        if code in APPLE_RANGE:
            if self.apple_family is not None:
                return self.apple_family >= code
            if self.family_basis == "chip":
                return (self.host_family or 0) >= code
            # M2+ eras print the highest Apple family when there is one; a block
            # with family lines but no Apple line supports none.
            return False if self._full_family_listing else None
        if 5001 <= code <= 5999:
            if self.metal_family is not None:
                return self.metal_family >= code
            return False if self._full_family_listing else None
        return None

    @property
    def family_basis(self) -> str | None:
        """Where family answers come from: the log ("printed"), or, on bare-metal
        Apple silicon that printed none (a llama-bench JSON row, say), the true
        family of the chip it names ("chip")."""
        if self.families or self.facts.probe:
            return "printed"
        if self.environment == "bare-metal" and self.vendors == {"apple"} and self.host_family:
            return "chip"
        return None

    @property
    def _full_family_listing(self) -> bool:
        # M2-and-later blocks print Common and Metal lines; the M1 era printed
        # only the Apple family, so absence means nothing there.
        return any(3001 <= c <= 3999 for c in self.families)

    def _effective(self) -> tuple[Capabilities, dict[str, str]]:
        printed = self.facts.capabilities
        caps = copy.copy(printed)
        inferred: dict[str, str] = {}
        a7, m3, a6 = self._supports(1007), self._supports(METAL3_CODE), self._supports(1006)

        def either(x: bool | None, y: bool | None) -> bool | None:
            if x or y:
                return True
            if x is False and y is False:
                return False
            return None

        rules = {
            "simdgroup_reduction": (either(a7, m3), "Apple7 or Metal3"),
            "simdgroup_mm": (a7, "Apple7"),
            "bfloat": (either(m3, a6), "Metal3 or Apple6"),
        }
        for flag, (value, why) in rules.items():
            if getattr(printed, flag) is None and value is not None:
                setattr(caps, flag, value)
                inferred[flag] = why
        return caps, inferred

    @property
    def full_caps(self) -> bool | None:
        c = self.caps
        if c.simdgroup_reduction is None or c.simdgroup_mm is None:
            return None
        return bool(c.simdgroup_reduction and c.simdgroup_mm)

    # -- runtime -------------------------------------------------------------------
    @property
    def gates_on_family(self) -> bool:
        """MLX tunes from the architecture name, not supportsFamily (mlx_lm, and ollama's MLX engine)."""
        return self.facts.program != "mlx_lm" and self.facts.backend != "mlx"

    @property
    def remedied(self) -> bool:
        f = self.facts
        if self.paravirtual and (self.apple_family or 0) > chips.PARAVIRTUAL_DEFAULT:
            return True
        # a banner is the shim's (or the image's) claim: the device's own family lines still showing the stock
        # Apple5 (or reduction printed off) say it did not take (a Tart image's agent stripped of it, a cap of 0)
        stock = self.paravirtual and ((self.apple_family or 0) in range(1001, chips.PARAVIRTUAL_DEFAULT + 1)
                                      or f.capabilities.simdgroup_reduction is False)
        return f.shim is not None and not stock

    @property
    def physical_gpus(self) -> list[str]:
        """Distinct GPU names: GGML_METAL_DEVICES's MTL0..MTL3 on one Mac are one GPU."""
        return list(dict.fromkeys(n for n in self.device_names if chips.vendor(n) not in (None, "software")))

    @property
    def gpu_offload(self) -> bool:
        f = self.facts
        if f.offload and f.offload[0] == 0:
            return False
        if f.n_gpu_layers == 0 or f.bench_devices == "none":
            return False
        return True

    def best(self) -> dict[str, float]:
        """figure -> best tok/s, per test and configuration (``tg128``, ``tg128 [threads=8]``: see
        model.figure_key; compare with another run through model.like_pairs). Only real rates:
        '0.00 t/s', inf and NaN are not measurements (and a zero would divide every ratio and
        per-token cost)."""
        out: dict[str, float] = {}
        for t in self.throughput:
            v = t["tok_s"]
            if v is not None and 0 < v < math.inf:
                key = figure_key(t["test"], t.get("config"))
                out[key] = max(out.get(key, 0.0), v)
        return out

    @cached_property
    def bandwidth_ceiling(self) -> tuple[float, str] | None:
        """Token generation reads every weight once per token: the host chip's published bandwidth over
        the model's size is a ceiling no run passes (tok/s, and its basis in words). Only for a guest on a
        named chip, with a model too large to sit in the chip's caches. An estimate, never a baseline."""
        chip, size = self.host_chip, self.facts.model_size_bytes
        bandwidth = chips.bandwidth_gbs(chip)
        if self.environment != "vm" or bandwidth is None or not size or size < REFERENCE_MIN_BYTES:
            return None
        return bandwidth * 1e9 / size, f"{chip} {bandwidth:g} GB/s / model {size / 1e9:.2f} GB"

    @cached_property
    def published_bare_metal(self) -> tuple[str, dict[str, float]] | None:
        """llama.cpp's own benchmark (Llama 2 7B Q4_0) has published bare-metal results per chip: a guest
        that ran exactly it on a named chip gets them ({'pp512': .., 'tg128': ..}, and the chip's row in
        words). The model is matched by its quantization and its file size, which names it to within 1%."""
        f, chip = self.facts, self.host_chip
        row = chips.published_7b_q4_0(chip)
        name = " ".join(filter(None, (f.model, f.quant)))
        if self.environment != "vm" or row is None or "Q4_0" not in name.upper() or not f.model_size_bytes:
            return None
        if abs(f.model_size_bytes / LLAMA2_7B_Q4_0_BYTES - 1) > 0.01:
            return None
        cores, pp512, tg128 = row
        return f"{chips.apple_chip(chip)} ({cores}-core GPU)", {"pp512": pp512, "tg128": tg128}

    @cached_property
    def generation_share(self) -> tuple[str, float, float] | None:
        """(figure, tok/s, share of the bandwidth ceiling) of the run's fastest token-generation figure,
        when its speed can stand for the capabilities nothing printed: a paravirtual Metal guest of a
        runtime that gates on the family, every layer on the GPU, no capability block, no shim. The
        fallback kernels of a clamped guest and the fast ones are an order of magnitude apart."""
        f = self.facts
        ceiling = self.bandwidth_ceiling
        if ceiling is None or not (self.is_metal and self.paravirtual and self.gates_on_family):
            return None
        if self.full_caps is not None or f.probe or f.shim is not None or f.capabilities.simdgroup_reduction is not None:
            return None
        if (f.n_gpu_layers is not None and 0 <= f.n_gpu_layers < 99) or (f.offload and f.offload[0] < f.offload[1]):
            return None  # some layers on the CPU: the speed says nothing of the kernels
        gen = [(k, v) for k, v in self.best().items()
               if (figure_parts(k)[0].startswith("tg") and "@" not in k) or figure_parts(k)[0] == "generation"]
        if not gen:
            return None
        key, tok_s = max(gen, key=lambda kv: kv[1])
        return key, tok_s, tok_s / ceiling[0]

    @property
    def mixture_of_experts(self) -> bool:
        """A mixture-of-experts model reads only its active experts per token: its share of a ceiling
        computed from the whole file is too high, by the inverse of the active fraction."""
        name = " ".join(filter(None, (self.facts.model, self.facts.quant)))
        return bool(_MOE.search(name))

    def figure_name(self, key: str) -> str:
        """A figure as a person reads it: the bare test (``tg128``) when the run has no other figure of that
        test, else the test with its configuration (``tg128 [threads=8]``)."""
        test = figure_parts(key)[0]
        same = [k for k in self.best() if figure_parts(k)[0] == test]
        return test if len(same) <= 1 else key

    def peer(self) -> Peer:
        return Peer(id=self.id, environment=self.environment, full_caps=self.full_caps, host_family=self.host_family,
                    remedied=self.remedied, model=self.facts.model, backend=self.facts.backend,
                    gpu_offload=self.gpu_offload, throughput=self.best(), host_chip=self.host_chip,
                    quant=self.facts.quant, build=self.facts.build_commit, created_at=self.created_at)


METAL3_CODE = chips.METAL3
# A model this small may sit in the chip's caches: the bandwidth ceiling says nothing about it.
REFERENCE_MIN_BYTES = 256 * 2**20
LLAMA2_7B_Q4_0_BYTES = 3_825_065_984  # llama-bench's model_size of Llama 2 7B Q4_0 (3.56 GiB)
# build targets of other systems than macOS (common_init's 'for x86_64-linux-gnu', MSVC's 'x64')
_OTHER_TARGETS = ("linux", "windows", "mingw", "msvc", "win64", "win32", "android")
_NON_MAC_BACKENDS = frozenset({"CUDA", "ROCM", "HIP", "MUSA", "SYCL", "CANN", "OPENCL", "ZDNN"})
_NON_MAC_CPU = re.compile(r"\bAMD (?:Ryzen|EPYC|Athlon)|Threadripper|\bQualcomm|\bSnapdragon|\bCortex-A", re.IGNORECASE)
_MOE = re.compile(r"moe|\bA\d+(?:\.\d+)?B\b|\d+x\d+B|experts", re.IGNORECASE)
