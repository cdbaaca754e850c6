"""llama-bench output in every form: markdown (every column layout since
2023), JSON (array, one field per line), JSONL, CSV and SQL (tables ``test``
and ``llama_bench``). See shared/reference/log-formats.md section 6."""

from __future__ import annotations

import csv
import datetime as dt
import functools
import json
import math
from typing import Any

import regex

from analyzer import chips
from analyzer.parsers import plausible
from analyzer.parsers.base import (
    REJECTED_KEY,
    SQLITE_INT_MAX,
    Event,
    Format,
    Pattern,
    Rejected,
    Sample,
    fits_sqlite,
    rx,
    text_field,
    to_float,
    to_int,
)

try:  # orjson parses a llama-bench row three times faster than json (2.8 vs 9.8 us for 1.2 KB)
    from orjson import loads as _loads
except ImportError:  # pragma: no cover - orjson is a declared dependency
    from json import loads as _loads  # type: ignore[assignment]

# Before 2024-11-14 each backend was a boolean column.
_OLD_BACKEND_COLUMNS = (("cuda", "CUDA"), ("vulkan", "Vulkan"), ("kompute", "Kompute"), ("metal", "Metal"),
                        ("sycl", "SYCL"), ("gpu_blas", "GPU BLAS"), ("blas", "BLAS"))


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, (int, float)) and value != 0) or str(value).strip().lower() in ("1", "true", "yes")


@functools.lru_cache(maxsize=1024)
def test_name(n_prompt: int | None, n_gen: int | None, n_depth: int | None = None) -> str | None:
    p, g = n_prompt or 0, n_gen or 0
    if p and g:
        name = f"pp{p}+tg{g}"
    elif p:
        name = f"pp{p}"
    elif g:
        name = f"tg{g}"
    else:
        return None
    if n_depth:
        name += f" @ d{n_depth}"
    return name


def _int(value: Any) -> int | None:
    """JSON gives ints already; CSV and SQL give strings."""
    if type(value) is int:
        return value
    if value is None or value == "" or isinstance(value, bool):
        return None
    return to_int(str(value))


def _float(value: Any) -> float | None:
    if type(value) is float:
        return value
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:  # an integer of 400 digits
            raise Rejected("a number too large for a float") from None
    if value is None or value == "" or isinstance(value, bool):
        return None
    return to_float(str(value))


def row_from_fields(fields: dict[str, Any], fmt: str) -> dict | None:
    """Map one llama-bench record (any era, any serialisation) to a bench row:
    its measurement plus its configuration."""
    m = _measurement(fields)
    if m is None:
        return None
    config = _configuration(fields, fmt)
    row = _row(config, _plausible(m, config["limits"]))
    if fmt != "jsonl":  # (JSONL's dense path parses no row's time: its rows must equal the whole parse's)
        row["test_time"] = log_time(fields.get("test_time"))
    return row


def log_time(value: Any) -> str | None:
    """llama-bench's test_time ('2026-08-11T10:22:33Z') as UTC ISO 8601, or None when it is not a time."""
    if type(value) is not str or len(value) > 40:
        return None
    try:
        when = dt.datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)  # llama-bench prints UTC ('Z'); a bare time is read so
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _plausible(m: tuple, limits: tuple[float, float]) -> tuple:
    """The measurement ``m`` if its speed is one the row's hardware can have (the prompt or the
    generation ceiling of ``limits``, see analyzer.parsers.plausible); ``Rejected`` otherwise."""
    test, tok_s, _, n_prompt, n_gen, _ = m
    ceiling = limits[1] if not n_prompt else limits[0]
    if not 0.0 < tok_s <= ceiling:
        plausible.check(tok_s, (n_prompt or 0) + (n_gen or 0), ceiling, test)  # raises: the row has tokens
    return m


def _limits(fields: dict[str, Any], cpu_info: str | None, gpu_info: str | None, backend: str | None,
            model: str | None) -> tuple[float, float]:
    """(prompt, generation) ceilings of a configuration's rows: from the Apple chip the row names
    (a discrete GPU's row has none) and the model's size and parameters, where shown."""
    chip = chips.apple_chip(cpu_info) or chips.apple_chip(gpu_info)
    if chip is not None and chips.vendor(gpu_info) in ("nvidia", "amd", "intel", "software"):
        chip = None
    size, n_params = fields.get("model_size"), fields.get("model_n_params")
    if type(size) is not int:
        size = _int(size)
    if type(n_params) is not int:
        n_params = _int(n_params)
    return plausible.ceilings(chip, size, n_params, model, backend)


# The parameters that make two rows of one test different figures (threads, batch, KV types, flash attention,
# offload), by llama-bench's display names, with the fields that state them in each serialisation (JSON/CSV/SQL
# names first, then the markdown columns of every era).
CONFIG_FIELDS = (("threads", ("n_threads", "threads")), ("n_batch", ("n_batch",)), ("n_ubatch", ("n_ubatch",)),
                 ("type_k", ("type_k",)), ("type_v", ("type_v",)), ("fa", ("flash_attn", "fa")),
                 ("ngl", ("n_gpu_layers", "ngl")), ("nkvo", ("no_kv_offload", "nkvo")),
                 # llama-bench -dev (2025 on): the devices a row ran on ('none': the CPU alone, 'CUDA0/CUDA1')
                 ("dev", ("devices", "dev")))


def config_label(fields: dict[str, Any]) -> str | None:
    """The configuration a row states, as ``threads=8 fa=1`` (in CONFIG_FIELDS order, only what the row
    states; booleans as 1/0), or None. Computed once per configuration, never per row of the dense path."""
    parts = []
    for name, keys in CONFIG_FIELDS:
        for key in keys:
            value = fields.get(key)
            if value is None or type(value) in (list, dict):
                continue
            if type(value) is bool:
                text = "1" if value else "0"
            else:
                text = str(value).strip()
                text = {"true": "1", "false": "0"}.get(text.lower(), text)
            if text and len(text) <= 32 and " " not in text and "=" not in text:
                parts.append(f"{name}={text}")
            break
    return " ".join(parts) or None


def _setup(fields: dict[str, Any]) -> str:
    """The row's configuration as one text: its fields before ``n_prompt``, where llama-bench prints the
    configuration in every era and after which it prints the test and what it measured (the dense path's
    configuration bytes, JsonlRows: parsed once per configuration, shared by its rows)."""
    out = []
    for key, value in fields.items():
        if key == "n_prompt":
            break
        out.append((key, value))
    return repr(out)


def _configuration(fields: dict[str, Any], fmt: str) -> dict[str, Any]:
    """The row fields that come from the benchmark's configuration, not its measurement.

    Type-checked here, at the parser boundary: a text field that is a number,
    bool, list or object rejects the row (``Rejected``), so it is never stored."""
    backend = text_field(fields, "backends")
    if backend is None:
        get = fields.get
        backend = next((label for key, label in _OLD_BACKEND_COLUMNS if _truthy(get(key, False))), "CPU")
    ngl = fields.get("n_gpu_layers")
    if type(ngl) is not int:
        ngl = _int(ngl)
    if not fits_sqlite(ngl):
        raise Rejected("n_gpu_layers out of range")
    cpu_info, gpu_info = text_field(fields, "cpu_info"), text_field(fields, "gpu_info")
    commit, model = text_field(fields, "build_commit"), text_field(fields, "model_type")
    return {"format": fmt, "model": model, "backend": backend, "cpu_info": cpu_info,
            "gpu_info": gpu_info, "n_gpu_layers": ngl, "build_commit": commit,
            "model_size": _int(fields.get("model_size")),
            # what makes two rows the same benchmark (see assembly: rows with another key start a run)
            "key": (cpu_info, gpu_info, backend, commit),
            # what makes two rows of one test two figures (see runs.builder's summary)
            "config": config_label(fields),
            # every field of the configuration (all but the test and what was measured): one invocation
            # prints a test of one setup once, so a repeat is the next invocation's (runs.boundaries)
            "setup": _setup(fields),
            # the most tok/s its rows can show: (prompt, generation)
            "limits": _limits(fields, cpu_info, gpu_info, backend, model)}


JSONL_PREFIX = b'{"build_commit"'


class JsonlRows:
    """llama-bench JSONL rows of one source (the dense path, for files of a
    million rows: no decode, no normalisation, no regex).

    In every era llama-bench prints the configuration before ``n_prompt`` and
    the measurements after it, and the rows of one benchmark share every byte
    of the configuration. That part is parsed once; each row parses only its
    measured tail. A row whose configuration differs is parsed whole."""

    _CUT = b'"n_prompt":'

    def __init__(self) -> None:
        self._head: bytes | None = None  # the configuration's bytes and the cut
        self._cut_at = 0  # where the measured tail starts
        self._config: dict[str, Any] | None = None  # the row fields that come from the configuration
        self._limits = (0.0, 0.0)  # its (prompt, generation) ceilings

    @property
    def config(self) -> dict[str, Any] | None:
        return self._config

    def measure(self, raw: bytes) -> tuple | None:
        """(test, tok_s, stddev, n_prompt, n_gen, n_depth) of a row with the same
        configuration as the last row parsed whole; None otherwise (``row`` decides it)."""
        head = self._head
        if head is None or not raw.startswith(head):  # the configuration's bytes, then the cut
            return None
        try:
            tail = _loads(b"{" + raw[self._cut_at:])
        except ValueError:  # not JSON: the full path (``row``) counts it
            return None
        if type(tail) is not dict:
            return None
        # _measurement's typed case (the million-row one) and _plausible's accepting test, inline
        get = tail.get
        tok_s, stddev = get("avg_ts"), get("stddev_ts")
        n_prompt, n_gen, n_depth = get("n_prompt"), get("n_gen"), get("n_depth")
        if (type(tok_s) is float and type(n_prompt) is int and type(n_gen) is int and type(n_depth) is int
                and (type(stddev) is float or stddev is None)
                and _INT_MIN <= n_prompt <= _INT_MAX and _INT_MIN <= n_gen <= _INT_MAX and _INT_MIN <= n_depth <= _INT_MAX
                and 0.0 < tok_s <= self._limits[0 if n_prompt else 1]):
            test = test_name(n_prompt, n_gen, n_depth)
            return None if test is None else (test, tok_s, stddev, n_prompt, n_gen, n_depth)
        try:
            m = _measurement(tail)
            return None if m is None else _plausible(m, self._limits)
        except ValueError:  # Rejected: the full path counts it
            return None

    def row(self, raw: bytes) -> dict | None:
        m = self.measure(raw)
        if m is not None:
            return _row(self._config, m)  # type: ignore[arg-type]
        cut = raw.find(self._CUT)
        try:
            obj = _loads(raw)
        except ValueError:
            return None  # not JSON (a line cut off): the text path decides
        if not isinstance(obj, dict):
            return None
        m = _measurement(obj)
        if m is None:
            return None
        config = _configuration(obj, "jsonl")
        if cut > 0:
            self._head, self._cut_at, self._config, self._limits = raw[:cut + len(self._CUT)], cut, config, config["limits"]
        return _row(config, _plausible(m, config["limits"]))


_INT_MIN, _INT_MAX = -SQLITE_INT_MAX - 1, SQLITE_INT_MAX


def _measurement(tail: dict[str, Any]) -> tuple | None:
    """(test, tok_s, stddev, n_prompt, n_gen, n_depth) from a row's measured fields.

    Runs once per row of files that hold a million: JSON values arrive typed,
    so the type checks come first and conversion only for CSV/SQL strings."""
    get = tail.get
    tok_s, stddev = get("avg_ts"), get("stddev_ts")
    n_prompt, n_gen, n_depth = get("n_prompt"), get("n_gen"), get("n_depth")
    if (type(tok_s) is float and type(n_prompt) is int and type(n_gen) is int and type(n_depth) is int
            and (type(stddev) is float or stddev is None)
            and _INT_MIN <= n_prompt <= _INT_MAX and _INT_MIN <= n_gen <= _INT_MAX and _INT_MIN <= n_depth <= _INT_MAX):
        test = test_name(n_prompt, n_gen, n_depth)  # a JSON row: typed already (the million-row case)
        return None if test is None else (test, tok_s, stddev, n_prompt, n_gen, n_depth)
    if type(tok_s) is not float:
        printed, tok_s = tok_s, _float(tok_s)
        if tok_s is None and type(printed) is str and printed.strip().lower() in ("nan", "-nan", "+nan"):
            tok_s = math.nan  # a CSV/SQL 'nan': a speed, refused by _plausible (counted, not dropped unseen)
    if type(n_prompt) is not int:
        n_prompt = _int(n_prompt)
    if type(n_gen) is not int:
        n_gen = _int(n_gen)
    if type(n_depth) is not int:
        n_depth = _int(n_depth)
    if not (fits_sqlite(n_prompt) and fits_sqlite(n_gen) and fits_sqlite(n_depth)):
        raise Rejected("a token count too large to store")
    test = test_name(n_prompt, n_gen, n_depth)
    if tok_s is None or test is None:
        return None
    if type(stddev) is not float:
        stddev = _float(stddev)
    return test, tok_s, stddev, n_prompt, n_gen, n_depth


def _row(config: dict[str, Any], m: tuple) -> dict:
    """A bench row from a configuration and one measurement."""
    test, tok_s, stddev, n_prompt, n_gen, n_depth = m
    return {"format": config["format"], "test": test, "n_prompt": n_prompt, "n_gen": n_gen, "n_depth": n_depth, "tok_s": tok_s,
            "stddev": stddev, "model": config["model"], "backend": config["backend"], "cpu_info": config["cpu_info"],
            "gpu_info": config["gpu_info"], "n_gpu_layers": config["n_gpu_layers"],
            "build_commit": config["build_commit"], "key": config["key"], "config": config["config"],
            "model_size": config.get("model_size"), "setup": config.get("setup")}


bench_row_from = _row  # for the dispatcher's batches


def _json_array(m: regex.Match) -> dict | None:
    """A whole llama-bench JSON array on one line (`jq -c .`, or a tool that re-serialised it)."""
    try:
        obj = _loads(m.group(0).strip().rstrip(","))
    except ValueError:
        return None
    if not isinstance(obj, list):
        return None
    rows, rejected = [], 0
    for item in obj:
        if isinstance(item, dict):
            try:
                row = row_from_fields(item, "json")
            except Rejected:  # this row only: the others of the array stand
                rejected += 1
                continue
            if row is not None:
                rows.append(row)
    if not rows:
        if rejected:
            raise Rejected(f"{rejected} llama-bench row(s) refused", rejected)
        return None
    return {"rows": rows, REJECTED_KEY: rejected} if rejected else {"rows": rows}


def _json_row(m: regex.Match) -> dict | None:
    try:
        obj = _loads(m.group(0).rstrip(","))
    except ValueError:
        # a whole {...} row that does not decode: a lone surrogate, an integer
        # beyond 64 bits, nesting too deep (orjson refuses all three)
        raise Rejected("a llama-bench JSON row that does not decode") from None
    if not isinstance(obj, dict):
        return None
    return row_from_fields(obj, "jsonl")


class _JsonObjectCollector:
    """llama-bench -o json prints one field per line; gather one object.

    The object opens at its first field line that names a llama-bench field: ``build_commit`` as
    llama-bench prints it (first in every era), ``avg_ns`` when the keys are sorted (``jq -S``,
    ``json.dumps(sort_keys=True)``: first in every era, before ``avg_ts`` and ``backends``), or
    ``avg_ts``. Its fields are then read by name up to the closing ``}``, in any order."""

    MAX_LINES = 400
    # a real object is under 10 KB; past this it is refused and counted (was: 400 lines of 1 MiB, joined)
    MAX_BYTES = 256 << 10

    def __init__(self, line_no: int, text: str):
        self.start = line_no
        self.lines = [text]
        self.size = len(text)

    def _keep(self, text: str) -> None:
        self.size += len(text) + 1
        if self.size > self.MAX_BYTES:
            self.lines = []
            raise Rejected(f"a llama-bench JSON object over {self.MAX_BYTES >> 10} KiB")
        self.lines.append(text)

    in_array = False  # inside a multi-line array (`jq .` puts every samples_ns element on its own line)

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        stripped = text.strip()
        if len(self.lines) > self.MAX_LINES:
            return None  # not a llama-bench object after all: drop it
        if self.in_array:
            if not _NUMBERS_TAIL.fullmatch(stripped):
                return None  # interrupted object (cut-off output): drop it
            self.in_array = not stripped.startswith("]")
            self._keep(text)
            return []
        if stripped.startswith("}"):
            row = self._row()
            self.lines = []
            return [Event("bench.row", self.start, "", row)] if row else []
        if not stripped.startswith('"'):
            return None  # interrupted object (cut-off output): drop it
        self.in_array = stripped.endswith("[")
        self._keep(text)
        return []

    def _row(self) -> dict | None:
        body = "\n".join(self.lines).rstrip().rstrip(",")
        try:
            obj = json.loads("{" + body + "}")
        except RecursionError:
            raise Rejected("JSON nested too deep") from None
        except ValueError:
            return None
        return row_from_fields(obj, "json")

    def finish(self) -> list[Event]:
        return []


# llama-bench -v prints its stderr between the CSV rows (a model's load, its perf lines: a few hundred lines a
# row); the table stays open across this many lines that are not its rows, then ends
CSV_INTERLEAVE_BUDGET = 5000


class _CsvCollector:
    survives_rejects = True  # one row a line: a refused row ends no table

    def __init__(self, header: str):
        try:
            self.columns = next(csv.reader([header]))
        except csv.Error:  # a mangled header (a stray CR mid-line): no row can match it
            self.columns = header.split(",")
        self.apart = 0  # lines since the last row that were not rows

    def passes(self, text: str) -> bool:
        """A line that is not a row: dispatched as any other while the table stays open (see
        ``CSV_INTERLEAVE_BUDGET``); False ends the table."""
        self.apart += 1
        return self.apart <= CSV_INTERLEAVE_BUDGET

    def feed(self, line_no: int, text: str) -> list[Event] | None:
        if not text.startswith('"'):
            return None
        try:
            values = next(csv.reader([text]))
        except (csv.Error, StopIteration):
            return None
        if len(values) != len(self.columns):
            return [] if not self.apart else None  # cut-off row: skipped (among stderr lines: any other line)
        self.apart = 0
        row = row_from_fields(dict(zip(self.columns, values, strict=False)), "csv")
        return [Event("bench.row", line_no, text, row)] if row else []

    def finish(self) -> list[Event]:
        return []


# Compiled once: the `regex` package's own cache costs more per call than the match.
_NUMBERS_TAIL = regex.compile(r"[-+\d.eE,\s]*+\]?\s*+,?")
_SPACES = regex.compile(r"\s+")
# 'Vulkan (master)': the label's cell as llama-bench's markdown prints it (cells are stripped); the name
# ends at its last non-space character, found in one pass (a lazy name before \s* is quadratic in spaces)
_BACKEND_LABEL = regex.compile(r"(?P<backend>[^()\s](?:[^()]*[^()\s])?+)\s*+\((?P<label>[^()]++)\)")
_TEST_PPTG = regex.compile(r"(?:pp|tg)\d")
_TEST_PP = regex.compile(r"pp(\d+)")
_TEST_TG = regex.compile(r"tg(\d+)")
_TEST_DEPTH = regex.compile(r"@ d(\d+)")
_SQL_VALUE = regex.compile(r"'((?:[^']|'')*)'|(NULL)|([-\d.eE+]+)")


def _sql_row(m: regex.Match) -> dict | None:
    columns = [c.strip() for c in m.group("cols").split(",")]
    values = [(a.replace("''", "'") if a is not None else (None if n else num))
              for a, n, num in _SQL_VALUE.findall(m.group("vals"))]
    if len(values) != len(columns):
        return None
    row = row_from_fields(dict(zip(columns, values, strict=False)), "sql")
    if row:
        row["table"] = m.group("table")
    return row


def _md_header(m: regex.Match) -> dict:
    cells = [c.strip() for c in m.group(0).strip().strip("|").split("|")]
    return {"columns": cells}


_MD_TEST = regex.compile(r"^(pp|tg)(\d+)")
_MD_RATE = regex.compile(r"^\s*([-\d.,]+(?:e[+-]?\d+)?) \u00b1 ([-\d.,]+(?:e[+-]?\d+)?)")


def _md_row(m: regex.Match) -> dict | None:
    cells = [c.strip() for c in m.group(0).strip().strip("|").split("|")]
    # A row of a llama-bench table (a pp/tg test cell) whose speed is none: refused here, where it is counted.
    for cell in cells:
        t = _MD_TEST.match(cell.replace(" ", ""))
        if t:
            rate = _MD_RATE.match(cells[-1])
            if rate:
                gen = t.group(1) == "tg"
                plausible.check(to_float(rate.group(1)), to_int(t.group(2)),
                                plausible.MAX_GEN_TOK_S if gen else plausible.MAX_PROMPT_TOK_S, cell)
            break
    return {"cells": cells}


def _md_row_any(m: regex.Match) -> dict | None:
    """A row of a table whose t/s cell is not its last (ramalama bench adds engine and date columns
    after it): the same row, read by the header's names; a line with no rate cell is no row."""
    cells = [c.strip() for c in m.group(0).strip().strip("|").split("|")]
    rate = next((c for c in cells if _MD_RATE.match(c)), None)
    if rate is None:
        return None
    for cell in cells:
        t = _MD_TEST.match(cell.replace(" ", ""))
        if t:
            gen = t.group(1) == "tg"
            plausible.check(to_float(_MD_RATE.match(rate).group(1)), to_int(t.group(2)),
                            plausible.MAX_GEN_TOK_S if gen else plausible.MAX_PROMPT_TOK_S, cell)
            break
    return {"cells": cells}


_MD_NAMES = ("model", "test", "t/s")


def _md_header_any(m: regex.Match) -> dict | None:
    """A header with the model, test and t/s columns where model is not the first (ramalama bench
    puts an id column before it): the same header, its rows read by name."""
    columns = _md_header(m)["columns"]
    return {"columns": columns} if all(n in columns for n in _MD_NAMES) else None


BENCH = Format(
    name="llama-bench",
    description="llama-bench results: md, json, jsonl, csv, sql (2023-2026)",
    # ']': the line that closes -o json's array, which nothing else of llama-bench's output names
    literals=("build_commit", '"avg_ns"', '"avg_ts"', "INSERT INTO", "\u00b1", "| model", "model |", "]"),
    patterns=(
        Pattern("bench.json_end", rx(r"^\]\s*+$")),
        Pattern("bench.row", rx(r"^\{(?>.*\"build_commit\")(?>.*\})\s*+,?\s*+$"), _json_row),
        Pattern("bench.row_list", rx(r"^\[\s*+\{(?>.*\"build_commit\")(?>.*\})\s*+\]\s*+$"), _json_array),
        # the first field line of a multi-line object: llama-bench's own order, or sorted keys
        Pattern("bench.json_start", rx(r'^"(?:build_commit|avg_ns|avg_ts)"\s*:'),
                collector=lambda m, n, t: _JsonObjectCollector(n, t)),
        Pattern("bench.csv_header", rx(r"^build_commit,build_number,"), collector=lambda m, n, t: _CsvCollector(t)),
        # the values run to the one ")" that ";" and the end follow (not `.*\);\s*$`: quadratic in `regex`
        # over many ");" that are not the last)
        Pattern("bench.row", rx(r"^INSERT INTO (?P<table>\w++) \((?P<cols>[^)]*+)\) VALUES "
                                r"\((?P<vals>(?:[^)]++|\)(?!;\s*+$))*+)\);\s*+$"), _sql_row),
        Pattern("bench.md_header", rx(r"^\|\s*model\s*\|(?>.*\|)\s*+$"), _md_header),
        # cells, then the last one: the tail starts after the next-to-last "|", found going forward
        Pattern("bench.md_row", rx(r"^\|(?:[^|]*+\|)*?\s*+[-\d.,]+(?:e[+-]?\d+)? \u00b1 [-\d.,]+(?:e[+-]?\d+)?"
                                   r"\s*+\|\s*+$"), _md_row),
        # the same table copied from a rendered page, without its edge pipes ('model | size | ... | t/s', its
        # separator '-- | --' read as nothing, rows ending in 'x ± y'): the same cells
        Pattern("bench.md_header", rx(r"^model\s*+\|(?:[^|]*+\|){3,}+[^|]*+$"), _md_header),
        Pattern("bench.md_row", rx(r"^[^|\s][^|]*+(?:\|[^|]*+){3,}?\|\s*+[-\d.,]+(?:e[+-]?\d+)? \u00b1 "
                                   r"[-\d.,]+(?:e[+-]?\d+)?\s*+$"), _md_row),
        # tables of other shapes, read by their header names (tried after llama-bench's own)
        Pattern("bench.md_row", rx(r"^\|(?:[^|]*+\|){2,}+\s*+$"), _md_row_any),
        Pattern("bench.md_header", rx(r"^\|(?:[^|]*+\|){3,}+\s*+$"), _md_header_any),
    ),
    samples=(
        Sample("model | size | params | backend | ngl | test | t/s", "bench.md_header",
               {"columns": ["model", "size", "params", "backend", "ngl", "test", "t/s"]}),
        Sample("llama 7B Q4_0 | 3.83 GiB | 7.24 B | Metal | 99 | pp 512 | 141.36 ± 0.67", "bench.md_row", {}),
        Sample("llama 7B Q4_0 | 3.83 GiB | 7.24 B | Metal | 99 | tg 128 | 20.06 ± 0.66", "bench.md_row", {}),
        Sample('{"build_commit": "ee3d1b54c", "build_number": 10167, "cpu_info": "Accelerate, Apple M1 Ultra (Virtual)", '
               '"gpu_info": "Apple Paravirtual device", "backends": "MTL,BLAS", "model_type": "llama 1B Q4_K - Medium", '
               '"n_prompt": 512, "n_gen": 0, "n_depth": 0, "avg_ts": 431.86, "stddev_ts": 2.04}', "bench.row",
               {"test": "pp512", "tok_s": 431.86, "backend": "MTL,BLAS", "gpu_info": "Apple Paravirtual device"}),
        Sample('INSERT INTO llama_bench (build_commit, build_number, backends, model_type, n_prompt, n_gen, n_depth, avg_ts, '
               "stddev_ts) VALUES ('ee3d1b54c', '10167', 'MTL,BLAS', 'llama 1B Q4_K - Medium', '0', '128', '0', '12.63', "
               "'0.11');", "bench.row", {"test": "tg128", "tok_s": 12.63, "table": "llama_bench"}),
        Sample("INSERT INTO test (build_commit, build_number, metal, cpu_info, n_prompt, n_gen, avg_ts, stddev_ts) VALUES "
               "('3ffbbd5c', '4840', '1', 'Apple M2 Max', '512', '0', '1234.5', '3.2');", "bench.row",
               {"test": "pp512", "backend": "Metal", "table": "test"}),
        Sample('"build_commit": "ee3d1b54c",', "bench.json_start", {}),
        Sample("]", "bench.json_end", {}),
        Sample('    "avg_ns": 1187046603,', "bench.json_start", {}),
        Sample('"avg_ts": 431.322577,', "bench.json_start", {}),
        Sample('[{"build_commit":"ee3d1b54c","cpu_info":"Accelerate, Apple M1 Ultra","gpu_info":"Apple M1 Ultra",'
               '"backends":"MTL,BLAS","model_type":"llama 1B Q4_K - Medium","n_prompt":512,"n_gen":0,"n_depth":0,'
               '"avg_ts":4871.99,"stddev_ts":9.1,"samples_ts":[4845.63,4881.12]}]', "bench.row_list", {}),
        Sample("build_commit,build_number,cpu_info,gpu_info,backends,model_filename,model_type", "bench.csv_header", {}),
        Sample("| model                          |       size |     params | backend    | threads |          test |"
               "                  t/s |", "bench.md_header", {"columns": ["model", "size", "params", "backend", "threads",
                                                                       "test", "t/s"]}),
        Sample("| qwen2 14B Q5_K - Medium        |   9.78 GiB |    14.77 B | Metal,BLAS |       8 |         pp512 |"
               "        114.96 ± 0.08 |", "bench.md_row",
               {"cells": ["qwen2 14B Q5_K - Medium", "9.78 GiB", "14.77 B", "Metal,BLAS", "8", "pp512", "114.96 ± 0.08"]}),
        # ramalama bench: an id column before the model, engine and date columns after t/s
        Sample("| id | model                     | params | backend | ngl | threads | test  | t/s           | engine | date "
               "                            |", "bench.md_header",
               {"columns": ["id", "model", "params", "backend", "ngl", "threads", "test", "t/s", "engine", "date"]}),
        Sample("| 1  | /mnt/models/gemma-3-1b.gguf | 1.00 B | CPU     | 99  | 8       | tg128 | 58.46 ± 1.93  | podman "
               "| 2026-05-24T15:14:02.489613+00:00 |", "bench.md_row",
               {"cells": ["1", "/mnt/models/gemma-3-1b.gguf", "1.00 B", "CPU", "99", "8", "tg128", "58.46 ± 1.93",
                          "podman", "2026-05-24T15:14:02.489613+00:00"]}),
    ),
)


def md_row_to_bench(columns: list[str], cells: list[str]) -> dict | None:
    """Map a markdown row with the header seen before it."""
    if len(columns) != len(cells) or len(set(columns)) != len(columns):
        return None  # (two columns of one name, as a hand-joined before/after table: which is which is unsaid)
    rec = dict(zip(columns, cells, strict=False))
    ts = rec.get("t/s", "")
    m = _MD_RATE.match(ts)
    if "test" not in rec and "n_prompt" in rec and "n_gen" in rec:  # the first layout (2023-08): no test column
        rec["test"] = test_name(to_int(rec["n_prompt"]), to_int(rec["n_gen"])) or ""
        rec.setdefault("ngl", rec.get("n_gpu_layers", ""))
    test = _SPACES.sub("", rec.get("test", "")).replace("@", " @ ")
    backend = rec.get("backend") or None
    label = None
    if backend:  # a hand-edited label: 'Vulkan (master)', 'Vulkan (PR)'
        lm = _BACKEND_LABEL.fullmatch(backend)
        if lm:
            backend, label = lm.group("backend"), lm.group("label")
    if not m or not _TEST_PPTG.match(test):
        return None
    p = _TEST_PP.match(test)
    g = _TEST_TG.search(test)
    d = _TEST_DEPTH.search(test)
    n_prompt, n_gen, n_depth = to_int(p.group(1)) if p else 0, to_int(g.group(1)) if g else 0, to_int(d.group(1)) if d else None
    if n_prompt is None or n_gen is None or (d and n_depth is None):
        return None  # a token count too large to store
    try:  # the parser refused (and counted) such a row already, unless its table has no test column
        tok_s = plausible.check(to_float(m.group(1)), n_prompt + n_gen,
                                plausible.MAX_PROMPT_TOK_S if n_prompt else plausible.MAX_GEN_TOK_S, test)
    except Rejected:
        return None
    if tok_s is None:
        return None
    return {
        "format": "md",
        "test": test,
        "n_prompt": n_prompt,
        "n_gen": n_gen,
        "n_depth": n_depth,
        "tok_s": tok_s,
        "stddev": to_float(m.group(2)),
        "model": rec.get("model") or None,
        "backend": backend,
        "label": label,
        "n_gpu_layers": to_int(rec["ngl"]) if rec.get("ngl") else None,
        "devices": rec.get("dev") or None,
        "cpu_info": None,
        "gpu_info": None,
        "config": config_label(rec),
    }
