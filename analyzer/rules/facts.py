"""What a run shows before any reading of it: its facts, its evidence lines, the devices it names and
the families they print. The base of RunView (rules/view.py): every other concern reads these."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from analyzer import chips
from analyzer.model import GUEST_PROCESS, Evidence, Observation, Provenance, RunFacts, claim
from analyzer.rules.observed import Readings


def evidence_line(e: Evidence) -> dict[str, Any]:
    """A kept line as a finding's evidence line; ``inner`` only for a line read inside a JSON string
    (absent otherwise, so a plain log's evidence serialises as it always did)."""
    return {"line": e.line, "text": e.text} if e.inner is None else {"line": e.line, "text": e.text, "inner": e.inner}


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
class FactsView:
    """A stored run as the rules receive it, and what it shows as printed."""

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

    # -- evidence helpers ------------------------------------------------------------------------
    def lines(self, *kinds: str, contains: str | None = None, limit: int = 6) -> list[dict[str, Any]]:
        out = []
        for e in self.evidence:
            if e.kind in kinds and (contains is None or contains.lower() in e.text.lower()):
                out.append(evidence_line(e))
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

    # -- device ----------------------------------------------------------------------------------
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

    def saw_value(self, flag: str, value: bool) -> bool:
        """Was this value printed for the flag anywhere in the run (not just last)?"""
        f = self.facts
        current = f.device.unified_memory if flag == "unified_memory" else getattr(f.capabilities, flag, None)
        return current is value or any(c["flag"] == flag and value in (c["value"], c["other"])
                                       for c in f.flag_conflicts)

    @cached_property
    def probe_only(self) -> bool:
        """A probe's output alone (capscan-probe, a JSON probe, system_profiler): it measured the device and
        ran no model, so what the run says of llama.cpp is what llama.cpp would do."""
        f = self.facts
        return not self.throughput and f.metal_era is None and (f.probe is not None or bool(f.sysprof_chipsets))

    # -- families --------------------------------------------------------------------------------
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

    @property
    def _full_family_listing(self) -> bool:
        # M2-and-later blocks print Common and Metal lines; the M1 era printed
        # only the Apple family, so absence means nothing there.
        return any(3001 <= c <= 3999 for c in self.families)

    # -- GPUs and offload ------------------------------------------------------------------------
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
