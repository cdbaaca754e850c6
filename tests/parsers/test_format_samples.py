"""The one parametrised test over every format's declared samples: each
sample line must pass the prefilter and produce its declared event (the same
samples `capscan formats` prints)."""

from __future__ import annotations

import math

import pytest

from analyzer.parsers import FORMATS, LITERALS, Dispatcher

CASES = [(fmt, sample) for fmt in FORMATS for sample in fmt.samples]


def _subset(expected: dict, got: dict) -> bool:
    for key, value in expected.items():
        if key not in got:
            return False
        g = got[key]
        if isinstance(value, float) and isinstance(g, float) and (math.isinf(value) or math.isinf(g)):
            if value != g:
                return False
        elif isinstance(value, dict) and isinstance(g, dict):
            if not _subset(value, g):
                return False
        elif g != value:
            return False
    return True


@pytest.mark.parametrize("fmt,sample", CASES, ids=[f"{f.name}:{s.kind}:{i}" for i, (f, s) in enumerate(CASES)])
def test_sample(fmt, sample):
    if sample.via is not None:
        # a continuation line, parsed inside its block by this pattern
        data = sample.via.match(sample.line)
        assert data is not None, sample.line
        assert _subset(sample.data, data), data
        return
    assert any(lit in sample.line for lit in LITERALS), "sample would not pass the prefilter"
    dispatcher = Dispatcher()
    events = dispatcher.feed(1, sample.line.encode())
    if sample.rejected:  # a line of the format the parser refuses: counted, and no event of its kind
        assert dispatcher.rejected == 1 and sample.kind not in [e.kind for e in events], events
        return
    assert dispatcher.rejected == 0
    kinds = [e.kind for e in events]
    assert sample.kind in kinds, f"{sample.line!r} gave {kinds}"
    ev = next(e for e in events if e.kind == sample.kind)
    assert _subset(sample.data, ev.data), ev.data


def test_every_format_has_samples():
    for fmt in FORMATS:
        assert fmt.samples, fmt.name
        assert fmt.literals, fmt.name


def test_formats_command_lists_every_sample():
    from click.testing import CliRunner

    from analyzer.cli import cli

    out = CliRunner().invoke(cli, ["formats"]).output
    for fmt, sample in CASES:
        assert sample.line[:150] in out
