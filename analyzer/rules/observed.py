"""Readings as observed: what each Metal block says about its own device, the kind of GPU each line
names, and the one generic contradiction rule.

A run is one process on one machine, so a fact observed with two values is a contradiction (two
logs pasted together, two machines' lines interleaved), never settled by which line came last.
The only values that really coexist in one process are declared in ``COMPATIBLE``, each with why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable

from analyzer import chips
from analyzer.model import Observation

APPLE = range(1001, 2000)
METAL = range(5001, 6000)
# Lines that list several devices of one machine (each with its own memory and name).
LIST_KINDS = frozenset({"vulkan.device", "cuda.device", "devices.item", "sysprof.chipset", "bench.device"})
FLAGS = ("simdgroup_reduction", "simdgroup_mm", "bfloat", "unified_memory")

# GPU kinds that one Mac really carries together: an Intel Mac's iGPU and its AMD (or NVIDIA) dGPU,
# which a process enumerates and lists side by side, and that report Metal3 with no Apple family;
# Apple silicon's own GPU, which reports Metal3/Metal4 beside its Apple family.
_KIND_GROUPS: tuple[frozenset[str], ...] = (
    frozenset({"amd", "intel", "nvidia", "non-apple"}),
    frozenset({"apple"}),
    frozenset({"paravirtual"}),
    frozenset({"venus"}),
)


def _kinds_coexist(a: Observation, b: Observation) -> bool:
    if "software" in (a.value, b.value):
        return True  # a software rasteriser (llvmpipe) is listed beside any GPU
    return any(a.value in g and b.value in g for g in _KIND_GROUPS)


def _memories_coexist(a: Observation, b: Observation) -> bool:
    # a device list names several GPUs, each with its own memory (an Intel Mac's iGPU: unified; its dGPU: not)
    return a.kind in LIST_KINDS and b.kind in LIST_KINDS and a.subject != b.subject


def _flags_coexist(a: Observation, b: Observation) -> bool:
    # a Vulkan line's bf16 describes that list entry; a Metal block's flag describes its own device
    return a.subject != b.subject and (a.kind in LIST_KINDS or b.kind in LIST_KINDS)


# fact -> (do two different values coexist in one process?, why). Facts not named here are single-valued.
COMPATIBLE: dict[str, tuple[Callable[[Observation, Observation], bool], str]] = {
    "gpu.kind": (_kinds_coexist, "an Intel Mac carries an Intel iGPU and an AMD or NVIDIA dGPU, and a process "
                                 "enumerates both; a software rasteriser is listed beside any GPU"),
    "gpu.unified_memory": (_memories_coexist, "a device list names several GPUs, each with its own memory"),
    "gpu.bfloat": (_flags_coexist, "a list entry's flag describes that entry only"),
}
# Facts that may hold any number of values in one process: device names (MTL0 and MTL1 of
# GGML_METAL_DEVICES, several CUDA devices), the families of a block (one line per family kind), build
# target strings (the arch decides, as process.isa), working sets (per device), probe answers (per code).
MULTI_VALUED = frozenset({"gpu.name", "gpu.family", "build.target", "gpu.working_set_mb", "gpu.driver", "host.cpu"})

_FACT_WORDS = {
    "process.isa": "the process's instruction set", "gpu.kind": "the kind of GPU",
    "host.chip": "the host chip",
    **{f"gpu.{flag}": chips.METAL_FLAG[flag].words
       for flag in ("unified_memory", "simdgroup_reduction", "simdgroup_mm", "bfloat", "tensor")},
}


@dataclass
class Block:
    """What one Metal block (or probe) printed about its own device."""

    number: int
    names: list[Observation] = field(default_factory=list)
    families: list[Observation] = field(default_factory=list)
    flags: dict[str, list[Observation]] = field(default_factory=dict)
    supports: dict[int, Observation] = field(default_factory=dict)  # a probe's supportsFamily answers

    @property
    def apple(self) -> Observation | None:
        codes = [o for o in self.families if o.value in APPLE]
        return max(codes, key=lambda o: o.value) if codes else None  # type: ignore[arg-type,return-value]

    @property
    def metal(self) -> Observation | None:
        codes = [o for o in self.families if o.value in METAL]
        return max(codes, key=lambda o: o.value) if codes else None  # type: ignore[arg-type,return-value]


class Readings:
    """A run's observations, indexed."""

    def __init__(self, observations: Iterable[Observation]):
        self.all = list(observations)
        self.by_fact: dict[str, list[Observation]] = {}
        for o in self.all:
            self.by_fact.setdefault(o.fact, []).append(o)

    def of(self, fact: str) -> list[Observation]:
        return self.by_fact.get(fact, [])

    def values(self, fact: str) -> list[Any]:
        return list(dict.fromkeys(o.value for o in self.of(fact)))

    @cached_property
    def blocks(self) -> dict[int, Block]:
        out: dict[int, Block] = {}
        for o in self.all:
            if o.block <= 0 or not o.kind.startswith(("metal.", "probe.")):
                continue
            b = out.setdefault(o.block, Block(o.block))
            if o.fact == "gpu.name":
                b.names.append(o)
            elif o.fact == "gpu.family":
                b.families.append(o)
            elif o.fact.startswith("gpu.supports."):
                b.supports[int(o.fact.rsplit(".", 1)[1])] = o
            elif o.fact.startswith("gpu.") and o.fact[4:] in FLAGS:
                b.flags.setdefault(o.fact[4:], []).append(o)
        return out

    @cached_property
    def listed_names(self) -> dict[str, str]:
        """A listed device's id -> what the list calls it ('MTL0' -> 'Apple Paravirtual device')."""
        return {o.subject: str(o.value) for o in self.of("gpu.name") if o.kind == "devices.item" and o.subject}

    def block_names(self, block: Block) -> list[str]:
        """The names a block's device goes by: its own GPU name line, and what a device list calls that id."""
        names = [str(o.value) for o in block.names]
        return names + [self.listed_names[n] for n in names if n in self.listed_names]

    @cached_property
    def kinds(self) -> list[Observation]:
        """The kind of GPU each line shows, as observations of one fact ('gpu.kind'): a name's vendor, and
        a block that reports Metal3/Metal4 with no Apple family (an AMD or Intel GPU of an Intel Mac)."""
        out: list[Observation] = []
        for o in self.of("gpu.name"):
            kind = chips.vendor(str(o.value))
            if kind:
                out.append(Observation(fact="gpu.kind", value=kind, line=o.line, kind=o.kind, block=o.block,
                                       subject=o.subject))
        for b in self.blocks.values():
            m = b.metal
            if m is not None and b.apple is None:
                out.append(Observation(fact="gpu.kind", value="non-apple", line=m.line, kind=m.kind, block=b.number,
                                       subject=m.subject))
        for o in self.of("gpu.driver"):
            out.append(Observation(fact="gpu.kind", value="apple", line=o.line, kind=o.kind, subject=o.subject))
        return out

    @cached_property
    def host_chips(self) -> list[Observation]:
        """Each host chip a line names (an Apple chip by its name, an Intel CPU as 'Intel'), as 'host.chip'."""
        out = []
        for o in self.of("host.cpu"):
            chip = chips.apple_chip(str(o.value)) or ("Intel" if chips.is_intel_cpu(str(o.value)) else None)
            if chip:
                out.append(Observation(fact="host.chip", value=chip, line=o.line, kind=o.kind, subject=o.subject))
        return out

    def contradictions(self) -> list[tuple[str, Observation, Observation]]:
        """Every fact observed with two values that cannot coexist in one process: (what, first, other),
        one pair per fact and pair of values, first lines first."""
        facts: dict[str, list[Observation]] = {f: obs for f, obs in self.by_fact.items() if f not in MULTI_VALUED}
        facts["gpu.kind"] = self.kinds
        facts["host.chip"] = self.host_chips
        out = []
        for fact, obs in facts.items():
            obs = sorted(obs, key=lambda o: o.line)
            coexist = COMPATIBLE.get(fact, (None, ""))[0]
            seen: set[tuple[Any, Any]] = set()
            for i, a in enumerate(obs):
                for b in obs[i + 1:]:
                    pair = (a.value, b.value)
                    if a.value == b.value or pair in seen or (coexist is not None and coexist(a, b)):
                        continue
                    seen.add(pair)
                    seen.add((b.value, a.value))
                    out.append((_FACT_WORDS.get(fact, fact), a, b))
        # a block that reports an Apple family below Apple6 and Metal3: no GPU does both (Metal3 needs Apple7
        # silicon, or an AMD/Intel GPU, which has no Apple family)
        for blk in self.blocks.values():
            apple, metal = blk.apple, blk.metal
            if apple is not None and metal is not None and int(apple.value or 0) < 1006:
                out.append(("the GPU's families", apple, metal))
        return out


def word(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
