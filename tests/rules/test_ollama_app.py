"""The official Ollama.app refuses the injection (hardened runtime, issue 23 item 5): its log is still a fixable
downgrade (the proof is the guest's), but the headline does not promise the fix inside the app and the next steps
name the routes that work; preflight refuses the app by its path before anything runs."""

from __future__ import annotations

from tests.ingest_util import diagnosed
from tests.rules.test_rules import fired


def test_an_official_app_log_gets_the_routes_that_work_not_the_generic_fix(tmp_path):
    from analyzer.output.headline import headline

    [run] = diagnosed(tmp_path, "rules/ollama-app-guest-stock-2025.log")
    d = run.diagnosis.stored()
    assert d["verdict"] == "capability-downgrade" and d["fixable"] is True and run.facts.ollama_app is True
    assert "ollama-app-hardened" in fired(run)
    text = headline(run.facts.program, run.diagnosis, run.throughput)
    assert "not inside the official Ollama.app" in text and not text.endswith("capscan can fix that.")
    steps = d["next_steps"]
    assert "refuses the injection" in steps[0] and '--inject-children -- "$(brew --prefix)/bin/ollama" serve' in steps[0]
    assert "llama-server" in steps[1] and "Inside the app itself nothing works" in steps[2]
    assert not any("<your llama.cpp command>" in s for s in steps)


def test_a_homebrew_ollama_log_is_offered_the_fix(tmp_path):
    from analyzer.output.headline import headline

    [run] = diagnosed(tmp_path, "rules/ollama-homebrew-guest-stock-2025.log")
    d = run.diagnosis.stored()
    assert d["fixable"] is True and not run.facts.ollama_app and "ollama-app-hardened" not in fired(run)
    assert headline(run.facts.program, run.diagnosis, run.throughput).endswith("capscan can fix that.")
    assert d["next_steps"][0] == f"capscan remedy plan --run {run.id}"
    # its runner child does the GPU work: the line to paste lets children inherit the library
    assert '--inject-children -- "$(brew --prefix)/bin/ollama" serve' in d["next_steps"][1]
