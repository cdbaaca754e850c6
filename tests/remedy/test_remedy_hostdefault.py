"""host-default, undo and status against a stand-in `defaults` (recorded
messages), on a stand-in Apple-silicon host."""

from __future__ import annotations

import json

import pytest

DOMAIN, KEY = "com.apple.gpusw.ParavirtualizedGraphics", "ForceUnrestrictedDeviceFeatureLevel"


@pytest.fixture
def host(env):
    return env.darwin(CAPSCAN_FAKE_BRAND="Apple M4 Max")


def _value(env):
    f = env.tmp / "pvg-default"
    return f.read_text().strip() if f.exists() else None


def test_status_apply_undo_cycle(host):
    env = host
    # --status stores nothing: the missing database $CAPSCAN_DB names is an error, never created
    r = env.capscan("remedy", "host-default", "--status")
    assert r.returncode == 2 and r.stderr.decode().startswith(f"capscan: no database at {env.db} ")
    assert not env.db.exists() and env.calls() == []
    from analyzer.store import open_db

    open_db(env.db).conn.close()
    r = env.capscan("remedy", "host-default", "--status")
    out = r.stdout.decode()
    assert r.returncode == 0 and "not set (the default does not exist)" in out
    assert "stopped and started again" in out and "interposer alone sufficient" in out
    assert f"`--apply` would run: defaults write {DOMAIN} {KEY} -bool true" in out
    # host or guest: kern.hv_vmm_present, and the brand string to catch a contradiction
    assert env.calls() == [["sysctl", "-n", "kern.hv_vmm_present"], ["sysctl", "-n", "machdep.cpu.brand_string"],
                           ["defaults", "read", DOMAIN, KEY]]

    r = env.capscan("remedy", "host-default", "--apply")
    assert r.returncode == 0, r.stderr.decode()
    assert "set com.apple.gpusw.ParavirtualizedGraphics ForceUnrestrictedDeviceFeatureLevel = 1 (was not set" in \
        r.stdout.decode()
    assert _value(env) == "1"
    assert ["defaults", "write", DOMAIN, KEY, "-bool", "true"] in env.calls()

    status = json.loads(env.capscan("remedy", "status", "--json").stdout)
    (action,) = [a for a in status["actions"] if a["action"] == "host-default"]
    assert action["result"] == "applied" and action["args"]["previous"]["state"] == "missing"
    assert action["undo"]["argv"] == ["defaults", "delete", DOMAIN, KEY]
    assert status["pending_undo"] == [action["id"]]

    before = len(env.calls())
    r = env.capscan("remedy", "undo")          # dry run
    assert "would run `defaults delete" in r.stdout.decode() and "dry run" in r.stdout.decode()
    assert not any(c[:2] == ["defaults", "delete"] for c in env.calls()[before:])
    assert _value(env) == "1"

    r = env.capscan("remedy", "undo", "--apply")
    assert r.returncode == 0, r.stdout.decode()
    assert ["defaults", "delete", DOMAIN, KEY] in env.calls()
    assert _value(env) is None
    status = json.loads(env.capscan("remedy", "status", "--json").stdout)
    assert status["pending_undo"] == [] and status["actions"][0]["undone_at"]


def test_previous_value_is_restored(host):
    env = host
    (env.tmp / "pvg-default").write_text("0\n")
    assert env.capscan("remedy", "host-default", "--apply").returncode == 0
    r = env.capscan("remedy", "host-default", "--undo")
    assert "would run `defaults write" in r.stdout.decode() and _value(env) == "1"
    r = env.capscan("remedy", "host-default", "--undo", "--apply")
    assert r.returncode == 0 and _value(env) == "0"
    assert ["defaults", "write", DOMAIN, KEY, "-bool", "false"] in env.calls()


def test_already_set_changes_nothing(host):
    env = host
    (env.tmp / "pvg-default").write_text("1\n")
    r = env.capscan("remedy", "host-default", "--apply", "--json")
    doc = json.loads(r.stdout)
    assert doc["apply"]["done"] and "nothing changed" in doc["apply"]["message"]
    assert not any(c[:2] == ["defaults", "write"] for c in env.calls())
    assert doc["records"] == []


def test_undo_leaves_a_value_changed_since(host):
    env = host
    env.capscan("remedy", "host-default", "--apply")
    (env.tmp / "pvg-default").write_text("0\n")  # someone else changed it
    r = env.capscan("remedy", "undo", "--apply")
    assert r.returncode == 1 and "someone changed it since" in r.stdout.decode()
    assert _value(env) == "0"


def test_refused_in_a_guest_and_on_linux(env):
    env.darwin()  # brand: Apple M1 Ultra (Virtual)
    r = env.capscan("remedy", "host-default", "--apply")
    assert r.returncode == 2 and "this is a guest" in r.stderr.decode()
    assert not any(c[0] == "defaults" for c in env.calls())
    env.vars["CAPSCAN_PLATFORM"] = "linux"
    r = env.capscan("remedy", "host-default", "--apply")
    assert r.returncode == 2 and "only on the macOS host" in r.stderr.decode()
    r = env.capscan("remedy", "host-default")
    assert r.returncode == 0 and "not a macOS host" in r.stdout.decode()


def test_status_and_undo_when_nothing_was_done(env):
    from analyzer.store import open_db

    for args in (("remedy", "status"), ("remedy", "undo", "--apply")):  # $CAPSCAN_DB names a missing file
        r = env.capscan(*args)
        assert r.returncode == 2 and r.stderr.decode().startswith(f"capscan: no database at {env.db} ")
        assert not env.db.exists()
    open_db(env.db).conn.close()
    assert "has done nothing yet" in env.capscan("remedy", "status").stdout.decode()
    assert "nothing to undo" in env.capscan("remedy", "undo", "--apply").stdout.decode()


@pytest.mark.parametrize(("hv", "brand", "why"), [
    ("missing", "Apple M4 Max", "cannot tell host from guest: `sysctl -n kern.hv_vmm_present` could not be read"),
    ("", "Apple M4 Max", "cannot tell host from guest: `sysctl -n kern.hv_vmm_present` could not be read"),
    ("yes", "Apple M4 Max", "cannot tell host from guest: `sysctl -n kern.hv_vmm_present` could not be read"),
    ("0", "Apple M1 Ultra (Virtual)", "kern.hv_vmm_present=0 but the CPU brand string is 'Apple M1 Ultra (Virtual)'"),
])
def test_apply_fails_closed_when_host_or_guest_is_unknown(env, hv, brand, why):
    """An unreadable or contradictory answer is never taken for a host: --apply refuses in one line and
    `defaults` never runs (on c5d2e23 the unknown fell through to the host and the write ran)."""
    env.darwin(CAPSCAN_FAKE_BRAND=brand, CAPSCAN_FAKE_HV_VMM=hv)
    if hv == "":  # sysctl prints nothing at all
        env.vars["CAPSCAN_FAKE_HV_VMM"] = " "
    r = env.capscan("remedy", "host-default", "--apply")
    err = r.stderr.decode()
    assert r.returncode == 2 and why in err, err
    assert len(err.strip().splitlines()) == 1
    assert not any(c[0] == "defaults" for c in env.calls())
    assert _value(env) is None
    from analyzer.store import open_db

    open_db(env.db).conn.close()
    r = env.capscan("remedy", "host-default", "--status", "--json")
    doc = json.loads(r.stdout)
    assert doc["host"] is False and why in doc["why_not_host"]
