"""Issue 38: a piped `--list-devices` output is named as the device listing it is, not "piped log"."""

from __future__ import annotations

import datetime as dt

import pytest

from analyzer.runs.naming import piped_source_name
from tests.ingest_util import diagnosed

WHEN = dt.datetime(2026, 10, 1, 9, 30, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("name", [
    "rules/list-devices-none-linux-2026.log",
    "rules/list-devices-none-bare-2026.log",
    "rules/list-devices-none-windows-2025.log",
])
def test_a_device_listing_is_named_so(tmp_path, name):
    run = diagnosed(tmp_path, name)[0]
    assert piped_source_name(run.facts, 1, WHEN) == "device listing · 2026-10-01 09:30"


def test_a_run_with_a_program_keeps_its_name(tmp_path):
    run = diagnosed(tmp_path, "metal/no-metal-rosetta-x86.log")[0]  # a listing, then the model ran
    assert not piped_source_name(run.facts, 1, WHEN).startswith("device listing")
