"""The wrappers the normaliser takes off a line (analyzer.read.normalize): each declared prefix has
a sample, which its own pattern recognises and which normalises to the text the program printed;
and whole logs wrapped by Kubernetes (`kubectl logs --prefix`, with and without --timestamps, and
the CRI container log files of containerd and CRI-O) give the runs and rows of the log unwrapped:
llama-bench markdown, pretty JSON, CSV and JSONL included (their patterns are anchored at the
line's start, so a prefix left on lost them while the Metal lines survived)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.read.normalize import _PREFIXES, PREFIX_SAMPLES, normalize
from tests.ingest_util import FIXTURES, ingest_bytes, stored_runs

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"
PATTERNS = dict(_PREFIXES)


@pytest.mark.parametrize("name,raw,text,proc", PREFIX_SAMPLES, ids=[f"{s[0]}:{i}" for i, s in enumerate(PREFIX_SAMPLES)])
def test_prefix_sample(name, raw, text, proc):
    assert PATTERNS[name].match(raw), f"{name} does not recognise its sample"
    assert normalize(raw) == ([text], proc)
    assert normalize(raw + "\r\n") == ([text], proc)


def test_every_prefix_has_a_sample():
    assert {name for name, _ in _PREFIXES} == {s[0] for s in PREFIX_SAMPLES}


@pytest.mark.parametrize("line", ["[pod/llama-0/llama]", "[pod/llama-0/llama] ",
                                  "2026-01-01T00:00:00.000000000Z stderr F", "2026-01-01T00:00:00.000000000Z stdout F "])
def test_a_wrapped_blank_line_is_blank(line):
    assert normalize(line) == ([], None)


def test_look_alikes_are_left_alone():
    # not a pod prefix (a markdown link, a bracketed word); not a CRI record (no stream and tag)
    for line in ("[pod/x] | model | size |", "[pods/a/b] build: ee3d1b54c (10167)"):
        assert normalize(line) == ([line], None)
    assert normalize("2026-01-01T00:00:00Z stdoutX F build: ee3d1b54c (10167)")[0] != ["build: ee3d1b54c (10167)"]


def _cri(lines: list[str], stream: str = "stderr", zone: str = "Z") -> bytes:
    return "".join(f"2026-08-09T18:13:{i % 60:02d}.{i:09d}{zone} {stream} F {line}\n"
                   for i, line in enumerate(lines)).encode()


WRAPS = {
    "kubectl --prefix": lambda lines: "".join(f"[pod/llama-0/llama] {x}\n" for x in lines).encode(),
    "kubectl --prefix --timestamps": lambda lines: "".join(
        f"[pod/llama-bench-7d9f8c-x2x4q/bench] 2026-08-09T18:13:{i % 60:02d}.123456789Z {x}\n"
        for i, x in enumerate(lines)).encode(),
    "CRI containerd": lambda lines: _cri(lines),
    "CRI stdout": lambda lines: _cri(lines, stream="stdout"),
    "CRI-O local time": lambda lines: _cri(lines, zone="+02:00"),
    "CRI CRLF": lambda lines: _cri(lines).replace(b"\n", b"\r\n"),
}

LOGS = {
    "md": EXAMPLES / "m1-ultra-guest-stock.log",
    "pretty json": FIXTURES / "bench" / "guest-stock.json",
    "csv": FIXTURES / "bench" / "current.csv",
    "jsonl": FIXTURES / "bench" / "gemma-12b-stock.jsonl",
    "sql": FIXTURES / "bench" / "current.sql",
}


def _seen(db: Path, data: bytes) -> list[dict]:
    result = ingest_bytes(db, data, name="pod.log")
    out = []
    for run in stored_runs(db, result.run_ids):
        f = run["facts"]
        out.append({"program": f.program, "device": f.device.name, "families": f.device.families,
                    "reduction": f.capabilities.simdgroup_reduction, "gpu_info": f.gpu_info,
                    "bench_backends": f.bench_backends,
                    "rows": [(t, v, k, p, g) for (t, v, k, p, g, _line) in run["throughput"]]})
    return out


@pytest.mark.parametrize("wrap", sorted(WRAPS))
@pytest.mark.parametrize("log", sorted(LOGS))
def test_a_wrapped_log_reads_as_the_log(tmp_path, log, wrap):
    raw = LOGS[log].read_bytes()
    want = _seen(tmp_path / "plain.db", raw)
    assert want and all(r["rows"] for r in want), "the fixture itself must give rows"
    lines = raw.decode("utf-8").splitlines()
    assert _seen(tmp_path / "wrapped.db", WRAPS[wrap](lines)) == want
