"""Issue 22: in an ollama server.log every model load is its own run, labelled ollama (not the first
only), and the official Ollama.app's runner path is kept as a fact (`ollama_app`, issue 18 acts on it:
the app is signed with the hardened runtime, so DYLD_INSERT_LIBRARIES never reaches its runner).

Through the real pipeline; see ollama/README.md for the logs and their sources."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path

from analyzer.ingest import ingest
from analyzer.output.run_report import facts_lines
from analyzer.output.runjson import run_to_json
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.store import open_db

HERE = Path(__file__).resolve().parent / "ollama"
METAL = (Path(__file__).resolve().parent.parent / "fixtures" / "timings" / "ollama-server-metal.log").read_text()


def diagnosed(text: str) -> list:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d) / "o.db")
        ids = ingest(db, Input("server.log", io.BytesIO(text.encode()))).run_ids
        runs = list(diagnose_runs(db, ids, refresh_peers=True))
        db.conn.close()
    return runs


def _second_load(times: int) -> str:
    lines = METAL.splitlines(keepends=True)
    return METAL + "".join(lines[6:58]) * (times - 1)


def test_every_load_is_an_ollama_run():
    for loads in (2, 3):
        runs = diagnosed(_second_load(loads))
        assert len(runs) == loads
        for run in runs:
            f = run.facts
            assert (f.program, f.backend, f.ollama_library, f.ollama_app) == ("ollama", "metal", "metal", True)
            assert f.device.name == "Apple M3 Pro" and f.offload == (29, 29)
            assert run.diagnosis.verdict == "healthy"
        # each load starts at its own offload line (the line after 'new model will fit ...')
        assert [r.facts.first_line for r in runs][1:] == [58 + 3 + 52 * i for i in range(loads - 1)]


def test_one_load_stays_one_run():
    [run] = diagnosed(METAL)
    assert run.facts.program == "ollama" and run.facts.ollama_app is True


def test_the_official_app_is_labelled_in_the_report_and_json():
    [run] = diagnosed((HERE / "ollama-8983-official-app-load-2025.log").read_text())
    assert run.facts.program == "ollama" and run.facts.ollama_app is True
    assert any("the official Ollama.app" in line for line in facts_lines(run))
    assert run_to_json(run)["ollama_app"] is True


def test_a_runner_elsewhere_is_not_the_app():
    text = METAL.replace("/Applications/Ollama.app/Contents/Resources/ollama runner",
                         "/opt/homebrew/Cellar/ollama/0.5.11/bin/ollama runner")
    [run] = diagnosed(text)
    assert run.facts.program == "ollama" and run.facts.ollama_app is None
    assert run_to_json(run)["ollama_app"] is None
