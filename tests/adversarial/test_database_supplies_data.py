"""A database supplies data, never code (issue 37, item 3).

A database can be handed over (``--db``, ``$CAPSCAN_DB``, a shared folder), so whatever it holds was
written by someone who may not be the user: a ``remedy_actions`` record never supplies the command
``remedy undo`` runs, a trigger or view in the file is refused before anything reads or writes, and a
stored verdict is a claim that every command decides again from the stored facts with today's rules.

The host-default tests run capscan in-process (click's CliRunner) on the stand-in macOS host the remedy
tests use (tests/remedy/bin: ``defaults``, ``sysctl``), whose every call is logged."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from analyzer.cli import cli
from analyzer.store import open_db

BIN = Path(__file__).resolve().parents[1] / "remedy" / "bin"
DOMAIN, KEY = "com.apple.gpusw.ParavirtualizedGraphics", "ForceUnrestrictedDeviceFeatureLevel"
OURS = ["defaults", "write", DOMAIN, KEY, "-bool", "true"]


class Host:
    """A stand-in Apple-silicon macOS host: its `defaults` value lives in a file, every call is logged."""

    def __init__(self, tmp: Path):
        import os

        self.tmp, self.db = tmp, tmp / "handed-over.db"
        self.value_file, self.log, self.pwned = tmp / "pvg-default", tmp / "standin.log", tmp / "PWNED"
        self.env = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "CAPSCAN_DB": str(self.db),
                    "CAPSCAN_STANDIN_LOG": str(self.log), "CAPSCAN_FAKE_DEFAULTS_FILE": str(self.value_file),
                    "CAPSCAN_PLATFORM": "darwin", "CAPSCAN_MACHINE": "arm64", "CAPSCAN_FAKE_BRAND": "Apple M4 Max",
                    "NO_COLOR": "1", "HOME": str(tmp)}
        open_db(self.db).conn.close()

    def capscan(self, *args: str):
        return CliRunner().invoke(cli, list(args), env=self.env, catch_exceptions=True)

    def value(self) -> str | None:
        return self.value_file.read_text().strip() if self.value_file.exists() else None

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        data = self.log.read_bytes().split(b"\0")
        out, i = [], 0
        while i < len(data) - 1:
            n = int(data[i])
            out.append([x.decode() for x in data[i + 1:i + 2 + n]])
            i += 2 + n
        return out

    def changes(self) -> list[list[str]]:
        """Every call that could change something: anything but `defaults read` and `sysctl`."""
        return [c for c in self.calls() if c[0] != "sysctl" and c[:2] != ["defaults", "read"]]

    def plant(self, *, action: str = "host-default", args: object = None, undo: object = None,
              raw_args: str | None = None, raw_undo: str | None = None, result: str = "applied") -> int:
        """A remedy_actions record written by someone else (straight into the file, as a handed-over
        database holds it)."""
        if args is None:
            args = {"argv": OURS, "previous": {"state": "missing", "value": None, "enabled": False},
                    "after": {"state": "set", "value": "1", "enabled": True}, "domain": DOMAIN, "key": KEY}
        conn = sqlite3.connect(self.db)
        with conn:
            cur = conn.execute(
                "INSERT INTO remedy_actions (at, action, args, result, undo) VALUES (?, ?, ?, ?, ?)",
                ("2026-12-01T10:00:00+00:00", action, raw_args if raw_args is not None else json.dumps(args), result,
                 raw_undo if raw_undo is not None else (None if undo is None else json.dumps(undo))))
        conn.close()
        return int(cur.lastrowid or 0)


@pytest.fixture
def host(tmp_path) -> Host:
    return Host(tmp_path)


def _args(previous: object, over: dict | None = None) -> dict:
    out = {"argv": OURS, "previous": previous, "after": {"state": "set", "value": "1", "enabled": True},
           "domain": DOMAIN, "key": KEY}
    out.update(over or {})
    return out


MISSING = {"state": "missing", "value": None, "enabled": False}
WAS_OFF = {"state": "set", "value": "0", "enabled": False}


# -- finding 1: the stored undo argv never runs ----------------------------------------------------------------


def test_undo_argv_replaced_by_a_shell_runs_capscans_own_command(host):
    """The record says the default was missing; its undo argv is a shell. The undo deletes the default
    (capscan's own DELETE, rebuilt from `previous`) and the shell never runs."""
    host.value_file.write_text("1\n")
    host.plant(undo={"argv": ["sh", "-c", f"id > {host.pwned}"], "expect": "1"})
    dry = host.capscan("remedy", "undo")
    assert dry.exit_code == 0, dry.output
    assert f"defaults delete {DOMAIN} {KEY}" in dry.output and "sh -c" not in dry.output
    r = host.capscan("remedy", "undo", "--apply")
    assert r.exit_code == 0, r.output
    assert not host.pwned.exists()
    assert host.changes() == [["defaults", "delete", DOMAIN, KEY]]
    assert host.value() is None


def test_host_default_undo_with_a_shell_argv(host):
    host.value_file.write_text("1\n")
    host.plant(args=_args(WAS_OFF), undo={"argv": ["/bin/sh", "-c", f"touch {host.pwned}"], "expect": "1"})
    dry = host.capscan("remedy", "host-default", "--undo", "--json")
    doc = json.loads(dry.output)
    assert doc["undo"]["argv"] == ["defaults", "write", DOMAIN, KEY, "-bool", "false"], doc["undo"]
    r = host.capscan("remedy", "host-default", "--undo", "--apply")
    assert r.exit_code == 0, r.output
    assert not host.pwned.exists()
    assert host.changes() == [["defaults", "write", DOMAIN, KEY, "-bool", "false"]]
    assert host.value() == "0"


def test_undo_argv_on_another_domain_is_never_run(host):
    """A `defaults` command, but on another domain and key: capscan still runs its own, on its own key."""
    host.value_file.write_text("1\n")
    other = ["defaults", "write", "com.apple.security", "GKAutoRearm", "-bool", "false"]
    host.plant(args=_args(WAS_OFF), undo={"argv": other, "expect": "1"})
    r = host.capscan("remedy", "undo", "--apply")
    assert r.exit_code == 0, r.output
    assert host.changes() == [["defaults", "write", DOMAIN, KEY, "-bool", "false"]]
    assert "com.apple.security" not in r.output


def test_undo_argv_with_a_string_substitution_is_never_run(host):
    host.value_file.write_text("1\n")
    evil = ["defaults", "write", DOMAIN, KEY, "-string", f"$(id > {host.pwned})"]
    host.plant(args=_args({"state": "set", "value": "true", "enabled": True}), undo={"argv": evil, "expect": "1"})
    r = host.capscan("remedy", "undo", "--apply", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["undo"][0]["argv"] == ["defaults", "write", DOMAIN, KEY, "-bool", "true"]
    assert host.changes() == [["defaults", "write", DOMAIN, KEY, "-bool", "true"]]
    assert not host.pwned.exists()


@pytest.mark.parametrize("previous", [
    {"state": "set", "value": "$(id)", "enabled": False},
    {"state": "set", "value": "2", "enabled": False},
    {"state": "set", "value": 1, "enabled": True},          # a number, not the text `defaults read` prints
    {"state": "set", "value": None, "enabled": False},
    {"state": "error", "value": None, "enabled": False},
    {"state": "missing; rm -rf ~", "value": None, "enabled": False},
    "missing",
    ["missing"],
])
def test_undo_of_a_previous_value_that_does_not_fit_is_refused(host, previous):
    host.value_file.write_text("1\n")
    aid = host.plant(args=_args(previous), undo={"argv": ["defaults", "delete", DOMAIN, KEY], "expect": "1"})
    for args in (("remedy", "undo", "--apply"), ("remedy", "host-default", "--undo", "--apply"),
                 ("remedy", "undo", "--apply", "--id", str(aid))):
        r = host.capscan(*args)
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        assert r.exit_code == 1, (args, r.output)
        assert "refus" in r.output and "Traceback" not in r.output, r.output
    assert host.changes() == [] and host.value() == "1"


@pytest.mark.parametrize("action", ["shell", "host-default ", "Host-Default", "remedy-run"])
def test_undo_of_an_unknown_action_is_refused(host, action):
    host.value_file.write_text("1\n")
    host.plant(action=action, undo={"argv": ["sh", "-c", f"id > {host.pwned}"], "expect": "1"})
    r = host.capscan("remedy", "undo", "--apply")
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert not host.pwned.exists() and host.changes() == []


@pytest.mark.parametrize("raw_undo", ['"sh -c id"', '["sh", "-c", "id"]', "42", "not json at all {",
                                      '{"argv": "sh -c id"}', '{"argv": ["defaults"], "expect": ["1"]}'])
def test_undo_json_of_the_wrong_shape_is_refused(host, raw_undo):
    host.value_file.write_text("1\n")
    host.plant(raw_undo=raw_undo)
    for args in (("remedy", "undo", "--apply"), ("remedy", "host-default", "--undo", "--apply")):
        r = host.capscan(*args)
        assert r.exception is None or isinstance(r.exception, SystemExit), (args, repr(r.exception))
        assert "Traceback" not in r.output
        assert r.exit_code in (0, 1), r.output
    assert host.changes() == [] and host.value() == "1"
    status = host.capscan("remedy", "status")
    assert status.exit_code == 0 and "sh -c" not in status.output, status.output


@pytest.mark.parametrize("over", [{"domain": "com.apple.security"}, {"key": "GKAutoRearm"}, {"domain": None},
                                  {"previous": None}])
def test_undo_of_a_record_on_another_key_is_refused(host, over):
    host.value_file.write_text("1\n")
    host.plant(args=_args(MISSING, over), undo={"argv": ["defaults", "delete", DOMAIN, KEY], "expect": "1"})
    r = host.capscan("remedy", "undo", "--apply")
    assert r.exit_code == 1 and "refus" in r.output, r.output
    assert host.changes() == [] and host.value() == "1"


def test_undo_args_that_are_not_an_object_are_refused(host):
    host.value_file.write_text("1\n")
    host.plant(raw_args='["defaults", "write"]', undo={"argv": ["sh", "-c", "id"], "expect": "1"})
    r = host.capscan("remedy", "undo", "--apply")
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    status = host.capscan("remedy", "status")
    assert status.exit_code == 0, status.output
    assert host.changes() == []


def test_status_shows_the_rebuilt_command_never_the_stored_one(host):
    host.value_file.write_text("1\n")
    host.plant(undo={"argv": ["sh", "-c", f"id > {host.pwned}"], "expect": "1"})
    r = host.capscan("remedy", "status")
    assert r.exit_code == 0, r.output
    assert "sh -c" not in r.output and "PWNED" not in r.output
    assert f"undo: defaults delete {DOMAIN} {KEY}" in r.output
    doc = json.loads(host.capscan("remedy", "status", "--json").output)
    assert "sh" not in json.dumps(doc["actions"][0]["undo"])
    assert not host.pwned.exists() and host.changes() == []


def test_a_record_capscan_wrote_itself_still_undoes(host):
    """The ordinary cycle: apply records the value it replaced; undo puts it back."""
    host.value_file.write_text("0\n")
    assert host.capscan("remedy", "host-default", "--apply").exit_code == 0
    assert host.value() == "1"
    r = host.capscan("remedy", "undo", "--apply")
    assert r.exit_code == 0, r.output
    assert host.value() == "0"
    assert host.changes()[-1] == ["defaults", "write", DOMAIN, KEY, "-bool", "false"]
