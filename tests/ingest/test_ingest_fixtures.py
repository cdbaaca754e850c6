"""Every fixture of tests/fixtures/expected.json ingested into a real SQLite
file and read back; the wrapped/pasted variants; how an input splits into runs.

Verdicts are not checked here (the diagnosis has its own tests)."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.ingest_util import (EXPECTED, FIXTURES, expected_summary, facts_summary, ingest_bytes, ingest_path,
                               parse_in_memory, same_throughput, stored_runs, throughput_of)


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_fixture_facts(rel, tmp_path):
    e = EXPECTED[rel]
    db = tmp_path / "capscan.db"
    result, error = ingest_path(db, FIXTURES / rel)
    if rel == "bad/binary.bin":
        # not a text log: refused with a one-line reason, nothing stored
        assert result is None and "binary" in error
        assert e["runs"] == 0
        return
    if rel == "bad/truncated.log.gz":
        # the complete lines before the cut are stored, and the damage is reported
        assert error and "truncated gzip" in error
    else:
        assert error is None, error
    runs = stored_runs(db, result.run_ids)
    assert len(runs) == e["runs"]
    decimals = 3 if "mlx" in rel else 2
    assert same_throughput(throughput_of(runs), e.get("throughput", []), decimals), throughput_of(runs)
    if e["runs"] == 1:
        assert facts_summary(runs[0]["facts"]) == expected_summary(e)
    if e["runs"] > 1:
        assert len(e["per_run"]) == len(runs)
        for run, per in zip(runs, e["per_run"]):
            assert facts_summary(run["facts"]) == expected_summary(per)
            assert same_throughput(throughput_of([run]), per.get("throughput", []), decimals)


def test_every_fixture_file_has_an_expectation():
    """Every log under the ingest fixture folders is in expected.json (rules/ belongs to the diagnosis tests)."""
    folders = ("metal", "backends", "bench", "timings", "probe", "shims", "wrapped", "bad")
    files = {str(p.relative_to(FIXTURES)) for d in folders for p in (FIXTURES / d).rglob("*") if p.is_file()}
    assert files == set(EXPECTED)


# ---------------------------------------------------------------------------
# wrapped / pasted variants of the same guest output
# ---------------------------------------------------------------------------

STOCK = FIXTURES / "metal/m4-2026-08-guest-stock.log"
SAME_AS_STOCK = ["wrapped/journald.log", "wrapped/quoted-paste.md", "wrapped/crlf.log", "wrapped/ansi.log",
                 "wrapped/stray-backticks.log", "bad/good.log.gz"]
SAME_BLOCK_AS_STOCK = ["wrapped/nslog.log", "wrapped/jsonl-callback.log"]  # the block only, no md table


def _capabilities(facts):
    return (facts.device.name, facts.device.apple_family, facts.device.families, facts.device.unified_memory,
            facts.device.working_set_mb, facts.capabilities.as_dict(), facts.use_bfloat, facts.metal_era)


@pytest.mark.parametrize("rel", SAME_AS_STOCK + SAME_BLOCK_AS_STOCK)
def test_wrapped_variant_gives_the_plain_logs_facts(rel):
    plain = parse_in_memory(STOCK.read_bytes())
    data = (FIXTURES / rel).read_bytes()
    if rel.endswith(".gz"):
        data = gzip.decompress(data)
    wrapped = parse_in_memory(data)
    assert len(plain) == len(wrapped) == 1
    assert _capabilities(wrapped[0][0]) == _capabilities(plain[0][0])
    if rel in SAME_AS_STOCK:
        assert [(t.test, t.tok_s, t.stddev) for t in wrapped[0][1]] == [(t.test, t.tok_s, t.stddev) for t in plain[0][1]]


def test_crlf_is_really_crlf_and_line_numbers_match_the_plain_log():
    data = (FIXTURES / "wrapped/crlf.log").read_bytes()
    assert data.count(b"\r\n") > 10
    (facts, _), = parse_in_memory(data)
    (plain, _), = parse_in_memory(STOCK.read_bytes())
    assert (facts.first_line, facts.last_line) == (plain.first_line, plain.last_line)


def test_nslog_and_journald_prefixes_name_the_process():
    (facts, _), = parse_in_memory((FIXTURES / "wrapped/journald.log").read_bytes())
    assert "llama-bench" in facts.processes
    (facts, _), = parse_in_memory((FIXTURES / "wrapped/nslog.log").read_bytes())
    assert facts.processes


def test_invalid_utf8_does_not_stop_decoding(tmp_path):
    data = (FIXTURES / "wrapped/invalid-utf8.log").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    result, error = ingest_path(tmp_path / "c.db", FIXTURES / "wrapped/invalid-utf8.log")
    assert error is None and len(result.run_ids) == 1


CUT_STOCK_LINES = {
    "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005)": "apple_family",
    "ggml_metal_device_init: simdgroup reduction   = false": "simdgroup_reduction",
    "ggml_metal_device_init: simdgroup matrix mul. = false": "simdgroup_mm",
    "ggml_metal_device_init: has bfloat            = false": "bfloat",
    "ggml_metal_device_init: has unified memory    = true": "unified_memory",
}


def test_cut_off_lines_never_invent_a_family_or_flag():
    (facts, tp), = parse_in_memory((FIXTURES / "wrapped/cut-off-lines.log").read_bytes())
    assert facts.device.apple_family is None and 1005 not in facts.device.families
    assert facts.device.families == [3003]
    assert facts.capabilities.simdgroup_reduction is None
    assert [t.test for t in tp] == ["pp512"]  # the tg128 row is cut inside its t/s cell


@pytest.mark.parametrize("line,field", CUT_STOCK_LINES.items())
def test_a_line_cut_at_any_offset_gives_nothing_or_the_whole_value(line, field):
    full = parse_in_memory(line.encode() + b"\n")
    for cut in range(len(line)):
        got = parse_in_memory(line[:cut].encode() + b"\n")
        summary = facts_summary(got[0][0]) if got else None
        if summary is None:
            continue
        # a cut line may still open a run, but never with a value the full line does not print
        assert summary[field] in (None, [], facts_summary(full[0][0])[field]), (cut, line[:cut])
        if cut < len(line) - 1:
            assert summary[field] in (None, []), (cut, line[:cut])


def test_family_cut_before_its_code_gives_no_family():
    for text in ("ggml_metal_device_init: GPU family: MTLGPUFamilyApp",
                 "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (10",
                 "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1005",
                 "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5  (1007)",  # mangled: name and code disagree
                 "ggml_metal_device_init: simdgroup reduction   = fal",
                 "ggml_metal_device_init: simdgroup reduction   = "):
        for facts, _ in parse_in_memory(text.encode() + b"\n"):
            assert facts.device.families == [] and facts.capabilities.simdgroup_reduction is None, text


def test_host_and_guest_in_one_paste_are_two_runs_with_their_lines(tmp_path):
    result, error = ingest_path(tmp_path / "c.db", FIXTURES / "wrapped/two-runs-host-and-guest.log")
    assert error is None
    host, guest = stored_runs(tmp_path / "c.db", result.run_ids)
    assert (host["facts"].first_line, host["facts"].last_line) == (2, 23)
    assert (guest["facts"].first_line, guest["facts"].last_line) == (26, 46)
    assert [r[5] for r in host["throughput"]] == [20, 21]
    assert [r[5] for r in guest["throughput"]] == [43, 44]
    assert all(2 <= ev.line <= 23 for ev in host["evidence"])
    assert all(26 <= ev.line <= 46 for ev in guest["evidence"])


def test_three_processes_concatenated_keep_their_rows(tmp_path):
    result, error = ingest_path(tmp_path / "c.db", FIXTURES / "wrapped/three-processes-concatenated.log")
    assert error is None
    listing, stock, shim = stored_runs(tmp_path / "c.db", result.run_ids)
    assert listing["throughput"] == [] and listing["facts"].listed_devices
    assert [(r[0], r[1]) for r in stock["throughput"]] == [("pp512", 431.86), ("tg128", 12.63)]
    assert [(r[0], r[1]) for r in shim["throughput"]] == [("pp512", 4786.7), ("tg128", 206.6)]
    assert shim["facts"].shim is not None and shim["facts"].shim.name == "LumeMetalCapabilities"
    assert stock["facts"].shim is None
    lines = [(r["facts"].first_line, r["facts"].last_line) for r in (listing, stock, shim)]
    assert lines[0][1] < lines[1][0] and lines[1][1] < lines[2][0]
    assert shim["facts"].first_line == 44  # the shim banner opens the shimmed process


# ---------------------------------------------------------------------------
# runs: several per input, bench rows carrying their own device
# ---------------------------------------------------------------------------

def _json_row(gpu: str, cpu: str, n_prompt: int, n_gen: int, tok_s: float, commit: str = "ee3d1b54c") -> str:
    return json.dumps({"build_commit": commit, "build_number": 10167, "cpu_info": cpu, "gpu_info": gpu,
                       "backends": "MTL,BLAS", "model_type": "llama 1B Q4_K - Medium", "n_prompt": n_prompt,
                       "n_gen": n_gen, "n_depth": 0, "avg_ts": tok_s, "stddev_ts": 1.0})


def test_three_concatenated_runs_record_first_and_last_lines(tmp_path):
    parts = [(FIXTURES / "metal/m4-2026-08-host-m1-ultra.log").read_bytes(),
             (FIXTURES / "metal/m4-2026-08-guest-stock.log").read_bytes(),
             (FIXTURES / "metal/m4-2026-08-guest-lume-shim.log").read_bytes()]
    data = b"".join(parts)
    result = ingest_bytes(tmp_path / "c.db", data)
    runs = stored_runs(tmp_path / "c.db", result.run_ids)
    assert len(runs) == 3
    offset = 0
    for part, run in zip(parts, runs):
        n = part.count(b"\n")
        assert offset < run["facts"].first_line <= run["facts"].last_line <= offset + n
        offset += n
    assert [r["facts"].device.apple_family for r in runs] == [1007, 1005, 1009]
    assert [r["throughput"][0][1] for r in runs] == [4871.99, 431.86, 4786.7]


def test_bench_json_row_with_another_device_starts_its_own_run(tmp_path):
    block = (FIXTURES / "metal/m4-2026-08-host-m1-ultra.log").read_text().split("| model")[0]
    n_block = block.count("\n")
    rows = [_json_row("Apple M1 Ultra", "Accelerate, Apple M1 Ultra", 512, 0, 4871.99),
            _json_row("Apple Paravirtual device", "Accelerate, Apple M1 Ultra (Virtual)", 512, 0, 431.86),
            _json_row("Apple Paravirtual device", "Accelerate, Apple M1 Ultra (Virtual)", 0, 128, 12.63)]
    data = (block + "\n".join(rows) + "\n").encode()
    result = ingest_bytes(tmp_path / "c.db", data)
    host, guest = stored_runs(tmp_path / "c.db", result.run_ids)
    # the first row names the device of the block above it: it joins that run
    assert host["facts"].device.name == "Apple M1 Ultra" and host["facts"].device.apple_family == 1007
    assert [(r[0], r[1], r[5]) for r in host["throughput"]] == [("pp512", 4871.99, n_block + 1)]
    # the next rows carry another device: a run of their own, named by the rows
    assert guest["facts"].device.name == "Apple Paravirtual device"
    assert guest["facts"].gpu_info == "Apple Paravirtual device"
    assert guest["facts"].device.families == [] and guest["facts"].capabilities.simdgroup_reduction is None
    assert [(r[0], r[1]) for r in guest["throughput"]] == [("pp512", 431.86), ("tg128", 12.63)]
    assert (guest["facts"].first_line, guest["facts"].last_line) == (n_block + 2, n_block + 3)


@pytest.mark.parametrize("fmt", ["csv", "sql"])
def test_bench_csv_and_sql_rows_split_by_device(fmt, tmp_path):
    devices = [("Apple M1 Ultra", 4871.99), ("Apple Paravirtual device", 431.86)]
    if fmt == "csv":
        lines = ["build_commit,build_number,cpu_info,gpu_info,backends,model_type,n_prompt,n_gen,n_depth,avg_ts,stddev_ts"]
        lines += [f'"ee3d1b54c","10167","Accelerate","{g}","MTL,BLAS","llama 1B","512","0","0","{t}","1.0"'
                  for g, t in devices]
    else:
        lines = [f"INSERT INTO llama_bench (build_commit, build_number, cpu_info, gpu_info, backends, model_type, "
                 f"n_prompt, n_gen, n_depth, avg_ts, stddev_ts) VALUES ('ee3d1b54c', '10167', 'Accelerate', '{g}', "
                 f"'MTL,BLAS', 'llama 1B', '512', '0', '0', '{t}', '1.0');" for g, t in devices]
    result = ingest_bytes(tmp_path / "c.db", ("\n".join(lines) + "\n").encode())
    runs = stored_runs(tmp_path / "c.db", result.run_ids)
    assert [(r["facts"].device.name, [x[1] for x in r["throughput"]]) for r in runs] == [
        ("Apple M1 Ultra", [4871.99]), ("Apple Paravirtual device", [431.86])]


def test_md_rows_attach_to_the_run_whose_block_precedes_them():
    (facts, tp), = parse_in_memory((FIXTURES / "bench/md-with-stderr-2to1.log").read_bytes())
    assert facts.device.apple_family == 1005 and [t.test for t in tp] == ["pp512", "tg128"]


def test_timing_rows_keep_their_token_counts():
    (facts, tp), = parse_in_memory((FIXTURES / "timings/ollama-verbose.log").read_bytes())
    assert [(t.test, t.n_prompt, t.n_gen) for t in tp] == [("prompt", 15, None), ("generation", None, 47)]
    (facts, tp), = parse_in_memory((FIXTURES / "timings/mlx-lm-benchmark.log").read_bytes())
    assert [(t.test, t.tok_s, t.n_prompt, t.n_gen) for t in tp] == [("prompt", 1656.55, 512, None),
                                                                     ("generation", 172.09, None, 128)]


def test_mlx_trials_stand_when_the_averages_line_is_cut_off():
    text = (FIXTURES / "timings/mlx-lm-benchmark.log").read_text().split("Averages:")[0]
    (facts, tp), = parse_in_memory(text.encode())
    assert len(tp) == 10 and tp[0].tok_s == 1662.104 and tp[0].n_prompt == 512


def test_llama_print_timings_2023_three_processes():
    runs = parse_in_memory((FIXTURES / "timings/llama-print-timings-2023.log").read_bytes())
    assert [(f.first_line, f.build_commit) for f, _ in runs] == [(1, "226255b"), (24, "dae06c06"), (36, "b9e74f9b")]
    # 'inf tokens per second' (0 ms) is dropped, not stored as a rate
    assert [t.test for t in runs[2][1]] == ["generation"]
