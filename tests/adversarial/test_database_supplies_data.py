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
from analyzer.rules.version import RULES_VERSION
from analyzer.store import open_db
from tests.remedy.conftest import stand_in_calls

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
        return stand_in_calls(self.log)

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


# -- shared: a database with the user's own runs -----------------------------------------------------------------

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# The guest's own proof of an Apple-silicon host (an arm64 macOS build line): with it the stock paravirtual
# guest's run is really fixable, the control every edited run is measured against.
ARM64_BUILD_LINE = ("build: 10167 (ee3d1b54c) with Apple clang version 17.0.0 (clang-1700.0.13.5) for "
                    "arm64-apple-darwin25.0.0\n")
NEVER_FIXABLE = {
    "intel-mac": FIXTURES / "metal" / "m2-2024-10-amd-egpu-intel-mac.log",
    "cpu-only": FIXTURES / "backends" / "cpu-only-system-info-2024-10.log",
    "bare-metal-healthy": FIXTURES / "metal" / "m2-2024-03-m2max.log",
}


def _store(tmp_path: Path, target: Path) -> tuple[Path, int, int]:
    """A database holding a truly fixable guest run and the user's own ``target`` run: (db, fixable id, target id)."""
    db = tmp_path / "capscan.db"
    guest = tmp_path / "guest-stock.log"
    guest.write_text(ARM64_BUILD_LINE + (FIXTURES / "metal" / "m4-2026-08-guest-stock.log").read_text())
    for path in (guest, target):
        r = CliRunner().invoke(cli, ["ingest", "--db", str(db), str(path)])
        assert r.exit_code == 0, r.output
    ids = [row["id"] for row in json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).output)]
    return db, min(ids), max(ids)


def _sql(db: Path, *statements: str) -> None:
    conn = sqlite3.connect(db)
    with conn:
        for s in statements:
            conn.execute(s)
    conn.close()


def _stored(db: Path, run_id: int) -> tuple:
    conn = sqlite3.connect(db)
    row = conn.execute("SELECT verdict, fixable FROM diagnoses WHERE run_id = ?", (run_id,)).fetchone()
    conn.close()
    return row


# -- finding 2: triggers and views are code, refused before anything runs ----------------------------------------

REWRITE = ("UPDATE diagnoses SET fixable = 1, verdict = 'capability-downgrade', "
           "report = json_set(report, '$.fixable', json('true'), '$.verdict', 'capability-downgrade')")
FOREIGN_OBJECTS = {
    "trigger-on-diagnoses": ("diagnoses_fix", f"CREATE TRIGGER diagnoses_fix AFTER INSERT ON diagnoses BEGIN "
                                              f"{REWRITE}; END"),
    "trigger-on-runs": ("runs_touch", f"CREATE TRIGGER runs_touch AFTER INSERT ON runs BEGIN {REWRITE}; END"),
    "capscan-like-name": ("generation_runs_update", "CREATE TRIGGER generation_runs_update AFTER UPDATE ON runs "
                                                    f"BEGIN {REWRITE}; END"),
    "temp-like-name": ("temp.fix", f'CREATE TRIGGER "temp.fix" BEFORE DELETE ON runs BEGIN {REWRITE}; END'),
    "update-trigger": ("on_read", f"CREATE TRIGGER on_read AFTER UPDATE ON remedy_actions BEGIN {REWRITE}; END"),
    "view": ("fixable_runs", "CREATE VIEW fixable_runs AS SELECT run_id FROM diagnoses WHERE fixable = 1"),
    "view-shadowing-a-table": ("run_origins", "DROP TABLE run_origins",
                               "CREATE VIEW run_origins AS SELECT run_id, 'k' || run_id AS key, 'x' AS instance, "
                               "'x' AS source, NULL AS sha256, NULL AS origin_run_id, NULL AS capscan_version, "
                               "NULL AS diagnosed_at, report FROM diagnoses"),
}


@pytest.mark.parametrize("kind", list(FOREIGN_OBJECTS))
def test_a_database_with_foreign_triggers_or_views_is_refused(tmp_path, kind):
    name, *statements = FOREIGN_OBJECTS[kind]
    db, _, intel = _store(tmp_path, NEVER_FIXABLE["intel-mac"])
    before = _stored(db, intel)
    _sql(db, *statements)  # added after capscan created the database, as a handed-over file holds it
    more = tmp_path / "more.log"
    more.write_text((FIXTURES / "metal" / "m2-2024-03-m2max.log").read_text())
    commands = [("ingest", "--force", str(more)), ("runs",), ("runs", "--json"), ("show", str(intel)),
                ("remedy", "plan", "--run", str(intel)), ("export", "prometheus"), ("export", "json"),
                ("db", "stats"), ("remedy", "status")]
    for args in commands:
        r = CliRunner().invoke(cli, [*args[:2], "--db", str(db), *args[2:]] if args[0] in ("remedy", "export", "db")
                               else [args[0], "--db", str(db), *args[1:]])
        assert r.exit_code == 2, (args, r.output)
        last = r.output.strip().splitlines()[-1]
        assert name in last and "capscan did not create" in last, (args, r.output)
        assert "Traceback" not in r.output
    assert _stored(db, intel) == before  # nothing fired


@pytest.mark.parametrize("kind", ["trigger-on-diagnoses", "view"])
def test_db_serve_refuses_a_foreign_trigger_or_view(tmp_path, kind, monkeypatch):
    """Datasette opens the file itself: the same check runs first, and nothing is served (the server is
    replaced by a recorder, so a missing check fails here instead of serving)."""
    pytest.importorskip("datasette")
    from analyzer.fleet import dbserve

    served: list[object] = []
    monkeypatch.setattr(dbserve, "serve", lambda *a, **k: served.append(a))
    name, *statements = FOREIGN_OBJECTS[kind]
    db, _, _ = _store(tmp_path, NEVER_FIXABLE["cpu-only"])
    _sql(db, *statements)
    r = CliRunner().invoke(cli, ["db", "serve", "--db", str(db), "--port", "0"])
    assert r.exit_code == 2 and name in r.output and "capscan did not create" in r.output, r.output
    assert served == []


def test_the_tui_store_refuses_a_foreign_trigger(tmp_path):
    from analyzer.store.browse import Store
    from analyzer.store.errors import StoreError

    db, _, _ = _store(tmp_path, NEVER_FIXABLE["intel-mac"])
    store = Store(db)
    with store.read() as conn:  # the TUI was started on a clean file; the trigger comes while it runs
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 2
    _sql(db, FOREIGN_OBJECTS["trigger-on-diagnoses"][1])
    with pytest.raises(StoreError, match="diagnoses_fix"):
        with store.read():
            pass
    with pytest.raises(StoreError, match="diagnoses_fix"):
        with store.database():
            pass


def test_connections_do_not_trust_the_schema(tmp_path):
    """trusted_schema=OFF: functions with side effects are not run from the schema's own SQL."""
    db, _, _ = _store(tmp_path, NEVER_FIXABLE["cpu-only"])
    database = open_db(db)
    assert database.conn.execute("PRAGMA trusted_schema").fetchone()[0] == 0
    database.conn.close()


# -- finding 3: a stored verdict is a claim; today's rules decide it ---------------------------------------------

def _edit_to_fixable(db: Path, run_id: int, *, report_too: bool, stale: bool = False) -> None:
    sets = "fixable = 1, verdict = 'capability-downgrade'"
    if report_too:
        sets += (", report = json_set(report, '$.fixable', json('true'), '$.verdict', 'capability-downgrade', "
                 "'$.fixable_reason', 'capscan can fix that')")
    if stale:
        sets += ", rules_version = '4'"
    _sql(db, f"UPDATE diagnoses SET {sets} WHERE run_id = {run_id}")


EDITS = [pytest.param(name, report_too, stale, id=f"{name}-{'report' if report_too else 'columns'}"
                      f"{'-stale' if stale else ''}")
         for name in NEVER_FIXABLE for report_too, stale in ((False, False), (True, False), (True, True))]


@pytest.mark.parametrize(("name", "report_too", "stale"), EDITS)
def test_an_edited_diagnosis_is_decided_again_everywhere(tmp_path, name, report_too, stale):
    db, fixable, target = _store(tmp_path, NEVER_FIXABLE[name])
    _edit_to_fixable(db, target, report_too=report_too, stale=stale)

    rows = {r["id"]: r for r in json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).output)}
    assert rows[fixable]["fixable"] is True  # the control: a real claim stands
    assert rows[target]["fixable"] is False and rows[target]["verdict"] != "capability-downgrade", rows[target]

    table = CliRunner().invoke(cli, ["runs", "--db", str(db)]).output
    (line,) = [ln for ln in table.splitlines() if ln.split("\t")[0] == str(target)]
    assert "capability-downgrade" not in line
    only = json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json", "--verdict",
                                               "capability-downgrade"]).output)
    assert [r["id"] for r in only] == [fixable]

    plan = json.loads(CliRunner().invoke(cli, ["remedy", "plan", "--db", str(db), "--run", str(target),
                                               "--json"]).output)
    assert plan["actionable"] is False and plan["fixable"] is False, plan
    assert json.loads(CliRunner().invoke(cli, ["remedy", "plan", "--db", str(db), "--run", str(fixable),
                                               "--json"]).output)["fixable"] is True

    from analyzer.store.browse import RunFilter, Store
    from analyzer.tui.model import page_rows

    with Store(db).read() as conn:
        tui = {r.id: r for r in page_rows(conn, RunFilter(), before=None, limit=50)}
    assert tui[target].fixable is False and tui[target].verdict != "capability-downgrade"
    assert tui[fixable].fixable is True

    prom = CliRunner().invoke(cli, ["export", "prometheus", "--db", str(db)]).output
    info = [ln for ln in prom.splitlines() if ln.startswith("capscan_run_info{")]
    assert sum('fixable="true"' in ln for ln in info) == 1, info  # the control only
    assert all('verdict="capability-downgrade"' not in ln or 'environment="vm"' in ln for ln in info), info

    out = tmp_path / "export.json"
    assert CliRunner().invoke(cli, ["export", "json", "--db", str(db), "--out", str(out)]).exit_code == 0
    runs = {r["id"]: r for r in json.loads(out.read_text())["runs"]}
    assert runs[target]["fixable"] is False and runs[target]["verdict"] != "capability-downgrade"


def test_a_stale_stored_verdict_is_decided_again_in_the_list(tmp_path):
    """Runs whose stored rules_version is not today's are decided again: a real downgrade stored as
    healthy by older rules lists as today's rules see it."""
    db, fixable, _ = _store(tmp_path, NEVER_FIXABLE["cpu-only"])
    _sql(db, f"UPDATE diagnoses SET verdict = 'healthy', fixable = 0, rules_version = '1' WHERE run_id = {fixable}")
    rows = {r["id"]: r for r in json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).output)}
    assert rows[fixable]["verdict"] == "capability-downgrade" and rows[fixable]["fixable"] is True


def test_a_stored_claim_on_the_default_stock_run_is_not_acted_on(tmp_path):
    """`remedy plan` without --run picks the newest stock run: an edited Intel run there is not actionable."""
    db, _, intel = _store(tmp_path, NEVER_FIXABLE["intel-mac"])
    _edit_to_fixable(db, intel, report_too=True)
    plan = json.loads(CliRunner().invoke(cli, ["remedy", "plan", "--db", str(db), "--json"]).output)
    assert plan["run_id"] == intel and plan["actionable"] is False and plan["fixable"] is False


def test_a_lying_diagnosis_stamped_by_another_installation_is_decided_again(tmp_path, monkeypatch):
    """The database comes from another machine whose capscan stamped its own (edited) diagnoses with its
    own key: nothing this installation's key verifies, so every claim is decided again here."""
    from analyzer.store import stamp

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "theirs"))
    db, fixable, intel = _store(tmp_path, NEVER_FIXABLE["intel-mac"])
    conn = sqlite3.connect(db)
    facts = conn.execute("SELECT CAST(facts AS BLOB) FROM runs WHERE id = ?", (intel,)).fetchone()[0]
    env = conn.execute("SELECT environment FROM diagnoses WHERE run_id = ?", (intel,)).fetchone()[0]
    theirs = stamp.key(create=False)
    assert theirs is not None
    with conn:
        conn.execute("UPDATE diagnoses SET fixable = 1, verdict = 'capability-downgrade', stamp = ? WHERE run_id = ?",
                     (stamp.stamp(theirs, intel, "capability-downgrade", 1, env, RULES_VERSION, facts), intel))
    conn.close()
    # on their machine the forged row verifies (the stamp only says who wrote it) ...
    assert intel not in _claims(db)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "ours"))  # ... here it does not
    rows = {r["id"]: r for r in json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).output)}
    assert rows[intel]["fixable"] is False and rows[intel]["verdict"] == "hardware-limit"
    assert rows[fixable]["fixable"] is True


def test_a_stamped_claim_moved_onto_other_facts_is_decided_again(tmp_path):
    """The stamp covers the run's facts: the fixable guest's stamped diagnosis over an Intel Mac's facts
    (the facts copied over the guest's run) no longer verifies."""
    db, fixable, intel = _store(tmp_path, NEVER_FIXABLE["intel-mac"])
    assert _claims(db) == set()  # this installation's own diagnoses, facts unchanged: nothing to decide again
    _sql(db, f"UPDATE runs SET facts = (SELECT facts FROM runs WHERE id = {intel}) WHERE id = {fixable}")
    assert _claims(db) == {fixable}
    rows = {r["id"]: r for r in json.loads(CliRunner().invoke(cli, ["runs", "--db", str(db), "--json"]).output)}
    assert rows[fixable]["fixable"] is False


def _claims(db: Path) -> set[int]:
    """The stored claims the listings decide again (not stamped here, on other facts, or older rules)."""
    from analyzer.rules.today import SETTLED
    from analyzer.rules.version import RULES_VERSION
    from analyzer.store.run_list import claims, unstamped

    database = open_db(db)
    try:
        return set(unstamped(database, claims(database, RULES_VERSION, SETTLED), RULES_VERSION))
    finally:
        database.conn.close()


@pytest.mark.parametrize("name", ["intel-mac", "cpu-only"])
async def test_the_tui_detail_and_copy_key_decide_an_edited_diagnosis_again(tmp_path, name):
    """The TUI's detail screen shows today's verdict, and its copy key (y) copies no remedy command."""
    from textual.widgets import DataTable

    from analyzer.tui.app import CapscanApp
    from analyzer.tui.screens.detail import DetailScreen

    db, fixable, target = _store(tmp_path, NEVER_FIXABLE[name])
    _edit_to_fixable(db, target, report_too=True)
    app = CapscanApp(db, run_id=target, poll_interval=None)
    async with app.run_test(size=(140, 45)) as pilot:
        for _ in range(3):
            await pilot.pause()
            await app.workers.wait_for_complete()
        assert isinstance(app.screen, DetailScreen)
        assert app.screen.run is not None and app.screen.run.diagnosis.fixable is False
        assert app.screen.run.diagnosis.verdict != "capability-downgrade"
        assert app.screen.plan is not None and app.screen.plan["actionable"] is False
        await pilot.press("y")
        await pilot.pause()
        assert app.clipboard == ""
        await pilot.press("escape")
        for _ in range(2):
            await pilot.pause()
            await app.workers.wait_for_complete()
        rows = app.runs_screen.rows
        assert rows[target].fixable is False and rows[fixable].fixable is True
        assert app.runs_screen.query_one("#runs", DataTable).row_count == 2


@pytest.mark.parametrize("name", list(NEVER_FIXABLE))
def test_an_edited_report_under_an_untouched_row_is_decided_again(tmp_path, name):
    """Only the report JSON says fixable (the row's columns, and their stamp, are capscan's own): the
    readers of whole reports (export json, remedy plan) decide it again too."""
    db, fixable, target = _store(tmp_path, NEVER_FIXABLE[name])
    _sql(db, "UPDATE diagnoses SET report = json_set(report, '$.fixable', json('true'), '$.verdict', "
             f"'capability-downgrade') WHERE run_id = {target}")
    out = tmp_path / "export.json"
    assert CliRunner().invoke(cli, ["export", "json", "--db", str(db), "--out", str(out)]).exit_code == 0
    runs = {r["id"]: r for r in json.loads(out.read_text())["runs"]}
    assert runs[target]["fixable"] is False and runs[target]["verdict"] != "capability-downgrade"
    assert runs[fixable]["fixable"] is True
    plan = json.loads(CliRunner().invoke(cli, ["remedy", "plan", "--db", str(db), "--run", str(target),
                                               "--json"]).output)
    assert plan["actionable"] is False
