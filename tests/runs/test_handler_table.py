"""Every event kind a parser can emit has exactly one handler in runs/, and every handler
answers a kind some parser emits (a misspelt kind would otherwise drop events silently)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import analyzer.parsers as parsers_pkg
from analyzer.parsers import FORMATS
from analyzer.parsers.base import Event
from analyzer.runs import assembler as assembler_mod
from analyzer.runs.assembler import Assembler, handler_table

PARSERS_DIR = Path(parsers_pkg.__file__).parent


def _literal_event_kinds() -> set[str]:
    """Kinds written as a literal first argument of Event(...) anywhere in analyzer/parsers/."""
    kinds = set()
    for path in PARSERS_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Event" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    kinds.add(first.value)
    return kinds


def emitted_kinds() -> set[str]:
    kinds = _literal_event_kinds()
    for fmt in FORMATS:
        kinds |= {p.kind for p in fmt.patterns} | {s.kind for s in fmt.samples}
    return kinds


def test_the_kind_scan_finds_both_pattern_and_collector_kinds():
    kinds = emitted_kinds()
    # non-vacuity: one kind from a pattern, one built by a collector, one by the dispatcher itself
    assert {"metal.device", "probe.threadgroup_memory", "bench.rows", "hint.process"} <= kinds
    assert len(kinds) > 60


@pytest.mark.parametrize("kind", sorted(emitted_kinds()))
def test_every_emitted_kind_has_a_handler(kind):
    assert kind in handler_table(), f"no handler in analyzer/runs/ for parser event kind {kind!r}"


def test_every_handler_answers_an_emitted_kind():
    dead = sorted(set(handler_table()) - emitted_kinds())
    assert not dead, f"handlers for kinds no parser emits (misspelt?): {dead}"


def test_a_kind_claimed_by_two_families_is_refused(monkeypatch):
    from analyzer.runs import context, system

    monkeypatch.setitem(context.HANDLERS, "model.name", system.HANDLERS["model.name"])
    with pytest.raises(RuntimeError, match="model.name"):
        handler_table()


def test_an_unknown_kind_is_counted_not_lost_silently():
    runs = []
    asm = Assembler(runs.append, lambda run, rows: None)
    asm.feed([Event("metal.devcie", 3, "typo"), Event("model.name", 4, "general.name = x", {"name": "x"})])
    asm.finish()
    assert asm.unhandled == {"metal.devcie": 1}
    assert [r.facts.model for r in runs] == ["x"]


def test_the_assembler_module_stays_small():
    # the lifecycle and the table only: what events mean lives in the family modules
    assert len(Path(assembler_mod.__file__).read_text().splitlines()) < 140
