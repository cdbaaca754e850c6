"""The self-test bundle (`capscan remedy selftest --bundle FILE`) as a pydantic model: one JSON file a
real Mac sends back, whose schema `capscan schema --for bundle` prints and which `capscan ingest`
reads back as runs (analyzer.ingest.bundle).

Each check only a Mac can settle is a ``Hypothesis``: what is claimed, what output would confirm
it, what was seen, and a status. The logs of the runs it made (the probe stock and remedied,
llama-bench before and after) travel whole, so an attached bundle becomes a test fixture."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

KIND = "capscan.selftest-bundle"
VERSION = 1
# pass: the expected output was seen; fail: it was not (``why`` says what was seen instead); error: the check
# could not run to an answer (a crash, a timeout, a missing tool); not-run-here: this machine cannot settle
# it (the Linux stand-in, or a guest for a host's check); not-run: it could, but was not asked to (``why``)
Status = Literal["pass", "fail", "error", "not-run-here", "not-run"]
STATUSES: tuple[str, ...] = ("pass", "fail", "error", "not-run-here", "not-run")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Hypothesis(_Closed):
    """One thing only a Mac can confirm, checked here."""

    name: str = Field(description="a stable id: library-hooks, kernels-stock, kernels-injected, "
                                  "framework-python, remedy-run-llama-bench, test-backend-ops.MUL_MAT, ...")
    claim: str = Field(description="the hypothesis, in a sentence")
    expected: str = Field(description="the output that would confirm it")
    actual: str | None = Field(description="what was seen (null: not run)")
    status: Status
    why: str | None = Field(default=None, description="why it failed, could not run or was not run here")
    command: list[str] | None = Field(default=None, description="the command it ran (argument list)")
    timings_ms: list[int] = Field(default_factory=list, description="wall time of each run, in ms")


class BundleLog(_Closed):
    """The output of one run the self-test made, stderr then stdout as `2>&1` shows it: read back as a log."""

    label: str = Field(description="stock probe, capscan probe, llama-bench stock, llama-bench capscan, ...")
    hypothesis: str | None = Field(description="the hypothesis it is evidence for")
    command: list[str]
    returncode: int | None
    text: str


class Machine(_Closed):
    """What the machine is, as the self-test found it."""

    platform: str = Field(description="darwin, or linux for the stand-in")
    stand_in: bool = Field(description="true: the Linux stand-in (LD_PRELOAD and the fake Metal device), not a GPU")
    guest: bool | None = Field(description="a VM guest (kern.hv_vmm_present); null: not known")
    guest_how: str | None
    cpu: str | None
    sip: str | None = Field(description="csrutil's state: enabled, disabled, custom, unknown (n/a on Linux)")
    machine: str | None
    command_line_tools: bool | None


class Bundle(_Closed):
    """What `capscan remedy selftest --bundle FILE` writes."""

    capscan_version: str
    bundle: Literal["capscan.selftest-bundle"]
    bundle_version: Literal[1]
    created_at: str = Field(description="UTC, ISO-8601")
    redacted: bool = Field(description="true: home directories, user and host names were replaced (--redact, "
                                       "the default) by ~, <user> and <host>")
    machine: Machine
    verdict: str = Field(description="the self-test's verdict (works, interposing-disabled, ...)")
    reason: str
    family: int | None = Field(description="the Apple family cap tested")
    hypotheses: list[Hypothesis]
    logs: list[BundleLog]
    selftest: dict[str, Any] = Field(description="the `capscan remedy selftest --json` document of this run")
    send_to: str = Field(description="where to send the bundle")
