"""analyzer.pipeline is the front door: the only module above ingest and the rules that reads inputs in
and diagnoses. The import contract (pyproject.toml) must really fail when a command goes round it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _lint_imports(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())"], cwd=tree, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "HOME": str(tree)}, timeout=300)


@pytest.mark.parametrize("module", ["analyzer.ingest", "analyzer.rules.diagnose", "analyzer.rules.today"])
def test_a_command_that_goes_round_the_pipeline_breaks_the_contract(tmp_path, module):
    pytest.importorskip("importlinter", reason="make test installs the lint extra")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "analyzer", tree / "analyzer", ignore=shutil.ignore_patterns("__pycache__", "_native"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    # watch calling a diagnosing or ingesting module itself, inside a function (a lazy import counts)
    watch = tree / "analyzer" / "fleet" / "watch.py"
    watch.write_text(watch.read_text() + f"\n\ndef _round():\n    import {module}  # noqa\n")
    result = _lint_imports(tree)
    assert result.returncode == 1
    assert "Only the pipeline (analyzer.pipeline) ingests and diagnoses" in result.stdout
    assert f"analyzer.fleet.watch -> {module}" in result.stdout
    # the layers contract still holds: the pipeline's contract is what caught it
    assert "each layer imports only the layers below it KEPT" in result.stdout


def test_the_rules_reaching_for_a_parser_break_the_contract(tmp_path):
    """The rules read runs, never log lines: the speed ceilings they share with the parsers live in
    analyzer.plausible, below both."""
    pytest.importorskip("importlinter", reason="make test installs the lint extra")
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "analyzer", tree / "analyzer", ignore=shutil.ignore_patterns("__pycache__", "_native"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    baseline = tree / "analyzer" / "rules" / "baseline.py"
    baseline.write_text(baseline.read_text() + "\n\ndef _round():\n    from analyzer.parsers import plausible  # noqa\n")
    result = _lint_imports(tree)
    assert result.returncode == 1
    assert "The rules import no parser BROKEN" in result.stdout
    assert "analyzer.rules.baseline -> analyzer.parsers.plausible" in result.stdout
