"""capscan export prometheus: node_exporter textfile, parsed back with prometheus_client's own parser."""

from __future__ import annotations

import os
from pathlib import Path


from analyzer.fleet.metrics import LABEL_MAX, collect, label_value
from analyzer.fleet.prometheus import METRIC_NAMES, write_textfile
from analyzer.store.db import open_db
from tests.conftest import run_capscan
from tests.fleet.dbutil import fleet_db, samples


def test_textfile_parses_back_with_every_metric(tmp_path, db_path):
    ids = fleet_db(db_path)
    out = tmp_path / "textfile" / "capscan.prom"
    out.parent.mkdir()
    write_textfile(collect(open_db(db_path), instance="guest-1"), out)
    got = samples(out.read_text())
    assert set(got) == set(METRIC_NAMES)
    info = got["capscan_run_info"]
    assert all(v == 1 for _, v in info)
    assert {frozenset(l) for l, _ in info} == {frozenset(
        {"verdict", "fixable", "environment", "runtime", "backend", "host_chip", "gpu_family", "instance"})}
    # every series names its machine (issue 26): two guests' textfiles in one folder stay two series
    assert {l["instance"] for series in got.values() for l, _ in series} == {"guest-1"}
    for l, _ in info:
        del l["instance"]
    by_env = {l["environment"]: l for l, _ in info}
    # the latest VM run is the remedied guest (the stock one it fixed is superseded); the host is bare metal
    assert by_env["vm"]["gpu_family"] == "Apple9" and by_env["vm"]["verdict"] != "capability-downgrade"
    assert by_env["bare-metal"] == {"verdict": "healthy", "fixable": "false", "environment": "bare-metal",
                                    "runtime": "llama-bench", "backend": "metal", "host_chip": "Apple M1 Ultra",
                                    "gpu_family": "Apple7"}
    # a guest and its host running one model stay apart (they overwrote each other before issue 26)
    tps = {(l["test"], l["environment"]): v for l, v in got["capscan_throughput_tokens_per_second"]}
    assert tps == {("pp512", "vm"): 4786.7, ("tg128", "vm"): 206.6, ("pp512", "bare-metal"): 4871.99,
                   ("tg128", "bare-metal"): 286.71}
    assert {(l["model"], l["host_chip"], l["runtime"]) for l, _ in got["capscan_throughput_tokens_per_second"]} == {
        ("llama 1B Q4_K - Medium", "Apple M1 Ultra", "llama-bench")}
    cost = {l["test"]: v for l, v in got["capscan_per_token_overhead_seconds"]}
    assert abs(cost["tg128"] - (1 / 206.6 - 1 / 286.71)) < 1e-9
    assert {l["environment"] for l, _ in got["capscan_run_timestamp_seconds"]} == {"vm", "bare-metal"}
    assert got["capscan_remedy_verified"] == [({"instance": "guest-1"}, 1.0)]
    assert got["capscan_last_run_timestamp_seconds"][0][1] > 1.7e9
    # no ids, hashes or paths among the label values
    every_label = {v for series in got.values() for labels, _ in series for v in labels.values()}
    assert not any(str(i) == v for i in ids.values() for v in every_label)
    assert not any("/" in v and v.startswith("/") for v in every_label)


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path, db_path):
    fleet_db(db_path)
    out = tmp_path / "capscan.prom"
    out.write_text("old\n")
    inode_before = out.stat().st_ino
    write_textfile(collect(open_db(db_path)), out)
    assert out.stat().st_ino != inode_before  # replaced by rename, never rewritten in place
    assert [p for p in os.listdir(tmp_path) if p.startswith("capscan.prom")] == ["capscan.prom"]


def test_hostile_label_values_are_cleaned_and_bounded():
    hostile = "llama\x1b[31m 7B\u202e\u0000 \"q\" {x}=\\ " + "A" * 500
    v = label_value(hostile)
    assert len(v) <= LABEL_MAX
    assert all(0x20 <= ord(c) < 0x7F for c in v)
    assert "\x1b" not in v and "\u202e" not in v and '"' not in v and "\\" not in v and "{" not in v
    assert v.startswith("llama 7B _q_ _x_=_ AAA")  # the colour escape is dropped whole
    assert label_value(None) == "unknown" and label_value("   ") == "unknown"
    # a workflow command is broken in ASCII, before stdout's sanitiser would add U+2060 (issue 37)
    assert label_value("a ##[error]b") == "a ##_[error]b" and label_value("::warning::x") == "_:warning::x"
    assert label_value("gpu\x9b31mred \x1b]0;title\x9c.") == "gpured ."  # 8-bit CSI and ST: the sequence whole


def test_hostile_model_name_round_trips_through_the_textfile(tmp_path, db_path):
    log = (Path(__file__).resolve().parents[2] / "examples" / "m1-ultra-guest-stock.log").read_text()
    evil = 'llama 1B\x1b]0;pwned\x07 "}\n'  # escape, quote and brace in the model column
    log = log.replace("llama 1B Q4_K - Medium         ", 'ev"il}{ \u202e' + "x" * 200 + " ")
    src = tmp_path / "evil.log"
    src.write_text(log + evil)
    assert run_capscan("ingest", str(src), db=db_path).returncode == 0
    out = tmp_path / "capscan.prom"
    write_textfile(collect(open_db(db_path)), out)
    got = samples(out.read_text())  # parses: the file is well-formed whatever the log held
    models = {l["model"] for l, _ in got["capscan_throughput_tokens_per_second"]}
    assert models and all(len(m) <= LABEL_MAX and m.isascii() and '"' not in m and "}" not in m for m in models)


def test_runs_past_max_age_leave_the_textfile(tmp_path, db_path):
    """Issue 26 item 4: a guest that went quiet drops out of its textfile (default: 7 days), so a
    dashboard never counts it forever; --max-age 0 keeps every run."""
    import sqlite3

    ids = fleet_db(db_path)
    con = sqlite3.connect(db_path)
    con.execute("UPDATE runs SET created_at = '2020-01-01T00:00:00+00:00' WHERE id = ?", (ids["host"],))
    con.commit()
    con.close()
    snap = collect(open_db(db_path))
    assert snap.dropped_old == 1 and {i["environment"] for i in snap.run_info} == {"vm"}
    assert all(key[2] == "vm" for key in snap.throughput)
    text = run_capscan("export", "prometheus", "--instance", "g", db=db_path, check=True).stdout.decode()
    assert 'environment="bare-metal"' not in text and 'instance="g"' in text
    kept = run_capscan("export", "prometheus", "--max-age", "0", db=db_path, check=True).stdout.decode()
    assert 'environment="bare-metal"' in kept
    recent = run_capscan("export", "prometheus", "--max-age", "3650", db=db_path, check=True).stdout.decode()
    assert 'environment="bare-metal"' in recent


def test_a_thread_sweeps_speed_says_what_figure_it_is(tmp_path, db_path):
    """A real llama-bench sweep of six thread counts: the gauge is the median of the six rows (one of them, not
    the best), and its HELP text says so, where it said "latest measured speed" (issue 41)."""
    log = Path(__file__).resolve().parents[1] / "fixtures/field/087-llama-bench-macos-cpu-thread-sweep-kleidiai-2025.log"
    run_capscan("ingest", str(log), db=db_path, check=True)
    out = tmp_path / "capscan.prom"
    write_textfile(collect(open_db(db_path), instance="mac"), out)
    text = out.read_text()
    tg64 = [v for l, v in samples(text)["capscan_throughput_tokens_per_second"] if l["test"] == "tg64"]
    assert tg64 == [157.63]  # median_low of 47.84 87.31 157.63 188.15 237.40 243.65: printed, not the best
    help_line = next(l for l in text.splitlines() if l.startswith("# HELP capscan_throughput_tokens_per_second"))
    assert "median of the rows it printed for the test across all its configurations" in help_line
    assert "not the best" in help_line and "Latest measured" not in help_line
