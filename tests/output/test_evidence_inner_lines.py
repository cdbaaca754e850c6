"""A log inside one JSON string (a CI artifact's stderr_tail) holds many log lines on one physical line:
the report lists each line read as evidence, not one line for the whole object (issue 41 item 5)."""

from __future__ import annotations

from tests.conftest import REPO, run_capscan

ARTIFACT = REPO / "tests" / "fixtures" / "forms" / "json-ci-artifact-stderr-tail.json"


def test_each_line_inside_a_json_string_is_its_own_evidence_line(tmp_path):
    out = run_capscan("diagnose", str(ARTIFACT), db=tmp_path / "c.db", check=True).stdout.decode()
    evidence = out.split("  evidence:\n", 1)[1].split("  next:", 1)[0].splitlines()
    # every one on physical line 20 (the stderr_tail member), each with its own text, in the log's order
    assert evidence == [
        "        20  ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)",
        "        20  ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)",
        "        20  ggml_metal_device_init: GPU family: MTLGPUFamilyCommon3 (3003)",
        "        20  ggml_metal_device_init: simdgroup reduction   = false",
        "        20  ggml_metal_device_init: simdgroup matrix mul. = false",
        "        20  ggml_metal_device_init: has bfloat            = false",
    ]
    assert '"stderr_tail"' in ARTIFACT.read_text().splitlines()[19]  # line 20 is that member


def test_a_line_with_several_events_is_still_shown_once(tmp_path):
    # llama.cpp's perf lines and llama-bench rows can give several events on one line: one evidence line each
    out = run_capscan(db=tmp_path / "c.db", input=(REPO / "examples" / "m1-ultra-guest-stock-json.log").read_bytes(),
                      check=True).stdout.decode()
    numbers = [line.split()[0] for line in out.split("  evidence:\n", 1)[1].split("  next:", 1)[0].splitlines()]
    assert numbers == ["5", "6", "7", "8", "9", "11", "18"]
