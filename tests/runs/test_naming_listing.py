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
