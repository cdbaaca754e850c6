"""The house rules that keep the tree readable, checked on the real tree:

- every SQL statement lives in analyzer/store/ (other layers call its functions);
- import-linter's layers contract (pyproject.toml) really fails on a wrong-way import, so the
  green contract run by `make lint` in CI means something."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
ANALYZER = ROOT / "analyzer"
SQL_CALLS = {"execute", "executemany", "executescript", "blobopen"}
SQL_TEXT = re.compile(r"^\s*(SELECT|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)"
                      r"|PRAGMA|BEGIN|WITH\s+\w+\s+AS)\b", re.IGNORECASE)


def nodes_outside(root: Path, skip: Callable[[Path], bool]) -> Iterator[tuple[Path, ast.AST]]:
    """(path relative to root, node) of every AST node of every module but the skipped ones."""
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if not skip(rel):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                yield rel, node


def sql_outside_the_store(root: Path) -> list[str]:
    found = []
    for rel, node in nodes_outside(root, lambda rel: rel.parts[0] == "store"):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SQL_CALLS:
            found.append(f"{rel}:{node.lineno}: .{node.func.attr}(...)")
        # (the parsers read llama-bench's SQL output: statements there are log text, not queries)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and rel.parts[0] != "parsers" \
                and SQL_TEXT.match(node.value):
            found.append(f"{rel}:{node.lineno}: {node.value[:40]!r}")
    return found


def test_every_sql_statement_lives_in_the_store():
    assert sql_outside_the_store(ANALYZER) == []


def test_the_sql_check_sees_a_query_outside_the_store(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "x.py").write_text(
        'def f(db):\n    return db.conn.execute("SELECT id FROM runs").fetchall()\n'
        'Q = """WITH linked AS (SELECT 1) SELECT * FROM linked"""\n')
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "ok.py").write_text('def g(c):\n    c.execute("SELECT 1")\n')
    assert [f.split(":")[0] for f in sql_outside_the_store(tmp_path)] == ["rules/x.py"] * 3  # the call, its statement, the WITH


def _lint_imports(tree: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                           "sys.exit(lint_imports_command())"], cwd=tree, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "HOME": str(tree)}, timeout=300)


def test_the_layers_contract_fails_on_a_wrong_way_import(tmp_path):
    pytest.importorskip("importlinter", reason="make test installs the lint extra")
    tree = tmp_path / "tree"
    shutil.copytree(ANALYZER, tree / "analyzer", ignore=shutil.ignore_patterns("__pycache__", "_native"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    assert _lint_imports(tree).returncode == 0  # the copy keeps the contract, as the real tree does
    # the store reaching up into the rules: one wrong-way import, inside a function
    writer = tree / "analyzer" / "store" / "writer.py"
    writer.write_text(writer.read_text() + "\n\ndef _wrong():\n    from analyzer.rules import engine  # noqa\n")
    result = _lint_imports(tree)
    assert result.returncode == 1
    assert "analyzer.store.writer -> analyzer.rules.engine" in result.stdout


def test_every_file_the_docs_name_exists():
    """The README, the docs site, CONTRIBUTING.md and bench/README.md point at tests and modules by path; a
    move must not leave them pointing at nothing."""
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "bench" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
    readme = "\n".join(p.read_text() for p in pages)
    named = set(re.findall(r"`((?:tests|analyzer|bench|scripts|native|examples)/[\w/.-]+\.(?:py|md|c|m|sh|tcss))`",
                           readme))
    assert len(named) > 20  # non-vacuity: the pages name many files
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == []


def import_cycles(root: Path) -> list[list[str]]:
    """Groups of analyzer modules that import each other, directly or round a circle, counting imports
    inside functions (lazy ones) but not those under ``if TYPE_CHECKING:`` (never run)."""
    mods = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        mods[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text())
        typing_only = {id(x) for n in ast.walk(tree) if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
                       for c in n.body for x in ast.walk(c)}
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    target = f"{node.module}.{alias.name}"
                    graph[mod].add(target if target in mods else node.module)
            elif isinstance(node, ast.Import):
                graph[mod].update(a.name for a in node.names)
    graph = {m: {t for t in targets if t in mods and t != m} for m, targets in graph.items()}
    cycles, seen = [], set()
    for start in sorted(graph):  # the modules reachable from start that reach start back
        reach = _reachable(graph, start)
        if start in reach and start not in seen:
            group = sorted(m for m in reach if start in _reachable(graph, m))
            seen.update(group)
            cycles.append(group)
    return cycles


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    reach, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in reach:
                reach.add(nxt)
                todo.append(nxt)
    return reach


def test_no_two_modules_import_each_other():
    """Issue 28: the last circle (cli/gha <-> cli/output) is gone; a lazy import is still an import."""
    assert import_cycles(ANALYZER) == []


def test_the_cycle_check_sees_a_lazy_circle(tmp_path):
    pkg = tmp_path / "analyzer"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from analyzer import b\n")
    (pkg / "b.py").write_text("def f():\n    from analyzer.a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from analyzer import a\n")
    assert import_cycles(pkg) == [["analyzer.a", "analyzer.b"]]


def rule_ids_outside_the_catalogue(root: Path) -> list[str]:
    """Rule ids written as string literals anywhere but analyzer/rules/catalog.py (issue 28: a rule's
    knowledge, its basis, next step and headline words, lives with the rule). Ids that are also a
    verdict or a field name (environment, virtualization-overhead) cannot be told apart and are left out."""
    sys.path.insert(0, str(root.parent))
    try:
        from analyzer.rules.catalog import RULES
        from analyzer.verdicts import VERDICTS
    finally:
        sys.path.pop(0)
    ids = {r.id for r in RULES} - set(VERDICTS) - {"environment"}
    return [f"{rel}:{node.lineno}: {node.value}"
            for rel, node in nodes_outside(root, lambda rel: rel.as_posix() == "rules/catalog.py")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in ids]


def test_no_rule_id_outside_the_catalogue():
    assert rule_ids_outside_the_catalogue(ANALYZER) == []


def test_the_rule_id_check_sees_an_id_in_another_module(tmp_path):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "catalog.py").write_text('X = "crashed"\n')
    (tmp_path / "headline.py").write_text('def f(d):\n    return "crashed" in d\n')
    assert rule_ids_outside_the_catalogue(tmp_path) == ["headline.py:2: crashed"]


def metal_flag_labels_outside_the_table(root: Path) -> list[str]:
    """A Metal flag's label (as llama.cpp prints it, as a table row, in a sentence) written as a string
    literal anywhere but analyzer/chips.py's METAL_FLAGS: the parser, the rules and the remedy read the table.
    The TUI's capability matrix keeps its own shorter row labels ('simdgroup matrix mul', 'tensor API')."""
    from analyzer.chips import KERNEL_FLAGS, METAL_FLAG
    from analyzer.parsers import LITERALS

    spelled = {text for name in KERNEL_FLAGS for text in (*METAL_FLAG[name].printed, METAL_FLAG[name].label,
                                                          METAL_FLAG[name].words)}
    # 'bfloat' is a field name too; a prefilter literal ('has bfloat') is a search string, not a label
    spelled -= {"bfloat", *LITERALS}
    return [f"{rel}:{node.lineno}: {node.value}"
            for rel, node in nodes_outside(root, lambda rel: rel.as_posix() in ("chips.py", "tui/model.py"))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in spelled]


def test_the_metal_flag_labels_are_written_once():
    assert metal_flag_labels_outside_the_table(ANALYZER) == []


def test_the_label_check_sees_a_label_in_another_module(tmp_path):
    (tmp_path / "chips.py").write_text('X = "simdgroup matrix mul."\n')
    (tmp_path / "launch.py").write_text('NAMES = {"simdgroup matrix mul.": 1}\n')
    assert metal_flag_labels_outside_the_table(tmp_path) == ["launch.py:1: simdgroup matrix mul."]
