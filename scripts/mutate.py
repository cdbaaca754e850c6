#!/usr/bin/env python3
"""A targeted mutation run over capscan's "fixable" path (issue 21, item 7): `make mutate`.

Each mutant is data: a file, an exact snippet of it (which must occur exactly once), its replacement,
and what the change means. Every one is of the unsafe class: a change that could let capscan call a
capability downgrade fixable (or offer a remedy) when the log shows an Intel/AMD Mac GPU, an x86_64
build, a non-Apple host or two machines' lines. The harness copies the tree once to a scratch folder,
applies one mutant at a time there (the tree it was started from is never written), runs a short
targeted pytest subset (-x: the first failing test kills the mutant), restores the file, and prints
killed/survived per mutant and the score. A mutant whose snippet is missing or not unique stops the run
(a stale mutant is a bug in this list); tests/test_mutants_declared.py checks that in CI.

An *equivalent* mutant (one no input can tell from the real code) says why in ``equivalent``; it is
still run and shown, but does not count in the score.

    python scripts/mutate.py                 # every mutant
    python scripts/mutate.py --list          # the list, nothing run
    python scripts/mutate.py ID [ID ...]     # only these
    python scripts/mutate.py --check         # only check the snippets (what the CI test does)
    python scripts/mutate.py ID --tests tests/rules/test_mutation_kills.py   # does a new test kill it?
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The tests that guard the fixable path, run with -x, the quickest to fail first. DESELECT leaves out what
# CI runs anyway but a mutation run should not lean on: the exhaustive 992-pair test of the bundled logs (about
# two minutes alone) and the two hypothesis properties (random examples: a mutant they happen to catch is not
# a kill by a named log). A mutant must die by a short deterministic log.
TESTS = (
    "tests/rules/test_mutation_kills.py",
    "tests/rules/test_fixable_proof.py",
    "tests/rules/test_rules.py",
    "tests/rules/test_shapes.py",
    "tests/rules/test_never_fixable.py",
    "tests/rules/test_fixable_needs_vm_and_apple_host.py",
    "tests/rules/test_same_process_signs.py",
)
DESELECT = ("not test_two_logs_pasted_together_are_never_more_fixable_than_each_alone"
            " and not test_amd_intel_and_intel_hosted_vms_are_never_fixable"
            " and not test_a_run_with_a_non_apple_sign_or_no_vm_evidence_is_never_fixable")
TIMEOUT_S = 180  # per mutant: a mutant that hangs the tests counts as killed ("timeout")


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str  # relative to the repository root
    old: str  # exact snippet: must occur exactly once in the file
    new: str
    why: str  # what the mutant means, in words
    equivalent: str | None = None  # why no input can tell it from the real code (then not scored)


PR, EN, O, E, C, P = ("analyzer/rules/proof.py", "analyzer/rules/environment.py", "analyzer/rules/observed.py",
                      "analyzer/rules/engine.py", "analyzer/rules/catalog.py", "analyzer/remedy/plan.py")

MUTANTS: tuple[Mutant, ...] = (
    # -- rules/observed.py: the one contradiction rule and COMPATIBLE -----------------------------------
    Mutant("obs-kinds-always-coexist", O, "return any(a.value in g and b.value in g for g in _KIND_GROUPS)",
           "return True", "COMPATIBLE widened: every two kinds of GPU coexist (paravirtual beside non-apple)"),
    Mutant("obs-kind-groups-paravirtual-with-intel", O, 'frozenset({"amd", "intel", "nvidia", "non-apple"}),',
           'frozenset({"amd", "intel", "nvidia", "non-apple", "paravirtual"}),',
           "COMPATIBLE widened: a paravirtual device and an Intel-Mac GPU coexist in one process"),
    Mutant("obs-kind-groups-paravirtual-with-apple", O, 'frozenset({"apple"}),\n    frozenset({"paravirtual"}),',
           'frozenset({"apple", "paravirtual"}),',
           "COMPATIBLE widened: a paravirtual device and a bare-metal Apple GPU coexist in one process"),
    Mutant("obs-memories-any-list", O,
           "return a.kind in LIST_KINDS and b.kind in LIST_KINDS and a.subject != b.subject",
           "return a.kind in LIST_KINDS or b.kind in LIST_KINDS",
           "COMPATIBLE widened: a Vulkan list's uma: 0 coexists with a Metal block's unified memory = true"),
    Mutant("obs-memories-same-subject", O,
           "return a.kind in LIST_KINDS and b.kind in LIST_KINDS and a.subject != b.subject",
           "return a.kind in LIST_KINDS and b.kind in LIST_KINDS",
           "COMPATIBLE widened: one listed device may have unified memory and not",
           equivalent="for fixable and remedies: two unified-memory values always include false, which is a "
                      "contrary sign of its own (view.contrary_signs) and vetoes; the contradiction adds only words"),
    Mutant("obs-flags-always-coexist", O,
           "return a.subject != b.subject and (a.kind in LIST_KINDS or b.kind in LIST_KINDS)", "return True",
           "COMPATIBLE widened: bfloat true and false coexist for one device",
           equivalent="for fixable and remedies: the decision never reads bfloat (clamp_proof reads the family and "
                      "the simdgroup flags); a paravirtual block reports bfloat true only at Apple6 or Metal3, and "
                      "then it is remedied (family above Apple5) or the Apple5+Metal3 family check fires"),
    Mutant("obs-compatible-isa", O, '"gpu.bfloat": (_flags_coexist, "a list entry\'s flag describes that entry only"),',
           '"gpu.bfloat": (_flags_coexist, "a list entry\'s flag describes that entry only"),\n'
           '    "process.isa": (lambda a, b: True, "mutant"),',
           "COMPATIBLE widened: an x86_64 and an arm64 instruction set coexist in one process",
           equivalent="for fixable and remedies: every x86_64 reading of process.isa comes with a contrary sign "
                      "that vetoes on its own (an x86_64 build target, or x86 CPU features in system_info)"),
    Mutant("obs-compatible-unified-memory", O,
           '"gpu.unified_memory": (_memories_coexist, "a device list names several GPUs, each with its own memory"),',
           '"gpu.unified_memory": (lambda a, b: True, "mutant"),',
           "COMPATIBLE widened: unified memory true and false always coexist"),
    Mutant("obs-compatible-simdgroup", O,
           '"gpu.bfloat": (_flags_coexist, "a list entry\'s flag describes that entry only"),',
           '"gpu.bfloat": (_flags_coexist, "a list entry\'s flag describes that entry only"),\n'
           '    "gpu.simdgroup_reduction": (lambda a, b: True, "mutant"),\n'
           '    "gpu.simdgroup_mm": (lambda a, b: True, "mutant"),',
           "COMPATIBLE widened: simdgroup flags printed true and false coexist",
           equivalent="for fixable and remedies: a block printing simdgroup true reports Apple7 or above (the run "
                      "is then remedied, no clamp), or Metal3 and no Apple family (a non-Apple block, a contrary "
                      "sign), or comes with a shim (remedied): the same runs are refused without the contradiction"),
    Mutant("obs-multi-valued-isa", O, 'MULTI_VALUED = frozenset({"gpu.name",',
           'MULTI_VALUED = frozenset({"process.isa", "gpu.name",',
           "the process's instruction set may hold any number of values",
           equivalent="for fixable and remedies: every x86_64 reading of process.isa comes with a contrary sign "
                      "that vetoes on its own (an x86_64 build target, or x86 CPU features in system_info)"),
    Mutant("obs-no-kind-contradiction", O, '        facts["gpu.kind"] = self.kinds\n', "",
           "the kinds of GPU are not checked for contradictions"),
    Mutant("obs-no-host-chip-contradiction", O, '        facts["host.chip"] = self.host_chips\n', "",
           "two host chips (an Apple M2 and an Intel CPU) are not a contradiction"),
    Mutant("obs-uncompatible-facts-coexist", O, "(coexist is not None and coexist(a, b))",
           "(coexist is None or coexist(a, b))",
           "contradiction check removed for every fact not named in COMPATIBLE"),
    Mutant("obs-apple5-metal3-threshold", O, "int(apple.value or 0) < 1006", "int(apple.value or 0) < 1005",
           "a block reporting Apple5 beside Metal3 is no longer a contradiction"),
    Mutant("obs-no-non-apple-kind", O, "            if m is not None and b.apple is None:\n                out.append(",
           "            if False:\n                out.append(",
           "a block with Metal3 and no Apple family no longer observes kind 'non-apple'"),
    Mutant("obs-no-driver-kind", O,
           'out.append(Observation(fact="gpu.kind", value="apple", line=o.line, kind=o.kind, subject=o.subject))',
           "pass", "an AGX driver error no longer observes kind 'apple'",
           equivalent="for fixable and remedies: the same AGX error is a bare-metal sign (view.bare_metal_signs), "
                      "and every run that could be fixable shows a paravirtual device (a VM sign), so the VM-and-"
                      "bare-metal contradiction vetoes the same runs (removing both is killed by "
                      "test_a_guest_block_beside_a_bare_metal_agx_error_is_not_fixable)"),
    Mutant("obs-no-intel-host-chip", O, ' or ("Intel" if chips.is_intel_cpu(str(o.value)) else None)', "",
           "an Intel CPU named as the host is not a host chip, so no contradiction with an Apple chip",
           equivalent="for fixable and remedies: an Intel CPU reaches host.cpu only from a named processor "
                      "(view.intel_cpus) or llama-bench's cpu_info, each a contrary sign that vetoes; a Chip: line "
                      "names only Apple silicon"),
    # -- rules/proof.py: contrary signs (ids keep RunView's 'view-' prefix) ---------------------------
    Mutant("view-contrary-no-intel-gpu-name", PR,
           'if chips.vendor(name) in ("amd", "intel", "nvidia"):\n                signs.append((f"the log names an Intel-Mac',
           'if chips.vendor(name) in ():\n                signs.append((f"the log names an Intel-Mac',
           "contrary sign removed: a named AMD/Intel/NVIDIA GPU",
           equivalent='for fixable and remedies: every line naming an AMD/Intel/NVIDIA GPU is a gpu.name observation of that kind, and a fixable run (or the gave-up app) always shows a paravirtual device, so the kinds contradiction vetoes the same runs'),
    Mutant("view-contrary-no-intel-cpu-info", PR, "        if chips.is_intel_cpu(f.cpu_info):\n            signs.append(",
           "        if False:\n            signs.append(", "contrary sign removed: llama-bench's cpu_info names an Intel CPU",
           equivalent="for fixable and remedies: an Intel cpu_info in a VM guest is view.intel_host, so the "
                      "intel-host-vm hardware limit decides the verdict (ahead of a downgrade or the gave-up app's "
                      "no-gpu-offload); outside a VM nothing is remedied anyway"),
    Mutant("view-contrary-no-intel-processor", PR, "        for cpu in self.intel_cpus:\n            signs.append(",
           "        for cpu in []:\n            signs.append(", "contrary sign removed: an Intel processor named",
           equivalent='for fixable and remedies: a named Intel processor makes view.intel_host in a VM guest (the intel-host-vm hardware limit decides), and outside a VM nothing is remedied'),
    Mutant("view-contrary-no-x86-features", PR, "        if f.x86_cpu_features:\n", "        if False:\n",
           "contrary sign removed: x86 CPU features in system_info"),
    Mutant("view-contrary-no-non-apple-block", PR, "        if non_apple:\n", "        if False:\n",
           "contrary sign removed: a Metal block with Metal3 and no Apple family",
           equivalent="for fixable and remedies: such a block observes kind 'non-apple', and a fixable run always shows a paravirtual device, so the kinds contradiction vetoes the same runs"),
    Mutant("view-contrary-no-unified-memory-obs", PR,
           'no_uma = [o for o in self.readings.of("gpu.unified_memory") if o.value is False]', "no_uma = []",
           "contrary sign narrowed: an observed 'no unified memory' is ignored (the single-valued fact still counts)"),
    Mutant("view-contrary-no-unified-memory", PR,
           '        if no_uma or self.saw_value("unified_memory", False):\n',
           "        if False:\n", "contrary sign removed: no unified memory"),
    Mutant("view-contrary-no-x86-target", PR,
           'if targets or (not self.facts.observations and (f.build_target or "").startswith("x86_64")):',
           'if (not self.facts.observations and (f.build_target or "").startswith("x86_64")):',
           "contrary sign removed: an x86_64 build target"),
    Mutant("view-non-apple-blocks-none", PR, "if b.metal is not None and b.apple is None]",
           "if b.metal is not None and b.apple is not None]",
           "a Metal block with Metal3 and no Apple family is not a non-Apple block",
           equivalent="for fixable and remedies: the block still observes kind 'non-apple' (observed.Readings.kinds reads the blocks itself), which contradicts the paravirtual device every fixable run shows"),
    # -- rules/proof.py (contradictions, vetoes), rules/environment.py (environment, host chip) ---------
    Mutant("view-no-readings-contradictions", PR, "for what, a, b in self.readings.contradictions():",
           "for what, a, b in []:", "the generic contradiction rule is not consulted"),
    Mutant("view-no-vm-and-bare-metal", PR, "        if self.vm_signs and self.bare_metal_signs:\n",
           "        if False:\n", "a VM guest and bare metal in one run is not a contradiction",
           equivalent="for fixable and remedies: a run with VM and bare-metal signs has environment None, and remedy_decision and the gave-up app's remedy both need environment 'vm'"),
    Mutant("view-no-venus-metal", PR, '        if "venus" in self.vendors and metal_output:\n',
           "        if False:\n", "a Linux guest's Venus device beside Metal output is not a contradiction",
           equivalent="for fixable and remedies: a Venus device is a gpu.name of kind 'venus', which contradicts the paravirtual device every fixable run (and the gave-up app) shows"),
    Mutant("view-bare-no-physical-gpu", EN, "        if physical:\n            signs.append((f\"a physical GPU",
           "        if False:\n            signs.append((f\"a physical GPU",
           "bare-metal sign removed: a physical GPU named (an A12Z DTK is no longer bare metal, so no hardware "
           "limit)"),
    Mutant("view-bare-no-agx", EN, "        if f.agx_domain:\n", "        if False:\n",
           "bare-metal sign removed: Apple's AGX driver answered",
           equivalent="for fixable and remedies: the AGX error also observes kind 'apple' (gpu.driver), which contradicts the paravirtual device every fixable run shows (removing both is killed by test_a_guest_block_beside_a_bare_metal_agx_error_is_not_fixable)"),
    Mutant("view-bare-no-hardware-overview", EN, "        if self._hardware_overview_virtual is False:\n",
           "        if False:\n", "bare-metal sign removed: a Hardware Overview naming a plain chip"),
    Mutant("view-bare-no-plain-apple-cpu", EN, "        plain = self._plain_apple_cpu\n        if plain is not None:\n",
           "        plain = self._plain_apple_cpu\n        if False:\n",
           "bare-metal sign removed: a brand string, cpu_info or CPU column naming an Apple chip without (Virtual)"),
    Mutant("view-host-chip-any-provenance", EN, "if chip and (said is None or text in said):", "if chip:",
           "host chip read from any machine's lines (a compare table's CPU column), not only the guest's own"),
    Mutant("view-bare-family-threshold", EN, "never = [c for c in self.families if 1006 <= c <= 1999",
           "never = [c for c in self.families if 1007 <= c <= 1999",
           "bare-metal sign narrowed: an unnamed device reporting Apple6 no longer shows bare metal",
           equivalent="for fixable and remedies: that sign counts only when no paravirtual device is shown, and clamp_proof needs a paravirtual device's own block"),
    Mutant("view-environment-vm-wins", EN, "        if vm and not bare:\n", "        if vm:\n",
           "a run showing a VM guest and bare metal is read as a VM",
           equivalent='for fixable and remedies: a run with VM and bare-metal signs is the VM-and-bare-metal contradiction, which vetoes whatever the environment reads'),
    Mutant("view-intel-host-no-cpu", EN, "        if chips.is_intel_cpu(f.cpu_info) or self.intel_cpus:\n            return True\n",
           "", "intel_host no longer reads an Intel CPU (an Intel-hosted guest's limit called a downgrade)"),
    Mutant("view-intel-host-no-uma", EN,
           'return self.paravirtual and f.device.unified_memory is False and not self.saw_value("unified_memory", True)',
           "return False", "intel_host no longer reads a paravirtual device without unified memory (an Intel-hosted "
           "guest's limit called a downgrade)"),
    Mutant("view-veto-no-contradictions", PR,
           '        if self.contradictions:\n            return "the run\'s evidence contradicts itself: "',
           '        if False:\n            return "the run\'s evidence contradicts itself: "',
           "a contradiction no longer vetoes"),
    Mutant("view-veto-no-contrary-signs", PR, "        if self.contrary_signs:\n            return self.contrary_signs[0][0]",
           "        if False:\n            return self.contrary_signs[0][0]", "a contrary sign no longer vetoes"),
    # -- rules/proof.py: the proof -----------------------------------------------------------------------
    Mutant("view-host-proof-any-environment", PR,
           '        if self.environment != "vm":\n            return []\n        if self.host_family is not None:',
           "        if self.host_family is not None:", "host proof read on runs not shown to be a VM guest",
           equivalent="for fixable and remedies: host_proof is read only after remedy_decision's environment check and in the gave-up app's branch, which checks environment 'vm' first"),
    Mutant("view-host-proof-unified-memory", PR,
           '**self.line_of(mac[0]), **self.cite(mac[0])}])\n        return []',
           '**self.line_of(mac[0]), **self.cite(mac[0])}])\n        if self.facts.device.unified_memory:\n'
           '            return [{"sign": "unified memory", "line": None, "text": "", "provenance": "guest-process"}]\n'
           '        return []',
           "host proof widened: unified memory accepted as proof of an Apple-silicon host"),
    Mutant("view-host-proof-any-build", PR, 'if chips.isa_of_target(str(o.value)) == "arm64"\n',
           'if chips.isa_of_target(str(o.value)) is not None\n',
           "host proof widened: any build target (x86_64, riscv64 too) accepted as the guest being arm64",
           equivalent="the target must still be a macOS one (os_of_target == 'darwin'), and an x86_64 macOS target "
                      "is a contrary sign; no llama.cpp build targets another macOS ISA (powerpc-apple-darwin)"),
    Mutant("view-host-proof-any-os", PR, '                       and chips.os_of_target(str(o.value)) == "darwin"\n',
           '\n',
           "host proof widened: an aarch64 Linux build target accepted as an arm64 macOS guest"),
    Mutant("view-host-proof-arm-features-anywhere", PR, "        if mac and self.is_metal:\n",
           "        if mac:\n", "host proof widened: Arm CPU features accepted in a process not shown to be macOS",
           equivalent="process.arm64_macos is observed only from a system_info line that itself shows Accelerate or "
                      "Metal (runs-system-arm-features-any-os guards that): the is_metal check is a second guard"),
    Mutant("runs-system-arm-features-any-os", "analyzer/runs/system.py",
           '        if on & {"ACCELERATE", "METAL"} or any(', '        if on or any(',
           "host proof widened: NEON/ARM_FMA without Accelerate or Metal read as an arm64 macOS process"),
    Mutant("view-host-proof-intel-chip", PR, "        if self.host_family is not None:\n            named =",
           "        if self.host_chip is not None:\n            named =",
           "host proof widened: a host chip capscan cannot place (no known family: an M6, an A20) accepted"),
    Mutant("view-clamp-any-block", PR,
           '            if not any(chips.vendor(n) == "paravirtual" for n in names):\n                continue\n', "",
           "clamp proof read from any block, not only the paravirtual device's own"),
    Mutant("view-clamp-apple7-counts", PR, "int(apple.value) >= chips.APPLE7:", "int(apple.value) > chips.APPLE7:",
           "clamp proof threshold moved: a block reporting Apple7 counts as clamped",
           equivalent='for fixable and remedies: a paravirtual block reporting Apple7 makes the run remedied (family above Apple5), so no downgrade verdict reads the clamp'),
    Mutant("view-decision-no-veto", PR, "        veto = self.vetoes\n        if veto:\n",
           "        veto = self.vetoes\n        if False:\n", "remedy_decision ignores vetoes"),
    Mutant("view-decision-unknown-environment", PR,
           '        if self.environment != "vm":\n            if self.environment == "bare-metal":',
           '        if self.environment == "bare-metal":\n            if self.environment == "bare-metal":',
           "remedy_decision accepts a run whose environment is not shown",
           equivalent='for fixable and remedies: a fixable run shows a paravirtual device (a VM sign), so environment None means a bare-metal sign too, and that contradiction has vetoed first'),
    Mutant("view-decision-no-host-needed", PR, "        if not host:\n            missing.append(\"host\")",
           "        if False:\n            missing.append(\"host\")", "remedy_decision no longer needs the host's proof"),
    Mutant("view-decision-no-clamp-needed", PR, "        if not clamp:\n            missing.append(\"clamp\")",
           "        if False:\n            missing.append(\"clamp\")", "remedy_decision no longer needs the clamp proof"),
    # -- rules/engine.py: precedence and the decision -------------------------------------------------------
    Mutant("engine-downgrade-before-no-offload", E,
           '_PRECEDENCE = ("hardware-limit", "no-gpu-offload", "capability-downgrade",',
           '_PRECEDENCE = ("hardware-limit", "capability-downgrade", "no-gpu-offload",',
           "precedence swapped: capability-downgrade ahead of no-gpu-offload"),
    Mutant("engine-downgrade-before-hardware-limit", E,
           '_PRECEDENCE = ("hardware-limit", "no-gpu-offload", "capability-downgrade",',
           '_PRECEDENCE = ("capability-downgrade", "hardware-limit", "no-gpu-offload",',
           "precedence swapped: capability-downgrade ahead of hardware-limit",
           equivalent="for fixable and remedies: the engine's hardware-limit check then refuses the downgrade (proof_missing no-hardware-limit), and refusal_for reads only fixable"),
    Mutant("engine-hardware-limit-no-veto", E, '        if "hardware-limit" in fired:\n', "        if False:\n",
           "a hardware-limit finding no longer vetoes a downgrade's fixable",
           equivalent='hardware-limit is first in _PRECEDENCE, so the verdict is never capability-downgrade when a hardware-limit rule fired: the check is unreachable'),
    Mutant("engine-mlx-not-gated", E, "        elif not view.gates_on_family:\n", "        elif False:\n",
           "MLX (which does not gate on the family) may be fixable"),
    Mutant("engine-next-remedy-without-fixable", E,
           '    if verdict == "capability-downgrade" and fixable:\n        why = (',
           '    if verdict == "capability-downgrade":\n        why = (',
           "next_steps offers `remedy run` for any downgrade, fixable or not"),
    # (the gave-up app's next step is the wrapper-disabled-gpu rule's own, in rules/catalog.py since issue 28)
    Mutant("engine-wrapper-remedy-despite-veto", C, "    if v.vetoes is None and v.host_proof:\n",
           "    if v.host_proof:\n", "the gave-up app's remedy offered despite a veto"),
    Mutant("engine-wrapper-remedy-without-host", C, "    if v.vetoes is None and v.host_proof:\n",
           "    if v.vetoes is None:\n", "the gave-up app's remedy offered without the host's proof"),
    # -- rules/catalog.py: hardware-limit and no-gpu-offload --------------------------------------------------
    Mutant("catalog-mac-discrete-no-intel", C, 'MAC_DISCRETE = frozenset({"amd", "intel", "nvidia"})',
           'MAC_DISCRETE = frozenset({"amd", "nvidia"})', "an Intel GPU is no longer a Mac discrete/iGPU hardware limit",
           equivalent='for fixable and remedies: a named Intel GPU is a contrary sign (view.contrary_signs) and a kind that contradicts the paravirtual device'),
    Mutant("catalog-no-unnamed-non-apple", C, "    if v.unnamed_non_apple_gpu:\n        return finding(",
           "    if False:\n        return finding(", "an unnamed Metal3-without-Apple device is no hardware limit",
           equivalent='for fixable and remedies: the same block is a non-Apple block (view.non_apple_blocks), a contrary sign that vetoes'),
    Mutant("catalog-intel-host-vm-off", C, "    if not v.intel_host:\n        return None\n",
           "    return None\n", "the Intel-host VM hardware limit never fires",
           equivalent='for fixable and remedies: each way to intel_host (an Intel CPU, no unified memory) is a contrary sign that vetoes'),
    Mutant("catalog-zero-layers-off", C, "    if f.offload and f.offload[0] == 0 and f.offload[1] > 0:\n",
           "    if False:\n", "'offloaded 0/N layers' no longer decides no-gpu-offload"),
    Mutant("catalog-ngl0-off", C, "    if f.n_gpu_layers == 0:\n        if f.wrapper_virtualised:",
           "    if False:\n        if f.wrapper_virtualised:", "n_gpu_layers = 0 no longer decides no-gpu-offload"),
    Mutant("catalog-x86-no-metal-off", C,
           '    if x86 and not v.device_names and f.metal_era is None and v.apple_silicon_signs and not v.intel_mac_signs:\n',
           "    if False:\n", "an x86_64 macOS build with no Metal device no longer decides no-gpu-offload",
           equivalent='for fixable and remedies: the x86_64 target is itself a contrary sign that vetoes'),
    Mutant("catalog-clamp-threshold", C, "below = v.apple_family is None or v.apple_family < chips.APPLE7",
           "below = v.apple_family is None or v.apple_family <= chips.APPLE7",
           "family threshold moved: '< 1007' -> '<= 1007' (a guest reporting Apple7 is clamped)",
           equivalent='for fixable and remedies: a paravirtual device reporting Apple7 is remedied (family above Apple5), so the clamp rule has returned before the threshold'),
    Mutant("catalog-clamp-not-paravirtual", C, "    if not v.is_metal or not v.paravirtual or v.remedied:\n",
           "    if not v.is_metal or v.remedied:\n", "the clamp rule fires on a device not shown to be paravirtual",
           equivalent='for fixable and remedies: the verdict may become a downgrade, but clamp_proof reads only a block naming the paravirtual device, so without one nothing is fixable'),
    Mutant("catalog-symptoms-despite-intel-gpu", C, "    if MAC_DISCRETE & v.vendors or v.environment != \"vm\":\n"
           "        return None  # the same symptoms",
           "    if v.environment != \"vm\":\n        return None  # the same symptoms",
           "downgrade symptoms read as a clamp beside a named Intel-Mac GPU",
           equivalent='for fixable and remedies: a named Intel-Mac GPU is a contrary sign that vetoes, and the symptoms verdict has no clamp proof anyway'),
    # -- chips.py: the family threshold itself -----------------------------------------------------------------
    Mutant("chips-apple7-is-1006", "analyzer/chips.py", "APPLE7 = 1007  #", "APPLE7 = 1006  #",
           "family threshold moved: APPLE7 -> 1006"),
    Mutant("chips-apple7-is-1008", "analyzer/chips.py", "APPLE7 = 1007  #", "APPLE7 = 1008  #",
           "family threshold moved: APPLE7 -> 1008"),
    # -- remedy/plan.py: the remedy's own refusal ---------------------------------------------------------------
    Mutant("plan-any-downgrade", P,
           '    if verdict == "capability-downgrade" and (diag.fixable or live):\n',
           '    if verdict == "capability-downgrade":\n', "remedy plan acts on any downgrade, fixable or not"),
    Mutant("plan-live-despite-veto", P, 'and diag.proof_missing == ["host"]:',
           'and "no-contrary-sign" not in diag.proof_missing:',
           "the live machine's proof stands in for more than the missing host (a vetoed or unclamped run)"),
    Mutant("plan-live-intel-brand", P, "    if chip and not chips.is_intel_cpu(brand):\n", "    if chip:\n",
           "live host proof: a brand string naming an Apple chip and an Intel CPU accepted",
           equivalent="chips.is_intel_cpu(brand) is False whenever the brand names an Apple chip (it excludes "
                      "_APPLE_CHIP matches), and chip is set exactly then: the guard is redundant"),
    Mutant("plan-live-arm-any-brand", P,
           '    if plat.machine() == "arm64" and not (brand and chips.is_intel_cpu(brand)):\n',
           '    if plat.machine() == "arm64":\n', "live host proof: arm64 accepted beside an Intel brand string"),
    # -- runs/*.py: the observations themselves -------------------------------------------------------------------
    Mutant("runs-metal-no-family-obs", "analyzer/runs/metal.py",
           '    run.observe("gpu.family", ev.data["code"], ev, subject=run.gpu.block_device)\n', "",
           "a Metal block's family lines are not observed"),
    Mutant("runs-metal-no-flag-obs", "analyzer/runs/metal.py",
           '        run.observe(f"gpu.{flag}", value, ev, subject=run.gpu.block_device)\n', "        pass\n",
           "a Metal block's flags (unified memory too) are not observed"),
    Mutant("runs-metal-no-name-obs", "analyzer/runs/metal.py",
           "        run.saw_device(name)\n        run.observe(\"gpu.name\", name, ev, subject=name)\n",
           "        run.saw_device(name)\n", "a Metal block's GPU name line is not observed"),
    Mutant("runs-metal-no-driver-obs", "analyzer/runs/metal.py",
           '    run.observe("gpu.driver", ev.data["domain"], ev)\n', "", "an AGX driver error is not observed",
           equivalent="for fixable and remedies: facts.agx_domain still makes the bare-metal sign, and with the paravirtual device's VM sign that contradiction vetoes"),
    Mutant("runs-system-no-x86-features-obs", "analyzer/runs/system.py",
           '        run.observe("process.isa", "x86_64", ev)\n', "        pass\n",
           "x86 CPU features in system_info are not observed as the process's instruction set",
           equivalent='for fixable and remedies: facts.x86_cpu_features still carries the features, and that contrary sign vetoes'),
    Mutant("runs-system-no-target-obs", "analyzer/runs/system.py",
           '    run.observe("build.target", target, ev)\n', "", "a build target is not observed"),
    Mutant("runs-system-no-isa-obs", "analyzer/runs/system.py",
           '        run.observe("process.isa", isa, ev)\n', "        pass\n",
           "a build line's instruction set is not observed"),
    Mutant("runs-system-no-devices-item-obs", "analyzer/runs/system.py",
           '    run.observe("gpu.name", ev.data["description"], ev, subject=ev.data["id"])\n', "",
           "a --list-devices entry is not observed"),
    Mutant("runs-vulkan-no-uma-obs", "analyzer/runs/gpu_backends.py",
           '            run.observe("gpu.unified_memory", bool(ev.data["uma"]), ev, subject=name)\n',
           "            pass\n", "a Vulkan device's uma: is not observed"),
    Mutant("runs-probe-no-uma-obs", "analyzer/runs/probes.py",
           '    asm.run.observe("gpu.unified_memory", ev.data["value"], ev, subject=asm.run.facts.device.name)\n', "",
           "a probe's has_unified_memory= is not observed"),
    Mutant("runs-probe-json-no-uma-obs", "analyzer/runs/probes.py",
           '        run.observe("gpu.unified_memory", d["unified_memory"], ev, subject=d.get("name"))\n', "",
           "a probe JSON's has_unified_memory is not observed",
           equivalent="for fixable and remedies: the probe JSON's value still reaches facts.device.unified_memory and saw_flag, so view.saw_value makes the same contrary sign (and intel_host) that vetoes"),
    Mutant("runs-context-no-chip-obs", "analyzer/runs/context.py",
           '    asm.run.observe("host.cpu", ev.data["chip"], ev)\n', "", "a Hardware Overview's Chip: is not observed"),
    Mutant("runs-context-no-processor-obs", "analyzer/runs/context.py",
           '    asm.run.saw_host_cpu(ev.data["name"], ev)\n', "",
           "a named processor (brand string, Processor Name:) is not observed"),
    Mutant("runs-bench-no-cpu-obs", "analyzer/runs/bench.py",
           '            run.observe("host.cpu", row["cpu_info"], row_ev, provenance=whose)\n', "            pass\n",
           "llama-bench's cpu_info is not observed"),
    Mutant("runs-bench-compare-guest", "analyzer/runs/bench.py",
           'whose: Provenance = "other-machine" if row["format"] == "compare" else GUEST_PROCESS',
           "whose: Provenance = GUEST_PROCESS", "a compare-llama-bench table's columns read as the guest's own lines"),
    Mutant("runs-bench-no-gpu-obs", "analyzer/runs/bench.py",
           '            run.observe("gpu.name", row["gpu_info"], row_ev, subject=row["gpu_info"], provenance=whose)\n',
           "            pass\n", "llama-bench's gpu_info is not observed",
           equivalent="for fixable and remedies: facts.gpu_info still names the GPU in view.device_names, so an "
                      "Intel-Mac GPU is still a contrary sign, and an Apple one a bare-metal sign beside the "
                      "guest's VM sign (a contradiction)"),
)


def check(mutants: tuple[Mutant, ...] = MUTANTS, root: Path = ROOT) -> list[str]:
    """Every problem with the list: an id used twice, a missing file, a snippet not found exactly once,
    a replacement equal to the original."""
    problems, seen = [], set()
    for m in mutants:
        if m.id in seen:
            problems.append(f"{m.id}: id used twice")
        seen.add(m.id)
        path = root / m.file
        if not path.is_file():
            problems.append(f"{m.id}: no file {m.file}")
            continue
        n = path.read_text().count(m.old)
        if n != 1:
            problems.append(f"{m.id}: snippet occurs {n} times in {m.file} (must be exactly once)")
        if m.old == m.new:
            problems.append(f"{m.id}: the replacement is the original")
    return problems


def _ignore(_dir: str, names: list[str]) -> set[str]:
    return {n for n in names if n in (".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                                      ".hypothesis", ".demo", "build") or n.startswith(".venv")
            or n.endswith(".egg-info")}


def _pytest(scratch: Path, tests: tuple[str, ...], extra: list[str]) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(scratch), PYTHONDONTWRITEBYTECODE="1", PYTHONHASHSEED="0")
    env.pop("CAPSCAN_DB", None)
    argv = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=",
            "--no-header", "-W", "ignore", *extra, *tests]
    return subprocess.run(argv, cwd=scratch, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def _first_failure(out: str) -> str:
    for line in out.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" - ")[0].split("::", 1)[-1][:90]
    return "tests failed"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ids", nargs="*", help="only these mutants")
    ap.add_argument("--list", action="store_true", help="list the mutants, run nothing")
    ap.add_argument("--skip-equivalent", action="store_true", help="do not run the mutants declared equivalent "
                    "(they do not count in the score; run them to check that they still survive)")
    ap.add_argument("--check", action="store_true", help="only check that every snippet occurs exactly once")
    ap.add_argument("-k", dest="k", help="pytest -k expression for every mutant's run")
    ap.add_argument("--tests", nargs="+", metavar="FILE", help="run these test files instead of the subset (to "
                    "check that a new test kills its mutants)")
    args = ap.parse_args(argv)

    problems = check()
    if problems:
        print("stale mutant list (fix scripts/mutate.py):", *problems, sep="\n  ", file=sys.stderr)
        return 2
    if args.check:
        print(f"{len(MUTANTS)} mutants, every snippet found exactly once")
        return 0
    chosen = [m for m in MUTANTS if (not args.ids or m.id in args.ids) and not (args.skip_equivalent and m.equivalent)]
    unknown = set(args.ids) - {m.id for m in MUTANTS}
    if unknown:
        print("no such mutant: " + ", ".join(sorted(unknown)), file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.id:42} {m.file:30} {m.why}" + (f"  [equivalent: {m.equivalent}]" if m.equivalent else ""))
        return 0

    tests = tuple(args.tests) if args.tests else tuple(t for t in TESTS if (ROOT / t).exists())
    extra = ["-k", f"({DESELECT}) and ({args.k})" if args.k else DESELECT]
    with tempfile.TemporaryDirectory(prefix="capscan-mutate-") as tmp:
        scratch = Path(tmp) / "tree"
        shutil.copytree(ROOT, scratch, ignore=_ignore, symlinks=True)
        # the tests must import the scratch copy, never the installed (editable) tree
        where = subprocess.run([sys.executable, "-c", "import analyzer; print(analyzer.__file__)"], cwd=scratch,
                               env=dict(os.environ, PYTHONPATH=str(scratch)), capture_output=True, text=True)
        if not where.stdout.strip().startswith(str(scratch)):
            print(f"the scratch copy is not what Python imports ({where.stdout.strip() or where.stderr})",
                  file=sys.stderr)
            return 2
        t0 = time.monotonic()
        base = _pytest(scratch, tests, extra)
        if base.returncode != 0:
            print("the unmutated tree fails its own tests; fix that first:\n" + base.stdout[-3000:], file=sys.stderr)
            return 2
        print(f"baseline: {len(tests)} test files pass in {time.monotonic() - t0:.1f}s; {len(chosen)} mutants\n")
        killed = survived = equivalent_n = 0
        survivors: list[Mutant] = []
        for m in chosen:
            path = scratch / m.file
            original = path.read_text()
            t1 = time.monotonic()
            try:
                path.write_text(original.replace(m.old, m.new, 1))
                try:
                    res = _pytest(scratch, tests, extra)
                    dead, how = res.returncode != 0, _first_failure(res.stdout) if res.returncode else ""
                except subprocess.TimeoutExpired:
                    dead, how = True, "timeout"
            finally:
                path.write_text(original)  # restored before the next mutant, whatever happened
            state = "killed" if dead else "SURVIVED"
            if m.equivalent:
                equivalent_n += 1
                state += " (equivalent)"
            elif dead:
                killed += 1
            else:
                survived += 1
                survivors.append(m)
            print(f"{state:22} {m.id:42} {time.monotonic() - t1:5.1f}s  {how or m.why}", flush=True)
    scored = killed + survived
    print(f"\nscore: {killed}/{scored} non-equivalent mutants killed"
          + (f" ({equivalent_n} equivalent, not scored)" if equivalent_n else ""))
    for m in survivors:
        print(f"  survived: {m.id} ({m.file}): {m.why}")
    return 1 if survivors else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the scratch copy is gone (TemporaryDirectory); the tree was never touched
        print("\ninterrupted: nothing was changed in the tree", file=sys.stderr)
        sys.exit(130)
