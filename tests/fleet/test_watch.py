"""capscan watch: follow files like tail -F; exactly once across rotation,
truncation, restarts and two watchers; real SQLite files."""

from __future__ import annotations

import io
import os
from pathlib import Path

from analyzer.ingest import ingest
from analyzer.read.reader import Input
from analyzer.store.db import open_db
from analyzer.fleet.watch import HEAD, Watcher
from tests.conftest import REPO

EXAMPLES = REPO / "examples"
GUEST = (EXAMPLES / "m1-ultra-guest-stock.log").read_bytes()
HOST = (EXAMPLES / "m1-ultra-host.log").read_bytes()
SHIM = (EXAMPLES / "m1-ultra-guest-shim.log").read_bytes()


def snapshot(db_path: Path) -> list[tuple]:
    """Every stored run as (source path, first, last, device, throughput, evidence lines)."""
    db = open_db(db_path)
    out = []
    for rid, path, first, last, device in db.conn.execute(
            "SELECT r.id, s.path, r.first_line, r.last_line, r.device_name FROM runs r "
            "JOIN sources s ON s.id = r.source_id ORDER BY r.id"):
        tp = tuple(db.conn.execute("SELECT test, tok_s FROM throughput WHERE run_id = ? ORDER BY rowid", (rid,)))
        ev = tuple(db.conn.execute("SELECT line, text FROM evidence WHERE run_id = ? ORDER BY line, rowid", (rid,)))
        out.append((path, first, last, device, tp, ev))
    db.conn.close()
    return out


def one_shot(tmp_path: Path, pieces: list[tuple[str, bytes]]) -> list[tuple]:
    """What ingesting each file's whole content at once stores."""
    ref = tmp_path / "reference.db"
    db = open_db(ref)
    for path, data in pieces:
        ingest(db, Input(os.path.abspath(path), io.BytesIO(data)), force=True)
    db.conn.close()
    return snapshot(ref)


def watcher(db_path: Path, *paths: Path, settle: float = 5.0, notices: list | None = None) -> Watcher:
    return Watcher(open_db(db_path), [str(p) for p in paths], settle=settle,
                   on_notice=(notices.append if notices is not None else None))


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(data)


def test_runs_are_stored_as_they_complete(tmp_path, db_path):
    log = tmp_path / "server.log"
    log.write_bytes(GUEST + HOST)
    w = watcher(db_path, log)
    first = w.poll(now=0.0)
    # the host's block started a new run, so the guest's run is complete; the host's is still open
    assert [r.facts.device.name for r in first] == ["Apple Paravirtual device"]
    assert first[0].diagnosis.verdict == "capability-downgrade"
    assert w.poll(now=1.0) == []  # not quiet long enough
    second = w.poll(now=6.0)
    assert [r.diagnosis.verdict for r in second] == ["healthy"]
    assert snapshot(db_path) == one_shot(tmp_path, [(str(log), GUEST + HOST)])
    assert w.poll(now=20.0) == []


def test_partial_last_line_waits_for_its_newline(tmp_path, db_path):
    log = tmp_path / "server.log"
    cut = GUEST.index(b"simdgroup reduction") + 9  # mid-way through line 8
    log.write_bytes(GUEST[:cut])
    w = watcher(db_path, log)
    w.poll(now=0.0, final=True)  # --once: every complete line is stored, the cut-off one is not
    db = open_db(db_path)
    assert db.conn.execute("SELECT line FROM watch_cursors").fetchone()[0] == 7
    assert db.conn.execute("SELECT COUNT(*) FROM evidence WHERE line = 8").fetchone()[0] == 0
    append(log, GUEST[cut:])
    w.poll(now=1.0, final=True)
    # the completed line is read whole, numbered as in the file
    texts = [t for (t,) in db.conn.execute("SELECT text FROM evidence WHERE line = 8")]
    assert texts == ["ggml_metal_device_init: simdgroup reduction   = false"]
    assert db.conn.execute("SELECT SUM(lines) FROM sources").fetchone()[0] == GUEST.count(b"\n")
    assert db.conn.execute("SELECT line FROM watch_cursors").fetchone()[0] == GUEST.count(b"\n")


def test_partial_line_is_not_split_while_following(tmp_path, db_path):
    log = tmp_path / "server.log"
    cut = GUEST.index(b"12.63") + 2
    log.write_bytes(GUEST[:cut])
    w = watcher(db_path, log)
    assert w.poll(now=0.0) == []
    append(log, GUEST[cut:])
    w.poll(now=1.0)
    runs = w.poll(now=7.0)
    assert len(runs) == 1
    assert snapshot(db_path) == one_shot(tmp_path, [(str(log), GUEST)])


def test_restart_between_two_writes_stores_each_line_once(tmp_path, db_path):
    log = tmp_path / "server.log"
    half = HOST.index(b"| model")
    log.write_bytes(GUEST + HOST[:half])
    w1 = watcher(db_path, log)
    assert len(w1.poll(now=0.0)) == 1  # the guest run; the host's lines are read but its run is open
    w1.close()  # stopped (Ctrl-C): nothing pending is stored, the cursor stays before it
    append(log, HOST[half:])
    w2 = watcher(db_path, log)
    w2.poll(now=0.0)
    assert [r.facts.device.name for r in w2.poll(now=10.0)] == ["Apple M1 Ultra"]
    assert snapshot(db_path) == one_shot(tmp_path, [(str(log), GUEST + HOST)])
    # a third start finds nothing new
    w3 = watcher(db_path, log)
    assert w3.poll(now=0.0, final=True) == []
    assert len(snapshot(db_path)) == 2


def test_rotation_while_following(tmp_path, db_path):
    log, rotated = tmp_path / "server.log", tmp_path / "server-1.log"
    half = HOST.index(b"| model")
    log.write_bytes(GUEST)
    notices: list[str] = []
    w = watcher(db_path, log, notices=notices)
    w.poll(now=0.0, final=True)
    writer = open(log, "ab")  # the runtime's open file descriptor
    writer.write(HOST[:half])
    writer.flush()
    os.rename(log, rotated)  # rotation: renamed away...
    writer.write(HOST[half:])  # ...the runtime still writes its last lines to the old file...
    writer.close()
    log.write_bytes(SHIM)  # ...then a new server.log
    w.poll(now=1.0)
    w.poll(now=10.0)
    assert any("rotated" in n for n in notices)
    got = snapshot(db_path)
    assert [(g[3], g[4]) for g in got] == [
        ("Apple Paravirtual device", (("pp512", 431.86), ("tg128", 12.63))),
        ("Apple M1 Ultra", tuple(bench_rows(HOST))),
        ("Apple Paravirtual device", tuple(bench_rows(SHIM))),
    ]
    # the new file is numbered from its own line 1
    assert got[2][1] == 1


def bench_rows(data: bytes) -> list[tuple[str, float]]:
    """(test, t/s) of each llama-bench markdown row in a log."""
    rows = []
    for line in data.decode().splitlines():
        if line.startswith("| llama"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.append((cells[-2], float(cells[-1].split(" ")[0].replace(",", ""))))
    return rows


def test_truncation_reads_from_the_start(tmp_path, db_path):
    log = tmp_path / "server.log"
    log.write_bytes(GUEST)
    notices: list[str] = []
    w = watcher(db_path, log, notices=notices)
    w.poll(now=0.0, final=True)
    with open(log, "r+b") as fh:  # copytruncate: same file, emptied, written again
        fh.truncate(0)
    append(log, HOST[:200])
    w.poll(now=1.0)
    append(log, HOST[200:])
    w.poll(now=2.0)
    w.poll(now=10.0)
    assert any("truncated" in n for n in notices)
    got = snapshot(db_path)
    assert [(g[1], g[2], g[3]) for g in got] == [(1, GUEST.count(b"\n"), "Apple Paravirtual device"),
                                                  (1, HOST.count(b"\n"), "Apple M1 Ultra")]


def test_rewritten_in_place_past_the_read_position_is_read_from_the_start(tmp_path, db_path):
    """Issue 24: `cat new > server.log` between two polls: the same file, emptied and already longer than
    what was read, so neither the size nor the inode says so; its first KiB does."""
    log = tmp_path / "server.log"
    log.write_bytes(GUEST)
    notices: list[str] = []
    w = watcher(db_path, log, notices=notices)
    w.poll(now=0.0, final=True)
    inode = log.stat().st_ino
    with open(log, "wb") as fh:   # O_TRUNC: same inode, new content
        fh.write(HOST + SHIM)
    assert log.stat().st_ino == inode and len(HOST + SHIM) > len(GUEST)
    w.poll(now=1.0, final=True)
    assert any("rewritten in place" in n for n in notices), notices
    got = snapshot(db_path)
    assert [(g[1], g[2], g[3]) for g in got] == [
        (1, GUEST.count(b"\n"), "Apple Paravirtual device"),
        (1, HOST.count(b"\n"), "Apple M1 Ultra"),
        (HOST.count(b"\n") + 1, (HOST + SHIM).count(b"\n"), "Apple Paravirtual device")]
    assert [g[1:] for g in got[1:]] == [g[1:] for g in one_shot(tmp_path, [(str(log), HOST + SHIM)])]


def test_renamed_while_stopped_continues_with_its_content(tmp_path, db_path):
    log, rotated = tmp_path / "server.log", tmp_path / "server-1.log"
    assert len(GUEST) > HEAD  # a file is recognised by its first KiB
    half = HOST.index(b"| model")
    log.write_bytes(GUEST + HOST[:half])
    w1 = watcher(db_path, log, rotated)
    w1.poll(now=0.0)  # guest run stored; the host's lines wait for their run to complete
    w1.close()
    append(log, HOST[half:])
    os.rename(log, rotated)
    log.write_bytes(SHIM)
    notices: list[str] = []
    w2 = watcher(db_path, rotated, log, notices=notices)
    w2.poll(now=0.0, final=True)
    assert any("continues" in n for n in notices)
    got = snapshot(db_path)
    devices = sorted(g[3] for g in got)
    assert devices == ["Apple M1 Ultra", "Apple Paravirtual device", "Apple Paravirtual device"]
    host = next(g for g in got if g[3] == "Apple M1 Ultra")
    assert host[1] == GUEST.count(b"\n") + 1 and len(host[4]) == 2  # whole, numbered as in its file


def test_two_watchers_on_one_file_store_each_run_once(tmp_path, db_path):
    log = tmp_path / "server.log"
    log.write_bytes(GUEST)
    a, b = watcher(db_path, log), watcher(db_path, log)
    a.poll(now=0.0)
    b.poll(now=0.0)
    append(log, HOST)
    b.poll(now=1.0)  # b stores the guest run (the host's block started)
    a.poll(now=1.0)  # a finds its cursor moved on, and continues from there
    append(log, SHIM)
    a.poll(now=2.0)
    b.poll(now=2.0)
    a.poll(now=20.0)
    b.poll(now=20.0)
    assert snapshot(db_path) == one_shot(tmp_path, [(str(log), GUEST + HOST + SHIM)])


def test_unrelated_lines_move_the_cursor_without_storing_sources(tmp_path, db_path):
    log = tmp_path / "server.log"
    log.write_bytes(b'time=2026-11-30T10:00:00Z level=INFO source=routes.go:1 msg="Listening on 127.0.0.1"\n' * 50)
    w = watcher(db_path, log)
    assert w.poll(now=0.0, final=True) == []
    db = open_db(db_path)
    assert db.conn.execute("SELECT COUNT(*) FROM sources").fetchone()[0] == 0
    assert db.conn.execute("SELECT line FROM watch_cursors").fetchone()[0] == 50


def test_missing_file_is_waited_for(tmp_path, db_path):
    log = tmp_path / "later.log"
    notices: list[str] = []
    w = watcher(db_path, log, notices=notices)
    assert w.poll(now=0.0) == [] and any("waiting" in n for n in notices)
    log.write_bytes(GUEST)
    assert len(w.poll(now=1.0, final=True)) == 1



def test_once_reads_a_backlog_larger_than_one_read(tmp_path, db_path, monkeypatch):
    import analyzer.fleet.watch as watch_mod

    monkeypatch.setattr(watch_mod, "READ_MAX", 4096)  # the backlog takes many reads
    filler = b'time=2026-11-30T10:00:00Z level=INFO source=routes.go:1 msg="request" status=200\n' * 300
    data = (GUEST + filler + HOST + filler) * 3
    log = tmp_path / "server.log"
    log.write_bytes(data)
    w = watcher(db_path, log)
    assert len(w.poll(now=0.0, final=True)) == 6
    got = snapshot(db_path)
    assert [(g[1], g[2], g[3], g[4]) for g in got] == [(e[1], e[2], e[3], e[4]) for e in
                                                        one_shot(tmp_path, [(str(log), data)])]
    db = open_db(db_path)
    assert db.conn.execute("SELECT offset, line FROM watch_cursors").fetchone() == (len(data), data.count(b"\n"))
