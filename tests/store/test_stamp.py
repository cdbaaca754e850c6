"""analyzer.store.stamp: who stored a diagnosis, checked without the rules (issue 37, item 3)."""

from __future__ import annotations

import os
import stat

from click.testing import CliRunner

from analyzer.cli import cli
from analyzer.store import stamp

FIX = os.path.join(os.path.dirname(__file__), "..", "fixtures", "metal", "m4-2026-08-guest-stock.log")


def test_the_key_is_made_by_the_first_store_in_the_data_directory_never_beside_the_database(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    shared = tmp_path / "shared"
    shared.mkdir()
    db = shared / "fleet.db"
    key = tmp_path / "data" / "capscan" / stamp.KEY_FILE
    # reading commands make no key (a listing checks stamps only where one exists)
    for args in (["runs", "--db", str(db)], ["db", "stats", "--db", str(db)]):
        CliRunner().invoke(cli, args)
    assert not key.exists()
    assert CliRunner().invoke(cli, ["ingest", "--db", str(db), FIX]).exit_code == 0
    assert key.exists() and stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    assert sorted(p.name for p in shared.iterdir() if "key" in p.name) == []


def test_a_stamp_verifies_only_under_its_key_and_what_it_covers(tmp_path):
    mine, theirs = b"m" * 32, b"t" * 32
    given = stamp.stamp(mine, 7, "capability-downgrade", 1, "vm", "5", b'{"device": 1}')
    assert stamp.verified(mine, 7, "capability-downgrade", 1, "vm", "5", b'{"device": 1}', given)
    assert not stamp.verified(theirs, 7, "capability-downgrade", 1, "vm", "5", b'{"device": 1}', given)
    for changed in ((8, "capability-downgrade", 1, "vm", "5", b'{"device": 1}'),
                    (7, "healthy", 1, "vm", "5", b'{"device": 1}'),
                    (7, "capability-downgrade", 0, "vm", "5", b'{"device": 1}'),
                    (7, "capability-downgrade", 1, "bare-metal", "5", b'{"device": 1}'),
                    (7, "capability-downgrade", 1, "vm", "4", b'{"device": 1}'),
                    (7, "capability-downgrade", 1, "vm", "5", b'{"device": 2}')):
        assert not stamp.verified(mine, *changed, given), changed
    assert not stamp.verified(None, 7, "capability-downgrade", 1, "vm", "5", b"", given)
    assert not stamp.verified(mine, 7, "capability-downgrade", 1, "vm", "5", b'{"device": 1}', 12345)


def test_a_truncated_key_stamps_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    path = tmp_path / "data" / "capscan" / stamp.KEY_FILE
    path.parent.mkdir(parents=True)
    path.write_bytes(b"short")
    assert stamp.key(create=False) is None and stamp.key(create=True) is None
