"""Benchmark tables of other tools that print llama-bench's figures: compare-llama-bench.py
(scripts/ of llama.cpp, since 2023), read by its header names, never by column positions.

Its header holds the properties that differ between the compared results (by the script's pretty
names: CPU, GPU, Backends, Model, Threads, ...), then ``Test``, one ``t/s <build>`` column per build
and ``Speedup``. Its rows have no "±", so the header opens a collector that reads the rows after
it. Each ``t/s <build>`` cell is one build's figure: the row becomes one llama-bench row per build,
the build named in its configuration (``build=master``), so two builds are never averaged into one."""

from __future__ import annotations

from typing import Any

import regex

from analyzer.parsers.base import REJECTED_KEY, Event, Format, Pattern, Sample, rx, to_float, to_int
from analyzer.parsers.bench import row_from_fields

# compare-llama-bench's header names (PRETTY_NAMES of every version; compared case-blind) -> the
# llama-bench field each states. The old backend columns print Yes/No, as llama-bench's booleans.
_FIELDS = {
    "cpu": "cpu_info", "gpu": "gpu_info", "backends": "backends", "gpu layers": "n_gpu_layers",
    "model": "model_type", "file": "model_filename", "num. of par.": "model_n_params",
    "num. of parameters": "model_n_params", "threads": "n_threads", "batch size": "n_batch",
    "microbatch size": "n_ubatch", "k type": "type_k", "v type": "type_v", "flashattention": "flash_attn",
    "nkvo": "no_kv_offload", "cuda": "cuda", "vulkan": "vulkan", "kompute": "kompute", "metal": "metal",
    "sycl": "sycl", "gpu blas": "gpu_blas", "blas": "blas", "opencl": "opencl",
}
# The other properties compare-llama-bench shows when they differ between rows: not configuration fields
# of llama-bench's rows (runs.builder keys figures by those), yet two values are two figures. By
# llama-bench's own column names.
_EXTRA = {"use mmap": "mmap", "split mode": "sm", "main gpu": "mg", "embeddings": "embd", "tensor split": "ts",
          "poll": "poll", "cpu mask": "cpu_mask", "cpu strict": "cpu_strict", "tensor overrides": "ot"}
_BACKEND_COLUMNS = {"backends", "cuda", "vulkan", "kompute", "metal", "sycl", "gpu blas", "blas", "opencl"}
_SIZE_GIB = "model size [gib]"
_BUILD = "t/s "
# compare-llama-bench compares a few builds; a table of thousands of t/s columns is hostile: the first
# MAX_BUILDS are read, the other cells of each row counted as refused records (a 211 KB table of
# 11,000 builds peaked at 220 MB)
MAX_BUILDS = 16
# a build's name goes into a configuration label: one token, no "=" nor the brackets of figure_key
_BUILD_NAME = regex.compile(r"[^\s=\[\]]{1,32}+")
_TEST = regex.compile(r"(?:pp(?P<p>\d++))?+\+?+(?:tg(?P<g>\d++))?+(?:@d(?P<d>\d++))?+")
_SEPARATOR = regex.compile(r"\|(?:\s*+:?-++:?\s*+\|)++")


def _cells(text: str) -> list[str]:
    return [c.strip() for c in text.strip().strip("|").split("|")]


def _header(m: regex.Match) -> dict[str, Any] | None:
    """A header with a Test column and at least one ``t/s <build>`` column, every build named."""
    columns = _cells(m.group(0))
    builds = [c[len(_BUILD):].strip() for c in columns if c.startswith(_BUILD)]
    if "Test" not in columns or not builds or not all(_BUILD_NAME.fullmatch(b) for b in builds):
        return None
    return {"columns": columns}


def _test(cell: str) -> tuple[int, int, int] | None:
    """(n_prompt, n_gen, n_depth) of ``pp512``, ``tg128``, ``pp512+tg128``, ``tg32@d2048``."""
    t = _TEST.fullmatch(cell.replace(" ", ""))
    if t is None or not (t.group("p") or t.group("g")):
        return None
    p, g, d = (to_int(t.group(k) or "0") for k in "pgd")
    return None if p is None or g is None or d is None else (p, g, d)


def rows_of(columns: list[str], cells: list[str]) -> list[dict]:
    """One llama-bench row per build of a compare-llama-bench row (``Rejected``: a speed no
    machine can have, counted), for the first ``MAX_BUILDS`` builds (``dropped_builds`` counts the rest)."""
    if len(cells) != len(columns):
        return []
    fields: dict[str, Any] = {}
    builds: list[tuple[str, str]] = []
    extra: list[str] = []
    test = None
    stated_backend = False
    for name, cell in zip(columns, cells, strict=True):
        low = name.lower()
        value = {"yes": "1", "no": "0"}.get(cell.lower(), cell)  # booleans print Yes/No
        if name == "Test":
            test = _test(cell)
        elif name.startswith(_BUILD):
            if len(builds) < MAX_BUILDS:
                builds.append((name[len(_BUILD):].strip(), cell))
        elif low == _SIZE_GIB:
            gib = to_float(cell)
            fields["model_size"] = int(gib * 1024 ** 3) if gib is not None and 0 < gib < 1e6 else None
        elif low in _EXTRA and cell:
            if len(value) <= 32 and _BUILD_NAME.fullmatch(value):
                extra.append(f"{_EXTRA[low]}={value}")
        elif low in _FIELDS and cell:
            fields[_FIELDS[low]] = value
            stated_backend = stated_backend or low in _BACKEND_COLUMNS
    if test is None:
        return []
    fields["n_prompt"], fields["n_gen"], fields["n_depth"] = test
    out = []
    for build, cell in builds:
        row = row_from_fields({**fields, "avg_ts": cell}, "compare")
        if row is None:
            continue
        if not stated_backend:  # llama-bench's "CPU" default is no reading of a table that hides the backend
            row["backend"] = None
            row["key"] = row["key"][:2] + (None,) + row["key"][3:]
        row["config"] = " ".join(filter(None, (row["config"], *extra, f"build={build}")))
        out.append(row)
    return out


class _CompareCollector:
    """The rows under a compare-llama-bench header, up to the first line that is not one."""

    survives_rejects = True  # one row a line: a refused row ends no table

    def __init__(self, data: dict[str, Any]):
        self.columns = data["columns"]
        self.dropped = max(0, sum(c.startswith(_BUILD) for c in self.columns) - MAX_BUILDS)

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        stripped = text.strip()
        if not stripped.startswith("|"):
            return None
        if _SEPARATOR.fullmatch(stripped):
            return []
        cells = _cells(stripped)
        if len(cells) != len(self.columns):
            return None  # another table (a blank line between them may not reach the parser)
        rows = rows_of(self.columns, cells)
        data: dict[str, Any] = {"rows": rows}
        if rows and self.dropped:
            data[REJECTED_KEY] = self.dropped  # the cells of the builds past the budget (Dispatcher counts them)
        return [Event("bench.row_list", line_no, text, data)] if rows else []

    def finish(self) -> list[Event]:
        return []


_HEADER_SAMPLE = ("| CPU                      | Model         | Test   |   t/s master |   t/s gg/metal-fa-f16 |"
                  "   Speedup |")
_ROW_SAMPLE = "| Accelerate, Apple M3 Max | llama 1B Q8_0 | tg128  |       169.28 |                170.57 |      1.01 |"
_HEADER = Pattern("bench.table_header", rx(r"^\|(?:[^|]*+\|)++\s*+$"), _header,
                  collector=lambda data, n, t: _CompareCollector(data))
# the collector's rows, as a pattern for the sample test (it reads them by the header's names)
_ROW = Pattern("bench.row_list", rx(r"^\|(?:[^|]*+\|)++\s*+$"),
               lambda m: _figures(rows_of(_cells(_HEADER_SAMPLE), _cells(m.group(0)))))


def _figures(rows: list[dict]) -> dict[str, Any]:
    return {"rows": rows, "figures": [[r["test"], r["tok_s"], r["config"]] for r in rows]}


COMPARE = Format(
    name="compare-llama-bench",
    description="compare-llama-bench.py tables: one t/s column per build (2023-2026)",
    literals=("| Test ",),  # tabulate left-aligns the Test column's header: always "| Test " (t/s cells are padded)
    patterns=(_HEADER,),
    samples=(
        Sample(_HEADER_SAMPLE, "bench.table_header",
               {"columns": ["CPU", "Model", "Test", "t/s master", "t/s gg/metal-fa-f16", "Speedup"]}),
        Sample(_ROW_SAMPLE, "bench.row_list", {"figures": [["tg128", 169.28, "build=master"],
                                                           ["tg128", 170.57, "build=gg/metal-fa-f16"]]}, via=_ROW),
    ),
)

__all__ = ["COMPARE", "MAX_BUILDS", "rows_of"]
