"""The `--json` contract (docs/usage.md, "capscan diagnose --json") as pydantic models: what
`diagnose --json` (and pipe mode, `probe --json`) prints is a ``DiagnoseDocument``, what
`show --json` prints one ``RunDocument``. `capscan schema` prints their JSON Schema.

The documents themselves are written by ``analyzer.output.runjson`` as plain dicts, not
through these models: `show` would otherwise build a second set of models at every start-up
for no reader's benefit. tests/output/test_json_schema.py holds the two together: every
bundled log's output validates against the printed schema and against these models, strictly.
Objects are closed (``extra="forbid"``) so that a key added to the output and not here fails
that test; a finding's ``data`` and a baseline's extras are the rules' own and stay open.

The diagnosis's parts (findings, proof, reference, baseline, pairing, prediction) are not described
here but in ``analyzer.diagnosis``, the model the rules produce and every output reads: one description."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

# A run's diagnosis is one description (analyzer.diagnosis): its parts are the document's
from analyzer.diagnosis import Baseline, Finding, Pairing, Prediction, ProofItem, Reference, Verdict
from analyzer.output.bundle import Bundle


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeviceJSON(_Closed):
    """The GPU the run used, as the log printed it (null: not shown)."""

    name: str | None
    apple_family: int | None = Field(description="the highest MTLGPUFamilyApple code seen (1001-1999)")
    families: list[int] = Field(description="every GPU family code seen")
    unified_memory: bool | None
    working_set_mb: float | None
    threadgroup_memory: int | None


class CapabilitiesJSON(_Closed):
    """What the runtime found the GPU able to do (printed, or implied by a printed family with a
    finding saying so)."""

    simdgroup_reduction: bool | None
    simdgroup_mm: bool | None
    bfloat: bool | None
    tensor: bool | None


class ShimJSON(_Closed):
    """An injected capability shim the log shows."""

    name: str
    apple_family_max: int | None


class ReducedJSON(_Closed):
    """How one entry stands for several printed rows of one configuration."""

    by: Literal["median", "best"] = Field(description="median: the median row (one of the rows, never the mean "
                                          "of two); best: the fastest row")
    of: int = Field(description="how many rows it stands for")


class ThroughputJSON(_Closed):
    """One printed figure (a row, a timing line), or, with ``reduced``, one standing for the many rows of
    one configuration."""

    test: str = Field(description="pp512, tg128, ...")
    # JSON has no infinity: a non-finite figure an older capscan stored is written as null
    tok_s: float | None = Field(description="tokens per second as printed (null: a non-finite figure)")
    stddev: float | None = Field(description="the ± printed with it (null: none printed, or a reduced entry)")
    model: str | None
    config: str | None = Field(default=None, description="the configuration its rows state, 'threads=8 fa=1' "
                               "(llama-bench display names); null where they state none")
    line: int | None = Field(default=None, description="the line it was printed on (a reduced entry: its first row's)")
    n: int = Field(default=1, description="rows it stands for: 1 for a printed row")
    reduced: ReducedJSON | None = Field(default=None, description="null for a row as printed; else how it stands "
                                        "for its rows (a configuration printed more than 64 times)")


class OriginJSON(_Closed):
    """Where an imported run was diagnosed (`capscan ingest` of another capscan's export)."""

    instance: str | None = Field(description="the guest's service.instance.id (its host name unless --instance)")
    source: str | None = Field(description="the log's name there")
    sha256: str | None = Field(description="the log's sha256 there (null: a diagnose --json report names none)")
    run_id: int | None = Field(description="the run's id in the origin's store")
    capscan_version: str | None
    diagnosed_at: str | None
    reported_fixable: bool | None = Field(default=None, description="the origin reported the run fixable and its "
                                          "own facts do not contradict that; the run's `fixable` is still false "
                                          "here (a report never acts where it was imported)")
    claim_refused: str | None = Field(default=None, description="why the origin's fixable claim was not accepted "
                                      "(a fact of its own against it, or a conflicting report); null otherwise")


class RunDocument(_Closed):
    """One diagnosed run (an element of `runs`; all of `show --json`). Fields the log does not
    show are null, never guessed."""

    id: int
    source: str
    first_line: int
    last_line: int
    program: str | None
    ollama_app: bool | None = Field(default=None, description="true: the official Ollama.app (signed with the "
                                    "hardened runtime), named by its runner's path; null: not shown")
    backend: str | None
    device: DeviceJSON
    host_chip: str | None
    environment: str | None = Field(description="vm, bare-metal, or null: not shown")
    capabilities: CapabilitiesJSON
    shim: ShimJSON | None
    throughput: list[ThroughputJSON]
    verdict: Verdict
    fixable: bool
    confidence: Literal["high", "medium", "low"] | None
    fixable_reason: str | None = Field(description="why the run is fixable, or what is missing; null when the "
                                                   "verdict is not a capability downgrade")
    proof: list[ProofItem] = Field(description="each positive sign of a fixable run with its line (of an imported "
                                   "run whose fixable claim was accepted: its origin's); [] otherwise")
    reference: list[Reference] = Field(description="estimated ceilings; may be empty")
    findings: list[Finding]
    baseline: Baseline | None = Field(description="a guest's bare-metal baseline and why, or why none; "
                                                      "null for runs that are not guests")
    next: list[str] = Field(description="the next commands or steps")
    pairing: Pairing | None = Field(description="per shared test, the ratio to the baseline and the per-token "
                                                    "cost")
    prediction: list[Prediction] = Field(description="the predicted speed after the remedy, per test")
    origin: OriginJSON | None = Field(default=None, description="an imported run's origin; null for a run of a "
                                                                "log stored here (its diagnosis is the origin's)")


class SummaryJSON(_Closed):
    verdict: Verdict = Field(description="the most severe verdict of the runs")
    runs: int
    fixable: bool


class DiagnoseDocument(_Closed):
    """What `capscan diagnose --json` (and pipe mode with --json) prints."""

    capscan_version: str
    summary: SummaryJSON
    runs: list[RunDocument]


# the self-test bundle a real Mac sends back (`remedy selftest --bundle FILE`) is its own document
DOCUMENTS: dict[str, type[BaseModel]] = {"diagnose": DiagnoseDocument, "show": RunDocument, "bundle": Bundle}


def json_schema(command: str = "diagnose") -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of what `capscan COMMAND --json` prints."""
    model = DOCUMENTS[command]
    schema = model.model_json_schema(mode="serialization")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://github.com/capscan/capscan/schema/{command}.json", **schema}
