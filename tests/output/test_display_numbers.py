"""Speeds as a person reads them (issue 24, "smaller"): a figure no GPU reaches (1e308, from a broken or hostile
log) is printed in a few characters, never as a 309-digit number; real speeds keep two decimals."""

from __future__ import annotations

import pytest

from analyzer.output.display import fmt_tps


@pytest.mark.parametrize("value,shown", [(4871.987, "4,871.99"), (12.63, "12.63"), (999_999_999.0, "999,999,999.00"),
                                         (1e308, "1e+308"), (2.5e12, "2.5e+12"), (float("inf"), "inf"), (None, "-")])
def test_speeds_are_printed_short(value, shown):
    assert fmt_tps(value) == shown
    assert len(fmt_tps(value)) <= 16
