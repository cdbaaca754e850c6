"""The mutation list of `make mutate` (scripts/mutate.py) cannot rot silently: every declared mutant's
snippet still occurs exactly once in its file, ids are unique, and an equivalent mutant says why.
(The mutation run itself is on demand, not in CI: see CONTRIBUTING.md.)"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _harness():
    spec = importlib.util.spec_from_file_location("capscan_mutate", ROOT / "scripts" / "mutate.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_every_declared_mutant_still_applies_exactly_once():
    mutate = _harness()
    assert len(mutate.MUTANTS) >= 40
    assert mutate.check() == []


def test_every_equivalent_mutant_says_why_and_every_mutant_what_it_means():
    for m in _harness().MUTANTS:
        assert m.why.strip(), m.id
        assert m.equivalent is None or len(m.equivalent) > 20, m.id


def test_the_check_finds_a_stale_snippet(tmp_path):
    mutate = _harness()
    (tmp_path / "f.py").write_text("x = 1\nx = 1\n")
    stale = (mutate.Mutant("gone", "f.py", "y = 2", "y = 3", "w"), mutate.Mutant("twice", "f.py", "x = 1", "x = 2", "w"),
             mutate.Mutant("nofile", "g.py", "a", "b", "w"))
    problems = mutate.check(stale, tmp_path)
    assert [p.split(":")[0] for p in problems] == ["gone", "twice", "nofile"]
