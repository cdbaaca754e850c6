#!/usr/bin/env python3
"""Linear time on hostile input, timed: what the suite's timing ratios were (issues 24 and 39).

    python3 bench/linearity.py [--only TEXT] [--check]

Each case runs the same work at a small and a large size (ten times, or four times, the input) in this
process, best of three, the two sizes interleaved so that a spell of load slows both alike, and prints
both figures, their ratio, and the ratio that fails (linear is about the size factor, quadratic its
square). ``--check`` exits 1 when a case is over its limit three measurements in a row. The suite
checks the same code by what it can count; a wall clock lives only here (the house rule).

Cases:

- ``pattern FORMAT KIND``: every declared pattern (and each ``via`` continuation pattern) against
  lines made from its own samples (long runs of spaces, a long word, unclosed brackets, the line
  repeated, a token repeated), about 10 KB and 100 KB (was tests/parsers/test_linear_patterns.py);
- ``normalize``: the prefixes normalize strips, on lines derived from their samples (same);
- ``hostile string N``: normalize on JSON-quoted strings of backslashes and escaped newlines, 20 KB and
  200 KB (was tests/read/test_forms.py);
- ``issue-24 line NAME``: the three quadratic lines of issue 24 in a real Metal log, ingested
  (reader, prefilter, dispatcher, assembly, SQLite), 10 KB and 100 KB (was tests/ingest/test_linear_lines.py);
- ``distinct names KIND``: 4,000 and 40,000 distinct NSLog process names or system_profiler chipsets,
  ingested (was tests/runs/test_linear_bookkeeping.py);
- ``unsupported ops``, ``tiny device blocks``: 10,000 and 40,000 distinct unsupported ops through the
  scanner and assembler; 500 and 2,000 one-run device blocks ingested and diagnosed (was
  tests/ingest/test_bounds.py).
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from analyzer.parsers import FORMATS  # noqa: E402
from analyzer.parsers.base import Rejected  # noqa: E402
from analyzer.read.normalize import PREFIX_SAMPLES, normalize  # noqa: E402

PATTERN_SMALL, PATTERN_LARGE = 10_000, 100_000


def _fill(unit: str, size: int) -> str:
    return unit * (size // max(len(unit), 1) + 1)


def _tokens(line: str) -> list[str]:
    words = line.split()
    picks = {words[0], max(words, key=len), words[-1]} if words else set()
    picks.add(line[: max(1, len(line) // 3)])
    return sorted(picks)


def variants(line: str, size: int) -> list[str]:
    """Adversarial lines of about ``size`` characters made from one sample line."""
    mid = len(line) // 2
    head, tail = line[:mid], line[mid:]
    out = [
        head + _fill(" ", size) + tail,  # a run of spaces inside
        line + _fill(" ", size),  # trailing spaces ("GPU name: x" + 80,000 spaces)
        line + " x" + _fill(" ", size) + "x",  # spaces then a word: `\S.*?\s*$` backtracking
        head + _fill("x", size) + tail,  # one long word ("ggml_metal_init: error: xxxx...")
        line + _fill("a", size),
        _fill("a", size) + line,
        _fill("(", size) + line,
        line + " (" + _fill("a", size),  # unclosed parenthesis ("using device X (aaaa...")
        line + _fill(" (", size),
        line + _fill("[", size),
        line + _fill("{", size),
        line + _fill('"', size),
        line + _fill("|", size),
        _fill(line + " ", size),  # the line repeated
        _fill(line, size),
    ]
    for token in _tokens(line):
        out.append(head + _fill(token, size) + tail)  # a run of one of its tokens inserted
        out.append(line + _fill(token + " ", size))
    out = [v[: size + len(line)] for v in out]
    # and each ended by a character no pattern ends on, so a pattern anchored at the end backtracks
    return out + [v + "~" for v in out]


class Case:
    """One workload at two sizes: ``run(size)`` does it once; ``limit``: the ratio that fails."""

    def __init__(self, name: str, small: object, large: object, run: Callable[[object], object], limit: float,
                 floor: float = 2e-3):
        self.name, self.small, self.large, self.run, self.limit, self.floor = name, small, large, run, limit, floor

    def _once(self, size: object) -> float:
        t = time.perf_counter()
        self.run(size)
        return time.perf_counter() - t

    def measure(self) -> tuple[float, float]:
        t_small = t_large = float("inf")
        for _ in range(3):
            t_small = min(t_small, self._once(self.small))
            t_large = min(t_large, self._once(self.large))
        return t_small, t_large

    def over(self, t_small: float, t_large: float) -> bool:
        # below the floor at the large size nothing grew (a ratio of microseconds is noise)
        return t_large >= self.floor and t_large >= self.limit * max(t_small, self.floor / self.limit)


def _searching(run: Callable[[str], object]) -> Callable[[object], None]:
    def each(lines: object) -> None:
        for text in lines:  # type: ignore[attr-defined]
            try:
                run(text)
            except (Rejected, ValueError, TypeError, OverflowError, RecursionError):
                pass
    return each


def pattern_cases() -> list[Case]:
    cases = []
    for fmt in FORMATS:
        for i, pattern in enumerate(fmt.declared_patterns()):
            own = [s.line for s in fmt.samples if s.via is pattern or (s.via is None and s.kind == pattern.kind)]
            samples = (own or [s.line for s in fmt.samples])[:4]
            cases.append(Case(f"pattern {fmt.name} {pattern.kind} #{i}",
                              [v for s in samples for v in variants(s, PATTERN_SMALL)],
                              [v for s in samples for v in variants(s, PATTERN_LARGE)],
                              _searching(pattern.regex.search), limit=30))
    raw = [r for _name, r, _text, _proc in PREFIX_SAMPLES]
    cases.append(Case("normalize", [v for s in raw for v in variants(s, PATTERN_SMALL)],
                      [v for s in raw for v in variants(s, PATTERN_LARGE)], _searching(normalize), limit=30))
    return cases


def string_cases() -> list[Case]:
    makes = {"backslashes": lambda n: '["' + "\\" * n + '\\n',
             "escaped newlines and quotes": lambda n: '{"a": "' + '\\n\\"' * (n // 2) + '"}',
             "quote newline pairs": lambda n: '"' + '"\\n' * (n // 2)}
    return [Case(f"hostile string {name}", make(20_000), make(200_000), normalize, limit=40, floor=1e-4 * 40)
            for name, make in makes.items()]


def ingest_cases() -> list[Case]:
    from analyzer.ingest import ingest
    from analyzer.read.reader import Input
    from analyzer.store import open_db
    from tests.ingest_util import FIXTURES, ingest_bytes

    rel, gpu_name = "metal/m2-2024-03-m2max.log", b"ggml_metal_init: GPU name:   Apple M2 Max"
    log = (FIXTURES / rel).read_bytes()
    work = Path(tempfile.mkdtemp(prefix="capscan-linear-"))

    def placed(line: bytes) -> bytes:
        if b"GPU name:" in line:
            return log.replace(gpu_name + b"\n", line + b"\n", 1)
        return log.replace(gpu_name + b"\n", gpu_name + b"\n" + line + b"\n", 1)

    counter = iter(range(1 << 30))

    def ingested(data: object) -> None:
        db = work / f"{next(counter)}.db"
        ingest_bytes(db, data, name="bench")  # type: ignore[arg-type]
        db.unlink()

    lines = {"metal-error-xxxx": lambda n: b"ggml_metal_init: error: " + b"x" * n,
             "using-device-unclosed": lambda n: b"llama_model_load_from_file_impl: using device X (" + b"a" * n,
             "gpu-name-then-spaces": lambda n: gpu_name + b" " * n,
             "gpu-name-spaces-inside": lambda n: b"ggml_metal_init: GPU name: x" + b" " * n + b"x"}
    cases = [Case(f"issue-24 line {name}", placed(make(10_000)), placed(make(100_000)), ingested, limit=30)
             for name, make in lines.items()]

    def ingest_text(text: object) -> None:
        with tempfile.TemporaryDirectory() as d:
            db = open_db(Path(d) / "b.db")
            ingest(db, Input("big.log", io.BytesIO(text)))  # type: ignore[arg-type]
            db.conn.close()

    names = {"nslog": lambda i: f"2026-07-30 11:02:14.552 proc{i}[123:456] ggml_metal_init: GPU name:   Apple M2 Max\n",
             "chipset": lambda i: f"      Chipset Model: Apple Paravirtual device {i}\n"}
    cases += [Case(f"distinct names {kind}", "".join(line(i) for i in range(4_000)).encode(),
                   "".join(line(i) for i in range(40_000)).encode(), ingest_text, limit=30)
              for kind, line in names.items()]
    return cases


def assembly_cases() -> list[Case]:
    from analyzer.ingest import ingest
    from analyzer.parsers import Dispatcher
    from analyzer.parsers.scanner import Scanner
    from analyzer.read.reader import open_input
    from analyzer.rules.diagnose import diagnose_runs
    from analyzer.runs.assembler import Assembler
    from analyzer.store import open_db

    def assemble(data: object) -> None:
        assembler = Assembler(lambda run: None, lambda run, rows: None)
        scanner = Scanner(Dispatcher(), assembler.feed)
        for i in range(0, len(data), 1 << 20):  # type: ignore[arg-type]
            scanner.feed(data[i:i + (1 << 20)])  # type: ignore[index]
        scanner.close()
        assembler.finish()

    def ops(n: int) -> bytes:
        head = b"ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)\n"
        return head + b"".join(b"ggml_metal_graph_compute_block_invoke: error: unsupported op 'OP_%d'\n" % i
                               for i in range(n))

    work = Path(tempfile.mkdtemp(prefix="capscan-linear-"))

    def blocks(n: object) -> None:
        path = work / f"blocks{n}.log"
        path.write_bytes(b"".join(b"ggml_metal_device_init: GPU name:   MTL0 (Apple M%d)\n"
                                  b"ggml_metal_device_init: GPU family: MTLGPUFamilyApple7  (1007)\n" % i
                                  for i in range(n)))  # type: ignore[call-overload]
        (work / "b.db").unlink(missing_ok=True)
        db = open_db(work / "b.db")
        source = open_input(str(path))
        result = ingest(db, source)
        source.close()
        diagnose_runs(db, result.run_ids, refresh_peers=True, keep=False)
        db.conn.close()

    return [Case("unsupported ops (4x the lines)", ops(10_000), ops(40_000), assemble, limit=9, floor=0.02 * 9),
            Case("tiny device blocks (4x the runs)", 500, 2000, blocks, limit=9, floor=0.05 * 9)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="only the cases whose name contains this text")
    ap.add_argument("--check", action="store_true", help="exit 1 when a case is over its limit three times running")
    args = ap.parse_args()
    cases = [c for c in (*pattern_cases(), *string_cases(), *ingest_cases(), *assembly_cases()) if args.only in c.name]
    width = max((len(c.name) for c in cases), default=10)
    print(f"{'case':<{width}}  {'small':>9}  {'large':>9}  {'ratio':>6}  {'fails at':>8}")
    failed = []
    for case in cases:
        for _ in range(3):  # a spell of load on one side only: measured again; quadratic is over every time
            t_small, t_large = case.measure()
            if not case.over(t_small, t_large):
                break
        ratio = t_large / t_small if t_small else float("inf")
        flag = "  OVER" if case.over(t_small, t_large) else ""
        print(f"{case.name:<{width}}  {t_small * 1e3:7.2f}ms  {t_large * 1e3:7.2f}ms  {ratio:6.1f}  "
              f"{case.limit:8.0f}{flag}", flush=True)
        if flag:
            failed.append(case.name)
    print(f"{len(cases) - len(failed)} of {len(cases)} cases within their limit")
    return 1 if failed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
