"""The sample reports of the README and the docs site are the real output of the command they show:
run it and compare line by line (so neither can drift from what users see)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import run_capscan

ROOT = Path(__file__).resolve().parent.parent


def readme_blocks(command: str) -> list[tuple[str, list[str]]]:
    """Every code block starting with ``command`` in README.md and docs/*.md, with the file it is in."""
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for match in re.finditer(r"```\n" + re.escape(command) + r"\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            found.append((path.name, match.group(1).rstrip("\n").split("\n")))
    assert found, f"no code block starting with {command!r} in README.md or docs/"
    return found


@pytest.mark.parametrize("example", ["m1-ultra-guest-stock.log", "m1-ultra-guest-stock-json.log"])
def test_readme_sample_report_is_the_real_output(tmp_path, example):
    command = f"$ capscan < examples/{example}"
    real = run_capscan(input=(ROOT / "examples" / example).read_bytes(), db=tmp_path / "capscan.db",
                       env={"NO_COLOR": "1"}, check=True).stdout.decode()
    # a piped run is named with the time its log printed (llama-bench's test_time, checked as printed), else the
    # time it was stored: the pages show the time they were made at
    if b'"test_time"' not in (ROOT / "examples" / example).read_bytes():
        real = re.sub(r"( · \d{4}-\d{2}-\d{2} \d{2}:\d{2})", " · 2026-12-02 11:40", real)
    real_lines = real.rstrip("\n").split("\n")
    for where, block in readme_blocks(command):
        assert block == real_lines, (
            f"{where}'s sample report differs from the real output; replace the block after {command!r} with:\n" + real)
    if "(fixable)" in real:  # every fixable verdict the README shows carries its proof
        assert "  proof:" in real
