"""Issue 28 item 6: the shared options are one list; the merge, --via's forwarding and the group's
check derive from it, so a new shared flag is one line in analyzer/cli/options.py."""

from __future__ import annotations

import pytest

from analyzer.cli.app import cli
from analyzer.cli.options import GROUP_OPTIONS, ROOT_FORWARDED, SHARED_OPTIONS
from tests.conftest import run_capscan


def test_the_group_declares_and_forwards_every_group_option():
    group_params = {p.name for p in cli.params if p.name not in ("version", "help")}
    assert set(ROOT_FORWARDED) == group_params
    assert {o.name for o in SHARED_OPTIONS} >= set(GROUP_OPTIONS)


@pytest.mark.parametrize("flag", ["--tee", "--fail-on=healthy", "--force", "--keep-raw", "--name=x", "--csv"])
def test_a_group_flag_the_command_cannot_use_is_a_usage_error(flag, tmp_path):
    proc = run_capscan(flag, "schema", db=tmp_path / "c.db")
    assert proc.returncode == 2
    assert f"{flag.split('=')[0]} has no meaning for `capscan schema`" in proc.stderr.decode()


def test_the_command_value_wins_over_the_groups(tmp_path):
    db = tmp_path / "c.db"
    run_capscan("ingest", "examples/m1-ultra-guest-stock.log", db=db, check=True)
    # group --fail-on healthy, command --fail-on capability-downgrade: the command's gate fires
    proc = run_capscan("--fail-on", "healthy", "runs", "--fail-on", "capability-downgrade", db=db)
    assert proc.returncode == 1
    # given on the group only, it still reaches the command
    assert run_capscan("--fail-on", "healthy", "runs", db=db).returncode == 0
    assert run_capscan("--fail-on", "capability-downgrade", "runs", db=db).returncode == 1
