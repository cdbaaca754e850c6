"""Issue 38: a piped `--list-devices` output is named as the device listing it is, not "piped log"."""

from __future__ import annotations

import datetime as dt

import pytest

from analyzer.runs.naming import piped_source_name
from tests.ingest_util import diagnosed

WHEN = dt.datetime(2026, 10, 1, 9, 30, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("name, program", [
    ("rules/list-devices-none-linux-2026.log", ""),
    ("rules/list-devices-none-bare-2026.log", "llama-cli "),  # its pasted command names the program
    ("rules/list-devices-none-windows-2025.log", ""),
])
def test_a_device_listing_is_named_so(tmp_path, name, program):
    run = diagnosed(tmp_path, name)[0]
    assert piped_source_name(run.facts, 1, WHEN) == f"{program}device listing · 2026-10-01 09:30"


def test_a_run_with_a_program_keeps_its_name(tmp_path):
    run = diagnosed(tmp_path, "metal/no-metal-rosetta-x86.log")[0]  # a listing, then the model ran
    assert not piped_source_name(run.facts, 1, WHEN).startswith("device listing")


@pytest.mark.parametrize("name, model", [
    ("rules/llama-cli-2026-banner-model.log", "Qwen3-1.7B-Q4_K_M"),  # llama-cli's 2026 banner: `model      : ...`
    ("rules/llama-server-2026-loading-model.log", "gemma-3-4b-it-Q4_K_M"),  # `load_model: loading model '...'`
    ("shapes/crash-mul-mat-no-block.log", "qwen2.5-0.5b-instruct-q4_k_m"),
])
def test_the_model_file_the_log_names_names_the_run(tmp_path, name, model):
    run = diagnosed(tmp_path, name)[0]
    assert f" · {model} · 2026-10-01 09:30" in piped_source_name(run.facts, 1, WHEN)


def test_the_loaders_general_name_still_comes_first():
    """A log with both keeps the model's own name (general.name, llama-bench's model_type)."""
    from analyzer.model import RunFacts

    facts = RunFacts(first_line=1, last_line=9, program="llama-server", model="TinyLlama",
                     model_file="/m/tinyllama-1.1b-chat.Q4_K_M.gguf")
    assert piped_source_name(facts, 1, WHEN) == "llama-server · TinyLlama · 2026-10-01 09:30"


@pytest.mark.parametrize("name, when", [
    ("../../examples/m1-ultra-guest-stock-json.log", "2026-08-09 18:13"),  # -o json 2>&1 (its first test_time)
    ("field/101-llama-bench-json-gh-runner-macos15-qwen-1-5b-2026.log", None),  # GitHub runner, -o json stdout
    ("field/338-llama-bench-cpu-sql-ngl-0-99-2026.log", None),
    ("field/332-llama-bench-cpu-csv-ngl-0-99-2026.log", None),
])
def test_a_run_is_named_by_the_time_its_log_printed(tmp_path, name, when):
    """llama-bench's JSON, CSV and SQL rows carry test_time: the run is named by it, not by when it was read."""
    run = diagnosed(tmp_path, name)[0]
    assert run.facts.log_time is not None and run.facts.log_time.endswith("Z")
    shown = run.facts.log_time[:16].replace("T", " ")
    assert when is None or shown == when
    assert piped_source_name(run.facts, 1).endswith(f" · {shown}")
    assert piped_source_name(run.facts, 1, WHEN).endswith(" · 2026-10-01 09:30")  # a time given wins


@pytest.mark.parametrize("value", ["yesterday", "2026-13-40T99:00:00Z", 1723224783, "", "x" * 100])
def test_a_test_time_that_is_no_time_names_nothing(value):
    from analyzer.parsers.bench import log_time
    assert log_time(value) is None
