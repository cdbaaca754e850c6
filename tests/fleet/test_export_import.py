"""One store for many guests (issue 26 item 2): `export json` in each guest, `ingest` centrally.

Every export here is written by the real CLI from the bundled logs and fixtures; the central
store reads them back through the same `capscan ingest` a user runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from analyzer.parsers.exports import SHAPES, ExportError, read_document, read_events, sniff
from analyzer.store.db import open_db
from tests.conftest import run_capscan
from tests.fleet.dbutil import EXAMPLES, GUEST_NAMING_HOST, SHIM_NAMING_HOST
from tests.ingest_util import count, ingest_path

GUEST_LOGS = [EXAMPLES / "m1-ultra-guest-stock.log", EXAMPLES / "m1-ultra-host.log", GUEST_NAMING_HOST,
              SHIM_NAMING_HOST]


def _guest(tmp_path: Path, name: str, logs=GUEST_LOGS) -> tuple[Path, Path]:
    """A guest's store with its logs ingested, and its export."""
    db = tmp_path / f"{name}.db"
    run_capscan("ingest", *map(str, logs), db=db, check=True)
    out = tmp_path / f"{name}.json"
    run_capscan("export", "json", "--instance", name, "--out", str(out), db=db, check=True)
    return db, out


def _runs(db: Path, *args: str) -> list[dict]:
    return json.loads(run_capscan("runs", "--json", *args, db=db, check=True).stdout)


def _show(db: Path, rid: int) -> dict:
    return json.loads(run_capscan("show", str(rid), "--json", db=db, check=True).stdout)


def test_a_guests_runs_arrive_as_runs_with_their_diagnosis_and_origin(tmp_path):
    guest_db, export = _guest(tmp_path, "guest-a")
    central = tmp_path / "central.db"
    proc = run_capscan("ingest", str(export), db=central, check=True)
    assert "a capscan export (capscan-export)" in proc.stderr.decode()
    here, there = _runs(central), _runs(guest_db)
    assert len(here) == len(there) == 4
    for mine, theirs in zip(sorted(here, key=lambda r: r["id"]), sorted(there, key=lambda r: r["id"]), strict=True):
        a, b = _show(central, mine["id"]), _show(guest_db, theirs["id"])
        for key in ("verdict", "confidence", "environment", "host_chip", "capabilities", "device",
                    "program", "first_line", "last_line"):
            assert a[key] == b[key], key
        # a report never acts here: its fixable claim is kept as reported, this store's fixable is false
        assert a["fixable"] is False
        assert a["origin"]["reported_fixable"] is b["fixable"]
        # the same proof lines, each now a report imported from the guest, never this store's own proof
        assert [{k: p[k] for k in ("sign", "line", "text")} for p in a["proof"]] == [
            {k: p[k] for k in ("sign", "line", "text")} for p in b["proof"]]
        assert all(p["provenance"] == "imported" and p["instance"] == "guest-a" for p in a["proof"])
        assert all(p["provenance"] == "guest-process" for p in b["proof"])
        assert [t["tok_s"] for t in a["throughput"]] == [t["tok_s"] for t in b["throughput"]]
        assert a["origin"]["instance"] == "guest-a" and a["origin"]["run_id"] == b["id"]
        assert a["origin"]["sha256"] == hashlib.sha256(Path(b["source"]).read_bytes()).hexdigest()
        assert a["source"] == f"guest-a:{b['source']}"
        assert any(f["rule"] == "imported" for f in a["findings"])
        assert b["origin"] is None  # a run of a log stored here has no origin
    # the fixable guest is reported fixable by its origin, never fixable here (issue 37)
    assert not any(r["fixable"] for r in here)
    assert any(_show(central, r["id"])["origin"]["reported_fixable"] for r in here)


def test_importing_the_same_export_twice_adds_nothing(tmp_path):
    _, export = _guest(tmp_path, "guest-a")
    central = tmp_path / "central.db"
    run_capscan("ingest", str(export), db=central, check=True)
    stats = json.loads(run_capscan("db", "stats", "--json", db=central, check=True).stdout)
    again = run_capscan("ingest", str(export), db=central)
    assert again.returncode == 0 and again.stdout == b""  # no new run ids
    assert "already imported" in again.stderr.decode()
    after = json.loads(run_capscan("db", "stats", "--json", db=central, check=True).stdout)
    assert (after["sources"], after["runs"], after["throughput_rows"]) == (stats["sources"], 4,
                                                                          stats["throughput_rows"])


def test_overlapping_exports_of_one_guest_store_each_run_once(tmp_path):
    guest_db, first = _guest(tmp_path, "guest-a", GUEST_LOGS[:2])
    run_capscan("ingest", str(GUEST_LOGS[2]), db=guest_db, check=True)  # a later CI job
    second = tmp_path / "second.json"
    run_capscan("export", "json", "--instance", "guest-a", "--out", str(second), db=guest_db, check=True)
    central = tmp_path / "central.db"
    run_capscan("ingest", str(first), db=central, check=True)
    proc = run_capscan("ingest", str(second), db=central, check=True)
    assert proc.stdout.split() == [b"3"]  # only the new run
    assert "2 already stored by an earlier import" in proc.stderr.decode()
    assert len(_runs(central)) == 3


def test_runs_instance_lists_one_guests_runs(tmp_path):
    _, a = _guest(tmp_path, "guest-a", GUEST_LOGS[:1])
    _, b = _guest(tmp_path, "guest-b", GUEST_LOGS[:2])
    central = tmp_path / "central.db"
    run_capscan("ingest", str(a), str(b), db=central, check=True)
    # the same log in two guests is two runs: identity includes the instance
    assert len(_runs(central, "--instance", "guest-b")) == 2
    assert [r["source"].split(":")[0] for r in _runs(central, "--instance", "guest-a")] == ["guest-a"]
    empty = run_capscan("runs", "--instance", "guest-c", db=central)
    assert empty.stdout == b"" and "--instance 'guest-c'" in empty.stderr.decode()


def test_an_export_of_imported_runs_keeps_their_first_origin(tmp_path):
    _, export = _guest(tmp_path, "guest-a", GUEST_LOGS[:1])
    middle, top = tmp_path / "middle.db", tmp_path / "top.db"
    run_capscan("ingest", str(export), db=middle, check=True)
    chained = tmp_path / "chained.json"
    run_capscan("export", "json", "--instance", "aggregator", "--out", str(chained), db=middle, check=True)
    run_capscan("ingest", str(chained), db=top, check=True)
    run_capscan("ingest", str(export), db=top, check=True)  # the same run by the other road: still one
    (run,) = _runs(top)
    assert _show(top, run["id"])["origin"]["instance"] == "guest-a"


def test_export_since_leaves_out_older_runs(tmp_path):
    guest_db, _ = _guest(tmp_path, "guest-a", GUEST_LOGS[:1])
    out = tmp_path / "recent.json"
    run_capscan("export", "json", "--since", "2999-01-01", "--out", str(out), db=guest_db, check=True)
    assert json.loads(out.read_text())["runs"] == []
    run_capscan("export", "json", "--since", "1h", "--out", str(out), db=guest_db, check=True)
    assert len(json.loads(out.read_text())["runs"]) == 1
    bad = run_capscan("export", "json", "--since", "yesterday", db=guest_db)
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr
    assert b"Invalid value for --since: 'yesterday' is neither a date" in bad.stderr


@pytest.mark.parametrize("command", [("diagnose", "--json"), ("diagnose", "--nl"), ("show", "--json")])
def test_capscans_own_reports_import_as_runs_never_as_a_log(tmp_path, command):
    guest_db, _ = _guest(tmp_path, "guest-a", GUEST_LOGS[:1])
    args = [command[0], "--run", "1", command[1]] if command[0] == "diagnose" else [command[0], "1", command[1]]
    report = tmp_path / "report.json"
    report.write_bytes(run_capscan(*args, db=guest_db, check=True).stdout)
    central = tmp_path / "central.db"
    run_capscan("ingest", str(report), db=central, check=True)
    (run,) = _runs(central)
    assert run["device"] == "Apple Paravirtual device"  # not a JSON fragment
    assert run["verdict"] == "capability-downgrade"


def test_watch_nl_events_import_with_their_host_and_hash(tmp_path):
    guest_db = tmp_path / "guest.db"
    proc = run_capscan("watch", "--once", "--nl", "--quiet", str(GUEST_LOGS[0]), db=guest_db, check=True)
    events = tmp_path / "events.jsonl"
    events.write_bytes(proc.stdout)
    event = json.loads(proc.stdout.splitlines()[0])
    central = tmp_path / "central.db"
    run_capscan("ingest", str(events), db=central, check=True)
    (run,) = _runs(central)
    origin = _show(central, run["id"])["origin"]
    assert origin["instance"] == event["host_name"] and origin["sha256"] == event["sha256"]


# --- what an import refuses ------------------------------------------------------------------


def _export_doc(*runs: dict) -> str:
    lines = ",\n".join(json.dumps(r) for r in runs)
    return ('{"capscan_version": "0.1.0", "export": "capscan.runs", "instance": "forged", "runs": [\n'
            + lines + "\n]}\n")


def _run_obj(**over) -> dict:
    run = {"id": 1, "source": "g.log", "first_line": 1, "last_line": 9, "program": "llama-bench", "backend": "metal",
           "device": {"name": "Apple Paravirtual device", "apple_family": 1005, "families": [1005],
                      "unified_memory": True, "working_set_mb": None, "threadgroup_memory": None},
           "host_chip": None, "environment": "vm", "capabilities": {"simdgroup_reduction": False},
           "shim": None, "throughput": [{"test": "tg128", "tok_s": 12.6, "stddev": None, "model": "m"}],
           "verdict": "capability-downgrade", "fixable": False, "confidence": "medium", "fixable_reason": None,
           "proof": [], "findings": [], "next": [],
           "origin": {"instance": "guest-x", "source": "g.log", "sha256": "ab" * 32, "run_id": 1}}
    run.update(over)
    return run


def test_a_forged_fixable_without_proof_is_refused_and_counted(tmp_path):
    forged = tmp_path / "forged.json"
    forged.write_text(_export_doc(_run_obj(fixable=True), _run_obj(first_line=20, last_line=30, verdict="healthy",
                                                                       fixable=True, proof=[{"sign": "s", "line": 2,
                                                                                             "text": "t"}]),
                                  _run_obj(first_line=40, last_line=50), {"not": "a run"}, [1, 2]))
    central = tmp_path / "central.db"
    proc = run_capscan("ingest", str(forged), db=central, check=True)
    assert "4 record(s) skipped" in proc.stderr.decode()
    (run,) = _runs(central)
    assert run["fixable"] is False


def test_hostile_text_in_an_export_is_cleaned(tmp_path):
    evil = tmp_path / "evil.json"
    evil.write_text(_export_doc(_run_obj(origin={"instance": "guest\x1b[31m\u202e", "source": "a\nb.log",
                                                 "sha256": None, "run_id": 1})))
    central = tmp_path / "central.db"
    run_capscan("ingest", str(evil), db=central, check=True)
    listed = run_capscan("runs", db=central, check=True).stdout.decode()
    assert "\x1b" not in listed and "\u202e" not in listed and "a\nb" not in listed


def test_a_truncated_export_is_one_line_and_stores_nothing(tmp_path):
    _, export = _guest(tmp_path, "guest-a", GUEST_LOGS[:2])
    cut = tmp_path / "cut.json"
    cut.write_bytes(export.read_bytes()[: export.stat().st_size // 2])
    central = tmp_path / "central.db"
    proc = run_capscan("ingest", str(cut), db=central)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1
    assert b"cannot be read" in proc.stderr and b"Traceback" not in proc.stderr
    assert run_capscan("runs", "--json", db=central).stdout.strip() in (b"", b"[]")


def test_an_imported_run_is_no_baseline_and_is_not_diagnosed_again(tmp_path):
    """The host's run imported from elsewhere never pairs with a guest stored here."""
    _, host_export = _guest(tmp_path, "host-a", [EXAMPLES / "m1-ultra-host.log"])
    central = tmp_path / "central.db"
    run_capscan("ingest", str(host_export), db=central, check=True)
    run_capscan("ingest", str(GUEST_NAMING_HOST), db=central, check=True)
    guest = next(r for r in _runs(central) if r["environment"] == "vm")
    assert _show(central, guest["id"])["pairing"] is None


# --- the stream reader ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_each_shape_sample_is_sniffed_as_itself(shape):
    assert sniff(shape.sample.encode()) is shape
    assert sniff(b"\xef\xbb\xbf  \n" + shape.sample.encode()) is shape


@pytest.mark.parametrize("log", [
    '[\n  {\n    "build_commit": "3f4fc97f",\n    "cpu_info": "Apple M1 Ultra (Virtual)"',  # llama-bench -o json
    '{"build_commit": "3f4fc97f", "build_number": 4000, "cpu_info": "Apple M1 Ultra"}',  # -o jsonl
    '{"capscan_version": "0.1.0"}',  # a document with no runs is not an export to import
    'ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)',
    '{"id": "x", "source": "g.log", "first_line": 1}',
])
def test_logs_and_other_json_are_not_exports(log):
    assert sniff(log.encode()) is None


def _chunked(data: bytes, size: int):
    return iter([data[i:i + size] for i in range(0, len(data), size)])


def test_the_document_reader_gives_the_same_runs_whatever_the_chunking(tmp_path):
    _, export = _guest(tmp_path, "guest-a", GUEST_LOGS[:2])
    data = export.read_bytes()
    whole = [e.run for e in read_document(iter([data]))]
    assert whole == json.loads(data)["runs"]
    for size in (1, 7, 4096):
        assert [e.run for e in read_document(_chunked(data, size))] == whole
    assert [e.line for e in read_document(iter([data]))] == [2, 3]


def test_a_number_split_across_chunks_is_read_whole():
    doc = b'{"capscan_version": "1", "summary": {"runs": 12345}, "runs": [{"id": 123456789}]}'
    for cut in range(1, len(doc)):
        items = list(read_document(iter([doc[:cut], doc[cut:]])))
        assert [i.run for i in items] == [{"id": 123456789}]
        assert items[0].header["summary"] == {"runs": 12345}


def test_damage_raises_export_error():
    with pytest.raises(ExportError):
        list(read_document(iter([b'{"capscan_version": "1", "runs": [{"id": 1}, {"id": '])))
    with pytest.raises(ExportError):
        list(read_document(iter([b'{"capscan_version": "1", "runs": [{"id": 1} {"id": 2}]}'])))


def test_events_reader_counts_lines_that_are_not_objects():
    items = list(read_events(iter([b'{"a": 1}\n\nnot json\n[1]\n{"b": 2}'])))
    assert [i if isinstance(i, int) else i.run for i in items] == [{"a": 1}, 3, 4, {"b": 2}]


def test_the_library_reports_what_an_import_stored(tmp_path):
    _, export = _guest(tmp_path, "guest-a", GUEST_LOGS[:2])
    result, error = ingest_path(tmp_path / "central.db", export)
    assert error is None
    assert result.export == "capscan-export" and result.imported == 2 and result.source_id is not None
    assert count(tmp_path / "central.db", "SELECT COUNT(*) FROM run_origins") == 2


def test_the_tui_filter_finds_a_guests_imported_runs(tmp_path):
    from analyzer.store import browse

    _, a = _guest(tmp_path, "guest-a", GUEST_LOGS[:1])
    central = tmp_path / "central.db"
    run_capscan("ingest", str(a), str(GUEST_LOGS[1]), db=central, check=True)
    db = open_db(central)
    for index in (None, browse.text_index(db.conn)):  # LIKE first, then the text index, as the TUI does
        rows = browse.page(db.conn, browse.RunFilter(text="guest-a"), index=index)
        assert [r.source for r in rows] == [f"guest-a:{GUEST_LOGS[0]}"]
        assert browse.count(db.conn, browse.RunFilter(text="guest-a"), index) == 1


def test_an_imported_reduced_figure_stays_labelled(tmp_path):
    """A guest's figure standing for many rows (issue 38: ``reduced``) arrives labelled, never shown as a
    printed row; a label of the wrong shape is dropped, not trusted (and the speed itself stays)."""
    doc = tmp_path / "reduced.json"
    doc.write_text(_export_doc(_run_obj(throughput=[
        {"test": "tg128", "tok_s": 12.6, "stddev": None, "model": "m", "n": 300, "reduced": {"by": "median", "of": 300}},
        {"test": "pp512", "tok_s": 431.9, "stddev": 2.0, "model": "m", "reduced": {"by": "mean", "of": -1}}])))
    central = tmp_path / "central.db"
    run_capscan("ingest", str(doc), db=central, check=True)
    (run,) = _runs(central)
    shown = {t["test"]: t for t in _show(central, run["id"])["throughput"]}
    assert shown["tg128"]["reduced"] == {"by": "median", "of": 300} and shown["tg128"]["n"] == 300
    assert shown["pp512"]["reduced"] is None and shown["pp512"]["tok_s"] == 431.9
