"""Forms in which real logs arrive that are not the program's own lines (issue 22, item 2): log
text kept inside JSON string values, UTF-8 byte-order marks and UTF-16 files, docker compose
prefixes. Each fixture in tests/fixtures/forms/ (README.md there says where each came from) is
read by the real pipeline into a real SQLite file and diagnosed."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.read.normalize import normalize
from tests.rules.test_shapes import diagnosed as _diagnosed

FIX = Path(__file__).resolve().parent.parent / "fixtures" / "forms"
PROBE = dict(verdict="capability-downgrade", environment="vm", device="Apple Paravirtual device",
             families=[1001, 1002, 1003, 1004, 1005, 2002, 3001, 3002, 3003], throughput=[])

# file -> per run (in file order): verdict, environment, device, families, throughput
CASES: dict[str, list[dict]] = {
    # docker compose: v2 "<service>-<n>  | ", v1 "<service>_<n>  | ", coloured, with `logs -t` times
    "compose-v2-probe.log": [PROBE],
    "compose-v1-colour-bench-json.log": [dict(verdict="unknown", environment="vm", device="Apple Paravirtual device",
                                              families=[], throughput=[("pp512", 431.86), ("tg128", 12.63)])],
    "compose-v2-bench-csv.log": [dict(verdict="healthy", environment="bare-metal", device="Apple M1 Ultra", families=[],
                                      throughput=[("pp512", 517.88), ("tg128", 52.38)])],
    "compose-v2-colour-venus.log": [dict(verdict="healthy", environment="vm", device="Virtio-GPU Venus (Apple M1 Max)",
                                         families=[], throughput=[("prompt", 410.4), ("generation", 77.45)])],
    "compose-v2-timestamps-llvmpipe.log": [dict(verdict="no-gpu-offload", environment=None,
                                                device="llvmpipe (LLVM 20.1.8, 128 bits)", families=[],
                                                throughput=[("prompt", 2.51), ("generation", 2.3)])],
}


def _runs(tmp_path: Path, name: str) -> list[dict]:
    runs, rows = _diagnosed(tmp_path, name)
    return [dict(verdict=r.diagnosis["verdict"], environment=r.diagnosis["environment"], device=r.facts.device.name,
                 families=r.facts.device.families, throughput=[(t, round(s, 2)) for t, s in rows[r.id]])
            for r in runs]


@pytest.fixture(autouse=True)
def _forms_folder(monkeypatch):
    import tests.rules.test_shapes as shapes
    monkeypatch.setattr(shapes, "FIX", FIX)


@pytest.mark.parametrize("name", sorted(CASES))
def test_form(tmp_path, name):
    assert _runs(tmp_path, name) == CASES[name]


def test_every_form_fixture_has_a_case():
    assert {p.name for p in FIX.iterdir() if p.is_file() and p.name != "README.md"} == set(CASES)


def test_compose_look_alikes_are_left_alone():
    # a markdown row, a service name without its replica number, a table cell that is a name
    for line in ("| llama-1 | 12.63 |", "web  | build: ee3d1b54c (10167)", "llama-1 |x"):
        assert normalize(line) == ([line], None)
