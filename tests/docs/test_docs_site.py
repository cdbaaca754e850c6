"""The README stays short and the documentation site builds: MkDocs in strict mode (a broken link or a
page missing from the nav fails), with the generated reference pages matching the code."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
README_MAX_LINES = 200


def test_the_readme_is_short_and_keeps_its_two_quickstart_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_MAX_LINES
    quick = text[text.index("## Quickstart"):].split("```sh\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in quick.strip().splitlines()] == ["make demo", "make test"]
    # what a newcomer looks for, in the contents line at the top
    contents = next(line for line in text.splitlines() if line.startswith("**Contents:**"))
    for anchor in ("#install", "#quickstart", "#your-own-log", "#verdicts-and-what-to-do-next", "#in-ci"):
        assert anchor in contents + text.split("## Install")[0]
    # the words a reader who is no GPU expert meets first are explained before the first section (issue 41)
    assert "](docs/glossary.md)" in text.split("## Install")[0]


def test_the_generated_reference_matches_the_code():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-reference"), "--check"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    commands = (ROOT / "docs" / "reference" / "commands.md").read_text()
    for name in ("capscan remedy run", "capscan watch", "capscan export prometheus", "--inject-children"):
        assert name in commands


def _build(site_root: Path, out: Path) -> subprocess.CompletedProcess:
    # (never -q: it hides the warnings, and strict mode then passes whatever they say)
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           str(site_root / "mkdocs.yml"), "-d", str(out)], capture_output=True, text=True,
                          timeout=300, cwd=site_root)


def _copy_site(tmp_path: Path) -> Path:
    root = tmp_path / "site-src"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_the_docs_build_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs", reason="make test installs the docs extra")
    root = _copy_site(tmp_path)
    proc = _build(root, tmp_path / "site")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pages = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    assert {"index.html", "remedy/index.html", "reference/commands/index.html", "glossary/index.html"} <= pages
    # non-vacuity: strict mode really fails on a broken link
    remedy = root / "docs" / "remedy.md"
    remedy.write_text(remedy.read_text() + "\nSee [nowhere](no-such-page.md).\n")
    broken = _build(root, tmp_path / "broken")
    assert broken.returncode != 0 and re.search(r"no-such-page\.md", broken.stdout + broken.stderr)


def test_make_docs_builds_the_site(tmp_path):
    """`make docs` is the site for a reader without the mkdocs command line in mind (issue 41): run for real,
    with this interpreter's venv as the Makefile's, into a folder of the test's."""
    pytest.importorskip("mkdocs", reason="make test installs the docs extra")
    if sys.prefix == sys.base_prefix or not shutil.which("make"):
        pytest.skip("needs this interpreter's venv (make test's) and make")
    site = tmp_path / "site"
    proc = subprocess.run(["make", "-s", "-C", str(ROOT), "docs", f"VENV={sys.prefix}", f"SITE={site}"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site / "index.html").is_file() and (site / "glossary" / "index.html").is_file()
