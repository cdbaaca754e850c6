"""Every declared pattern runs in time linear in its line (issue 24, "Linear matching").

Each pattern of each declared Format (and each continuation pattern a sample names with ``via``)
meets adversarial lines derived from its own format's sample lines: a long run of one of the
sample's tokens inserted, long runs of spaces (inside and at the end), unclosed brackets and
parentheses, a long word glued to the line's opening token, the line repeated. Each is built at
about 10 KB and 100 KB and timed in the same process, best of three, so a loaded machine slows
both alike: the 100 KB lines must cost less than 30 times the 10 KB ones (quadratic would be 100
times); a pattern fails only when three measurements in a row say so. No wall-clock bound (the
house rule).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from analyzer.parsers import FORMATS
from analyzer.parsers.base import Format, Pattern, Rejected
from analyzer.read.normalize import PREFIX_SAMPLES, normalize

SMALL, LARGE = 10_000, 100_000
RATIO = 30  # linear is ~10, quadratic ~100
FLOOR = 2e-3  # seconds: below this at 100 KB, nothing grew (a ratio of microseconds is noise)


def _fill(unit: str, size: int) -> str:
    return unit * (size // max(len(unit), 1) + 1)


def _tokens(line: str) -> list[str]:
    words = line.split()
    picks = {words[0], max(words, key=len), words[-1]} if words else set()
    picks.add(line[: max(1, len(line) // 3)])
    return sorted(picks)


def _variants(line: str, size: int) -> list[str]:
    """Adversarial lines of about ``size`` characters made from one sample line."""
    mid = len(line) // 2
    head, tail = line[:mid], line[mid:]
    out = [
        head + _fill(" ", size) + tail,  # a run of spaces inside
        line + _fill(" ", size),  # trailing spaces ("GPU name: x" + 80,000 spaces)
        line + " x" + _fill(" ", size) + "x",  # spaces then a word: `\S.*?\s*$` backtracking
        head + _fill("x", size) + tail,  # one long word ("ggml_metal_init: error: xxxx...")
        line + _fill("a", size),
        _fill("a", size) + line,
        _fill("(", size) + line,
        line + " (" + _fill("a", size),  # unclosed parenthesis ("using device X (aaaa...")
        line + _fill(" (", size),
        line + _fill("[", size),
        line + _fill("{", size),
        line + _fill('"', size),
        line + _fill("|", size),
        _fill(line + " ", size),  # the line repeated
        _fill(line, size),
    ]
    for token in _tokens(line):
        out.append(head + _fill(token, size) + tail)  # a run of one of its tokens inserted
        out.append(line + _fill(token + " ", size))
    out = [v[: size + len(line)] for v in out]
    # and each ended by a character no pattern ends on, so a pattern anchored at the end backtracks
    return out + [v + "~" for v in out]


def _once(run: Callable[[str], object], lines: list[str]) -> float:
    t = time.perf_counter()
    for text in lines:
        try:
            run(text)
        except (Rejected, ValueError, TypeError, OverflowError, RecursionError):
            pass
    return time.perf_counter() - t


def _costs(run: Callable[[str], object], small: list[str], large: list[str]) -> tuple[float, float]:
    """Best of three of each, the two sizes interleaved so that a spell of load slows both alike."""
    t_small = t_large = float("inf")
    for _ in range(3):
        t_small = min(t_small, _once(run, small))
        t_large = min(t_large, _once(run, large))
    return t_small, t_large

def _patterns(fmt: Format) -> list[Pattern]:
    seen: dict[int, Pattern] = {id(p): p for p in fmt.patterns}
    for sample in fmt.samples:
        if sample.via is not None:
            seen.setdefault(id(sample.via), sample.via)
    return list(seen.values())


CASES = [(fmt, pattern) for fmt in FORMATS for pattern in _patterns(fmt)]


def _assert_linear(run: Callable[[str], object], samples: list[str], what: str) -> None:
    small = [v for s in samples for v in _variants(s, SMALL)]
    large = [v for s in samples for v in _variants(s, LARGE)]
    # a quadratic pattern is over the ratio every time; a machine busy with other work only some of the
    # time, so a pattern fails only when three measurements in a row say so
    for _ in range(3):
        t_small, t_large = _costs(run, small, large)
        if t_large < FLOOR or t_large < RATIO * max(t_small, FLOOR / RATIO):
            return
    raise AssertionError((what, t_small, t_large))


@pytest.mark.parametrize("fmt,pattern", CASES,
                         ids=[f"{f.name}:{p.kind}:{i}" for i, (f, p) in enumerate(CASES)])
def test_declared_pattern_is_linear(fmt: Format, pattern: Pattern):
    """The pattern's own samples (those of its kind, or that name it as ``via``), else its format's."""
    own = [s.line for s in fmt.samples if s.via is pattern or (s.via is None and s.kind == pattern.kind)]
    samples = (own or [s.line for s in fmt.samples])[:4]
    _assert_linear(pattern.regex.search, samples, f"{fmt.name} {pattern.kind} {pattern.regex.pattern!r}")


def test_every_pattern_is_compiled_with_regex():
    """The declared patterns are the ``regex`` package's (possessive quantifiers, atomic groups)."""
    import regex

    for fmt, pattern in CASES:
        assert isinstance(pattern.regex, regex.Pattern), (fmt.name, pattern.kind)


def test_normalize_is_linear():
    """The prefixes normalize strips, on lines derived from their own samples."""
    _assert_linear(normalize, [raw for _name, raw, _text, _proc in PREFIX_SAMPLES], "normalize")
