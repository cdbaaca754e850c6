"""Messages posted from worker threads back to the screens (post_message is
thread-safe; widgets are only ever touched on the app's thread)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

from analyzer.store.browse import Facets, RunFilter, RunRow

StoredRun = Any  # analyzer.store.queries.StoredRun; not imported here, to keep pydantic off the first screen


@dataclass
class RunsLoaded(Message):
    generation: int
    flt: RunFilter
    rows: list[RunRow]
    append: bool
    limit: int
    elapsed_s: float


@dataclass
class CountLoaded(Message):
    generation: int
    matching: int


@dataclass
class FacetsLoaded(Message):
    facets: Facets


@dataclass
class DatabaseChanged(Message):
    """Another process committed to the database (new runs or diagnoses)."""
    new_runs: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, DatabaseChanged)


@dataclass
class RunLoaded(Message):
    run: StoredRun | None
    baseline: StoredRun | None


@dataclass
class PlanLoaded(Message):
    plan: dict[str, Any] | None
    error: str | None


@dataclass
class CompareLoaded(Message):
    runs: list[StoredRun]
    pair: dict[str, Any] | None
    decomposition: dict[str, Any] | None
    note: str | None
