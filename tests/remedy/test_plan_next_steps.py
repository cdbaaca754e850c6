"""`remedy plan` after the runs a newcomer stores (the bundled examples): which run it plans unasked, and whose
commands it lists first when this machine is not the macOS guest."""

from __future__ import annotations

import json

from tests.conftest import REPO, run_capscan

EXAMPLES = REPO / "examples"


def _store_stock_remedied_host(db):
    run_capscan(db=db, input=(EXAMPLES / "m1-ultra-guest-stock-json.log").read_bytes(), check=True)
    run_capscan("ingest", str(EXAMPLES / "m1-ultra-guest-shim.log"), str(EXAMPLES / "m1-ultra-host.log"),
                db=db, check=True)


def test_plan_unasked_takes_the_newest_downgraded_run_not_the_newest_and_says_so(tmp_path):
    db = tmp_path / "c.db"
    _store_stock_remedied_host(db)  # runs 1 (fixable), 2 (remedied, healthy), 3 (host, healthy)
    out = run_capscan("remedy", "plan", db=db, env={"CAPSCAN_PLATFORM": "linux"}, check=True).stdout.decode()
    first = out.splitlines()[0]
    assert first == ("run 1: capability-downgrade  (fixable)  (the newest capability-downgrade run; "
                     "--run ID for another)")
    assert "nothing to do" not in out
    doc = json.loads(run_capscan("remedy", "plan", "--json", db=db, env={"CAPSCAN_PLATFORM": "linux"},
                                 check=True).stdout)
    assert doc["run_id"] == 1 and doc["chosen"] == "the newest capability-downgrade run" and doc["actionable"]
    # named, the host run is still planned as asked: nothing to do
    host = run_capscan("remedy", "plan", "--run", "3", db=db, check=True).stdout.decode()
    assert host.splitlines() == ["run 3: healthy", "nothing to do: Full capabilities already: nothing to fix."]


def test_plan_without_a_downgraded_run_says_it_took_the_newest(tmp_path):
    db = tmp_path / "c.db"
    run_capscan("ingest", str(EXAMPLES / "m1-ultra-host.log"), db=db, check=True)
    out = run_capscan("remedy", "plan", db=db, check=True).stdout.decode()
    assert out.splitlines()[0] == "run 1: healthy  (the newest run: no capability-downgrade run is stored; --run ID for another)"


def test_a_guests_plan_read_on_linux_lists_the_guests_commands_and_via_the_stand_in_only_asked(tmp_path):
    db = tmp_path / "c.db"
    _store_stock_remedied_host(db)
    linux = {"CAPSCAN_PLATFORM": "linux"}
    out = run_capscan("remedy", "plan", db=db, env=linux, check=True).stdout.decode()
    lines = out.splitlines()
    assert lines[1] == "in the macOS guest (this machine is linux; the last step from the host below):"
    assert lines[2:4] == ["1. Confirm this is a guest", "   $ sysctl -n kern.hv_vmm_present"]
    assert "$ csrutil status" in out and "DYLD_INSERT_LIBRARIES" in out
    assert "LD_PRELOAD" not in out and "make -C" not in out and "stand-in" not in out
    launch = "   $ capscan remedy run --family 1007 -- '<your llama-bench command>'"
    assert launch in lines
    for via in ("lume", "tart", "anka", "ssh"):
        assert f"   $ capscan remedy run --via {via} --vm '<VM name>' --family 1007 -- '<your llama-bench command>'" \
            in lines[lines.index(launch):]
    dev = run_capscan("remedy", "plan", "--stand-in", db=db, env=linux, check=True).stdout.decode()
    assert "1. Build the Linux stand-in if missing" in dev and "LD_PRELOAD=" in dev and "csrutil" not in dev
    assert "$ capscan remedy run --run 1 --family 1007 --" in dev
    # the stand-in is Linux's: asked for on macOS it is a usage error, not a plan
    mac = run_capscan("remedy", "plan", "--stand-in", db=db, env={"CAPSCAN_PLATFORM": "darwin"})
    assert mac.returncode == 2 and "--stand-in plans the Linux stand-in" in mac.stderr.decode()
