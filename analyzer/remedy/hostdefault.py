"""The host-side default `com.apple.gpusw.ParavirtualizedGraphics
ForceUnrestrictedDeviceFeatureLevel`: read it, set it (remembering what it
replaced), put it back. Read by ParavirtualizedGraphics on the host when a VM
starts, for VMs launched by this user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from analyzer.remedy.runner import Runner
from analyzer.store import remedy_records as records

if TYPE_CHECKING:
    from analyzer.store.db import Database

DOMAIN = "com.apple.gpusw.ParavirtualizedGraphics"
KEY = "ForceUnrestrictedDeviceFeatureLevel"
READ = ["defaults", "read", DOMAIN, KEY]
WRITE_TRUE = ["defaults", "write", DOMAIN, KEY, "-bool", "true"]
DELETE = ["defaults", "delete", DOMAIN, KEY]
ACTION = "host-default"

RESTART = ("VMs must be stopped and started again to see it (a guest reboot is not enough): "
           "`lume stop VM && lume run VM`, stop and re-run `tart run VM`, or `anka stop VM && anka start VM`.")
SUFFICIENT = ("Published tests (kronk, M4 Max host) found the interposer alone sufficient: the default by itself "
              "left the guest at Apple5, and the shim gave identical results with or without it.")


@dataclass
class Value:
    state: str          # "set" | "missing" | "error"
    value: str | None   # "1", "0", ... as `defaults read` prints it
    detail: str

    @property
    def enabled(self) -> bool:
        return self.state == "set" and (self.value or "").strip().lower() in ("1", "true", "yes")

    def describe(self) -> str:
        if self.state == "missing":
            return "not set (the default does not exist)"
        if self.state == "error":
            return f"unknown ({self.detail})"
        return f"{self.value} ({'enabled' if self.enabled else 'disabled'})"

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "value": self.value, "enabled": self.enabled}


def read(runner: Runner) -> Value:
    result = runner.run(READ)
    if result.ok:
        return Value("set", result.stdout.strip(), "")
    if "does not exist" in result.output:
        return Value("missing", None, result.output.strip())
    return Value("error", None, result.output.strip() or f"exit status {result.returncode}")


def undo_argv(previous: Value) -> list[str]:
    if previous.state == "missing":
        return DELETE
    v = (previous.value or "").strip().lower()
    return ["defaults", "write", DOMAIN, KEY, "-bool", "true" if v in ("1", "true", "yes") else "false"]


def apply(runner: Runner, db: Database) -> tuple[bool, str, int | None]:
    """(ok, message, action id). Records the value it replaced."""
    before = read(runner)
    if before.state == "error":
        return False, f"cannot read the default: {before.detail}", None
    if before.enabled:
        return True, f"{DOMAIN} {KEY} is already {before.value}; nothing changed.", None
    result = runner.run(WRITE_TRUE)
    # What is set is read back, whatever `defaults` said: a write can take and still fail (or say it took and
    # not), and the record must describe the real value so that `remedy undo` can put the old one back.
    after = read(runner)
    changed = after.state == "error" or (after.state, after.value) != (before.state, before.value)
    write_error = None if result.ok else (result.output.strip() or f"exit status {result.returncode}")[:200]
    args = {"argv": WRITE_TRUE, "previous": before.to_json(), "after": after.to_json(), "domain": DOMAIN, "key": KEY}
    if write_error:
        args["write_error"] = write_error
    if not changed:
        aid = records.record(db, ACTION, args, f"failed: {write_error or 'the value did not change'}", None)
        return False, f"`{' '.join(WRITE_TRUE)}` did not take ({write_error or 'the value did not change'}); " \
                      f"the default is still {after.describe()}.", aid
    # something changed (or cannot be read back): recorded as applied, so it can be undone
    expect = after.value if after.state == "set" else None
    aid = records.record(db, ACTION, args, "applied", {"argv": undo_argv(before), "expect": expect})
    if result.ok and after.enabled:
        return True, f"set {DOMAIN} {KEY} = 1 (was {before.describe()}).", aid
    now_ = "cannot be read back" if after.state == "error" else f"now reads {after.describe()}"
    return False, (f"`{' '.join(WRITE_TRUE)}` {'failed (' + write_error + ')' if write_error else 'did not set 1'}, "
                   f"but the default {now_}: recorded as action {aid}, so `capscan remedy undo --apply` puts back "
                   f"{before.describe()}."), aid


def undo_action(runner: Runner, db: Database, action: dict[str, Any]) -> tuple[bool, str]:
    """Put back the value an earlier apply replaced, unless someone changed it since."""
    now_ = read(runner)
    expect = (action["undo"] or {}).get("expect")
    if expect is not None and not (now_.state == "set" and now_.value == expect):
        return False, (f"the default is now {now_.describe()}, not the {expect} capscan set, so someone changed it "
                       "since; capscan leaves it alone")
    argv = action["undo"]["argv"]
    result = runner.run(argv)
    if not result.ok:
        return False, f"`{' '.join(argv)}` failed: {result.output.strip()[:200]}"
    records.mark_undone(db, action["id"])
    return True, f"ran `{' '.join(argv)}`; the default is now {read(runner).describe()}."


def why_not_host(runner: Runner) -> str | None:
    """None when this is a macOS host (where the default is read); else why not."""
    from analyzer.remedy import platform as plat

    if plat.system() != "darwin":
        return (f"the ParavirtualizedGraphics default exists only on the macOS host that runs the VMs, and this is "
                f"{plat.system()}")
    guest, how = plat.is_guest(runner)
    if guest:
        return (f"this is a guest ({how}); the default is read by the host's ParavirtualizedGraphics, so set it "
                "on the host")
    return None
