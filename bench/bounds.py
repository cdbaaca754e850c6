#!/usr/bin/env python3
"""capscan on hostile input: time and peak memory of the real CLI, each figure
beside its smaller peer (so growth shows as a ratio, not an absolute).

    python3 bench/bounds.py [--out DIR] [--quick]

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
- 32 ollama ``msg="inference compute"`` lines of 1 MiB (shlex.split took 41-73 s on one), beside the same
  lines with another message (read by no pattern).

Target: peak RSS < 150 MB everywhere; time ratios near the size ratios (2x).
This is a script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
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


def measure(args: list[str], db: Path) -> tuple[float, float, int]:
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db), *args], cwd=REPO,
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quick", action="store_true", help="a quarter of the sizes")
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="capscan-bounds-"))
    out.mkdir(parents=True, exist_ok=True)
    q = 4 if a.quick else 1
    rows: list[tuple[str, str, float, float, int]] = []

    def run(label: str, size: str, args: list[str]) -> None:
        db = out / "bench.db"
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        t, rss, rc = measure(args, db)
        rows.append((label, size, t, rss, rc))
        print(f"{label:<34} {size:>10} {t:8.2f} s {rss:8.1f} MB  exit {rc}", flush=True)

    for n in (20_000 // q, 40_000 // q, 80_000 // q):
        p = out / f"ops{n}.log"
        p.write_bytes(ops(n))
        run("distinct unsupported ops", f"{n:,}", ["ingest", str(p)])
    for n in (15_000 // q, 30_000 // q, 60_000 // q):
        p = out / f"blocks{n}.log"
        p.write_bytes(blocks(n))
        run("tiny device blocks (1 run each)", f"{n:,}", ["ingest", str(p)])
    for name, make in (("distinct NSLog process names", nslog), ("distinct system_profiler chipsets", chipsets)):
        for n in (10_000 // q, 20_000 // q, 40_000 // q):
            p = out / f"{make.__name__}{n}.log"
            p.write_bytes(make(n))
            run(name, f"{n:,}", ["ingest", str(p)])
    bomb = out / "zeros.gz"
    write_gzip_bomb(bomb, b"\0" * (1 << 20), 4096 // q)
    run(f"gzip bomb, zeros ({bomb.stat().st_size >> 10} KB)", f"{4096 // q} MiB", ["ingest", str(bomb)])
    line = b"srv  log_server_r: request: GET /health 127.0.0.1 200\n"
    text = out / "text.gz"
    write_gzip_bomb(text, line * ((1 << 20) // len(line)), 1024 // q)
    run(f"gzip bomb, text ({text.stat().st_size >> 10} KB)", f"{1024 // q} MiB", ["ingest", str(text)])
    big = out / "big.log"
    with open(big, "wb") as f:
        chunk = b"".join(b"llama_model_loader: - tensor %6d: blk.%d.attn_q.weight q4_K [4096, 4096]\n" % (i, i % 32)
                         for i in range(4096))
        while f.tell() < (282 << 20) // q:
            f.write(chunk)
    run("--keep-raw", f"{big.stat().st_size >> 20} MB", ["ingest", "--keep-raw", str(big)])
    ratios: list[tuple[str, float, float]] = []
    for label, make, n in (("one 395 MB llama-bench JSON object", huge_object, 395 // q),
                           ("metal error lines (a per-run list)", metal_errors, 400_000 // q)):
        hostile, peer = out / "hostile.log", out / "peer.log"
        # written as they are made: a forked child's peak RSS counts what the parent holds
        with open(hostile, "wb") as fh:
            make(n, fh)
        with open(peer, "wb") as fh:
            ordinary(hostile.stat().st_size, fh)
        run(label, f"{hostile.stat().st_size >> 20} MB", ["ingest", str(hostile)])
        run("  ordinary log, same size", f"{peer.stat().st_size >> 20} MB", ["ingest", str(peer)])
        (_, _, th, rh, _), (_, _, tp, rp, _) = rows[-2], rows[-1]
        ratios.append((label, th / tp, rh / rp))
        print(f"  ratio to the ordinary log: time {th / tp:.2f}x, peak RSS {rh / rp:.2f}x "
              f"({'PASS' if th / tp <= 2 and rh / rp <= 2 else 'FAIL'}: within 2x)", flush=True)
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
    worst = max(r[3] for r in rows)
    print(f"peak RSS at most {worst:.1f} MB: {'PASS' if worst < TARGET_RSS_MB else 'FAIL'} (< {TARGET_RSS_MB:.0f} MB)")
    in_ratio = all(t <= 2 and r <= 2 for _, t, r in ratios)
    return 0 if worst < TARGET_RSS_MB and in_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
