"""Issue 38, item 2: each invocation its own run, whatever comes before it in one stream.

`cat *.log | capscan` is one input. The field corpus logs (tests/fixtures/field/*.log), concatenated in several
orders (sorted, reversed, seeded shuffles), must read as the runs of each log read apart, in order, each with the
same figures (its throughput rows as stored) and the same verdict.

The issue's rule is that a program's start after a *finished* run begins a new run. Most field logs are cuts a
thread poster made, and a cut that ends before its results (a start-up block, a model load, an error) is no
finished run: a bare timing block, a context block or a bare table after it is exactly what that process would
print next. Likewise a cut that begins mid-process (its first line a timing line, a slot's progress, a bare row)
is no invocation. So such a log and its neighbour are read as one unit on both sides of the comparison
(`continues`, decided from the logs' own lines, never by name); after every log that ends with results, a log
that begins with a program's start must split. What still differs is bounded per order by MAX_DIFFERENT_SHARE,
which may only go down.

Both readings are diagnosed over the same runs (apart: a source per unit, all diagnosed together), so a run's
peers (runs of its model on its hardware) are the same in both.
"""

from __future__ import annotations

import difflib
import io
import random
from functools import lru_cache
from itertools import pairwise
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


# What a program prints once it measured (its timing lines, a slot's progress, a bare row): a log whose first
# line is one of these is a cut from the middle of a process, not an invocation
MID_PROCESS = frozenset(("timing", "timing.count", "timing.pair", "timing.trial", "timing.setup", "whisper.timing",
                         "server.slot", "bench.row", "wrapper.kobold_total"))


def continues(before: str, after: str) -> bool:
    """May `after` be read as the rest of the process `before` was cut from? When `before` ends open: the
    issue's rule is that a program's start after a *finished* run begins a new run, and a cut before its
    results (a start-up block, a model load, an error) is no finished run: a bare timing block, a context
    block or a bare table after it is exactly what that process would print next. And when `after` begins
    mid-process (its first line a timing line, a slot's progress, a bare row): a cut without its start is no
    invocation, and nothing in its lines says that another process printed it."""
    return shape(before)[1] or shape(after)[0] in MID_PROCESS


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


# The share of units each order still reads differently. At 66065a3, before issue 38: 0.45 to 0.57 of the units;
# 0.35 at a673fe4. Now 0.03 to 0.08 (sorted, reversed, seed-1, seed-2): what is left is a cut that begins inside a
# Metal block after another cut that ended open (two machines' lines read as one process, as any reader would), a
# neighbour's merge changing a run's peers, and `ollama` slog lines of two servers. A share, not a count, so that
# new field logs do not break it; it may only go down.
MAX_DIFFERENT_SHARE = 0.10


@pytest.mark.parametrize("which", ORDERS)
def test_runs_together_are_the_runs_apart(which, tmp_path):
    names = order(which)
    parts = units(names)
    alone = apart(tmp_path, parts)
    stream = together(tmp_path, names)
    different = read_differently(parts, alone, stream)
    assert len(different) <= MAX_DIFFERENT_SHARE * len(parts), different


def test_every_finished_log_is_a_junction_that_must_split():
    """The property is not vacuous: every log that ends with results, followed by a log that begins with a
    program's start (not mid-process), ends a unit, so that start must open a run of its own (a third of the
    corpus and more)."""
    finished = [n for n in logs() if not shape(n)[1]]
    assert len(finished) * 3 > len(logs())
    for which in ORDERS:
        names = order(which)
        junctions = [a for a, b in pairwise(names) if not shape(a)[1] and shape(b)[0] not in MID_PROCESS]
        assert len(junctions) * 4 > len(names)
        last = {u[-1] for u in units(names)}
        assert all(a in last for a in junctions)
