"""The result of one check: pass/fail (or warn/skip), one sentence of why,
and what to do instead when it fails."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

PASS, FAIL, WARN, SKIP = "pass", "fail", "warn", "skip"
MARK = {PASS: "ok  ", FAIL: "FAIL", WARN: "warn", SKIP: "skip"}


@dataclass
class Check:
    name: str
    status: str
    reason: str
    instead: str | None = None
    command: list[str] | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == FAIL

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        text = f"  {MARK[self.status]}  {self.name}: {self.reason}"
        if self.instead and self.status in (FAIL, WARN):
            text += f"\n        instead: {self.instead}"
        return text


def passed(name: str, reason: str, **kw: Any) -> Check:
    return Check(name, PASS, reason, **kw)


def failed(name: str, reason: str, instead: str, **kw: Any) -> Check:
    return Check(name, FAIL, reason, instead, **kw)


def warned(name: str, reason: str, instead: str | None = None, **kw: Any) -> Check:
    return Check(name, WARN, reason, instead, **kw)


def skipped(name: str, reason: str, **kw: Any) -> Check:
    return Check(name, SKIP, reason, **kw)
