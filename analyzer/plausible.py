"""Plausible speeds: the physical ceilings every measured tokens-per-second value is held to
(issue 21, item 4). The parsers check each speed against them before it becomes a Throughput
(``analyzer.parsers.plausible.check``); the rules hold a stored row to them before it becomes a
baseline (``stored_ceiling``, analyzer.rules.baseline). Both read this module: it sits below both,
beside ``analyzer.chips``, so the rules import no parser.

A speed is refused (``Rejected``: the dispatcher skips the record and counts it) when it is
negative, zero for a test that processed tokens, NaN, infinite, or above what the hardware can
physically do. The ceilings, all generous on purpose (a real result must never be refused;
they exist to stop a typo, a corrupted file or a fabricated row from becoming the baseline that
turns earlier guests into "139x slower, fixable"):

- **Token generation** (llama-bench ``n_gen > 0, n_prompt = 0``) reads every weight once per
  token, so it cannot beat ``bandwidth / model_size``. The ceiling is ``TG_MARGIN`` (2x) that:
  measured runs reach 25-80% of it (M1 Ultra TinyLlama tg128 287 of 1,228 t/s; Gemma 12B 52 of
  111), and the margin covers the tensors a token does not read (token embeddings, Gemma 3n's
  per-layer embeddings) and published figures rounded down. Only where both are known: an Apple
  chip in the row's ``cpu_info``/``gpu_info`` (a guest's ``Apple M1 Ultra (Virtual)`` too: a VM
  is never faster than its host) with a figure in ``chips.bandwidth_gbs``, and the row's
  ``model_size``; never for an RPC backend (the weights are on another machine), never for a model of
  at most ``CACHE_BYTES`` (on-chip caches, not DRAM, may serve it: stories260K, stories15M).
- **Prompt processing** is compute-bound: at least 2 FLOP per parameter and token, on a chip
  whose peak is below ``FLOP_PER_BYTE`` (256) FLOP per byte/s of its bandwidth: M1-M4 GPUs have
  26-41 (M1 2.6 TFLOPS at 68 GB/s, M2 Ultra 27.2 at 800), M5's neural accelerators about 115
  ("over 4x the peak GPU compute for AI" of M4). Ceiling: ``FLOP_PER_BYTE * bandwidth /
  (2 * model_n_params)``, times ``TG_MARGIN``; 190,000 t/s for TinyLlama on an M1 Ultra, whose
  published pp512 is 4,872.
- **Sparse models** read and compute only part of their weights per token: a mixture of experts
  (``qwen3moe 30B.A3B``, ``mixtral 8x7B``, ``gpt-oss 120B``) or Gemma 3n's ``E4B``. Where the
  label names the active parameters (``30B.A3B``) both ceilings grow by total/active; any other
  sparse label by ``SPARSE_ALLOWANCE`` (32: Kimi K2 is 1T/32B, Qwen3-Next 80B/3B).
- **Anything else** (a timing line, a markdown table, a CUDA card, an unknown chip): an absolute
  cap, ``MAX_GEN_TOK_S`` (1,000,000: a token in under a microsecond; stories260K on a CPU makes
  thousands per second, nothing makes a million) and ``MAX_PROMPT_TOK_S`` (100,000,000: tiny
  models on data-centre GPUs process millions of prompt tokens per second, not a hundred
  million).

The same ceilings keep a row stored by an older capscan from becoming a baseline
(``stored_ceiling``, used by analyzer.rules.baseline): such rows carry no model size, so its
floor is read from the model's label (``llama 1B Q4_K - Medium``: at least 3/4 of the named
parameters, at the quantization's fewest bits).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from analyzer import chips

if TYPE_CHECKING:
    import regex

TG_MARGIN = 2.0
FLOP_PER_BYTE = 256.0
CACHE_BYTES = 256 << 20
SPARSE_ALLOWANCE = 32.0
MAX_GEN_TOK_S = 1e6
MAX_PROMPT_TOK_S = 1e8
# llama.cpp's size names round to the nearest named size (1B for TinyLlama's 1.1B, 3B for Phi-2's 2.8B).
PARAMS_FLOOR = 0.75

_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9}


@functools.cache
def _patterns() -> tuple[regex.Pattern[str], regex.Pattern[str], regex.Pattern[str], regex.Pattern[str]]:
    """The label patterns (sparse, active, params, quant bits), compiled on first use: importing
    ``regex`` is 8-10 ms of every start-up that imports the rules, and ``show`` of a run that is no
    guest reads no label (bench/README.md, issue 39)."""
    import regex

    # Labels of sparse models, as llama.cpp names them (`general.architecture` then its size type): an
    # "A<active>" size (30B.A3B, A13B), experts (8x7B, 16x12B, 17Bx16E), "moe" in the architecture, Gemma
    # 3n's effective sizes (E2B, E4B), and the mixture-of-experts architectures whose size says neither.
    sparse = regex.compile(r"moe|\d+(?:\.\d+)?[BM]?x\d+|\bE\d+B\b|\bA\d+(?:\.\d+)?[BM]\b|"
                           r"^(?:gpt-oss|deepseek|dbrx|arctic|grok|jamba|llama4|mixtral|minimax|dots1|hunyuan|"
                           r"qwen3next|kimi|bailing|ernie|glm4moe|smallthinker|gemma3n)", regex.IGNORECASE)
    active = regex.compile(r"\b(\d+(?:\.\d+)?)([BMK])\.A(\d+(?:\.\d+)?)([BMK])\b")
    params = regex.compile(r"\b(\d+(?:\.\d+)?)([BMK])\b")
    # The fewest bits a weight of each quantization family holds (the bulk tensors; a mix keeps some wider).
    quant_bits = regex.compile(r"\b(?:I?Q|TQ)(\d)|\b(B?F16)\b|\b(F32)\b|\bMXFP(4)\b", regex.IGNORECASE)
    return sparse, active, params, quant_bits


def _sparsity(label: str | None) -> float:
    """How much larger than the whole model's a sparse model's per-token ceiling may be."""
    if not label:
        return 1.0
    sparse_re, active_re, _, _ = _patterns()
    if not sparse_re.search(label):
        return 1.0
    m = active_re.search(label)
    if m:
        total = float(m.group(1)) * _SCALE[m.group(2).upper()]
        active = float(m.group(3)) * _SCALE[m.group(4).upper()]
        if 0 < active < total:
            return TG_MARGIN * total / active  # the label rounds both: keep a margin on the ratio too
    return SPARSE_ALLOWANCE


@functools.lru_cache(maxsize=256)
def ceilings(chip: str | None, model_size: int | None, n_params: int | None, label: str | None,
             backends: str | None) -> tuple[float, float]:
    """(prompt, generation) ceilings in tok/s for the rows of one llama-bench configuration."""
    prompt, gen = MAX_PROMPT_TOK_S, MAX_GEN_TOK_S
    bandwidth = chips.bandwidth_gbs(chip)
    if bandwidth is None or (backends and "RPC" in backends.upper()):
        return prompt, gen
    bw = bandwidth * 1e9
    sparse = _sparsity(label)
    if type(model_size) is int and model_size > CACHE_BYTES:
        gen = min(gen, TG_MARGIN * sparse * bw / model_size)
    if type(n_params) is int and n_params > 0:
        prompt = min(prompt, TG_MARGIN * sparse * FLOP_PER_BYTE * bw / (2 * n_params))
    return prompt, gen


def stored_ceiling(test: str, chip: str | None, label: str | None) -> float:
    """The ceiling of a stored speed of ``test`` ('pp512', 'tg128', 'generation') on ``chip``, for a
    row stored before speeds were checked: no model size is stored, so it is read from the label
    as a floor (``PARAMS_FLOOR`` of the named parameters, at the quantization's fewest bits); the
    absolute cap when the label names neither."""
    gen = test.startswith("tg") or test == "generation"
    params = bits = None
    if label:
        _, active_re, params_re, quant_re = _patterns()
        active = active_re.search(label)
        m = active or params_re.search(label)
        if m:
            params = float(m.group(1)) * _SCALE[m.group(2).upper()] * PARAMS_FLOOR
        q = quant_re.search(label)
        if q:
            bits = next(float(g) for g in (q.group(1), "16" if q.group(2) else None, "32" if q.group(3) else None,
                                           q.group(4)) if g)
    size = int(params * bits / 8) if params and bits else None
    prompt_cap, gen_cap = ceilings(chips.apple_chip(chip), size, int(params) if params else None, label, None)
    return gen_cap if gen else prompt_cap
