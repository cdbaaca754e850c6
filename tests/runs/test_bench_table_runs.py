"""Issue 22 for llama-bench markdown tables: each stated configuration is its own figure, and rows
that belong to different processes are different runs. One llama-bench build prints one backend
column for every row, and its header once: a row of another backend, or a header after a table's
rows, is another invocation (several backends' tables pasted in one log). The dev column
(``-dev``, 2025 on) is a configuration too, and ``none`` means the CPU alone.

Through the real pipeline (ingest into a temp database, diagnose); the field logs are real, the
variants are cut from them or written in llama-bench's own layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.model import figure_key
from tests.runs.test_configurations import diagnosed

FIX = Path(__file__).resolve().parent.parent / "fixtures"
FIELD_006 = (FIX / "field/006-llama-bench-vulkan-opencl-rocm-6800xt-2024.log").read_text()
FIELD_142 = (FIX / "field/142-llama-bench-iris-xe-opencl-vulkan-cpu-2024.log").read_text()
FIELD_159 = (FIX / "field/159-llama-bench-windows-cuda-present-dev-none-2026.log").read_text()
HEADER, RULE = FIELD_006.splitlines()[:2]


def figures(run) -> dict[str, float]:
    return {figure_key(t["test"], t.get("config")): t["tok_s"] for t in run.throughput}


def test_three_backends_at_two_offloads_are_three_runs_of_their_own_figures():
    runs = diagnosed(FIELD_006)
    assert [r.facts.bench_backends for r in runs] == ["OpenCL", "Vulkan", "ROCm"]
    assert figures(runs[0]) == {"pp512 [ngl=0]": 103.91, "tg128 [ngl=0]": 4.45, "pp512 [ngl=99]": 121.56,
                                "tg128 [ngl=99]": 21.17}
    assert figures(runs[1])["pp512 [ngl=99]"] == 374.44 and figures(runs[2]) == {
        "pp512 [ngl=0]": 248.76, "tg128 [ngl=0]": 4.48, "pp512 [ngl=99]": 684.11}
    # each run starts at its own first row
    assert [r.facts.first_line for r in runs] == [3, 7, 11]


def test_gpu_and_cpu_builds_in_one_table_are_apart_and_the_cpu_ones_say_so():
    runs = diagnosed(FIELD_142)
    assert [r.facts.bench_backends for r in runs] == ["OpenCL", "Vulkan", "CPU AVX2", "CPU AVX512"]
    assert [figures(r)["tg128 [ngl=99]" if i < 2 else "tg128 [ngl=4]"] for i, r in enumerate(runs)] == [
        3.55, 5.54, 6.53, 6.70]
    assert {r.diagnosis.verdict for r in runs[2:]} == {"no-gpu-offload"}
    assert not any(r.diagnosis.fixable for r in runs)


def test_a_second_header_after_rows_is_another_run_even_of_the_same_backend():
    # the same backend and configuration in two invocations' tables: two runs, never one median
    rows = FIELD_006.splitlines()
    again = rows[8].replace("374.44 ± 4.66", "362.10 ± 3.98")
    text = "\n".join([HEADER, RULE, rows[8], rows[9], "", "build: 1a2b3c4d (1975)", HEADER, RULE, again])
    runs = diagnosed(text)
    assert [len(r.throughput) for r in runs] == [2, 1]
    assert [figures(r)["pp512 [ngl=99]"] for r in runs] == [374.44, 362.10]


def test_rows_of_one_backend_stay_one_run():
    rows = FIELD_006.splitlines()
    runs = diagnosed("\n".join([HEADER, RULE, *rows[6:10]]))
    assert len(runs) == 1 and len(runs[0].throughput) == 4


def test_hand_labelled_rows_of_one_backend_stay_one_run():
    # 'Vulkan (master)' / 'Vulkan (PR)': one backend, two builds told apart by the label (a hand-edited table)
    rows = FIELD_006.splitlines()[6:8]
    text = "\n".join([HEADER, RULE, *(r.replace("| Vulkan     |", "| Vulkan (master) |") for r in rows),
                      *(r.replace("| Vulkan     |", "| Vulkan (PR) |") for r in rows)])
    runs = diagnosed(text)
    assert len(runs) == 1 and len(runs[0].throughput) == 4


def test_dev_none_is_a_cpu_run_whatever_the_backend_column_says():
    [run] = diagnosed(FIELD_159)
    assert run.facts.bench_devices == "none"
    assert figures(run) == {"pp512 [ngl=-1 dev=none]": 195.09}
    assert run.diagnosis.verdict == "no-gpu-offload" and not run.diagnosis.fixable
    [finding] = [f for f in run.diagnosis.stored()["findings"] if f["rule"] == "zero-layers-offloaded"]
    assert "-dev none" in finding["message"] and finding["evidence"][0]["line"] == 9


@pytest.mark.parametrize("dev", ["CUDA0", "CUDA0/CUDA1", "auto"])
def test_a_named_device_is_not_read_as_cpu_only(dev):
    text = (FIX / "rules/bench-dev-cuda0-2026.md").read_text().replace("| CUDA0        |", f"| {dev:<12} |")
    [run] = diagnosed(text)
    assert run.facts.bench_devices == dev
    assert run.diagnosis.verdict != "no-gpu-offload", run.diagnosis.summary
    assert "zero-layers-offloaded" not in [f["rule"] for f in run.diagnosis.stored()["findings"]]


def test_dev_none_and_a_gpu_device_in_one_sweep_are_two_figures():
    lines = FIELD_159.splitlines()
    row = lines[-1]
    text = "\n".join([*lines, row.replace("|  -1 | none         |", "|  99 | CUDA0        |").replace(
        "195.09 ± 19.68", "4210.55 ± 31.02")])
    [run] = diagnosed(text)
    assert figures(run) == {"pp512 [ngl=-1 dev=none]": 195.09, "pp512 [ngl=99 dev=CUDA0]": 4210.55}
