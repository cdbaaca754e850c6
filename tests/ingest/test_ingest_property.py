"""Property: whatever happens to a real log on its way to capscan (lines lost,
doubled, shuffled, cut, case-flipped; random bytes, ANSI codes, CRLF), the
parsers and the assembly never raise and never invent a capability: every
family code and every true/false flag in the result is printed by some line
of the mutated input."""

from __future__ import annotations

import math
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.read.normalize import normalize
from tests.ingest_util import FIXTURES, parse_in_memory

SOURCES = [
    "metal/m4-2026-08-guest-stock.log", "metal/m4-2026-08-host-m1-ultra.log", "metal/m2-2024-03-m2max.log",
    "metal/m1-2023-11-mib.log", "metal/m3-2025-01-lmstudio-m2.log", "metal/m4-2026-02-ggml-metal-devices-virtual.log",
    "metal/whisper-family-fallback.log", "shims/lume-broad-overclaim.log", "shims/tart-banner.log",
    "wrapped/jsonl-callback.log", "wrapped/nslog.log", "wrapped/two-runs-host-and-guest.log",
    "wrapped/three-processes-concatenated.log", "probe/capscan-probe-guest.txt", "probe/capscan-probe-guest.json",
    "probe/lume-probe-shim.txt", "probe/anka-probe.json", "backends/vulkan-2025-07-venus-guest.log",
    "backends/vulkan-2026-07-nvidia-fp4.log", "backends/load-backend-2025.log", "bench/guest-stock.json",
    "bench/current.csv", "timings/server-timings.json", "timings/ollama-verbose.log",
]
TEXTS = {rel: (FIXTURES / rel).read_bytes() for rel in SOURCES}
ANSI = [b"\x1b[0m", b"\x1b[35m", b"\x1b[1;32m", b"\x1b[2K", b"\x1b]0;title\x07"]


@st.composite
def mutated_logs(draw):
    lines = TEXTS[draw(st.sampled_from(SOURCES))].split(b"\n")
    for _ in range(draw(st.integers(0, 8))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "shuffle", "cut", "bytes", "case", "ansi",
                                   "crlf", "join"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(draw(st.integers(0, len(lines))), lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "shuffle":
            window = lines[i:i + draw(st.integers(2, 12))]
            lines[i:i + len(window)] = draw(st.permutations(window))
        elif op == "cut":
            lines[i] = lines[i][:draw(st.integers(0, max(0, len(lines[i]) - 1)))]
        elif op == "bytes":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(st.binary(min_size=1, max_size=6)) + lines[i][pos:]
        elif op == "case":
            lines[i] = lines[i].swapcase() if draw(st.booleans()) else lines[i].upper()
        elif op == "ansi":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(st.sampled_from(ANSI)) + lines[i][pos:]
        elif op == "crlf":
            lines = [line + b"\r" for line in lines]
        elif op == "join" and i + 1 < len(lines):
            lines[i:i + 2] = [lines[i] + lines[i + 1]]
    return b"\n".join(lines), draw(st.integers(1, 4096))


_ANSI_RX = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def _printed(data: bytes) -> list[str]:
    """Each input line as printed (ANSI removed) and as normalised, lower-cased."""
    out = []
    for raw in data.split(b"\n"):
        text = raw.decode("utf-8", errors="replace")
        out.append(_ANSI_RX.sub("", text).lower())
        out.extend(t.lower() for t in normalize(text)[0])
    return out


def _family_printed(code: int, lines: list[str]) -> bool:
    marks = (f"({code})", f"supports_family.{code}=true", f'"{code}":true', f'"{code}": true', f"family={code}",
             f'"family":{code}', f'"family": {code}')
    return any(m in line for line in lines for m in marks)


_FLAG_LABELS = {
    "simdgroup_reduction": ("simdgroup reduction",),
    "simdgroup_mm": ("simdgroup matrix mul",),
    "bfloat": ("bfloat",),
    "tensor": ("has tensor",),
    "unified_memory": ("hasunifiedmemory", "has unified memory", "has_unified_memory"),
}
_VULKAN_FIELDS = {"bfloat": "bf16", "unified_memory": "uma"}


def _flag_printed(flag: str, value: bool, lines: list[str]) -> bool:
    word = "true" if value else "false"
    for line in lines:
        if word in line and any(label in line for label in _FLAG_LABELS[flag]):
            return True
        if flag in _VULKAN_FIELDS and re.search(rf"\b{_VULKAN_FIELDS[flag]}: {int(value)}\b", line):
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated_logs())
def test_mutated_logs_never_raise_and_never_invent(case):
    data, chunk = case
    runs = parse_in_memory(data, chunk=chunk)
    lines = _printed(data)
    for facts, throughput in runs:
        fams = facts.device.families
        assert fams == sorted(set(fams))
        for code in fams:
            assert _family_printed(code, lines), (code, facts.first_line)
        if facts.device.apple_family is not None:
            assert facts.device.apple_family in fams and 1001 <= facts.device.apple_family <= 1999
        caps = facts.capabilities.as_dict()
        caps["unified_memory"] = facts.device.unified_memory
        for flag, value in caps.items():
            if value is not None:
                assert _flag_printed(flag, value, lines), (flag, value)
        assert facts.first_line <= facts.last_line
        assert all(math.isfinite(t.tok_s) for t in throughput)


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 512))
def test_random_bytes_never_raise_or_give_capabilities(data, chunk):
    for facts, _ in parse_in_memory(data, chunk=chunk):
        assert facts.device.families == [] or all(_family_printed(c, _printed(data)) for c in facts.device.families)


def test_the_unmutated_sources_pass_the_same_checks():
    """The property's oracle accepts the real logs (so a failure above is a real invention)."""
    for rel, data in TEXTS.items():
        lines = _printed(data)
        for facts, _ in parse_in_memory(data):
            assert all(_family_printed(c, lines) for c in facts.device.families), rel
            caps = facts.capabilities.as_dict()
            caps["unified_memory"] = facts.device.unified_memory
            assert all(_flag_printed(f, v, lines) for f, v in caps.items() if v is not None), rel
