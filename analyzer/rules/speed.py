"""What a run's speeds say: its best figure per test and configuration, their names as a person reads
them, and the references a guest is held to (the host chip's bandwidth ceiling, llama.cpp's published
bare-metal results) with the share of the ceiling its generation speed reaches."""

from __future__ import annotations

import math
import re
from functools import cached_property

from analyzer import chips
from analyzer.model import figure_key, figure_parts
from analyzer.rules.capabilities import CapabilitiesView


class SpeedView(CapabilitiesView):
    """The run's figures and the references it is held to (a guest's ceiling needs its host chip)."""

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


# A model this small may sit in the chip's caches: the bandwidth ceiling says nothing about it.
REFERENCE_MIN_BYTES = 256 * 2**20
LLAMA2_7B_Q4_0_BYTES = 3_825_065_984  # llama-bench's model_size of Llama 2 7B Q4_0 (3.56 GiB)
_MOE = re.compile(r"moe|\bA\d+(?:\.\d+)?B\b|\d+x\d+B|experts", re.IGNORECASE)
