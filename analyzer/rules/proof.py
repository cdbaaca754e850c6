"""Whether a run may be called fixable: the contrary signs and contradictions that veto it, the proof
items (the clamp the paravirtual device's own block shows, the guest's own evidence of an Apple-silicon
host, the kernels it ran, its arm64 build) and the one decision every remedy offer reads,
``remedy_decision``. A false "fixable" is the worst bug capscan can ship: all of it lives here, and
tests/rules/test_proof.py tests it beside the other fixable tests in tests/rules/."""

from __future__ import annotations

from functools import cached_property
from typing import Any

from analyzer import chips
from analyzer.model import GUEST_PROCESS, provenance_words
from analyzer.rules.environment import EnvironmentView
from analyzer.rules.observed import Block, word
from analyzer.verdicts import NO_CLAMP_BLOCK, NO_HOST_CHIP, NO_VM_GUEST

# capscan-probe --kernels checks, in llama.cpp's order, with their names in words
KERNEL_WORDS = {cap: chips.METAL_FLAG[cap].words for cap in chips.KERNEL_FLAGS}
# wrong numbers, or the compiler refusing the construct: facts about the GPU/driver that veto fixable. A crash or
# a timeout of the check process says the check could not run: neither veto nor proof.
KERNEL_FAILURES = ("fail", "compile-error")
KERNEL_COULD_NOT_RUN = ("crash", "timeout")


def kernel_failure(cap: str, result: dict[str, Any]) -> str:
    """A failed kernel check in words, the same for the finding, the veto and the remedy's refusal:
    'the GPU behind this VM cannot compile the bfloat kernel (compile-error: program_source:...)'."""
    name = KERNEL_WORDS[cap]
    what = {"fail": f"does not run {name} correctly",
            "compile-error": f"cannot compile the {name} kernel"}[result["result"]]  # one of KERNEL_FAILURES
    message = result.get("message")
    return f"the GPU behind this VM {what} ({result['result']}{': ' + message if message else ''})"


class ProofView(EnvironmentView):
    """Everything that may veto or prove 'fixable': it reads the facts and the environment, nothing above."""

    # -- contrary signs --------------------------------------------------------------------------
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

    # -- contradictions and vetoes ---------------------------------------------------------------
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

    @cached_property
    def vetoes(self) -> str | None:
        """Why nothing in this run may be remedied whatever else it shows: a contradiction or a contrary sign
        anywhere in it (the first one, in words), else None."""
        if self.contradictions:
            return "the run's evidence contradicts itself: " + self.contradictions[0][0]
        if self.contrary_signs:
            return self.contrary_signs[0][0]
        return None

    # -- the proof -------------------------------------------------------------------------------
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

    @property
    def failed_kernels(self) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
        """Kernel checks that did not compile or computed wrong. A capability that was not run (bfloat below
        MSL 3.1), or whose check could not run (crash, timeout), is no failure; two different results for one
        capability are a contradiction."""
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
