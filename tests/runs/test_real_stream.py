"""Issue 38, item 2, on the real logs of llama.cpp 0c1e570 (field 330-356, made by scripts/real-llama-logs:
llama-bench in every output format, llama-cli, llama-completion, llama-simple, llama-server, `llama`, --version).

`cat` of any log that ends with results followed by any other: the second must read as its own runs, exactly as
apart. The logs whose start is not told apart yet are listed with the reason; each listed log must still merge
after some finished log (so the list only shrinks). The logs come with the i38-reallogs branch: where they are
absent, the test is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.parsers import Dispatcher
from analyzer.parsers.scanner import Scanner
from analyzer.runs.assembler import Assembler

FIELD = Path(__file__).resolve().parents[1] / "fixtures" / "field"
REAL = sorted(p.stem for p in FIELD.glob("3[345]?-*-2026.log") if 330 <= int(p.name[:3]) <= 356)

BENCH_RELOAD = ("starts with a model load, which after llama-bench rows reads as llama-bench -v loading the model "
                "for its next test (field 331, 333, 335, 337, 339 show that shape)")
ONE_JSONL = ("llama-bench -o jsonl rows right after rows of the same setup (another -o jsonl run without -v): a loop "
             "appending to one file prints exactly that, one run (its median); no line between tells them apart")
KNOWN: dict[str, str] = {
    "347-llama-simple-cpu-layers-decoded-speed-2026": BENCH_RELOAD,
    "348-llama-simple-ngl0-cpu-layers-2026": BENCH_RELOAD,
    "336-llama-bench-cpu-jsonl-ngl-0-99-2026": ONE_JSONL,
}

pytestmark = pytest.mark.skipif(len(REAL) < 27, reason="the real logs of field 330-356 come with i38-reallogs")


def _bytes(name: str) -> bytes:
    data = (FIELD / f"{name}.log").read_bytes()
    return data if data.endswith(b"\n") else data + b"\n"


def runs(data: bytes) -> list[tuple[bool, tuple]]:
    """(measured?, its figures) of each run, as the assembler hands them on."""
    out: list = []
    rows: dict[int, list] = {}
    asm = Assembler(out.append, lambda run, batch: rows.setdefault(id(run), []).extend(
        (t.test, t.tok_s, t.n_prompt, t.n_gen) for t in batch))
    scanner = Scanner(Dispatcher(), asm.feed)
    scanner.feed(data)
    scanner.close()
    asm.finish()
    return [(run.has_results, tuple(sorted(rows.get(id(run), [])))) for run in out]


def _merged(before: str, after: str) -> bool:
    return runs(_bytes(before) + _bytes(after)) != runs(_bytes(before)) + runs(_bytes(after))


def finished() -> list[str]:
    return [n for n in REAL if (r := runs(_bytes(n))) and r[-1][0]]


@pytest.mark.parametrize("after", [n for n in REAL if n not in KNOWN])
def test_each_real_invocation_after_a_finished_one_is_its_own_run(after):
    merged = [before for before in finished() if before != after and _merged(before, after)]
    assert not merged


@pytest.mark.parametrize("after", sorted(KNOWN))
def test_each_known_merge_is_still_one(after):
    """A listed log that now reads apart after every finished log leaves the list."""
    assert any(_merged(before, after) for before in finished() if before != after), KNOWN[after]
