"""A stored verdict is a claim: today's rules decide it before a command shows or acts on it.

A database can be handed over or edited (issue 37): its diagnoses are what some program wrote, not
proof. Every command that shows or acts on a verdict goes through here: one run is diagnosed again
from its stored facts with today's rules, as `show` does (``todays_diagnosis``); a listing keeps a
stored diagnosis only when it claims nothing (not fixable, a settled verdict, today's rules) and
decides the claims again (``todays_verdicts``), so listing 10^5 settled runs costs one index scan and
imports no rules. Only the rules' own diagnosis path is used (an imported run: analyzer.rules.origin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Sequence, TypeVar

from analyzer.rules.version import RULES_VERSION
from analyzer.store import run_list
from analyzer.verdicts import VERDICTS

if TYPE_CHECKING:
    from analyzer.diagnosis import Diagnosis
    from analyzer.model import StoredRun
    from analyzer.store.db import Database

# What a stored diagnosis may say and still be shown as stored: every verdict but the downgrade
SETTLED = tuple(v for v in VERDICTS if v != "capability-downgrade")
BATCH = 500

R = TypeVar("R")


def claims_nothing(diag: Diagnosis) -> bool:
    """A stored diagnosis (a report) that says nothing only the rules may say: not fixable, a settled
    verdict, today's rules."""
    return diag.fixable is False and diag.verdict in SETTLED and diag.rules_version == RULES_VERSION


def todays_diagnosis(db: Database, run: StoredRun, *, keep_settled: bool = False) -> Diagnosis:
    """The diagnosis of one loaded run that a command may show or act on: diagnosed again in memory from
    its stored facts with today's rules, nothing written. With ``keep_settled`` (readers of every run:
    export json), a stored diagnosis that claims nothing is kept as it is."""
    if keep_settled and run.diagnosis is not None and claims_nothing(run.diagnosis):
        return run.diagnosis
    from analyzer.rules.diagnose import diagnose_stored_run

    return diagnose_stored_run(db, run)


def todays_reports(db: Database, runs: list[StoredRun]) -> None:
    """For readers of every run's whole report (export json), a batch at a time: each run's diagnosis set
    to today's. A stored report is kept when it claims nothing and its row does not either, or when its
    row is a claim this installation stamped and the report says what the stamped row says; any other
    run is diagnosed again in memory."""
    claimed = run_list.claims(db, RULES_VERSION, SETTLED, [r.id for r in runs])
    wanted = set(run_list.unstamped(db, claimed, RULES_VERSION)) if claimed else set()
    for run in runs:
        d, row = run.diagnosis, claimed.get(run.id)
        if d is not None and run.id not in wanted and (
                claims_nothing(d) if row is None else
                (d.verdict, d.fixable, d.environment, d.rules_version)
                == (row[0], bool(row[1]) if row[1] in (0, 1) else None, row[2], row[3])):
            continue
        run.diagnosis = todays_diagnosis(db, run)


def todays_verdicts(db: Database, rows: Iterable[R], run_id: Callable[[R], int], *,
                    among: Sequence[int] | None = None) -> Iterator[tuple[R, Diagnosis | None]]:
    """Each listed row with today's diagnosis when its stored one is a claim (analyzer.store.run_list.claims:
    fixable, a verdict not settled, older rules) that this installation did not stamp itself on the same
    facts (analyzer.store.stamp), else None: the stored values stand. ``among``: the ids of a bounded
    listing (a page, the recent runs); else the claims of the whole store are found first, from an index.
    Rows stream BATCH at a time; stamps are checked, and the claims of a batch diagnosed (sharing one
    pass's peers), a batch at a time, so memory stays bounded."""
    claimed = run_list.claims(db, RULES_VERSION, SETTLED, among)
    if not claimed:  # the common case: nothing to decide, and the rules are never imported
        for row in rows:
            yield row, None
        return
    batch: list[R] = []

    def flush() -> Iterator[tuple[R, Diagnosis | None]]:
        here = {rid: claimed[rid] for r in batch if (rid := run_id(r)) in claimed}
        # a claim this installation stamped itself on unchanged facts stands; the rest are decided again
        wanted = run_list.unstamped(db, here, RULES_VERSION) if here else []
        today: dict[int, Diagnosis] = {}
        if wanted:
            from analyzer.rules.diagnose import diagnose_in_memory

            today = diagnose_in_memory(db, wanted)
        for r in batch:
            yield r, today.get(run_id(r))
        batch.clear()

    for row in rows:
        batch.append(row)
        if len(batch) >= BATCH:
            yield from flush()
    yield from flush()
