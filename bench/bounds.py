#!/usr/bin/env python3
"""capscan on hostile input: time and peak memory of the real CLI, each figure
beside its smaller peer (so growth shows as a ratio, not an absolute).

    python3 bench/bounds.py [--out DIR] [--quick] [--only TEXT]

Measures ``python -m analyzer --db TMP ingest FILE`` in a subprocess (wall
time, and its own peak RSS from ``wait4``) on:

- 20k / 40k / 80k distinct ``unsupported op`` lines (was quadratic: 2.4/8.2/33 s);
- 15k / 30k / 60k tiny device blocks, one run each (was 72 s and 812 MB at 60k);
- 10k / 20k / 40k distinct NSLog process names, and as many system_profiler chipsets (were quadratic:
  13.4 s and 33.5 s at 40k);
- a 4 MB gzip of 4 GiB of zeros (was 8.4 GB), and one of 1 GiB of text;
- ``--keep-raw`` on a 282 MB log (was 890 MB);
- one llama-bench JSON object of 395 keys of ~1 MB (was 1.66 GB), and 400k ``ggml_metal_init: error``
  lines (a per-run list; was 1.18 GB at 3.5 M), each beside an ordinary log of the same size;
- capscan exports read back (``ingest guest.json.gz``, issue 37): a run whose proof list holds 1.4 M
  items (a 30 KB gzip; was 1.0 GB), one whose proof list holds 300k items in under 4 MiB (past the
  decoder's value budget), and a header of 120k keys (a 1.2 MB gzip; was 1.35 GB), each beside an
  ordinary export of the same size (real run objects, one after another).
- 32 ollama ``msg="inference compute"`` lines of 1 MiB (shlex.split took 41-73 s on one), beside the same
  lines with another message (read by no pattern).
- issue 37's other surfaces: 4,000 fixable blocks (was 158 s) beside 4,000 not-fixable ones, and the
  export of each imported (was 157 s); a 6-line compare table of 40,000 builds piped (was 94 s) and one
  of 11,000 builds (the issue's 211 KB table peaked at 220 MB), and a probe JSON of huge family lists
  (was 236 MB), each beside an ordinary log of the same size.

``--only TEXT`` runs only the cases whose label contains TEXT (``--only export``).

Target: peak RSS < 150 MB everywhere; time ratios near the size ratios (2x).
This is a script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.bombs import write_gzip_bomb  # noqa: E402

TARGET_RSS_MB = 150.0


def measure(args: list[str], db: Path, stdin: Path | None = None) -> tuple[float, float, int]:
    """Wall time, peak RSS (MB) and exit code of ``capscan --db DB ARGS`` (``stdin``: pipe mode's input)."""
    start = time.monotonic()
    with open(stdin or os.devnull, "rb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db), *args], cwd=REPO, stdin=fh,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
    return time.monotonic() - start, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def ops(n: int) -> bytes:
    return b"ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\n" + b"".join(
        b"ggml_metal_graph_compute_block_invoke: error: unsupported op 'OP_%d'\n" % i for i in range(n))


def blocks(n: int) -> bytes:
    return b"".join(b"ggml_metal_device_init: GPU name:   MTL0 (Apple M%d)\n"
                    b"ggml_metal_device_init: GPU family: MTLGPUFamilyApple7  (1007)\n" % i for i in range(n))


def nslog(n: int) -> bytes:
    return b"".join(b"2026-07-30 11:02:14.552 proc%d[123:456] ggml_metal_init: GPU name:   Apple M2 Max\n" % i
                    for i in range(n))


def chipsets(n: int) -> bytes:
    return b"".join(b"      Chipset Model: Apple Paravirtual device %d\n" % i for i in range(n))


def huge_object(keys: int, fh) -> None:
    pad = b"x" * ((1 << 20) - 64)   # each line just under the reader's 1 MiB line cap
    fh.write(b'[\n  {\n    "build_commit": "3ffbbd5c",\n')
    for i in range(keys):
        fh.write(b'    "pad_%d": "%s",\n' % (i, pad))
    fh.write(b'    "avg_ts": 53.71\n  }\n]\n')


def metal_errors(n: int, fh) -> None:
    fh.write(b"ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\n")
    for i in range(n):
        fh.write(b"ggml_metal_init: error: load pipeline error %d\n" % i)


RUN_OBJECT = {"id": 1, "source": "guest.log", "first_line": 1, "last_line": 62, "program": "llama-bench",
              "backend": "metal", "device": {"name": "Apple Paravirtual device", "apple_family": 1005,
                                             "families": [1005, 3003], "unified_memory": True},
              "host_chip": "Apple M1 Ultra", "environment": "vm", "capabilities": {"simdgroup_reduction": False},
              "shim": None, "throughput": [{"test": "pp512", "tok_s": 431.86, "stddev": 1.2,
                                            "model": "llama 1B Q4_K - Medium", "config": None, "line": 18},
                                           {"test": "tg128", "tok_s": 12.63, "stddev": 0.1,
                                            "model": "llama 1B Q4_K - Medium", "config": None, "line": 19}],
              "verdict": "capability-downgrade", "fixable": True, "confidence": "high",
              "fixable_reason": "the guest names its host chip", "findings": [], "next": [],
              "proof": [{"sign": "Apple5", "line": 6, "text": "ggml_metal_device_init: GPU family: MTLGPUFamilyApple5"}],
              "origin": {"instance": "guest-a", "source": "guest.log", "sha256": "ab" * 32, "run_id": 1}}
EXPORT_HEAD = b'{"capscan_version": "0.1.0", "export": "capscan.runs", "instance": "guest-a"'


def export_bomb(kind: str, fh) -> None:
    """A capscan export built to be large once decoded: a proof list of 1.4 M (or 300k) items, or a
    header of 120k keys."""
    import json

    if kind == "header":
        fh.write(EXPORT_HEAD + b"".join(b', "k%d": %d' % (i, i) for i in range(120_000)) + b', "runs": []}\n')
        return
    n, item = (1_400_000, b"{}") if kind == "proof" else (300_000, b'{"a":1}')
    run = json.dumps({**RUN_OBJECT, "proof": []}).encode()
    at = run.index(b'"proof": [') + 10
    fh.write(EXPORT_HEAD + b', "runs": [' + run[:at] + item)
    block = (b"," + item) * 10_000  # written in blocks: the parent's peak RSS is the child's too
    for _ in range((n - 1) // 10_000):
        fh.write(block)
    fh.write(run[at:] + b"]}\n")


def ordinary_export(size: int, fh) -> None:
    """An ordinary export of about ``size`` bytes: one real-shaped run object after another."""
    import json

    fh.write(EXPORT_HEAD + b', "runs": [\n')
    i, written = 0, 0
    while written < size:
        run = json.dumps({**RUN_OBJECT, "first_line": i * 100 + 1, "last_line": i * 100 + 62}).encode()
        fh.write((b",\n" if i else b"") + run)
        written += len(run) + 2
        i += 1
    fh.write(b"\n]}\n")


def inference_compute(n: int, fh, plain: bool = False) -> None:
    """``n`` lines of 1 MiB (the reader's cap): ollama's slog 'inference compute' record with a 1 MiB quoted
    description (shlex.split took 41-73 s on one), or, ``plain``, the same line with another message, which
    the same formats look at and none reads."""
    msg = b'msg="inference computed"' if plain else b'msg="inference compute"'
    head = (b"time=2025-05-21T11:35:57.935-03:00 level=INFO source=types.go:130 " + msg + b" id=0 library=metal "
            b'name="Apple Paravirtual device" description="')
    body = b"M2 Max " * (((1 << 20) - 200) // 7)
    for _ in range(n):
        fh.write(head + body + b'" total="16.0 GiB"\n')


def ordinary(size: int, fh) -> None:
    """An ordinary log of ``size`` bytes, the peer of an adversarial input: the real field-corpus logs
    (tests/fixtures/field), one after another, repeated."""
    corpus = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted((REPO / "tests/fixtures/field").glob("*.log")))
    while size > 0:
        fh.write(corpus[:size])
        size -= len(corpus)


# ---------------------------------------------------------------------------
# issue 37: the surfaces of imports, predictions, compare tables, probes and ollama's slog lines
# ---------------------------------------------------------------------------

FIX = REPO / "tests/fixtures"
# llama-bench -o jsonl 2>&1 in a stock guest: the clamped block, then rows whose cpu_info names the host
STOCK_BLOCK = (FIX / "metal/m4-2026-08-guest-stock.log").read_bytes().split(b"| model")[0]
FIXABLE = STOCK_BLOCK + (FIX / "bench/gemma-12b-stock.jsonl").read_bytes()
# its peer, the same block and rows but a cpu_info naming no chip: no host proof, so not fixable
NOT_FIXABLE = FIXABLE.replace(b"Accelerate, Apple M1 Ultra (Virtual)", b"Accelerate")


def compare_table(builds: int, rows: int, fh) -> None:
    """compare-llama-bench's markdown table with ``builds`` t/s columns, tabulate's layout."""
    fh.write(b"| CPU | Model | Test |" + b"".join(b" t/s b%d |" % i for i in range(builds)) + b" Speedup |\n")
    fh.write(b"|:----|:------|:-----|" + b"-----:|" * builds + b"--------:|\n")
    for r in range(rows):
        fh.write(b"| Accelerate, Apple M3 Max | llama 1B Q8_0 | " + (b"tg128", b"pp512")[r % 2] + b" |"
                 + b"".join(b" %d.%02d |" % (10 + (i * 7 + r) % 90, r) for i in range(builds)) + b" 1.01 |\n")


def probe_families(lines: int, fh) -> None:
    """capscan-probe --json lines, each with a supports_family object of ~75,000 entries (~1 MB)."""
    fams = b",".join(b'"%d":%s' % (1000 + i, (b"true", b"false")[i % 2]) for i in range(75_000))
    for _ in range(lines):
        fh.write(b'{"probe":"capscan-probe","version":1,"device":"Apple Paravirtual device","supports_family":{'
                 + fams + b'},"max_threadgroup_memory":32768,"has_unified_memory":true}\n')


def export_of(log: Path, out: Path, work: Path) -> Path:
    """The real ``export json`` of a store holding ``log``'s runs."""
    db = work / f"export-{log.stem}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    for args in (["ingest", str(log)], ["export", "json", "--instance", "guest-b", "--out", str(out)]):
        subprocess.run([sys.executable, "-m", "analyzer", "--db", str(db), *args], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return out


def issue37(out: Path, q: int, run, rows: list, wanted) -> list[tuple[str, float, float]]:
    """Issue 37's cases of predictions, compare tables and probes (its imports and slog lines are in
    main's table), each hostile input beside its peer; returns (label, time ratio, RSS ratio)."""
    ratios: list[tuple[str, float, float]] = []

    def pair(label: str) -> None:
        (_, _, th, rh, _), (_, _, tp, rp, _) = rows[-2], rows[-1]
        ratios.append((label, th / tp, rh / rp))
        print(f"  ratio to its peer: time {th / tp:.2f}x, peak RSS {rh / rp:.2f}x "
              f"({'PASS' if th / tp <= 2 and rh / rp <= 2 else 'FAIL'}: within 2x)", flush=True)

    n = 4000 // q
    fixable, peer = out / "fixable.log.gz", out / "not-fixable.log.gz"
    if not wanted("fixable blocks"):
        n = 0
    for path, block in ((fixable, FIXABLE), (peer, NOT_FIXABLE)) if n else ():
        with gzip.open(path, "wb") as fh:  # one stream (the issue's 11 KB): blocks compress against each other
            for _ in range(n):
                fh.write(block)
    if n:
        run(f"fixable blocks ({fixable.stat().st_size >> 10} KB gzip)", f"{n:,}", ["ingest", str(fixable)])
        run("  not-fixable blocks, same count", f"{n:,}", ["ingest", str(peer)])
        pair("fixable blocks")
        exports = [export_of(f, out / f"{f.name}.json", out) for f in (fixable, peer)]
        run("  import: export of the fixable runs", f"{n:,}", ["ingest", str(exports[0])])
        run("  import: export of the not-fixable runs", f"{n:,}", ["ingest", str(exports[1])])
        pair("importing fixable runs")

    def beside_ordinary(label: str, make, args: list[str], piped: bool = False, peer_of=ordinary) -> None:
        if not wanted(label):
            return
        hostile, same = out / "hostile37.log", out / "peer37.log"
        with open(hostile, "wb") as fh:  # written as made: the child's peak RSS counts what the parent holds
            make(fh)
        with open(same, "wb") as fh:
            peer_of(hostile.stat().st_size, fh)
        size = f"{hostile.stat().st_size >> 10:,} KB"
        for name, path in ((label, hostile), ("  its peer, same size", same)):
            run(name, size, args if piped else [*args, str(path)], stdin=path if piped else None)
        pair(label)

    beside_ordinary("compare table, 40,000 builds, piped", lambda fh: compare_table(40_000 // q, 4, fh), [],
                    piped=True)
    beside_ordinary("compare table, 11,000 builds, piped", lambda fh: compare_table(11_000 // q, 4, fh), [],
                    piped=True)
    beside_ordinary("probe JSON, huge family lists", lambda fh: probe_families(16 // q, fh), ["ingest"])
    return ratios


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="a quarter of the sizes")
    ap.add_argument("--only", default="", help="only the cases whose label contains this text")
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="capscan-bounds-"))
    out.mkdir(parents=True, exist_ok=True)
    q = 4 if a.quick else 1
    rows: list[tuple[str, str, float, float, int]] = []

    def wanted(label: str) -> bool:
        return a.only.lower() in label.lower()

    def run(label: str, size: str, args: list[str], stdin: Path | None = None) -> None:
        db = out / "bench.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        t, rss, rc = measure(args, db, stdin)
        rows.append((label, size, t, rss, rc))
        print(f"{label:<34} {size:>10} {t:8.2f} s {rss:8.1f} MB  exit {rc}", flush=True)

    for n in (20_000 // q, 40_000 // q, 80_000 // q) if wanted("distinct unsupported ops") else ():
        p = out / f"ops{n}.log"
        p.write_bytes(ops(n))
        run("distinct unsupported ops", f"{n:,}", ["ingest", str(p)])
    for n in (15_000 // q, 30_000 // q, 60_000 // q) if wanted("tiny device blocks") else ():
        p = out / f"blocks{n}.log"
        p.write_bytes(blocks(n))
        run("tiny device blocks (1 run each)", f"{n:,}", ["ingest", str(p)])
    for name, make in (("distinct NSLog process names", nslog), ("distinct system_profiler chipsets", chipsets)):
        for n in () if not wanted(name) else (10_000 // q, 20_000 // q, 40_000 // q):
            p = out / f"{make.__name__}{n}.log"
            p.write_bytes(make(n))
            run(name, f"{n:,}", ["ingest", str(p)])
    if wanted("gzip bomb"):
        bomb = out / "zeros.gz"
        write_gzip_bomb(bomb, b"\0" * (1 << 20), 4096 // q)
        run(f"gzip bomb, zeros ({bomb.stat().st_size >> 10} KB)", f"{4096 // q} MiB", ["ingest", str(bomb)])
        line = b"srv  log_server_r: request: GET /health 127.0.0.1 200\n"
        text = out / "text.gz"
        write_gzip_bomb(text, line * ((1 << 20) // len(line)), 1024 // q)
        run(f"gzip bomb, text ({text.stat().st_size >> 10} KB)", f"{1024 // q} MiB", ["ingest", str(text)])
    if wanted("--keep-raw"):
        big = out / "big.log"
        with open(big, "wb") as f:
            chunk = b"".join(b"llama_model_loader: - tensor %6d: blk.%d.attn_q.weight q4_K [4096, 4096]\n"
                             % (i, i % 32) for i in range(4096))
            while f.tell() < (282 << 20) // q:
                f.write(chunk)
        run("--keep-raw", f"{big.stat().st_size >> 20} MB", ["ingest", "--keep-raw", str(big)])
    ratios: list[tuple[str, float, float]] = []
    cases = (("one 395 MB llama-bench JSON object", huge_object, 395 // q, ordinary, ".log"),
             ("metal error lines (a per-run list)", metal_errors, 400_000 // q, ordinary, ".log"),
             ("export: 1.4 M-item proof list", export_bomb, "proof", ordinary_export, ".json"),
             ("export: 300k-item proof list", export_bomb, "values", ordinary_export, ".json"),
             ("export: 120k header keys", export_bomb, "header", ordinary_export, ".json"))
    for label, make, n, peer_of, ext in cases:
        if not wanted(label) and not (a.only and wanted("ordinary")):
            continue
        plain, peer = out / f"hostile{ext}", out / f"peer{ext}"
        # written as they are made: a forked child's peak RSS counts what the parent holds
        with open(plain, "wb") as fh:
            make(n, fh)
        with open(peer, "wb") as fh:
            peer_of(plain.stat().st_size, fh)
        hostile = plain
        if ext == ".json":  # as it arrives from a shared folder: gzip (a few KB)
            import gzip

            hostile = out / "hostile.json.gz"
            with open(plain, "rb") as src, gzip.open(hostile, "wb", 6) as dst:
                while piece := src.read(1 << 20):
                    dst.write(piece)
        size = plain.stat().st_size
        shown = f"{size >> 20} MB" if ext == ".log" else f"{size >> 20} MB/{hostile.stat().st_size >> 10} KB gz"
        run(label, shown, ["ingest", str(hostile)])
        run(f"  ordinary {'log' if ext == '.log' else 'export'}, same size", f"{peer.stat().st_size >> 20} MB",
            ["ingest", str(peer)])
        (_, _, th, rh, _), (_, _, tp, rp, _) = rows[-2], rows[-1]
        ratios.append((label, th / tp, rh / rp))
        print(f"  ratio to the ordinary log: time {th / tp:.2f}x, peak RSS {rh / rp:.2f}x "
              f"({'PASS' if th / tp <= 2 and rh / rp <= 2 else 'FAIL'}: within 2x)", flush=True)
    if wanted("inference compute"):
        hostile, peer = out / "hostile.log", out / "peer.log"
        for path, plain in ((hostile, False), (peer, True)):
            with open(path, "wb") as fh:
                inference_compute(32 // q, fh, plain)
        run("ollama inference compute, 1 MiB", f"{32 // q} lines", ["ingest", str(hostile)])
        run("  the same lines, another msg", f"{32 // q} lines", ["ingest", str(peer)])
        (_, _, th, rh, _), (_, _, tp, rp, _) = rows[-2], rows[-1]
        ratios.append(("inference compute lines", th / tp, rh / rp))
        print(f"  ratio to the other message: time {th / tp:.2f}x, peak RSS {rh / rp:.2f}x "
              f"({'PASS' if th / tp <= 2 and rh / rp <= 2 else 'FAIL'}: within 2x)", flush=True)
    ratios += issue37(out, q, run, rows, wanted)
    if not rows:
        print(f"no case matches --only {a.only!r}")
        return 2
    worst = max(r[3] for r in rows)
    print(f"peak RSS at most {worst:.1f} MB: {'PASS' if worst < TARGET_RSS_MB else 'FAIL'} (< {TARGET_RSS_MB:.0f} MB)")
    in_ratio = all(t <= 2 and r <= 2 for _, t, r in ratios)
    return 0 if worst < TARGET_RSS_MB and in_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
