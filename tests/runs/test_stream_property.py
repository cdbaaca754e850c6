"""Issue 38, item 2: each invocation its own run, whatever comes before it in one stream.

`cat *.log | capscan` is one input. The field corpus logs (tests/fixtures/field/*.log), concatenated in several
orders (sorted, reversed, seeded shuffles), must read as the runs of each log read apart, in order, each with the
same figures (its throughput rows as stored) and the same verdict.

The issue's rule is that a program's start after a *finished* run begins a new run. Most field logs are cuts a
thread poster made, and a cut that ends before its results (a start-up block, a model load, an error) is no
finished run: a bare timing block, a context block or a bare table after it is exactly what that process would
print next. So a log that ends open and the log after it are read as one unit on both sides of the comparison
(`continues`, decided from the logs' own lines, never by name); after every log that ends with results the next
must split. What still differs is bounded per order by MAX_DIFFERENT_SHARE, which may only go down.

Both readings are diagnosed over the same runs (apart: a source per unit, all diagnosed together), so a run's
peers (runs of its model on its hardware) are the same in both.
"""

from __future__ import annotations

import difflib
import io
import random
from functools import lru_cache
from pathlib import Path

import pytest

from analyzer.ingest import ingest
from analyzer.parsers import Dispatcher
from analyzer.parsers.scanner import Scanner
from analyzer.read.reader import Input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.runs.assembler import Assembler
from analyzer.store import open_db

FIELD = Path(__file__).resolve().parents[1] / "fixtures" / "field"
ORDERS = ("sorted", "reversed", "seed-1", "seed-2")

def logs() -> list[str]:
    return sorted(p.stem for p in FIELD.glob("*.log"))


def _bytes(name: str) -> bytes:
    data = (FIELD / f"{name}.log").read_bytes()
    return data if data.endswith(b"\n") else data + b"\n"  # `cat` of a file without its last newline joins lines


@lru_cache(maxsize=None)
def shape(name: str) -> tuple[str | None, bool]:
    """A log as capscan reads it apart: (its first event's kind, does it end open: no run, or a last run that
    measured nothing)."""
    kinds: list[str] = []
    runs: list = []
    asm = Assembler(runs.append, lambda run, rows: None)

    def feed(events: list) -> None:
        if not kinds and events:
            kinds.append(events[0].kind)
        asm.feed(events)

    scanner = Scanner(Dispatcher(), feed)
    scanner.feed(_bytes(name))
    scanner.close()
    asm.finish()
    return (kinds[0] if kinds else None), (not runs or not runs[-1].has_results)


def continues(before: str, after: str) -> bool:
    """May `after` be read as the rest of the process `before` was cut from? When `before` ends open: the
    issue's rule is that a program's start after a *finished* run begins a new run, and a cut before its
    results (a start-up block, a model load, an error) is no finished run: a bare timing block, a context
    block or a bare table after it is exactly what that process would print next."""
    return shape(before)[1]


def order(which: str) -> list[str]:
    names = logs()
    if which == "sorted":
        return names
    if which == "reversed":
        return names[::-1]
    random.Random(int(which.partition("-")[2])).shuffle(names)
    return names


def units(names: list[str]) -> list[tuple[str, ...]]:
    """The logs in stream order, a cut and its continuation (`continues`) kept together as one unit."""
    out: list[list[str]] = []
    for name in names:
        if out and continues(out[-1][-1], name):
            out[-1].append(name)
        else:
            out.append([name])
    return [tuple(u) for u in out]


Reading = tuple[tuple, str, bool]  # a run's figures (rows as stored, without line numbers), verdict, fixable


def _readings(db, run_ids: list[int]) -> list[Reading]:
    out = []
    for run in diagnose_runs(db, run_ids):
        # a figure as stored: everything but its line number, which the stream shifts
        rows = tuple(sorted(repr(sorted((k, v) for k, v in t.items() if k != "line")) for t in run.throughput))
        d = run.diagnosis.stored() if run.diagnosis else {}
        out.append((rows, d.get("verdict"), bool(d.get("fixable"))))
    return out


def apart(tmp: Path, parts: list[tuple[str, ...]]) -> list[list[Reading]]:
    """Each unit read on its own (a source each, in one database), then all diagnosed together."""
    db = open_db(tmp / "apart.db")
    try:
        ids = [ingest(db, Input(f"{u[0]}.log", io.BytesIO(b"".join(_bytes(n) for n in u)))).run_ids for u in parts]
        every = _readings(db, [i for mine in ids for i in mine])
    finally:
        db.conn.close()
    out, at = [], 0
    for mine in ids:
        out.append(every[at:at + len(mine)])
        at += len(mine)
    return out


def together(tmp: Path, names: list[str]) -> list[Reading]:
    db = open_db(tmp / "stream.db")
    try:
        return _readings(db, ingest(db, Input("-", io.BytesIO(b"".join(_bytes(n) for n in names)))).run_ids)
    finally:
        db.conn.close()


def read_differently(parts: list[tuple[str, ...]], alone: list[list[Reading]], stream: list[Reading]) -> list[str]:
    """The units whose runs the stream does not reproduce (aligned run by run, so one merge costs only the units
    it touches): each unit whose runs are not all matched, in order."""
    flat = [(k, r) for k, mine in enumerate(alone) for r in mine]
    matched: set[int] = set()
    blocks = difflib.SequenceMatcher(None, [r for _, r in flat], stream, autojunk=False).get_matching_blocks()
    for a, _, size in blocks:
        matched.update(range(a, a + size))
    bad = {flat[i][0] for i in range(len(flat)) if i not in matched}
    return ["+".join(parts[k]) for k in sorted(bad)]


# The share of units each order still reads differently (a start after an open fragment's device lines read as
# its continuation, two llama-bench JSON outputs of one build, model and device read as one, a neighbour's run
# changing a verdict). At 66065a3, before issue 38: 0.45 to 0.57 of the units; now at most 0.36 here, and 0.37
# with the public and real logs of i38-publiclogs and i38-reallogs; 0.32 once wrappers and ollama counts
# split after another program's results, 0.35 with every printed row compared apart (i38-figures). A share, not a count, so that new field logs
# do not break it; it may only go down.
MAX_DIFFERENT_SHARE = 0.35


@pytest.mark.parametrize("which", ORDERS)
def test_runs_together_are_the_runs_apart(which, tmp_path):
    names = order(which)
    parts = units(names)
    alone = apart(tmp_path, parts)
    stream = together(tmp_path, names)
    different = read_differently(parts, alone, stream)
    assert len(different) <= MAX_DIFFERENT_SHARE * len(parts), different


def test_every_finished_log_is_a_junction_that_must_split():
    """The property is not vacuous: every log that ends with results ends a unit, so the next log's start must
    open a run of its own (a third of the corpus and more)."""
    finished = [n for n in logs() if not shape(n)[1]]
    assert len(finished) * 3 > len(logs())
    for which in ORDERS:
        parts = units(order(which))
        assert sum(1 for u in parts if not shape(u[-1])[1]) == sum(1 for n in order(which) if not shape(n)[1])
