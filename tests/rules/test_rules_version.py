"""A rule change that forgets ``RULES_VERSION`` fails here.

A stored diagnosis made under another ``RULES_VERSION`` is made again (rules/today.py): a change to the rules
that keeps the version leaves every stored verdict as the old rules made it. ``RULES_DIGEST``, beside the
version, is a digest of the source text of what diagnosing runs (rules/engine.py, rules/catalog.py and every
module of the rules or of analyzer's root they import, lazily or not). Source text, not bytecode or an AST
dump, so the digest is the same on every Python that capscan supports.
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

import analyzer
from analyzer.rules import version

ROOT = Path(analyzer.__file__).parent
START = ("analyzer.rules.engine", "analyzer.rules.catalog")
# the layers a diagnosis is computed in: the rules, and the pure data and tables below every layer
INSIDE = ("analyzer.rules.",)
ROOT_MODULES = {f"analyzer.{p.stem}" for p in ROOT.glob("*.py") if p.stem not in ("__init__", "__main__")}
OUTSIDE = {"analyzer.rules.version"}  # the record itself


def _path(module: str, root: Path = ROOT) -> Path | None:
    parts = module.split(".")[1:]
    for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def _wanted(module: str, root: Path) -> bool:
    return (module.startswith(INSIDE) or module in ROOT_MODULES) and module not in OUTSIDE \
        and _path(module, root) is not None


def _imports(path: Path) -> set[str]:
    """Every analyzer module ``path`` imports, at the top or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # 'from analyzer import chips'
    return {m for m in found if m.startswith("analyzer.")}


def rules_sources(root: Path = ROOT) -> list[Path]:
    seen: set[str] = set()
    todo = [m for m in START if _wanted(m, root)]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo.extend(m for m in _imports(_path(module, root)) if _wanted(m, root) and m not in seen)  # type: ignore[arg-type]
    return sorted({_path(m, root) for m in seen})  # type: ignore[type-var]


def rules_digest(root: Path = ROOT) -> str:
    digest = hashlib.sha256()
    for path in rules_sources(root):
        text = path.read_bytes().replace(b"\r\n", b"\n")
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + text + b"\0")
    return digest.hexdigest()[:16]


def test_the_digest_covers_the_rules_and_what_they_call():
    names = {p.relative_to(ROOT).as_posix() for p in rules_sources()}
    # non-vacuity: the catalog's predicates, the engine, the run view they read, the chip table they judge by
    assert {"rules/catalog.py", "rules/engine.py", "rules/view.py", "rules/observed.py", "chips.py"} <= names
    assert "rules/version.py" not in names and not any(n.startswith(("store/", "cli/", "tui/")) for n in names)


def test_a_changed_predicate_or_a_new_module_changes_the_digest(tmp_path):
    import shutil

    copy = tmp_path / "analyzer"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns("__pycache__", "_native"))
    assert rules_digest(copy) == rules_digest()
    catalog = copy / "rules" / "catalog.py"
    text = catalog.read_text(encoding="utf-8")
    assert "v.apple_family < chips.APPLE7" in text
    catalog.write_text(text.replace("v.apple_family < chips.APPLE7", "v.apple_family <= chips.APPLE7", 1),
                       encoding="utf-8")
    changed = rules_digest(copy)
    assert changed != rules_digest()
    # a predicate moved to a module of its own that the catalog imports is still covered
    (copy / "rules" / "extra.py").write_text("def clamp(v):\n    return v.apple_family == 1005\n", encoding="utf-8")
    catalog.write_text(catalog.read_text(encoding="utf-8") + "from analyzer.rules.extra import clamp  # noqa\n",
                       encoding="utf-8")
    assert "rules/extra.py" in {p.relative_to(copy).as_posix() for p in rules_sources(copy)}


def test_a_rule_change_bumps_rules_version():
    now = rules_digest()
    assert now == version.RULES_DIGEST, (
        f"the rules changed: bump RULES_VERSION and record the new digest (RULES_DIGEST = \"{now}\") "
        "in analyzer/rules/version.py")
