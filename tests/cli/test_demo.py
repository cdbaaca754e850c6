"""`make demo`, the README's first command: its capscan lines, read from the Makefile itself and run in
this process against a database of the test's own (scripts/check-quickstart runs the real target from a
fresh clone with Debian's python3, CI only: it installs capscan)."""

from __future__ import annotations

import re
import shlex

from tests.conftest import REPO, run_capscan


def _demo_recipe() -> list[str]:
    """The demo target's recipe lines, without their leading tab."""
    lines = (REPO / "Makefile").read_text(encoding="utf-8").split("\ndemo:\n", 1)[1].splitlines()
    end = next(i for i, line in enumerate(lines) if not line.startswith("\t"))
    return [line[1:] for line in lines[:end]]


def _capscan_lines(recipe: list[str]) -> list[tuple[list[str], str | None]]:
    """Each `$(VENV)/bin/capscan ...` line as its arguments (after --db $(DEMO_DB)) and its stdin file."""
    out = []
    for line in recipe:
        if not line.startswith("$(VENV)/bin/capscan "):
            continue
        words = shlex.split(line)[1:]
        assert words[:2] == ["--db", "$(DEMO_DB)"], line  # every step writes and reads the demo's own database
        stdin = None
        if "<" in words:
            at = words.index("<")
            stdin, words = words[at + 1], words[:at] + words[at + 2:]
        out.append((words[2:], stdin))
    return out


def test_make_demo_stores_stock_remedied_and_host_and_ends_with_their_compare(tmp_path):
    recipe = _demo_recipe()
    steps = _capscan_lines(recipe)
    db = tmp_path / "demo.db"
    outputs = []
    for args, stdin in steps:
        data = (REPO / stdin).read_bytes() if stdin else None
        proc = run_capscan(*args, db=db, input=data, cwd=REPO)
        assert proc.returncode == 0, proc.stderr.decode()
        outputs.append(proc.stdout.decode())
    # the stock JSON guest first, the fixable case the README shows
    assert steps[0][1] == "examples/m1-ultra-guest-stock-json.log"
    assert "CAPABILITY-DOWNGRADE  (fixable, high confidence" in outputs[0]
    # then the remedied guest and the host, and the compare of the three is the last thing capscan prints
    assert steps[-1][0] == ["compare", "1", "2", "3"]
    assert "gap decomposition: stock run 1, remedied run 2, host run 3" in outputs[-1]
    assert re.search(r"tg128 +12\.63 +206\.60 +286\.71 .* 98\.2% +1\.8%", outputs[-1])
    # a fresh database each time, so the ids the compare names are the ones just stored
    assert any(line.startswith("@rm -f $(DEMO_DB) ") for line in recipe)
    # it ends by naming the database and the next two commands, each with that database
    echoed = [shlex.split(line[1:])[1] for line in recipe if line.startswith("@echo ")]
    assert "The three runs are in $(DEMO_DB)" in echoed[-3] and "$(VENV)/bin" in echoed[-3]
    nxt = [shlex.split(line.split("#")[0]) for line in echoed[-2:]]
    assert all(words[:3] == ["$(VENV)/bin/capscan", "--db", "$(DEMO_DB)"] for words in nxt)
    show = run_capscan(*nxt[0][3:], db=db, cwd=REPO)
    assert show.returncode == 0 and "run 1 " in show.stdout.decode() and "evidence:" in show.stdout.decode()
    plan = run_capscan(*nxt[1][3:], db=db, cwd=REPO)
    assert plan.returncode == 0, plan.stderr.decode()
    assert plan.stdout.decode().startswith("run 1: capability-downgrade  (fixable)  (the newest capability-downgrade")
