"""Logs that lack the capability block say exactly what to run, for the program and era they show
(issue 22 item 3), never a generic "pipe the full stderr" to someone who already did."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

BUILD_2026 = "build: 8912 (3c1a2f4e) with Apple clang version 17.0.0 (clang-1700.0.13.5) for arm64-apple-darwin25.0.0"
# llama-cli at its default verbosity after 2026-05-14 (INFO mapped to TRACE): the build line, the chat, the
# new speed line (log-formats.md §2 and the llama-cli of 2025-12-10, #17824)
LLAMA_CLI_2026 = [BUILD_2026, "", "> hello", "Hello! How can I help you today?", "",
                  "[ Prompt: 45.3 t/s | Generation: 12.1 t/s ]"]
OLLAMA = ['time=2026-03-02T10:14:07.118+01:00 level=INFO source=server.go:1342 msg="llama runner started in 2.51 seconds"',
          "[GIN] 2026/03/02 - 10:14:09 | 200 |  2.804551625s |       127.0.0.1 | POST     \"/api/generate\"",
          "total duration:       2.804551625s",
          "eval count:           50 token(s)",
          "eval duration:        4.1s",
          "eval rate:            12.20 tokens/s"]


def steps_of(lines: list[str]) -> tuple[str, list[str]]:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "a.db")
        ids = ingest(db, Input("a.log", io.BytesIO(("\n".join(lines) + "\n").encode()))).run_ids
        [run] = diagnose_runs(db, ids)
        db.conn.close()
    return run.diagnosis.verdict, run.diagnosis.next_steps


@pytest.mark.parametrize("wrap", [lambda s: s, lambda s: "0.00.012.345 I " + s if s.startswith("build") else s],
                         ids=["plain", "log prefix"])
def test_the_2026_default_llama_cli_log_is_told_the_verbosity_flag(wrap):
    verdict, steps = steps_of([wrap(x) for x in LLAMA_CLI_2026])
    assert verdict == "unknown"
    assert any("-lv 4" in s and "--list-devices" in s for s in steps), steps
    assert not any("Pipe the full stderr" in s for s in steps)


def test_an_ollama_log_without_device_lines_is_told_ollama_debug():
    verdict, steps = steps_of(OLLAMA)
    assert verdict == "unknown"
    assert any("OLLAMA_DEBUG=1" in s and "server.log" in s for s in steps), steps
