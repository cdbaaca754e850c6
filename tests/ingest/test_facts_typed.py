"""Every run's facts are typed as the model declares before they are stored: the values the
parsers and the run builder put in them decode back under pydantic's strict mode (no string
where an int belongs, no int where a bool does), and what the store reads back equals what was
built. Checked on every fixture, so a handler that stores a wrong type fails here, not in a
user's database (where it would load as a damaged run and be diagnosed unknown)."""

from __future__ import annotations

import pytest

from analyzer.model import FactsError, RunFacts, facts_json, load_facts
from tests.ingest_util import FIXTURES, is_label, parse_in_memory

FILES = sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.name not in ("expected.json", "README.md")
               and not p.name.startswith("_") and p.suffix != ".py" and not is_label(p))


def strict(stored: bytes) -> RunFacts:
    """What the builder stored, decoded with no coercion at all (no "1007" for an int, no 1 for a bool)."""
    return RunFacts.model_validate_json(stored, strict=True)


def test_there_are_fixtures():
    assert len(FILES) > 80


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_built_facts_are_strictly_typed_and_load_back_equal(path):
    for facts, _ in parse_in_memory(path.read_bytes()):
        stored = facts_json(facts)
        assert strict(stored) == facts  # raises a ValidationError naming the field
        assert load_facts(stored) == facts


def test_a_wrongly_typed_fact_is_caught_strictly_and_loads_laxly_only_when_harmless():
    facts = RunFacts(first_line=1, last_line=2)
    facts.device.apple_family = "1007"  # what a handler bug would store
    with pytest.raises(FactsError, match="device.apple_family"):
        strict(facts_json(facts))
    assert load_facts(facts_json(facts)).device.apple_family == 1007  # an older capscan's string: read as meant
    facts.device.apple_family = 1007.0  # an integral float, as JSON from elsewhere may hold it
    assert load_facts(facts_json(facts)).device.apple_family == 1007
    facts.device.apple_family = "Apple7"
    with pytest.raises(FactsError, match="device.apple_family"):
        load_facts(facts_json(facts))  # nothing to read it as: a load error, never a silent value
