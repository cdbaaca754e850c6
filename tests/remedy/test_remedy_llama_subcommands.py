"""`capscan remedy` reads the 2026 unified binary's argv forms (`llama serve`, `llama bench`) as the
programs they run, and asks a quiet-by-default server or CLI for `-lv 4` so the remedy can be verified."""

from __future__ import annotations

import pytest

from analyzer.remedy.plan import command_program, verbosity_note


@pytest.mark.parametrize("cmd,program", [
    (["llama", "serve", "-m", "m.gguf", "--port", "8080"], "llama-server"),
    (["/opt/homebrew/bin/llama", "bench", "-m", "m.gguf", "-p", "64"], "llama-bench"),
    (["/Users/a/.llama-app/llama", "cli", "-m", "m.gguf"], "llama-cli"),
    (["llama", "completion", "-m", "m.gguf"], "llama-completion"),
    (["llama-server", "-m", "m.gguf"], "llama-server"),
    (["./build/bin/llama-bench", "-m", "m.gguf"], "llama-bench"),
    (["llama", "help"], None),
    (["python3", "serve.py"], None),
])
def test_command_program(cmd, program):
    assert command_program(cmd) == program


@pytest.mark.parametrize("cmd,asks", [
    (["llama", "serve", "-m", "m.gguf"], True),
    (["llama-cli", "-m", "m.gguf"], True),
    (["llama", "serve", "-m", "m.gguf", "-lv", "4"], False),
    (["llama-server", "-m", "m.gguf", "--log-verbosity=4"], False),
    (["llama", "bench", "-m", "m.gguf"], False),  # llama-bench prints the block at any verbosity
])
def test_verbosity_note(cmd, asks):
    note = verbosity_note(cmd)
    assert (note is not None) is asks
    if asks:
        assert "-lv 4" in note
