"""The human report in plain words: its first line says what happens, why and
whether capscan can fix it; the confidence level says what it rests on; the
evidence, the reasons and the next steps agree with each other. Real fixtures
through the real pipeline and the real report renderer."""

from __future__ import annotations

import io

import pytest

from analyzer.diagnosis import Diagnosis
from analyzer.output.headline import confidence_clause, headline, speed_gap
from analyzer.output.report import console
from analyzer.output.run_report import run_lines
from analyzer.output.styled import plain_text, write_rich
from tests.ingest_util import FIXTURES, diagnosed


def report_of(run) -> list[str]:
    lines = run_lines(run)
    buf = io.StringIO()
    write_rich(lines, console(buf))
    assert plain_text(lines) == buf.getvalue()  # what a pipe gets is what rich prints
    return buf.getvalue().splitlines()


@pytest.mark.parametrize("files,first", [
    (("metal/m4-2026-08-guest-stock.log",),  # no host chip or arm64 build in the log (issue 21)
     "This VM runs llama.cpp on slow fallback paths, because its virtual GPU under-reports what it can do; "
     "capscan offers the fix only once the log shows an Apple-silicon host."),
    (("baselines/guest-stock-block-and-json.log",),
     "This VM runs llama.cpp on slow fallback paths, because its virtual GPU under-reports what it can do; "
     "capscan can fix that."),
    (("metal/m4-2026-08-host-m1-ultra.log", "baselines/guest-stock-block-and-json.log"),
     "This VM runs llama.cpp about 23x slower than its host, because its virtual GPU under-reports what it can do; "
     "capscan can fix that."),
    (("metal/m4-2026-08-host-m1-ultra.log", "shims/lume-shim-apple9-on-m1.log"),
     "This VM runs llama.cpp at 72% of its host's speed with full GPU capabilities: the rest is the virtual GPU's own "
     "cost, which no capability fix removes."),
    (("metal/m2-2024-10-amd-egpu-intel-mac.log",),
     "This GPU really lacks the features llama.cpp's fast paths need: nothing is misconfigured, and forcing them "
     "would give wrong results."),
    # (named by its pasted '$ llama-cli --version' command)
    (("metal/no-metal-rosetta-x86.log",), "Everything ran on the CPU: llama-cli did not use the GPU."),
    (("metal/m4-2026-08-host-m1-ultra.log",), "The GPU runs llama.cpp with its full capabilities: nothing to fix."),
    # a probe's output: no model ran, so the sentence says what llama.cpp would do with the device
    (("kernels/guest-kernels-pass.txt",),
     "In this VM, llama.cpp would run on slow fallback paths, because its virtual GPU under-reports what it can do; "
     "capscan can fix that."),
    (("probe/lume-probe-shim.txt",), "This VM's GPU shows its full capabilities to llama.cpp: nothing to fix."),
    (("probe/capscan-probe-host-m1-ultra.txt",), "The GPU shows its full capabilities to llama.cpp: nothing to fix."),
    (("timings/mlx-lm-benchmark.log",), "MLX is not slowed by a VM's capability clamp, so capscan has nothing to fix "
                                        "here."),
])
def test_first_line_says_it_in_plain_words(tmp_path, files, first):
    run = diagnosed(tmp_path, *files)[0]
    assert report_of(run)[0] == first


def test_the_fix_is_promised_only_when_fixable(tmp_path):
    # symptoms in a VM: a downgrade, but no positive evidence of an Apple-silicon host
    run = diagnosed(tmp_path, "rules/unsupported-op-paravirtual-listed.log")[0]
    assert run.diagnosis.verdict == "capability-downgrade" and not run.diagnosis.fixable
    first = report_of(run)[0]
    assert "can fix" not in first and "the GPU's own capability block" in first
    run = diagnosed(tmp_path, "metal/m4-2026-08-guest-stock.log")[0]  # the block, but no host shown
    first = report_of(run)[0]
    assert "can fix" not in first and "Apple-silicon host" in first


def test_a_fix_the_log_rules_out_is_named_in_the_first_line(tmp_path):
    """An x86_64 build in a guest: the first line names why capscan offers no fix, instead of asking for
    evidence of an Apple-silicon host that would not change the answer."""
    log = tmp_path / "rosetta-guest.log"
    log.write_text("build: 7012 (5be2c8aa1) with Apple clang version 17.0.0 (clang-1700.0.13.5) for "
                   "x86_64-apple-darwin24.6.0\n" + (FIXTURES / "metal/m4-2026-08-guest-stock.log").read_text())
    run = diagnosed(tmp_path, str(log))[0]
    assert run.diagnosis.verdict == "capability-downgrade" and not run.diagnosis.fixable
    first = report_of(run)[0]
    assert first.endswith("; capscan does not offer the fix here: the program is an x86_64 build "
                          "(x86_64-apple-darwin24.6.0), so an Intel Mac or Rosetta."), first
    assert "Apple-silicon host" not in first


def test_speed_gap_prefers_the_predicted_remedied_speed():
    prediction = [{"test": "tg128", "host_tok_s": 230.0, "per_token_s": 0.0005, "predicted_tok_s": 206.6,
                   "from_models": ["llama 7B Q4_0"]}]
    paired = {"run": 1, "why": "same model", "tests": [{"test": "tg128", "tok_s": 12.63, "baseline_tok_s": 287.0,
                                                        "ratio": 0.044, "per_token_s": 0.076}]}
    guest = {"verdict": "capability-downgrade", "fixable": True, "environment": "vm"}
    speeds = [{"test": "tg128", "tok_s": 12.63}]
    factor, against = speed_gap(Diagnosis.load({**guest, "prediction": prediction, "paired": paired}), speeds)
    assert against == "it could" and round(factor, 1) == 16.4
    assert speed_gap(Diagnosis.load({**guest, "paired": paired}), speeds)[1] == "its host"
    assert speed_gap(Diagnosis.load(guest), speeds) is None
    assert "about 16x slower than it could" in headline(
        "llama-bench", Diagnosis.load({**guest, "prediction": prediction, "paired": paired}), speeds)


@pytest.mark.parametrize("files,clause", [
    (("metal/m4-2026-08-guest-stock.log",), "medium confidence: the log does not name the host chip"),
    (("bench/host-m1-ultra.json", "bench/guest-stock.json"),
     "medium confidence: read from symptoms such as the speed gap or skipped kernels, not from printed capabilities; "
     "the host chip is known"),
    (("metal/m1-2023-11-mib.log",), "medium confidence: some capabilities are inferred from the printed GPU family, "
                                    "not printed"),
    (("metal/no-metal-rosetta-x86.log",), "high confidence: the log prints the deciding facts itself"),
    (("rules/unsupported-op-paravirtual-listed.log",), "low confidence: read from symptoms"),
])
def test_confidence_says_what_it_rests_on(tmp_path, files, clause):
    run = diagnosed(tmp_path, *files)[0]
    verdict_line = report_of(run)[2]
    assert clause in verdict_line
    caps = run.facts.capabilities
    assert confidence_clause(run.diagnosis, caps.simdgroup_reduction is not None or bool(run.facts.probe)) \
        in verdict_line


def test_mlx_report_shows_each_evidence_line_once_and_next_agrees(tmp_path):
    run = diagnosed(tmp_path, "timings/mlx-lm-benchmark.log")[0]
    lines = report_of(run)
    numbered = [l.split()[0] for l in lines[lines.index("  evidence:") + 1:lines.index("  next:")]
                if l.split()[0].isdigit()]
    assert numbered and len(numbered) == len(set(numbered))
    nxt = " ".join(lines[lines.index("  next:") + 1:])
    assert "Nothing to remedy for MLX" in nxt and "Metal init" not in nxt


def test_rosetta_run_gives_one_reason(tmp_path):
    run = diagnosed(tmp_path, "metal/no-metal-rosetta-x86.log")[0]
    reasons = [f for f in run.diagnosis.stored()["findings"] if f["severity"] in ("error", "warning")]
    assert [f["rule"] for f in reasons] == ["no-metal-device"]
    assert "Rosetta" in reasons[0]["message"]
    assert not any("error:" in line or "CPU-only build" in line for line in report_of(run))


def test_what_the_log_did_not_print_reads_not_in_the_log(tmp_path):
    """A Vulkan run prints no Metal family nor capability flags: the report says so in words, never `-` or `?`,
    and its confidence does not claim an inference from a family the log never printed (issue 41)."""
    run = diagnosed(tmp_path, "backends/vulkan-moltenvk-m4max.log")[0]
    lines = report_of(run)
    text = "\n".join(lines)
    assert "families not in the log" in text and "families -" not in text
    printed = next(l for l in lines if l.lstrip().startswith("printed"))
    assert "simdgroup reduction not in the log" in printed and "unified memory yes" in printed
    assert " -," not in printed
    assert "medium confidence: the Vulkan backend prints no GPU family or capability flags" in lines[2]
    assert "inferred from the printed GPU family" not in text
    # the plain words for "no capability clamp applies to this backend"
    assert "capscan's fix (for a VM whose GPU reports itself as an older model than it is) does not apply" in text
    assert "no capability clamp" not in text


def test_a_run_naming_neither_program_nor_backend_says_so(tmp_path):
    run = diagnosed(tmp_path, "field/032-llama-cpp-python-gha-unsupported-rms-norm-2024.log")[0]
    assert not run.facts.program and not run.facts.backend
    lines = report_of(run)
    assert lines[1].endswith("  program and backend not in the log"), lines[1]
    assert "? / ?" not in "\n".join(lines)


def test_an_intel_macs_host_chip_is_never_its_gpu(tmp_path):
    """An Intel Mac running Metal on its AMD GPU: the host chip is the processor it names, or none, never the
    GPU (host_chip `AMD Radeon Pro 5500M` read as a chip to a non-GPU reader)."""
    name = "field/179-whisper-rs-intel-mbp-amd-5500m-metallib-null-2023.log"
    run = diagnosed(tmp_path, name)[0]
    assert run.diagnosis.environment == "bare-metal" and run.diagnosis.host_chip is None
    assert "5500M" not in report_of(run)[1]
    log = tmp_path / "intel-mac.log"
    log.write_text("Processor Name: 6-Core Intel Core i7\n" + (FIXTURES / name).read_text())
    run = diagnosed(tmp_path, str(log))[-1]
    assert run.diagnosis.host_chip == "6-Core Intel Core i7", run.diagnosis.host_chip


def test_the_environment_note_only_where_it_changes_something(tmp_path):
    """A CPU-only run is the same in a VM and on bare metal: no note asking which it was. An unknown run,
    which a VM's clamp may explain, keeps it."""
    runs = diagnosed(tmp_path, "metal/no-metal-rosetta-x86.log")
    assert runs[0].diagnosis.verdict == "no-gpu-offload" and not runs[0].diagnosis.environment
    assert runs[0].diagnosis.report_lines.get("environment")  # the JSON keeps it
    assert not any(l.startswith("  environment:") for l in report_of(runs[0]))
    unknown = diagnosed(tmp_path, "field/032-llama-cpp-python-gha-unsupported-rms-norm-2024.log")[0]
    assert unknown.diagnosis.verdict == "unknown"
    assert any(l.startswith("  environment: Whether this ran in a VM") for l in report_of(unknown))
