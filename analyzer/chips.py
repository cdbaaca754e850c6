"""GPU and chip facts: which MTLGPUFamilyApple a chip really is, which vendor a
device name belongs to, the host chip a guest reveals, and the Metal flags a device reports.

Sources: shared/reference/vm-gpu-landscape.md section 6 and log-formats.md 1.6.
"""

from __future__ import annotations

import re
from typing import NamedTuple

APPLE7 = 1007  # what llama.cpp's simdgroup reduction and matrix multiply gates need
METAL3 = 5001
PARAVIRTUAL_DEFAULT = 1005  # a stock macOS guest reports MTLGPUFamilyApple5
HIGHEST_KNOWN_APPLE = 1011  # Apple11 exists in Apple's docs; anything higher is impossible today

# Chip generation -> true MTLGPUFamilyApple code. A-series chips are Macs too since 2026: the MacBook Neo
# (Mac17,5) runs an A18 Pro, Apple9 (a guest on it names 'Apple A18 Pro (Virtual)').
_M_FAMILY = {1: 1007, 2: 1008, 3: 1009, 4: 1009, 5: 1010}
_A_FAMILY = {8: 1002, 9: 1003, 10: 1003, 11: 1004, 12: 1005, 13: 1006, 14: 1007, 15: 1008, 16: 1008, 17: 1009,
             18: 1009, 19: 1010}

_APPLE_CHIP = re.compile(r"\bApple (?P<chip>M(?P<m>\d+)(?: (?:Pro|Max|Ultra))?|A(?P<a>\d+)[A-Z]?(?: (?:Pro|Bionic))?)\b")
_INTEL_CPU = re.compile(r"\bIntel\b|\bXeon\b|\bCore\(TM\)|\bi[3579]-\d{4}", re.IGNORECASE)


def apple_chip(text: str | None) -> str | None:
    """'Accelerate, Apple M1 Ultra (Virtual)' -> 'Apple M1 Ultra'."""
    if not text:
        return None
    m = _APPLE_CHIP.search(text)
    return f"Apple {m.group('chip')}" if m else None


def chip_family(chip: str | None) -> int | None:
    """True MTLGPUFamilyApple code of an Apple chip name, or None."""
    if not chip:
        return None
    m = _APPLE_CHIP.search(chip)
    if not m:
        return None
    if m.group("m"):
        return _M_FAMILY.get(int(m.group("m")))
    return _A_FAMILY.get(int(m.group("a")))


def family_name(code: int | None) -> str:
    if code is None:
        return "unknown"
    if 1001 <= code <= 1999:
        return f"Apple{code - 1000}"
    if 2001 <= code <= 2999:
        return f"Mac{code - 2000}"
    if 3001 <= code <= 3999:
        return f"Common{code - 3000}"
    if 4001 <= code <= 4999:
        return f"MacCatalyst{code - 4000}"
    if 5001 <= code <= 5999:
        return f"Metal{code - 4998}"
    return str(code)


def vendor(device: str | None) -> str | None:
    """The kind of GPU a device name denotes."""
    if not device:
        return None
    d = device.lower()
    if "paravirtual" in d:
        return "paravirtual"
    if "venus" in d or "virtio" in d:
        return "venus"
    if "llvmpipe" in d or "lavapipe" in d or "swiftshader" in d or "softpipe" in d:
        return "software"
    if "amd" in d or "radeon" in d or "firepro" in d:
        return "amd"
    if "intel" in d or "iris" in d or "uhd graphics" in d or re.search(r"\bhd graphics\b", d):
        return "intel"
    if "nvidia" in d or "geforce" in d or "quadro" in d or "tesla" in d or re.search(r"\brtx\b", d):
        return "nvidia"
    if _APPLE_CHIP.search(device):
        return "apple"
    return None


# CPU features llama.cpp's system_info prints that only an x86 CPU has (ggml's __SSE3__, __AVX2__, __F16C__,
# __FMA__, __BMI2__ ... checks; Arm's are NEON, ARM_FMA, FP16_VA, DOTPROD, SVE, SME). FMA is x86's: Arm's is ARM_FMA.
X86_CPU_FEATURES = frozenset({"SSE3", "SSSE3", "AVX", "AVX_VNNI", "AVX2", "F16C", "FMA", "BMI2", "AVX512",
                              "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"})


# Arm's system_info features (ggml's __ARM_NEON, __ARM_FEATURE_FMA ... checks): only an arm64 process has them.
ARM_CPU_FEATURES = frozenset({"NEON", "ARM_FMA", "FP16_VA", "DOTPROD", "SVE", "SME", "MATMUL_INT8"})


def isa_of_target(target: str | None) -> str | None:
    """'arm64-apple-darwin23.4.0' -> 'arm64', 'x86_64-apple-darwin...' -> 'x86_64'; another target -> its
    first field; None when empty."""
    if not target:
        return None
    t = target.strip().lower()
    if t.startswith(("darwin ", "linux ", "windows ")):  # CMake's form ('Darwin x86_64', 2026 --version)
        t = t.split(" ", 1)[1]
    first = t.split("-", 1)[0]
    if first in ("arm64", "aarch64", "arm64e"):
        return "arm64"
    if first in ("x86_64", "amd64", "i386", "i686", "x86_64h"):
        return "x86_64"
    return first or None


def os_of_target(target: str | None) -> str | None:
    """'arm64-apple-darwin23.4.0' -> 'darwin', 'aarch64-linux-gnu' -> 'linux', 'x86_64-w64-mingw32' ->
    'windows'; None when the target names no system capscan knows."""
    t = (target or "").lower()
    if "apple-darwin" in t or "apple-macos" in t or t.startswith("darwin "):
        return "darwin"
    if "linux" in t:  # 'aarch64-linux-gnu', CMake's 'Linux aarch64'
        return "linux"
    if "windows" in t or "mingw" in t or "msvc" in t:
        return "windows"
    return None


def is_intel_cpu(cpu_info: str | None) -> bool:
    return bool(cpu_info and _INTEL_CPU.search(cpu_info) and not _APPLE_CHIP.search(cpu_info))


# Unified memory bandwidth of each Apple-silicon Mac chip, in GB/s: the highest published figure of the
# chip (where bins differ, the faster bin: M3 Max 300 or 400, M4 Max 410 or 546, M5 Max 460 or 614), as the
# exact LPDDR peak where Apple rounds it down (M1 Pro 204.8 for "200GB/s", M1 Max 409.6 for "400GB/s",
# M1/M2 Ultra 819.2 for "800GB/s", M2 102.4 for "100GB/s", M3 Pro 153.6 for "150GB/s"): a ceiling, so it
# must never be lower than what the chip can do. Sources: Apple's newsroom announcements and the Mac
# technical specifications pages (support.apple.com/specs) of each chip, as reported at launch (M4 Pro
# 273 and M4 Max 546, 2024-10-30; M3 Ultra 819, 2025-03-05; M5 153, 2025-10-15; M5 Pro 307 and M5 Max
# 614, 2026-03-03); the exact LPDDR figures as tabulated by Ars Technica's chip comparisons.
# A chip not listed (A-series, a future M) has no figure: callers fall back to what needs none.
_BANDWIDTH_GBS: dict[str, float] = {
    "Apple M1": 68.25, "Apple M1 Pro": 204.8, "Apple M1 Max": 409.6, "Apple M1 Ultra": 819.2,
    "Apple M2": 102.4, "Apple M2 Pro": 204.8, "Apple M2 Max": 409.6, "Apple M2 Ultra": 819.2,
    "Apple M3": 102.4, "Apple M3 Pro": 153.6, "Apple M3 Max": 409.6, "Apple M3 Ultra": 819.2,
    "Apple M4": 120.0, "Apple M4 Pro": 273.0, "Apple M4 Max": 546.0,
    "Apple M5": 153.0, "Apple M5 Pro": 307.0, "Apple M5 Max": 614.0,
}


def bandwidth_gbs(chip: str | None) -> float | None:
    """The published unified-memory bandwidth (GB/s) of an Apple chip named anywhere in ``chip``
    ('Apple M1 Ultra', 'Accelerate, Apple M2 Max (Virtual)'), or None when unknown."""
    name = apple_chip(chip)
    return _BANDWIDTH_GBS.get(name) if name else None


# Published bare-metal llama-bench results of llama.cpp's own benchmark (Llama 2 7B Q4_0, -ngl 99, batch 1:
# pp512 and tg128, tok/s) per chip and GPU-core count, from llama.cpp's "Performance of llama.cpp on Apple
# Silicon M-series" discussion. The discussion itself was unreachable when this was written: the rows were
# read from copies that cite it per row (a 2026 survey of inference engines quoting its Apple table; a
# benchmark note quoting the M1 Max row), are rounded as those copies print them, and are unverified
# against the discussion. A guest's figure beside one is an estimate of the gap, never a baseline.
PUBLISHED_7B_Q4_0_SOURCE = "https://github.com/ggml-org/llama.cpp/discussions/4167"
_PUBLISHED_7B_Q4_0: dict[str, tuple[int, float, float]] = {  # chip: (GPU cores, pp512, tg128)
    "Apple M1 Max": (32, 530.06, 61.19),
    "Apple M1 Ultra": (64, 1030.0, 83.7),
    "Apple M2 Ultra": (76, 1238.0, 94.3),
    "Apple M3 Ultra": (80, 1471.0, 92.1),
    "Apple M4 Pro": (20, 440.0, 50.7),
    "Apple M4 Max": (40, 886.0, 83.1),
    "Apple M5 Max": (40, 987.0, 102.9),  # the Metal backend alone (the Neural Accelerators' BLAS path is faster)
}


def published_7b_q4_0(chip: str | None) -> tuple[int, float, float] | None:
    """(GPU cores, pp512, tg128) published for ``chip`` on Llama 2 7B Q4_0, or None when no row."""
    name = apple_chip(chip)
    return _PUBLISHED_7B_Q4_0.get(name) if name else None


class MetalFlag(NamedTuple):
    """One flag of a Metal start-up block, written once for the parser, the rules and the remedy."""

    name: str  # the field of model.Capabilities (or of the device) it fills
    printed: tuple[str, ...]  # llama.cpp's labels of every era, the base label first ('... support' is added)
    label: str  # a table row's label (the remedy's before/after)
    words: str  # in a sentence ('the device lacks simdgroup matrix multiply')


METAL_FLAGS: tuple[MetalFlag, ...] = (
    MetalFlag("simdgroup_reduction", ("simdgroup reduction", "simdgroup reduction support"), "simdgroup reduction",
              "simdgroup reduction"),
    MetalFlag("simdgroup_mm", ("simdgroup matrix mul.", "simdgroup matrix mul. support"), "simdgroup matrix mul.",
              "simdgroup matrix multiply"),
    MetalFlag("bfloat", ("has bfloat", "bfloat"), "bfloat", "bfloat"),
    MetalFlag("use_bfloat", ("use bfloat",), "use bfloat", "bfloat in use"),
    MetalFlag("tensor", ("has tensor",), "tensor", "the tensor API"),
    MetalFlag("unified_memory", ("hasUnifiedMemory", "has unified memory"), "unified memory", "unified memory"),
    MetalFlag("residency_sets", ("has residency sets", "use residency sets"), "residency sets", "residency sets"),
    MetalFlag("shared_buffers", ("use shared buffers",), "shared buffers", "shared buffers"),
)
METAL_FLAG = {flag.name: flag for flag in METAL_FLAGS}
# the flags llama.cpp's kernels are gated on, in its order (capscan-probe --kernels checks these)
KERNEL_FLAGS = ("simdgroup_reduction", "simdgroup_mm", "bfloat")
