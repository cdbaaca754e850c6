"""Every evidence kind a rule names is one some parser emits (issue 39, item 2).

The rules find their lines by the kind of event that read them (``RunView.lines("metal.flag")``,
``o.kind == "devices.item"``, ``LIST_KINDS``). A misspelt or retired kind finds nothing, silently:
the finding loses its evidence, or a sign its line, and no test of the verdict notices. So the kinds
named in analyzer/rules/ are read from the source and checked against what the parsers declare
(their patterns, samples and literal ``Event(...)`` kinds: tests/runs/test_handler_table.py), and the
events a handler makes of a parsed one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import analyzer.rules as rules_pkg
import analyzer.runs as runs_pkg
from tests.runs.test_handler_table import emitted_kinds as parser_kinds

RULES_DIR = Path(rules_pkg.__file__).parent
RUNS_DIR = Path(runs_pkg.__file__).parent


def emitted_kinds() -> set[str]:
    """What the parsers emit, and the events a handler in analyzer/runs/ makes of a parsed one (a
    llama-bench row's device, ``Event("bench.device", ...)``), which it keeps as evidence too."""
    kinds = set(parser_kinds())
    for path in RUNS_DIR.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Event" and node.args:
                kinds.update(_constants(node.args[0]))
    return kinds


def _constants(node: ast.AST) -> list[str]:
    """The string constants of a literal: "a", ("a", "b"), {"a"}, frozenset({"a"})."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for elt in node.elts for s in _constants(elt)]
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("frozenset", "set", "tuple") and node.args:
        return _constants(node.args[0])
    return []


def _is_kind(node: ast.AST) -> bool:
    """``x.kind`` or a name holding kinds (``kinds``, ``LIST_KINDS``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "kind"
    return isinstance(node, ast.Name) and node.id.lower().endswith("kinds")


def named_kinds(source: str) -> set[str]:
    """Kinds a module names: arguments of ``.lines(...)``, literals compared with a kind
    (``o.kind == "x"``, ``e.kind in ("x", "y")``, ``"x" in kinds``) and ``*_KINDS`` constants."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "lines":
            out.update(s for arg in node.args for s in _constants(arg))
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_is_kind(s) for s in sides):
                out.update(s for side in sides if not _is_kind(side) for s in _constants(side))
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.endswith("_KINDS")
                                                  for t in node.targets):
            out.update(_constants(node.value))
    return out


def rule_kinds() -> dict[str, set[str]]:
    return {path.name: named_kinds(path.read_text()) for path in sorted(RULES_DIR.glob("*.py"))}


def test_the_scan_finds_kinds_in_each_form_it_reads():
    # non-vacuity: a .lines() argument, a compared kind, a "x" in kinds test and a *_KINDS constant
    found = set().union(*rule_kinds().values())
    assert {"metal.flag", "devices.item", "timing.pair", "cuda.device", "backend.loaded"} <= found
    assert len(found) > 40


def test_the_scan_reports_a_kind_no_parser_emits():
    source = 'def f(v, e, kinds):\n    v.lines("metal.flag", "probe.cpu_brand", limit=1)\n' \
             '    return e.kind in ("host.processor", "probe.nope") or "timing.nope" in kinds\n'
    assert named_kinds(source) - emitted_kinds() == {"probe.cpu_brand", "probe.nope", "timing.nope"}


@pytest.mark.parametrize("module", sorted(rule_kinds()))
def test_every_kind_a_rule_names_is_emitted_by_a_parser(module):
    dead = sorted(rule_kinds()[module] - emitted_kinds())
    assert not dead, f"analyzer/rules/{module} names evidence kinds no parser emits (the lookup finds nothing): {dead}"
