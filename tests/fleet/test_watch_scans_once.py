"""capscan watch scans what it reads once: the scan that finds where runs end is the one stored
(analyzer.ingest.pieces), not a second parse of the same bytes inside ingest. Counted with a real
Scanner subclass over real files and a real SQLite database; what is stored is checked against
ingesting the whole file at once."""

from __future__ import annotations

import analyzer.fleet.watch as watch_module
import analyzer.ingest as ingest_module
import analyzer.ingest.pieces as pieces_module
from analyzer.parsers.scanner import Scanner
from tests.fleet.test_watch import GUEST, HOST, SHIM, one_shot, snapshot, watcher


def counting_scanners(monkeypatch) -> list[int]:
    """Every Scanner the pipeline makes (and one watch made itself before it had a front door) counts
    the bytes it is fed."""
    fed: list[int] = []

    class Counting(Scanner):
        def feed(self, chunk: bytes) -> None:
            fed.append(len(chunk))
            super().feed(chunk)

    for module in (pieces_module, ingest_module, watch_module):
        monkeypatch.setattr(module, "Scanner", Counting, raising=False)
    return fed


def test_a_backlog_is_scanned_once_and_stored_as_ingest_stores_it(tmp_path, db_path, monkeypatch):
    log = tmp_path / "server.log"
    content = GUEST + HOST + SHIM
    log.write_bytes(content)
    fed = counting_scanners(monkeypatch)
    w = watcher(db_path, log)
    runs = w.poll(now=0.0, final=True)  # `capscan watch --once`: two complete runs cut, the last one stored at the end
    assert [r.facts.device.name for r in runs] == ["Apple Paravirtual device", "Apple M1 Ultra",
                                                   "Apple Paravirtual device"]
    assert sum(fed) == len(content)  # each byte once (it was three times: find the runs, store, store the rest)
    w.close()
    assert snapshot(db_path) == one_shot(tmp_path, [(str(log), content)])


def test_a_quiet_file_is_scanned_once_for_deciding_and_storing(tmp_path, db_path, monkeypatch):
    log = tmp_path / "server.log"
    log.write_bytes(GUEST)
    fed = counting_scanners(monkeypatch)
    w = watcher(db_path, log, settle=5.0)
    assert w.poll(now=0.0) == []  # one run, not complete yet: scanned to find that out
    assert sum(fed) == len(GUEST)
    fed.clear()
    assert [r.facts.device.name for r in w.poll(now=6.0)] == ["Apple Paravirtual device"]  # quiet: stored
    assert sum(fed) == 0  # from the scan already made: nothing was read since
    w.close()
    assert snapshot(db_path) == one_shot(tmp_path, [(str(log), GUEST)])




def test_a_piece_input_would_change_is_stored_by_ingest_and_leaves_no_thread(tmp_path):
    """Bytes Input changes before the scanners see them (a UTF-8 byte-order mark, UTF-16 from PowerShell's
    `>`) are not replayed from the raw scan: ingest stores them, as it did before the single scan, and the
    hashing thread of each poll's look at them ends with it."""
    import threading

    from tests.conftest import REPO

    forms = REPO / "tests" / "fixtures" / "forms"
    for name in ("utf8-bom-concatenated.log", "utf16le-bom-powershell.log"):
        content = (forms / name).read_bytes()
        log = tmp_path / name
        log.write_bytes(content)
        before = threading.active_count()
        w = watcher(tmp_path / f"{name}.db", log, settle=5.0)
        stored = [r for t in (0.0, 1.0, 2.0, 6.0) for r in w.poll(now=t)]
        w.close()
        assert threading.active_count() == before, name
        if name.startswith("utf8"):
            assert [r.facts.first_line for r in stored] == [1, 28]  # two runs, the mark dropped as ingest drops it
            reference = tmp_path / "reference"
            reference.mkdir()
            assert snapshot(tmp_path / f"{name}.db") == one_shot(reference, [(str(log), content)])
