"""Every declared pattern is the ``regex`` package's, whose possessive quantifiers and atomic groups keep
matching linear in the line (issue 24, "Linear matching").

Whether each pattern really runs in time linear in its line is measured by ``bench/linearity.py``
(``make bench-linear``): each pattern against adversarial lines made from its own samples at 10 KB and
100 KB, the two sizes timed in one process. That is a wall clock, so it lives in bench/ and not here: the
regex engine offers no count of its steps, and a timing ratio fails on a busy machine (issue 39).
"""

from __future__ import annotations

import regex

from analyzer.parsers import FORMATS
from analyzer.parsers.base import Format, Pattern


def _patterns(fmt: Format) -> list[Pattern]:
    seen: dict[int, Pattern] = {id(p): p for p in fmt.patterns}
    for sample in fmt.samples:
        if sample.via is not None:
            seen.setdefault(id(sample.via), sample.via)
    return list(seen.values())


CASES = [(fmt, pattern) for fmt in FORMATS for pattern in _patterns(fmt)]


def test_every_pattern_is_compiled_with_regex():
    """The declared patterns are the ``regex`` package's (possessive quantifiers, atomic groups)."""
    for fmt, pattern in CASES:
        assert isinstance(pattern.regex, regex.Pattern), (fmt.name, pattern.kind)
