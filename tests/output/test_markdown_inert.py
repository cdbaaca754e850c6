"""Log text in --markdown and the GitHub step summary is inert (issue 24 item 4): rendered as GitHub would
(CommonMark with GFM tables and strikethrough, by markdown-it-py), a hostile cell stays one cell of text
with no link, image, HTML, code or emphasis, and @mentions, #refs and bare URLs are broken by a word joiner."""

from __future__ import annotations

import re

import pytest
from markdown_it import MarkdownIt

from analyzer.output.tabular import WORD_JOINER, markdown_cell
from tests.conftest import REPO, run_capscan

HOSTILE = ("![x](http://evil.example/p.png) [click](http://evil.example) <img src=x onerror=alert(1)> <b>bold</b> "
           "**strong** _em_ ~~gone~~ `code` a|b @octocat #123 www.evil.example http://evil.example a@b.example "
           "# heading \\ backslash &amp; entity")
RENDER = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def _cells(markdown: str) -> list[str]:
    html = RENDER.render(markdown)
    return re.findall(r"<td>(.*?)</td>", html, re.S)


@pytest.mark.parametrize("text", [HOSTILE, "| leading pipe", "trailing backslash \\", "*", "<!-- comment -->"])
def test_a_hostile_cell_renders_as_one_cell_of_plain_text(text):
    cells = _cells("| a | b |\n|---|---|\n| " + markdown_cell(text) + " | 2 |\n")
    assert len(cells) == 2 and cells[1] == "2", cells
    assert not re.search(r"<(a|img|b|strong|em|code|del|h\d)\b", cells[0]), cells[0]
    shown = cells[0].replace(WORD_JOINER, "").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    assert shown.replace("&amp;", "&") == text.strip()  # every character is still there, as text


def test_mentions_references_and_urls_are_broken_by_a_word_joiner():
    cell = markdown_cell("@octocat #123 http://evil.example www.evil.example a@b.example")
    assert f"@{WORD_JOINER}octocat" in cell and f"#{WORD_JOINER}123" in cell
    assert f"http:{WORD_JOINER}//" in cell and f"www{WORD_JOINER}" in cell and f"a@{WORD_JOINER}b" in cell


def test_numbers_and_ordinary_names_are_written_as_they_are():
    assert markdown_cell(12.5) == "12.50" and markdown_cell(1005) == "1005"
    assert markdown_cell("Apple M2 Max") == "Apple M2 Max" and markdown_cell(None) == " "


def test_runs_markdown_of_a_hostile_source_name(tmp_path):
    """The file name is log text too: in `runs --markdown` it is one cell of text, its mention broken."""
    log = tmp_path / "![x](evil.png) @octocat <b>x.log"
    log.write_bytes((REPO / "examples" / "m1-ultra-guest-stock-json.log").read_bytes())
    db = tmp_path / "c.db"
    run_capscan("ingest", str(log), db=db, check=True)
    out = run_capscan("runs", "--markdown", db=db, check=True).stdout.decode()
    html = RENDER.render(out)
    assert "<img" not in html and "<b>" not in html and f"@{WORD_JOINER}octocat" in out
    assert len(re.findall(r"<td\b", html)) == len(re.findall(r"<th\b", html))  # the row has as many cells as the header
