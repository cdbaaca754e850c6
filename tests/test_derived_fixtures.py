"""The derived fixtures (wrapped/, bad/) cannot drift from what tests/fixtures/_derive.py makes of the committed
sources, and expected.json and README.md cannot drift from the files on disk. Hand-made fixtures are the
committed files themselves: for them only the catalogue checks apply."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
DERIVED_DIRS = ("wrapped", "bad")
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
README = (FIXTURES / "README.md").read_text(encoding="utf-8")


def _derive_module():
    spec = importlib.util.spec_from_file_location("capscan_fixtures_derive", FIXTURES / "_derive.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True  # no __pycache__ among the fixtures the sweeps walk
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.dont_write_bytecode = dont_write
    return mod


DERIVE = _derive_module()


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("derived")
    DERIVE.write(out)
    return out


def derived_paths(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for d in DERIVED_DIRS for p in (root / d).rglob("*") if p.is_file()}


def test_every_derived_file_is_byte_identical_to_the_committed_one(regenerated):
    paths = derived_paths(regenerated)
    assert paths
    differ = [p for p in sorted(paths) if (regenerated / p).read_bytes() != (FIXTURES / p).read_bytes()]
    assert differ == [], f"regenerate with python3 tests/fixtures/_derive.py: {differ}"


def test_every_derived_expectation_and_readme_line_is_what_the_generator_computes(regenerated):
    computed = json.loads((regenerated / "expected.json").read_text(encoding="utf-8"))
    assert set(computed) == derived_paths(regenerated)
    for path, entry in computed.items():
        assert EXPECTED.get(path) == entry, path
    for line in (regenerated / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("- `"):
            assert line in README.splitlines(), line


def test_every_file_in_the_derived_folders_comes_from_the_generator(regenerated):
    assert derived_paths(FIXTURES) == derived_paths(regenerated)


def test_every_expected_path_exists_and_is_listed_in_the_readme():
    listed = set(re.findall(r"^- `([^`]+)` — ", README, re.MULTILINE))
    missing = [p for p in EXPECTED if not (FIXTURES / p).is_file()]
    unlisted = [p for p in EXPECTED if p not in listed]
    assert (missing, unlisted) == ([], [])


@pytest.mark.parametrize("path", sorted(EXPECTED))
def test_every_expectation_uses_the_documented_keys(path):
    """The invariants the old generator asserted for every entry, now that most entries are edited by hand."""
    entry = EXPECTED[path]
    assert set(entry) <= set(DERIVE.KEY_ORDER)
    assert "runs" in entry and "verdict" in entry
    assert entry.get("families", []) == sorted(entry.get("families", []))
    if entry["runs"] > 1:
        assert len(entry["per_run"]) == entry["runs"]
