"""CONTRIBUTING.md's three recipes, done: a log format (a new family), a rule and a runs column, each added
the recipe's way to a scratch copy of the tree, then shown working end to end through the ``capscan``
command of that copy.

Each recipe holds at three code files plus fixture data, and CONTRIBUTING.md names every file it touches:
a file a recipe needs that its paragraph does not name, or a fourth code file, fails here. The copy runs in
an interpreter of its own (it is another ``analyzer`` package), driven there by click's CliRunner.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RECIPE_HEADS = {"format": "**Add a format**", "rule": "**Add a rule", "column": "**Add a runs column**"}


class Scratch:
    """A copy of analyzer/ (and the test files the recipes touch) whose edits are recorded per recipe."""

    def __init__(self, root: Path):
        self.root = root
        self.touched: dict[str, set[str]] = defaultdict(set)
        shutil.copytree(ROOT / "analyzer", root / "analyzer",
                        ignore=shutil.ignore_patterns("__pycache__", "_native", "*.so", "*.dylib"))
        for test in ("tests/rules/test_rules.py", "tests/tui/test_run_columns.py"):
            (root / test).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / test, root / test)

    def create(self, recipe: str, rel: str, text: str) -> None:
        path = self.root / rel
        assert not path.exists(), rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        self.touched[recipe].add(rel)

    def insert(self, recipe: str, rel: str, anchor: str, text: str, *, after: bool = False) -> None:
        """``text`` before (or after) the one place ``anchor`` (a regex) matches."""
        path = self.root / rel
        source = path.read_text(encoding="utf-8")
        found = list(re.finditer(anchor, source, re.MULTILINE))
        assert len(found) == 1, f"{rel}: the recipe's anchor {anchor!r} matches {len(found)} times"
        at = found[0].end() if after else found[0].start()
        path.write_text(source[:at] + text + source[at:], encoding="utf-8")
        self.touched[recipe].add(rel)


def add_a_format(s: Scratch) -> None:
    # a new family: its patterns, literals and samples; its place in FORMATS; its handlers
    s.create("format", "analyzer/parsers/tinyllm.py", '''
        """tinyllm: a made-up runtime's speed line, added by tests/test_recipes.py."""
        from analyzer.parsers.base import Format, Pattern, Sample, rx

        TINYLLM = Format(
            name="tinyllm",
            description="tinyllm's speed line",
            literals=("tinyllm: ",),
            patterns=(Pattern("tinyllm.speed", rx(r"tinyllm: (?P<test>\\w+) at (?P<tok_s>\\d+(?:\\.\\d+)?) tok/s$"),
                              lambda m: {"test": m["test"], "tok_s": float(m["tok_s"])}),),
            samples=(Sample("tinyllm: tg32 at 41.5 tok/s", "tinyllm.speed", {"test": "tg32", "tok_s": 41.5}),),
        )
        ''')
    s.insert("format", "analyzer/parsers/__init__.py", r"^FORMATS: tuple\[Format, \.\.\.\] = \(",
             "from analyzer.parsers.tinyllm import TINYLLM  # noqa: E402\n\n")
    s.insert("format", "analyzer/parsers/__init__.py", r"^FORMATS: tuple\[Format, \.\.\.\] = \(", "TINYLLM, ",
             after=True)
    s.create("format", "analyzer/runs/tinyllm.py", '''
        """What tinyllm's lines mean for the run."""
        from analyzer.model import Throughput


        def on_tinyllm_speed(asm, ev):
            run = asm.run
            run.program.name = run.program.name or "tinyllm"
            run.add_throughput(Throughput(test=ev.data["test"], tok_s=ev.data["tok_s"], line=ev.line, kind="timing"))
            run.touch(ev)


        HANDLERS = {"tinyllm.speed": on_tinyllm_speed}
        ''')


def add_a_rule(s: Scratch) -> None:
    s.insert("rule", "analyzer/rules/catalog.py", r"^RULES: tuple\[Rule, \.\.\.\] = \(\n", '''\
def _tinyllm(v: RunView) -> Finding | None:
    if v.facts.program != "tinyllm":
        return None
    return finding("tinyllm measured this run: its speeds are its own kernels', not llama.cpp's.",
                   v.lines("tinyllm.speed", limit=1))


''')
    s.insert("rule", "analyzer/rules/catalog.py", r"^RULES: tuple\[Rule, \.\.\.\] = \(\n",
             '    Rule("tinyllm-own-kernels", None, "info", _tinyllm),\n', after=True)
    version = s.root / "analyzer/rules/version.py"
    text = version.read_text(encoding="utf-8")
    old = re.search(r'^RULES_VERSION = "(\d+)"', text, re.MULTILINE)
    assert old is not None
    version.write_text(text.replace(old.group(0), f'RULES_VERSION = "{int(old.group(1)) + 1}"'), encoding="utf-8")
    s.touched["rule"].add("analyzer/rules/version.py")
    s.insert("rule", "tests/rules/test_rules.py", r"^CASES: dict\[.*\n",
             '    "tinyllm-own-kernels": [(("tinyllm/tinyllm-run.log",), "unknown", False)],\n', after=True)


def add_a_column(s: Scratch) -> None:
    # the field last in RUN_FIELDS (its name and SQL) and RunRow; its column last in COLUMNS; a test
    s.insert("column", "analyzer/store/run_list.py", r"^\)\nRUN_COLUMNS = ",
             '    ("lines", "r.last_line - r.first_line + 1"),\n')
    s.insert("column", "analyzer/store/run_list.py", r"^    best_tg: float \| None\n", "    lines: int | None\n",
             after=True)
    s.insert("column", "analyzer/output/run_columns.py", r"^\)\nBY_KEY = ",
             '    RunColumn("lines", "lines", lambda row: str(row["lines"] or "-"), right=True, tui_width=5),\n')
    s.insert("column", "tests/tui/test_run_columns.py", r"\Z",
             '\n\ndef test_lines_column():\n    assert BY_KEY["lines"].text({"lines": 3}) == "3"\n')


DRIVE = """\
import json, sys
from click.testing import CliRunner
from analyzer.cli import cli
from analyzer.parsers import FORMATS
from analyzer.runs.assembler import handler_table

db, log = sys.argv[1], sys.argv[2]
fmt = next(f for f in FORMATS if f.name == "tinyllm")
samples = [fmt.parse(s.line) is not None and fmt.parse(s.line)[1] == s.data for s in fmt.samples]
runner = CliRunner()
diagnosed = runner.invoke(cli, ["--db", db, "diagnose", log, "--json"])
listed = runner.invoke(cli, ["--db", db, "runs", "--json"])
table = runner.invoke(cli, ["--db", db, "runs"])
print(json.dumps({"samples": samples, "handled": "tinyllm.speed" in handler_table(),
                  "diagnose": [diagnosed.exit_code, diagnosed.stdout], "runs": [listed.exit_code, listed.stdout],
                  "table": [table.exit_code, table.stdout]}))
"""

LOG = """\
tinyllm 0.1 starting
tinyllm: pp128 at 812.25 tok/s
tinyllm: tg32 at 41.5 tok/s
"""


def recipe_paragraph(head: str) -> str:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    start = text.index(head)
    end = text.find("\n\n", start)
    return text[start:end]


@pytest.fixture(scope="module")
def done(tmp_path_factory):
    scratch = Scratch(tmp_path_factory.mktemp("recipes"))
    add_a_format(scratch)
    add_a_rule(scratch)
    add_a_column(scratch)
    log = scratch.root / "tests" / "fixtures" / "tinyllm" / "tinyllm-run.log"  # the fixture's data
    log.parent.mkdir(parents=True)
    log.write_text(LOG, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(scratch.root), "HOME": str(scratch.root), "CAPSCAN_DB": "",
           "XDG_DATA_HOME": str(scratch.root / "data")}
    proc = subprocess.run([sys.executable, "-c", DRIVE, str(scratch.root / "capscan.db"), str(log)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=scratch.root)
    assert proc.returncode == 0, proc.stderr
    return scratch, json.loads(proc.stdout)


@pytest.mark.parametrize("recipe", sorted(RECIPE_HEADS))
def test_each_recipe_holds_at_three_code_files_and_names_each(done, recipe):
    scratch, _ = done
    touched = scratch.touched[recipe]
    assert 0 < len(touched) <= 3, f"the {recipe} recipe touched {sorted(touched)}"
    said = recipe_paragraph(RECIPE_HEADS[recipe])
    for rel in touched:
        new = not (ROOT / rel).exists()  # a new module is named by its folder
        assert (rel.rsplit("/", 1)[0] + "/" if new else rel) in said, f"CONTRIBUTING.md's {recipe} recipe omits {rel}"


def test_the_new_format_reaches_the_report(done):
    _, out = done
    assert out["samples"] == [True] and out["handled"]
    code, text = out["diagnose"]
    assert code == 0, text
    (run,) = json.loads(text)["runs"]
    assert run["program"] == "tinyllm"
    assert [(t["test"], t["tok_s"]) for t in run["throughput"]] == [("pp128", 812.25), ("tg32", 41.5)]


def test_the_new_rule_fires_on_it(done):
    _, out = done
    (run,) = json.loads(out["diagnose"][1])["runs"]
    (found,) = [f for f in run["findings"] if f["rule"] == "tinyllm-own-kernels"]
    assert found["evidence"][0]["line"] == 2


def test_the_new_column_is_listed(done):
    _, out = done
    code, text = out["runs"]
    assert code == 0, text
    (row,) = json.loads(text)
    assert row["lines"] == 2  # lines 2 and 3 made the run
    header, line = out["table"][1].splitlines()
    assert header.split("\t")[-1] == "lines" and line.split("\t")[-1] == "2"
