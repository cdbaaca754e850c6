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


TRUE_SPELLINGS = ("1", "true", "yes")
FALSE_SPELLINGS = ("0", "false", "no")


def undo_argv(previous: Value) -> list[str]:
    if previous.state == "missing":
        return DELETE
    v = (previous.value or "").strip().lower()
    return ["defaults", "write", DOMAIN, KEY, "-bool", "true" if v in TRUE_SPELLINGS else "false"]


@dataclass
class UndoPlan:
    """What `remedy undo` does for one record: capscan's own `defaults` command, rebuilt from the value
    the record says was replaced (``argv``), and the value capscan set (``expect``: left alone when it
    has changed since); or why the record is refused (``refused``), and then nothing runs."""

    argv: list[str] | None
    previous: Value | None
    expect: str | None
    refused: str | None

    def to_json(self) -> dict[str, Any]:
        if self.refused:
            return {"refused": self.refused}
        return {"argv": self.argv, "expect": self.expect}


def _refused(why: str) -> UndoPlan:
    return UndoPlan(None, None, None, f"refusing this record: {why}; nothing runs")


def undo_plan(action: dict[str, Any]) -> UndoPlan:
    """The undo of a stored record, rebuilt. The database is data, never code: a database handed over
    (--db, $CAPSCAN_DB, a shared folder) can hold any record, so the stored undo argv is never run or
    shown as a command; only a record that fits what ``apply`` writes gets capscan's own command."""
    if action.get("action") != ACTION:
        return _refused(f"capscan does not know how to undo {str(action.get('action'))[:40]!r}")
    args, undo = action.get("args"), action.get("undo")
    if not isinstance(args, dict) or not isinstance(undo, dict):
        return _refused("its arguments or its undo are not what capscan records")
    if args.get("domain") != DOMAIN or args.get("key") != KEY:
        return _refused(f"it names another default than {DOMAIN} {KEY}")
    prev = args.get("previous")
    if not isinstance(prev, dict) or prev.get("state") not in ("missing", "set"):
        return _refused("the value it replaced is not recorded as missing or set")
    value = prev.get("value")
    if prev["state"] == "missing" and value is not None:
        return _refused("the value it replaced is both missing and set")
    if prev["state"] == "set" and not (isinstance(value, str)
                                       and value.strip().lower() in TRUE_SPELLINGS + FALSE_SPELLINGS):
        return _refused("the value it replaced is not a boolean as `defaults read` prints one")
    shown = undo.get("argv")  # never run: only its type is checked, as any field of the record
    if shown is not None and not (isinstance(shown, list) and all(isinstance(x, str) for x in shown)):
        return _refused("its undo is not what capscan records")
    expect = undo.get("expect")
    if expect is not None and not (isinstance(expect, str) and expect.strip().lower() in TRUE_SPELLINGS):
        return _refused("the value it says capscan set is not the 1 capscan sets")
    previous = Value(prev["state"], value, "")
    return UndoPlan(undo_argv(previous), previous, expect, None)


def public_record(action: dict[str, Any]) -> dict[str, Any]:
    """A stored record as status and host-default show it: its undo is the rebuilt command (or why it is
    refused), never the stored argv; a host-default record's command is capscan's own."""
    out = dict(action)
    if action.get("action") == ACTION:
        out["args"] = {**(action["args"] if isinstance(action.get("args"), dict) else {}), "argv": WRITE_TRUE}
        if action.get("undo") is not None:
            out["undo"] = undo_plan(action).to_json()
    elif action.get("undo") is not None:
        undo = action["undo"]
        why = undo.get("why") if isinstance(undo, dict) else None
        out["undo"] = {"why": why} if isinstance(why, str) else {"refused": "not an undo capscan records"}
    if not isinstance(out.get("args"), dict):
        out["args"] = {}
    return out


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
    """Put back the value an earlier apply replaced, unless someone changed it since; with capscan's own
    command rebuilt from the record (``undo_plan``), never the argv the record holds."""
    plan = undo_plan(action)
    if plan.refused or plan.argv is None:
        return False, plan.refused or "refusing this record; nothing runs"
    now_ = read(runner)
    if plan.expect is not None and not (now_.state == "set" and now_.value == plan.expect):
        return False, (f"the default is now {now_.describe()}, not the {plan.expect} capscan set, so someone "
                       "changed it since; capscan leaves it alone")
    result = runner.run(plan.argv)
    if not result.ok:
        return False, f"`{' '.join(plan.argv)}` failed: {result.output.strip()[:200]}"
    records.mark_undone(db, action["id"])
    return True, f"ran `{' '.join(plan.argv)}`; the default is now {read(runner).describe()}."


def why_not_host(runner: Runner) -> str | None:
    """None only when this is known to be a macOS host (where the default is read); else why not.

    Fails closed: `--apply` inside a guest writes a default nothing reads and leaves a change to undo, so an
    unreadable or contradictory answer (kern.hv_vmm_present unreadable, or 0 beside a "(Virtual)" brand
    string) is never taken for a host; the brand string alone does not make one."""
    from analyzer.remedy import platform as plat

    if plat.system() != "darwin":
        return (f"the ParavirtualizedGraphics default exists only on the macOS host that runs the VMs, and this is "
                f"{plat.system()}")
    hv = plat.hv_vmm_present(runner)
    brand = plat.brand_string(runner)
    if hv is None:
        if plat.is_guest_brand(brand):
            return (f"this is a guest (CPU brand string '{brand}'); the default is read by the host's "
                    "ParavirtualizedGraphics, so set it on the host")
        return ("capscan cannot tell host from guest: `sysctl -n kern.hv_vmm_present` could not be read (CPU "
                f"brand string: {brand or 'unreadable'}), and an unknown is never taken for the host; run "
                "`sysctl -n kern.hv_vmm_present` here, it must print 0 on the host")
    if hv:
        return ("this is a guest (kern.hv_vmm_present=1); the default is read by the host's "
                "ParavirtualizedGraphics, so set it on the host")
    if plat.is_guest_brand(brand):
        return (f"capscan cannot tell host from guest: kern.hv_vmm_present=0 but the CPU brand string is "
                f"'{brand}', and an ambiguous answer is never taken for the host")
    return None
