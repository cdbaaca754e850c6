"""Issue 39, item 3: no class in analyzer/ over 400 lines. RunView grew to 807 lines by gathering every
reading in one class; it is now a façade over one module per concern (analyzer/rules/view.py says which),
and a class that outgrows this limit is split the same way."""

from __future__ import annotations

import ast
from pathlib import Path

ANALYZER = Path(__file__).resolve().parent.parent / "analyzer"
MAX_LINES = 400


def long_classes(root: Path, limit: int = MAX_LINES) -> list[str]:
    """'path:line Name (N lines)' for every class of every module under root longer than limit."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                start = min([d.lineno for d in node.decorator_list] + [node.lineno])
                n = (node.end_lineno or node.lineno) - start + 1
                if n > limit:
                    found.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({n} lines)")
    return found


def test_no_class_in_analyzer_is_over_400_lines():
    assert long_classes(ANALYZER) == []


def test_the_size_check_sees_a_long_class(tmp_path):
    body = "".join(f"    def m{i}(self):\n        return {i}\n" for i in range(201))  # 402 lines of body
    (tmp_path / "big.py").write_text("@decorated\nclass Big:\n" + body)
    (tmp_path / "small.py").write_text("class Small:\n    pass\n")
    assert long_classes(tmp_path) == ["big.py:2 Big (404 lines)"]
