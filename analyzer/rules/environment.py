"""Where a run ran: the platform its log shows, the signs of a VM guest or of bare metal, the host chip
(only the guest's own lines name a guest's host) and an Intel host. Each reading is None (or empty) when
the log does not say."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any

from analyzer import chips
from analyzer.rules.facts import FactsView


class EnvironmentView(FactsView):
    """Where the run ran, read from the facts and lines below."""

    # -- platform --------------------------------------------------------------------------------
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

    # -- VM guest or bare metal ------------------------------------------------------------------
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

    # -- host chip -------------------------------------------------------------------------------
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
            if self.intel_cpus:
                # an Intel Mac: its chip is the processor it names, never its AMD or Intel GPU (issue 41)
                return self.intel_cpus[0].strip(), "the processor the Mac names"
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


# build targets of other systems than macOS (common_init's 'for x86_64-linux-gnu', MSVC's 'x64')
_OTHER_TARGETS = ("linux", "windows", "mingw", "msvc", "win64", "win32", "android")
_NON_MAC_BACKENDS = frozenset({"CUDA", "ROCM", "HIP", "MUSA", "SYCL", "CANN", "OPENCL", "ZDNN"})
_NON_MAC_CPU = re.compile(r"\bAMD (?:Ryzen|EPYC|Athlon)|Threadripper|\bQualcomm|\bSnapdragon|\bCortex-A", re.IGNORECASE)
