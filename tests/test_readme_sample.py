"""The README's sample report is the real output of the command it shows: run it
and compare line by line (so the README cannot drift from what users see)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def readme_block(command: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"```\n" + re.escape(command) + r"\n(.*?)```", text, re.S)
    assert match, f"README.md has no code block starting with {command!r}"
    return match.group(1).rstrip("\n").split("\n")


@pytest.mark.parametrize("example", ["m1-ultra-guest-stock.log", "m1-ultra-guest-stock-json.log"])
def test_readme_sample_report_is_the_real_output(tmp_path, example):
    command = f"$ capscan < examples/{example}"
    env = {**os.environ, "NO_COLOR": "1"}
    with open(ROOT / "examples" / example, "rb") as log:
        real = subprocess.run([sys.executable, "-m", "analyzer", "--db", str(tmp_path / "capscan.db")], stdin=log,
                              capture_output=True, env=env, cwd=ROOT, check=True).stdout.decode()
    real_lines = real.rstrip("\n").split("\n")
    assert readme_block(command) == real_lines, (
        "README.md's sample report differs from the real output; replace the block after "
        f"{command!r} with:\n" + real)
    if "(fixable)" in real:  # every fixable verdict the README shows carries its proof
        assert "  proof:" in real
