"""What the runtime turned on: the capabilities a run printed, those inferred from its families (or, on
bare-metal Apple silicon that printed none, from its chip), whether the runtime gates on the family at all,
and whether the run is already remedied."""

from __future__ import annotations

import copy
from functools import cached_property

from analyzer import chips
from analyzer.model import Capabilities
from analyzer.rules.environment import EnvironmentView

APPLE_RANGE = range(1001, 2000)
METAL3_CODE = chips.METAL3


class CapabilitiesView(EnvironmentView):
    """The capabilities the runtime had, printed or inferred (the chip's basis needs the environment)."""

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

    # -- runtime ---------------------------------------------------------------------------------
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
