"""A run's diagnosis, typed: what the rules produce (analyzer.rules.engine), the store keeps as JSON
(analyzer.store), and every output reads by attribute. Its parts (a finding, a proof item, a reference,
a baseline and its pairing, a prediction) are also the `--json` contract's (analyzer.output.contract):
`capscan schema` is generated from these classes, so there is no second description.

Two ways in: ``Diagnosis.load``, validated, for the rules' own report (rules.engine: validating the
plain data once costs less than building each nested part with ``model_construct``) and for a stored one
(an older capscan's, or a database from elsewhere: a report that does not fit is not loaded, and the run
is diagnosed again on the next read); ``Diagnosis.of``, without validation, for the few fixed reports
capscan writes itself (an internal error, an imported run's, a run gone from the store). Either way the report keeps the keys
it was made with, in their order, so what is stored is byte for byte what it was as a dict.

Nothing here imports the rest of capscan: the facts model (analyzer.model) holds a ``Diagnosis``."""

# (No ``from __future__ import annotations`` here or in analyzer.model: pydantic would compile and eval
# each annotation's text again when the classes are made, a cost of every start-up that imports them.)
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictBool


def empty_list() -> list[Any]:
    """A field's default: a new empty list. A function, not ``list``: pydantic asks each default
    factory for its signature when a model class is made, and a builtin's is parsed from its text
    (inspect, with tokenize's patterns compiled on first use: some 6 ms of every start-up that
    imports the models, ``show``'s among them)."""
    return []


def empty_dict() -> dict[Any, Any]:
    """A field's default: a new empty dict (a function, as ``empty_list``)."""
    return {}


Verdict = Literal["capability-downgrade", "hardware-limit", "no-gpu-offload", "virtualization-overhead", "healthy",
                  "unknown"]

# Where a claim comes from (issue 37): the guest's own process (this run's lines), another machine's
# lines in the same paste (a compare-llama-bench table's columns), a record imported from another
# capscan (with its origin instance), or this store's database. Only the first may prove a host or
# make a run fixable (rules.view: host_proof, remedy_decision).
Provenance = Literal["guest-process", "other-machine", "imported", "database"]


class _Part(BaseModel):
    """A part of a diagnosis. Closed: a key it does not declare is an error (a stored report with one is
    diagnosed again; the contract test fails on one added to the output and not here). It dumps only
    the keys it was made with (an optional key the rules left out stays out)."""

    model_config = ConfigDict(extra="forbid")

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_unset=True)


class EvidenceLine(_Part):
    line: int
    text: str
    inner: int | None = Field(default=None, description="the line's number inside the JSON string on physical "
                              "line `line` that held the log (a CI artifact's stderr_tail): shown as line:inner; "
                              "absent for a line of the log itself")


class Finding(_Part):
    rule: str
    severity: Literal["error", "warning", "info"]
    message: str
    evidence: list[EvidenceLine]
    data: dict[str, Any] | None = Field(default=None, description="the rule's own details, when it has any")


class ProofItem(_Part):
    """One positive sign that makes a downgrade fixable, with the line that shows it and whose line it is."""

    sign: str
    line: int | None
    text: str
    provenance: Provenance | None = Field(
        default=None, description="where the sign comes from: guest-process (the run's own lines, the only "
        "provenance that may make a run fixable), other-machine (another machine's lines in the same paste), "
        "imported (a record imported from another capscan), database (a stored record); null: a record that "
        "does not say (an older capscan's)")
    instance: str | None = Field(default=None, description="the origin instance of an imported sign")


class Reference(_Part):
    """An estimate of what the hardware could do: from published figures or the memory-bandwidth
    ceiling, never a stored baseline and never a reason for `fixable`."""

    test: str
    ceiling_tok_s: float
    basis: str


class Baseline(_Part):
    """Which bare-metal run a guest is measured against, and why (or why none)."""

    model_config = ConfigDict(extra="allow")

    run: int | None
    why: str
    host_chip: str | None
    candidates: int


class PairedTest(_Part):
    test: str
    config: str | None = Field(default=None, description="this run's configuration of the figure (see throughput)")
    tok_s: float | None
    rows: int = Field(default=1, description="this run's printed rows of the figure: tok_s is the best of them")
    baseline_tok_s: float | None
    baseline_config: str | None = Field(default=None, description="the baseline's figure's configuration: the same "
                                        "value of every parameter both state")
    ratio: float | None
    per_token_s: float | None = Field(description="1/tok_s - 1/baseline_tok_s: the per-token cost of the VM")


class Pairing(_Part):
    run: int
    why: str
    tests: list[PairedTest]


class Prediction(_Part):
    test: str
    host_tok_s: float | None
    per_token_s: float | None
    predicted_tok_s: float | None
    from_models: list[str]


class Reported(_Part):
    """An imported run's fixable claim as its origin reported it (analyzer.rules.origin)."""

    by: str
    fixable: bool
    claim_refused: str | None


class Diagnosis(BaseModel):
    """One run's diagnosis. Every key but the verdict and ``fixable`` may be absent from a stored report
    (an internal error's, an imported run's, an older capscan's): its default is what readers take then."""

    # a key another capscan stored and this one does not know is kept as it was
    model_config = ConfigDict(extra="allow")

    verdict: Verdict
    fixable: StrictBool
    fixable_reason: str | None = None
    # an imported run: its origin's claim (the run itself is never fixable here)
    reported: Reported | None = None
    proof: list[ProofItem] = Field(default_factory=empty_list)
    # what a downgrade lacks to be fixable: "host", "clamp", "gates-on-family", ...
    proof_missing: list[str] = Field(default_factory=empty_list)
    confidence: Literal["high", "medium", "low"] | None = None
    environment: str | None = None
    host_chip: str | None = None
    host_family: int | None = None
    # runtime capability flags (simdgroup_reduction, simdgroup_mm, bfloat, tensor); {} when not diagnosed
    capabilities: dict[str, bool | None] = Field(default_factory=empty_dict)
    capabilities_inferred: list[str] = Field(default_factory=empty_list)
    summary: str | None = None
    findings: list[Finding] = Field(default_factory=empty_list)
    next_steps: list[str] = Field(default_factory=empty_list)
    # the headline's nuances, the fired rules' own words (analyzer.rules.catalog.Rule.headline)
    headline_notes: dict[str, str] = Field(default_factory=empty_dict)
    # lines the report shows under a label when the verdict lacks that fact (Rule.report_line)
    report_lines: dict[str, str] = Field(default_factory=empty_dict)
    baseline: Baseline | None = None
    paired: Pairing | None = None
    reference: list[Reference] = Field(default_factory=empty_list)
    # an imported run's origin, as analyzer.store.origins keeps it
    origin: dict[str, Any] | None = None
    rules_version: str | None = None
    # what the decisive rule rests on (printed, symptoms, speed, reported): the headline's "why" reads it
    basis: str | None = None
    # the predicted speed after the remedy, per test (analyzer.rules.diagnose)
    prediction: list[Prediction] = Field(default_factory=empty_list)

    # the keys the report was made with, in order: what is stored is what was made
    _keys: tuple[str, ...] = PrivateAttr(default=())

    @classmethod
    def of(cls, **fields: Any) -> "Diagnosis":
        """The rules' own diagnosis, not validated (its parts built as models already)."""
        made = cls.model_construct(**fields)
        made._keys = tuple(fields)
        return made

    @classmethod
    def load(cls, data: dict[str, Any]) -> "Diagnosis":
        """A stored report, validated; raises pydantic's ``ValidationError`` when it does not fit."""
        made = cls.model_validate(data)
        made._keys = tuple(data)
        return made

    def drop_prediction(self) -> None:
        """Without a predicted speed (one that could not be made again): not stored, as if never set."""
        self.prediction = []
        self.model_fields_set.discard("prediction")

    def stored(self) -> dict[str, Any]:
        """The report as plain data, its keys in the order they were made (a key set later comes last):
        what the store writes as JSON."""
        out = self.model_dump(exclude_unset=True)
        keys = self._keys  # (read once: a private attribute is looked up through __getattr__)
        if tuple(out)[:len(keys)] == keys:  # the rules' own: made in the declared order already
            return out
        known = set(keys)
        order = keys + tuple(k for k in out if k not in known)
        return {k: out[k] for k in order if k in out}


# What a run not diagnosed (yet) reads as (readers never change it)
UNDIAGNOSED = Diagnosis.of(verdict="unknown", fixable=False)
