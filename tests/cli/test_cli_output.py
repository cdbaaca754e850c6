"""The CLI in pipelines and CI: one output path for --json/--nl/--csv/--tsv/--markdown,
--fail-on on every command that offers it, --tee streaming, GitHub Actions, and `runs`
never losing the run id (piped, and fitted to an 80-column terminal).

Commands run in-process (click's CliRunner, a real SQLite file in tmp) where only the
output matters, and as real processes where pipes, terminals and timing matter."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios
import fcntl
from pathlib import Path

import click
import pytest

from analyzer.cli import cli
from tests.conftest import REPO, run_capscan

FIX = Path(__file__).resolve().parent.parent / "fixtures"
GUEST = FIX / "baselines/guest-stock-block-and-json.log"  # capability-downgrade, fixable (llama-bench -o json 2>&1)
HOST = FIX / "metal/m4-2026-08-host-m1-ultra.log"          # healthy, same model: the guest's baseline
AMD = FIX / "metal/m2-2024-10-amd-egpu-intel-mac.log"       # hardware-limit


def invoke(*args: str, input: bytes | None = None, env: dict | None = None) -> tuple[int, str, str]:
    """(exit code as main() maps it, stdout, stderr) of an in-process run (tests.conftest.run_capscan)."""
    r = run_capscan(*args, input=input, env=env)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


@pytest.fixture
def db(tmp_path) -> str:
    path = str(tmp_path / "o.db")
    code, out, _ = invoke("--db", path, "ingest", str(HOST), str(GUEST), str(AMD))
    assert code == 0 and out.split() == ["1", "2", "3"]
    return path


COMMANDS = {
    "runs": ["runs"],
    "show": ["show", "2"],
    "diagnose": ["diagnose", "--run", "1", "--run", "2"],
    "compare": ["compare", "1", "2"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_output_format(db, command):
    args = ["--db", db, *COMMANDS[command]]
    outputs = {fmt: invoke(*args, *([f"--{fmt}"] if fmt else [])) for fmt in
               ("", "json", "nl", "csv", "tsv", "markdown")}
    assert all(code == 0 for code, _, _ in outputs.values()), {k: v[2] for k, v in outputs.items()}
    doc = json.loads(outputs["json"][1])
    lines = [json.loads(line) for line in outputs["nl"][1].splitlines()]
    rows = list(csv.DictReader(io.StringIO(outputs["csv"][1])))
    tsv = [line.split("\t") for line in outputs["tsv"][1].splitlines()]
    md = outputs["markdown"][1].splitlines()
    assert rows and len(tsv) == len(rows) + 1 and tsv[0] == list(rows[0])  # same rows, same columns
    assert all(len(t) == len(tsv[0]) for t in tsv)
    table = [line for line in md if line.startswith("|")]
    assert set(table[1].replace("|", "")) <= set(":-") and len(table) >= 3
    if command == "runs":
        assert [r["id"] for r in doc] == [r["id"] for r in lines] == [3, 2, 1]
        assert [int(r["id"]) for r in rows] == [3, 2, 1] and rows[2]["best_tg"] == "286.71"
        assert [line.split("|")[1].strip() for line in table[2:]] == ["3", "2", "1"]
    elif command == "show":
        assert doc["id"] == 2 and lines == [doc]
        assert {r["test"] for r in rows} == {t["test"] for t in doc["throughput"]}
        assert "CAPABILITY-DOWNGRADE" in outputs[""][1]
    elif command == "diagnose":
        assert [r["id"] for r in doc["runs"]] == [r["id"] for r in lines] == [1, 2]
        assert {r["verdict"] for r in rows} == {"healthy", "capability-downgrade"}
        assert md[0] == "### capscan: capability-downgrade (fixable)"
        assert any("capscan remedy plan --run 2" in line for line in md)
    else:
        assert [p["a"] for p in doc["pairs"]] == [1] and lines and lines[0]["a"] == 1 and lines[0]["b"] == 2
        assert {r["test"] for r in rows} == {t["test"] for t in doc["pairs"][0]["tests"]}
        assert md[0] == "### run 1 (A) vs run 2 (B)" and "B/A" in table[0] and "speedup" not in table[0]


def test_compare_markdown_says_b_over_a_as_the_terminal_does(db):
    """An 11x slowdown read "speedup 0.09" in markdown; it reads the terminal's B/A now, and a value the run
    lacks is '-', never a blank cell (issue 41)."""
    human = invoke("--db", db, "compare", "1", "2")[1]
    md = invoke("--db", db, "compare", "1", "2", "--markdown")[1]
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert [c.strip() for c in table[0].strip("|").split("|")] == [
        "test", "A: run 1 t/s", "B: run 2 t/s", "B/A", "B - A per token"]
    for row in table[2:]:
        test, _, _, ratio, _ = (c.strip() for c in row.strip("|").split("|"))
        terminal = next(line.split() for line in human.splitlines()
                        if line.startswith(test + " ") and line.endswith(" ms"))  # the table's row, not the chart's
        assert ratio in terminal and ratio.endswith("%"), (ratio, terminal)
        assert float(ratio.rstrip("%")) < 100  # the stock guest (B) is slower than its host (A)
    # run 3 (an Intel Mac's AMD GPU) names no host chip: '-' as the terminal shows it
    md = invoke("--db", db, "compare", "1", "3", "--markdown")[1]
    assert "host\\_chip Apple M1 Ultra → -" in md, md


def test_two_formats_at_once_is_a_usage_error(db):
    code, _, err = invoke("--db", db, "runs", "--csv", "--json")
    assert code == 2 and "--csv" in err and "--json" in err


def test_json_report_carries_next_baseline_and_prediction(db):
    doc = json.loads(invoke("--db", db, "diagnose", "--run", "2", "--json")[1])
    run = doc["runs"][0]
    assert run["next"][0] == "capscan remedy plan --run 2"
    assert set(run["baseline"]) >= {"run", "why"}
    if run["pairing"] is not None:
        assert run["pairing"]["run"] == 1 and {t["test"] for t in run["pairing"]["tests"]} <= {"pp512", "tg128"}
    assert isinstance(run["prediction"], list)
    human = invoke("--db", db, "show", "2")[1]
    assert run["next"][0] in human


# --------------------------------------------------------------------------- --fail-on

FAIL_ON = {  # command -> (args, a verdict it shows, a verdict it does not)
    "pipe": (["--fail-on", "{v}"], "capability-downgrade", "hardware-limit"),
    "ingest": (["ingest", "--force", str(GUEST), "--fail-on", "{v}"], "capability-downgrade", "healthy"),
    "diagnose": (["diagnose", "--run", "3", "--fail-on", "{v}"], "hardware-limit", "capability-downgrade"),
    "show": (["show", "1", "--fail-on", "{v}"], "healthy", "capability-downgrade"),
    "runs": (["runs", "--verdict", "healthy", "--fail-on", "{v}"], "healthy", "hardware-limit"),
    "compare": (["compare", "1", "3", "--fail-on", "{v}"], "hardware-limit", "capability-downgrade"),
}


@pytest.mark.parametrize("command", FAIL_ON)
def test_fail_on_works_on_every_command_that_offers_it(db, command):
    args, hit, miss = FAIL_ON[command]
    stdin = GUEST.read_bytes() if command == "pipe" else None
    for verdict, expected in ((hit, 1), (miss, 0), (f"{miss},{hit}", 1)):
        code, out, err = invoke("--db", db, *[a.format(v=verdict) for a in args], input=stdin)
        assert code == expected, (verdict, out, err)
        assert out  # the output is written before the gate closes


@pytest.mark.parametrize("args", [[], ["ingest", "-"], ["diagnose", "-"]])
def test_fail_on_unknown_fires_when_nothing_was_recognised(tmp_path, args):
    db = str(tmp_path / "u.db")
    code, _, _ = invoke("--db", db, *args, "--fail-on", "unknown", input=b"hello\nnothing to see\n")
    assert code == 1
    code, _, _ = invoke("--db", db, *args, "--fail-on", "capability-downgrade", input=b"more nothing\n")
    assert code == 0


@pytest.mark.parametrize("command", [["runs"], ["show", "2"], ["diagnose", "--run", "1", "--run", "2", "--run", "3"]])
def test_fixable_is_one_form_per_kind_of_output(db, command):
    """JSON and NL: true/false (the contract's JSON booleans, never 1/0); CSV and TSV: true/false too
    (never True/False, 1/0 or yes/no). Run 2 (the stock guest) is the fixable one."""
    def by_run(rows: list[dict]) -> dict[int, object]:
        return {int(r.get("id", r.get("run"))): r["fixable"] for r in rows}

    code, out, _ = invoke("--db", db, *command, "--json")
    doc = json.loads(out)
    records = doc if isinstance(doc, list) else doc.get("runs", [doc])
    code_nl, out_nl, _ = invoke("--db", db, *command, "--nl")
    _, out_csv, _ = invoke("--db", db, *command, "--csv")
    _, out_tsv, _ = invoke("--db", db, *command, "--tsv")
    assert code == code_nl == 0
    as_json = by_run(records)
    assert as_json == by_run([json.loads(line) for line in out_nl.splitlines()])
    assert all(type(v) is bool for v in as_json.values()) and as_json[2] is True
    csv_rows = list(csv.DictReader(io.StringIO(out_csv)))
    tsv_rows = list(csv.DictReader(io.StringIO(out_tsv), delimiter="\t"))
    expected = {rid: "true" if v else "false" for rid, v in as_json.items()}
    assert by_run(csv_rows) == by_run(tsv_rows) == expected


def test_a_flag_a_command_cannot_use_is_refused_not_ignored(db):
    for args in (["--fail-on", "healthy", "db", "stats"], ["--tee", "runs"], ["--csv", "remedy", "status"],
                 ["--fail-on", "healthy", "formats"]):
        code, _, err = invoke("--db", db, *args)
        assert code == 2, args
    for cmd in ("formats", "tui", "db", "remedy"):  # not offered at all on the command itself
        params = {p.name for p in cli.get_command(click.Context(cli), cmd).params}
        assert "fail_on" not in params and "tee" not in params


# --------------------------------------------------------------------------- runs never loses the id

@pytest.fixture(scope="module")
def many_runs(tmp_path_factory) -> Path:
    """130 runs whose sources have long paths (the column that used to eat the id)."""
    d = tmp_path_factory.mktemp("many") / ("a-rather-long-directory-name-for-ci-artifacts" * 2)
    d.mkdir(parents=True)
    (d / "guest-stock-run.log").write_bytes(GUEST.read_bytes() * 100)
    (d / "amd-egpu.log").write_bytes(AMD.read_bytes() * 30)
    db = d.parent / "many.db"
    r = run_capscan("ingest", str(d / "guest-stock-run.log"), str(d / "amd-egpu.log"), db=db, check=True)
    assert len(r.stdout.split()) == 130
    return db


def test_runs_piped_is_plain_and_complete(many_runs):
    r = run_capscan("runs", "-n", "0", db=many_runs, env={"COLUMNS": "80"}, check=True)
    lines = r.stdout.decode().splitlines()
    assert lines[0].split("\t") == ["id", "when", "source", "program", "device", "model", "env", "verdict",
                                    "best pp", "best tg"]
    rows = [line.split("\t") for line in lines[1:]]
    assert [int(row[0]) for row in rows] == list(range(130, 0, -1))
    assert all(row[2].endswith((".log")) and "a-rather-long-directory" in row[2] for row in rows)
    assert b"\x1b" not in r.stdout and "…" not in r.stdout.decode()
    assert {row[7] for row in rows} == {"capability-downgrade", "hardware-limit"}


def _on_a_terminal(args: list[str], db: Path, columns: int) -> str:
    """Run capscan with stdout on a pseudo-terminal of the given width; its output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": str(columns), "TERM": "xterm"}
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db), *args], stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=REPO)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait(timeout=120) == 0, proc.stderr.read()
    os.close(master)
    return b"".join(chunks).decode().replace("\r\n", "\n")


@pytest.mark.parametrize("columns", [80, 200])
def test_runs_on_a_terminal_fits_the_width_and_keeps_id_verdict_and_speeds(many_runs, columns):
    out = _on_a_terminal(["runs", "-n", "0"], many_runs, columns)
    lines = out.splitlines()
    head = lines[0].split()
    assert head[0] == "id" and "verdict" in head and lines[0].rstrip().endswith("best pp  best tg")
    assert all(len(line) <= columns for line in lines), max(map(len, lines))
    rows = lines[1:]
    assert len(rows) == 130
    for rid, line in zip(range(130, 0, -1), rows):
        cells = line.split()
        assert cells[0] == str(rid)
        assert ("capability-downgrade" in cells) != ("hardware-limit" in cells)
        assert cells[-2].replace(",", "").replace(".", "").isdigit() and cells[-1].replace(".", "").isdigit()
    if columns == 200:
        assert "guest-stock-run.log" in out and "Apple Paravirtual device" in out


# --------------------------------------------------------------------------- --tee streams

# The producer writes the first line, then holds the rest back until the test has read that line from
# capscan's stdout (a file appears), or for 120 s: no clock decides the outcome, only the order of events.
PRODUCER = r"""
import os, sys, time
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
out = sys.stdout.buffer
out.write(lines[0]); out.flush()
for _ in range(2400):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.05)
open(sys.argv[3], "w").write("released" if os.path.exists(sys.argv[2]) else "gave up")
out.write(b"".join(lines[1:])); out.flush()
"""


@pytest.mark.parametrize("args", [["--tee"], ["ingest", "--tee", "-"]])
def test_tee_passes_each_line_through_as_soon_as_it_is_read(tmp_path, args):
    go, held = tmp_path / "go", tmp_path / "held"
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER, str(GUEST), str(go), str(held)],
                                stdout=subprocess.PIPE)
    capscan = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(tmp_path / "t.db"), *args],
                               stdin=producer.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    producer.stdout.close()
    first = capscan.stdout.readline()
    go.touch()
    rest, err = capscan.communicate(timeout=300)
    assert producer.wait() == 0 and capscan.returncode == 0, err
    assert first == GUEST.read_bytes().splitlines(keepends=True)[0]
    assert held.read_text() == "released", "the first line waited for the rest of the input"
    assert first + rest == GUEST.read_bytes()  # stdout carries the input, byte for byte, and nothing else
    if args == ["--tee"]:
        assert b"CAPABILITY-DOWNGRADE" in err  # the report went to stderr
    else:
        assert err.split(b"\n")[-2:] == [b"1", b""] or b"\n1\n" in err  # the run id went to stderr


# --------------------------------------------------------------------------- GitHub Actions

def test_github_actions_summary_and_annotations(tmp_path):
    from analyzer.cli.gha import escape_data, escape_property

    assert escape_data("100% bad\r\n::error::x") == "100%25 bad%0D%0A::error::x"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    hostile = tmp_path / "guest%0A\n::error::owned,\x1b[31m.log"
    hostile.write_bytes(GUEST.read_bytes())
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_WORKSPACE": str(tmp_path)}
    r = run_capscan("diagnose", str(hostile), str(AMD), "--json", db=tmp_path / "g.db", env=env)
    assert r.returncode == 0
    json.loads(r.stdout)  # stdout is still only the JSON
    text = summary.read_text()
    assert text.startswith("earlier step\n### capscan: capability-downgrade (fixable)")
    assert "| hardware-limit |" in text and "capscan remedy plan --run 1" in text
    notes = [line for line in r.stderr.decode().splitlines() if line.startswith("::")]
    assert len(notes) == 2, notes
    error, warning = notes
    # the guest log is a file in the workspace: placed, by its path relative to it; the AMD fixture is not
    assert error.startswith("::error file=guest%250A%0A%3A%3Aerror%3A%3Aowned%2C[31m.log,line=1,title=")
    assert "\x1b" not in error
    assert warning.startswith("::warning title=capscan%3A run 2 is hardware-limit::")
    assert error.count("::") == 2  # the log's name cannot open a second command
    off = run_capscan("diagnose", "--run", "1", "--no-gha", db=tmp_path / "g.db", env=env)
    assert off.returncode == 0 and summary.read_text() == text and b"::error" not in off.stderr
    # a pipe is no file GitHub could open: a plain title, whatever the workspace holds
    piped = run_capscan("--force", "--json", db=tmp_path / "p.db", input=GUEST.read_bytes(),
                        env={**env, "GITHUB_STEP_SUMMARY": str(tmp_path / "piped.md")})
    (line,) = [x for x in piped.stderr.decode().splitlines() if x.startswith("::")]
    assert line.startswith("::error title=capscan%3A run 1 is capability-downgrade::The VM")
    quiet = run_capscan("diagnose", "--run", "1", db=tmp_path / "g.db", env={"GITHUB_ACTIONS": "",
                                                                           "GITHUB_STEP_SUMMARY": str(summary)})
    assert summary.read_text() == text and b"::error" not in quiet.stderr


# --------------------------------------------------------------------------- docs/usage.md lists every command

def _command_paths(group: click.Group, prefix: str = "capscan") -> list[str]:
    out = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        path = f"{prefix} {name}"
        out += _command_paths(command, path) if isinstance(command, click.Group) else [path]
    return out


def test_every_command_appears_in_the_usage_table():
    readme = (REPO / "docs" / "usage.md").read_text()
    block = readme[readme.index("<!-- usage:start -->"):readme.index("<!-- usage:end -->")]
    cells = [line.replace("\\|", "\0").split("|")[1].strip().strip("`").replace("\0", "|")
             for line in block.splitlines() if line.startswith("| `capscan")]
    listed = set()
    for cell in cells:
        words = cell.split()
        for i in range(1, len(words) + 1):
            *head, last = words[:i]
            for alt in last.split("|"):
                listed.add(" ".join([*head, alt]))
    missing = [p for p in _command_paths(cli) if p not in listed]
    assert not missing, f"add these to docs/usage.md's table: {missing}"


def test_db_and_formats_json(db):
    assert json.loads(invoke("--db", db, "db", "path", "--json")[1])["path"] == db
    stats = json.loads(invoke("--db", db, "db", "stats", "--json")[1])
    assert stats["runs"] == 3 and "runs" in invoke("--db", db, "db", "stats")[1]
    names = [f["name"] for f in json.loads(invoke("formats", "--json")[1])]
    assert "metal" in names and "metal:" in invoke("formats")[1]


def test_json_streams_with_non_finite_numbers_as_null():
    from analyzer.output import tabular

    out = io.StringIO()
    tabular.write_json_array(out, iter([{"a": float("inf")}, {"b": [1.5, float("nan")]}]))
    assert json.loads(out.getvalue()) == [{"a": None}, {"b": [1.5, None]}]
    out = io.StringIO()
    tabular.write_json_array(out, iter([]))
    assert json.loads(out.getvalue()) == []
