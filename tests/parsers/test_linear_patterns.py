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

CASES = [(fmt, pattern) for fmt in FORMATS for pattern in fmt.declared_patterns()]


def test_every_pattern_is_compiled_with_regex():
    """The declared patterns are the ``regex`` package's (possessive quantifiers, atomic groups)."""
    for fmt, pattern in CASES:
        assert isinstance(pattern.regex, regex.Pattern), (fmt.name, pattern.kind)
