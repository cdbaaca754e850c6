"""llama-bench `-o json` reformatted: the same records as llama-bench prints them, as `jq .`,
`jq -S .` (sorted keys: `avg_ns` comes first, `build_commit` fourth), `jq -c`, `jq -cS`, a stream of
objects (`jq -S '.[]'`), indent 4, tabs and CRLF give the same runs and the same rows. The object is
read by structure (its fields by name, in any order), never from the position of a key.

The variants are written with Python's json module, which prints what jq prints for these records
(`jq -S . f | diff - <(python -c 'json.dumps(..., indent=2, sort_keys=True)')` is empty), so the test
needs no jq on the machine. Each goes through the real pipeline: ingest into a real SQLite file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.ingest_util import FIXTURES, ingest_bytes, stored_runs

# The 2023-2024 era (before `backends`, 2024-11-14): one boolean column per backend, no n_depth.
_OLD_CONFIG = {
    "build_commit": "3ffbbd5c", "build_number": 4840, "cuda": False, "vulkan": False, "kompute": False,
    "metal": True, "sycl": False, "rpc": "0", "gpu_blas": True, "blas": True, "cpu_info": "Apple M2 Max",
    "gpu_info": "", "model_filename": "models/llama-2-7b.Q4_0.gguf", "model_type": "llama 7B Q4_0",
    "model_size": 3825065984, "model_n_params": 6738415616, "n_batch": 2048, "n_ubatch": 512, "n_threads": 8,
    "type_k": "f16", "type_v": "f16", "n_gpu_layers": 99, "split_mode": "layer", "main_gpu": 0,
    "no_kv_offload": False, "flash_attn": False, "tensor_split": "0.00", "use_mmap": True, "embeddings": False}
OLD_ERA = [
    {**_OLD_CONFIG, "n_prompt": 512, "n_gen": 0, "test_time": "2024-06-01T10:00:00Z", "avg_ns": 668000000,
     "stddev_ns": 1200000, "avg_ts": 766.47, "stddev_ts": 1.38, "samples_ns": [667000000, 669000000],
     "samples_ts": [767.6, 765.3]},
    {**_OLD_CONFIG, "n_prompt": 0, "n_gen": 128, "test_time": "2024-06-01T10:00:05Z", "avg_ns": 2383000000,
     "stddev_ns": 9000000, "avg_ts": 53.71, "stddev_ts": 0.2, "samples_ns": [2380000000, 2386000000],
     "samples_ts": [53.78, 53.64]},
]


def _records(name: str) -> list[dict]:
    if name == "old-era":
        return OLD_ERA
    return json.loads((FIXTURES / "bench" / name).read_text())


def _dump(records, **kw) -> str:
    return json.dumps(records, ensure_ascii=False, **kw) + "\n"


VARIANTS = {
    "jq .": lambda r: _dump(r, indent=2),
    "jq -S .": lambda r: _dump(r, indent=2, sort_keys=True),
    "jq -c .": lambda r: _dump(r, separators=(",", ":")),
    "jq -cS .": lambda r: _dump(r, separators=(",", ":"), sort_keys=True),
    "jq -S '.[]'": lambda r: "".join(_dump(o, indent=2, sort_keys=True) for o in r),
    "jq -cS '.[]'": lambda r: "".join(_dump(o, separators=(",", ":"), sort_keys=True) for o in r),
    "indent 4": lambda r: _dump(r, indent=4),
    "indent 4 sorted": lambda r: _dump(r, indent=4, sort_keys=True),
    "tabs sorted": lambda r: _dump(r, indent="\t", sort_keys=True),
    "jq -S . CRLF": lambda r: _dump(r, indent=2, sort_keys=True).replace("\n", "\r\n"),
    "jq . CRLF": lambda r: _dump(r, indent=2).replace("\n", "\r\n"),
}


def _seen(db: Path, data: bytes) -> list[dict]:
    """Each stored run as what it says, line numbers left out (they differ between layouts)."""
    result = ingest_bytes(db, data, name="bench.json")
    out = []
    for run in stored_runs(db, result.run_ids):
        f = run["facts"]
        out.append({"program": f.program, "backend": f.backend, "device": f.device.name, "cpu_info": f.cpu_info,
                    "gpu_info": f.gpu_info, "bench_backends": f.bench_backends, "n_gpu_layers": f.n_gpu_layers,
                    "build_commit": f.build_commit,
                    "rows": [(t, v, k, p, g) for (t, v, k, p, g, _line) in run["throughput"]]})
    return out


@pytest.mark.parametrize("source", ["guest-stock.json", "host-m1-ultra.json", "old-era"])
def test_every_layout_gives_the_same_runs_and_rows(tmp_path, source):
    records = _records(source)
    if source == "old-era":
        reference = _seen(tmp_path / "ref.db", _dump(records, indent=4).encode())
    else:  # as llama-bench printed it
        reference = _seen(tmp_path / "ref.db", (FIXTURES / "bench" / source).read_bytes())
    assert len(reference) == 1 and len(reference[0]["rows"]) == len(records), reference
    assert [round(v, 2) for _t, v, *_ in reference[0]["rows"]] == [round(r["avg_ts"], 2) for r in records]
    for i, (name, write) in enumerate(VARIANTS.items()):
        got = _seen(tmp_path / f"v{i}.db", write(records).encode())
        assert got == reference, name


def test_sorted_keys_fill_every_field(tmp_path):
    """`jq -S .` of a guest's run: the fields before build_commit (avg_ts, backends) are read too."""
    records = _records("guest-stock.json")
    (run,) = _seen(tmp_path / "s.db", VARIANTS["jq -S ."](records).encode())
    assert run["bench_backends"] == "MTL,BLAS"
    assert run["gpu_info"] == "Apple Paravirtual device"
    assert [(t, round(v, 2)) for t, v, *_ in run["rows"]] == [("pp512", round(records[0]["avg_ts"], 2)),
                                                              ("tg128", round(records[1]["avg_ts"], 2))]


def test_old_era_sorted_keys_keep_the_metal_column(tmp_path):
    (run,) = _seen(tmp_path / "o.db", VARIANTS["jq -S ."](OLD_ERA).encode())
    assert run["bench_backends"] == "Metal"
    assert [(t, v) for t, v, *_ in run["rows"]] == [("pp512", 766.47), ("tg128", 53.71)]


def test_an_oversized_object_is_refused_and_counted_and_the_next_one_is_read(tmp_path):
    """Issue 24: one llama-bench object of 395 keys of 1 MB each was collected whole, joined and parsed
    (1.66 GB). Past the object budget it is refused and counted; the ordinary object after it is read."""
    huge = {**OLD_ERA[0], **{f"pad_{i}": "x" * (512 << 10) for i in range(5)}}  # each line under the 1 MiB cap
    text = json.dumps([huge, OLD_ERA[1]], indent=2)
    result = ingest_bytes(tmp_path / "c.db", text.encode())
    assert result.rejected == 1
    [run] = stored_runs(tmp_path / "c.db", result.run_ids)
    assert [(t, s) for t, s, *_ in run["throughput"]] == [("tg128", 53.71)]
