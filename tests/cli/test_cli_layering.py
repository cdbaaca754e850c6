"""The CLI sits on top: nothing in analyzer/ outside analyzer/cli/ imports it
(the remedy machinery, the store, the rules and the TUI are usable without click)."""

from __future__ import annotations

import ast
from pathlib import Path

ANALYZER = Path(__file__).resolve().parent.parent.parent / "analyzer"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_nothing_below_the_cli_imports_it():
    offenders = {}
    for path in ANALYZER.rglob("*.py"):
        rel = path.relative_to(ANALYZER)
        if rel.parts[0] == "cli" or rel.name == "__main__.py":
            continue
        bad = sorted(n for n in _imports(path) if n == "analyzer.cli" or n.startswith("analyzer.cli."))
        if bad:
            offenders[str(rel)] = bad
    assert not offenders, offenders


def test_the_layering_check_sees_a_wrong_way_import(tmp_path):
    probe = tmp_path / "x.py"
    probe.write_text("def f():\n    from analyzer.cli.output import write\n")
    assert "analyzer.cli.output" in _imports(probe)


def test_entry_points_still_resolve():
    import click

    from analyzer.cli import cli, main

    # the group imports a command's module when it is asked for that command (start-up)
    ctx = click.Context(cli)
    names = {"ingest", "diagnose", "runs", "show", "compare", "db", "formats", "tui", "remedy", "probe"}
    assert callable(main) and set(cli.list_commands(ctx)) >= names
    assert all(isinstance(cli.get_command(ctx, n), click.Command) for n in names)
