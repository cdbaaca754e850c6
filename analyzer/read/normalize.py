"""Undo what pasting and logging frameworks do to a llama.cpp line.

Users paste logs with timestamps (llama.cpp's common logger), journald and
NSLog prefixes, Kubernetes' (``kubectl logs --prefix``, CRI container log
files), docker compose's (``svc-1  | ``), CI artifacts that keep stderr as
one escaped JSON string, LM Studio and ollama framing, JSON log callbacks, ``> ``
quoting, stray backticks, ANSI colour codes and CRLF endings. This module
turns such a line back into the text the program printed, and remembers the
process name when a prefix names one.

Every line leaves here cleaned of escape sequences, control and bidi
characters (``analyzer.safe_text``): before the JSON callback is decoded, and
again after, since ``\u001b`` inside a JSON string only becomes an ESC then.
"""

from __future__ import annotations

import json

import regex

from analyzer.safe_text import clean

# Prefixes, tried repeatedly at the start of the line (they can stack).
_PREFIXES: tuple[tuple[str, regex.Pattern[str]], ...] = (
    # llama.cpp common logger: "0.00.012.345 I "
    ("common-log", regex.compile(r"^\d+\.\d{2}\.\d{3}\.\d{3}(?: [IWEDT])? ")),
    # Kubernetes CRI container log (containerd/CRI-O, /var/log/pods/...): RFC 3339 time, stream,
    # F (full line) or P (part of a line over the runtime's limit, read as a line of its own):
    # "2026-01-01T00:00:00.000000000Z stderr F ", CRI-O "2026-01-01T01:00:00.123456789+01:00 stdout F "
    ("cri", regex.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2}) (?:stdout|stderr) [FP](?: |$)")),
    # kubectl logs --prefix: "[pod/llama-0/llama] " (pod, container); with --timestamps the time follows
    ("kubectl", regex.compile(r"^\[pod/[^/\s\]]+/[^/\s\]]+\](?: |$)")),
    # NSLog: "2026-08-09 12:41:47.024 llama-bench[2738:54808] "
    ("nslog", regex.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} (?P<proc>[^\[\s]+)\[\d+:[0-9a-fx]+\] ")),
    # journald short format: "Aug 09 12:41:47 host llama-server[2738]: "
    ("journald", regex.compile(r"^[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \S+ (?P<proc>[^\[\s:]+)(?:\[\d+\])?: ")),
    # GitHub Actions raw logs: "2026-07-14T09:12:03.4411820Z "
    ("gh-actions", regex.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z ")),
    # journald iso / syslog RFC3339: "2026-08-09T12:41:47+0000 host proc[12]: "
    ("syslog-iso", regex.compile(r"^\d{4}-\d{2}-\d{2}T[\d:.]+(?:Z|[+-]\d{2}:?\d{2})? \S+ (?P<proc>[^\[\s:]+)(?:\[\d+\])?: ")),
    # LM Studio: "2025-01-07 11:04:10 [DEBUG] " (often alone on its line)
    ("lmstudio", regex.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \[[A-Z]+\] ?")),
    # bracketed timestamps: "[2026-08-09 12:41:47] ", "[12:41:47.123] "
    ("bracket-time", regex.compile(r"^\[\d{2,4}[-:/][\d\-:/ .T]+Z?\] ")),
    # 2023 ollama: "2023/10/06 16:33:43 llama.go:313: "
    ("go-log", regex.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (?:\S+\.go:\d+: )?")),
    # docker compose logs: "llama-server-1  | " (v2, "<service>-<n>", padded), "web_1  | " (v1); colour
    # codes are gone already (clean). The service name must end in its replica number.
    ("compose", regex.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}[-_][0-9]{1,4} {1,64}\|(?: |$)")),
    # markdown quote
    ("quote", regex.compile(r"^(?:> ?)+")),
    # stray backticks around pasted lines
    ("backticks", regex.compile(r"^`+")),
)
# All of them as one pattern, tried once a round: its branches in the order above, so the first
# prefix that matches wins, as a loop over them would find (the `regex` package allows the three
# branches' `proc` groups one name). One call, not twelve, for each line the prefilter lets through.
_ANY_PREFIX = regex.compile("|".join(f"(?:{pattern.pattern})" for _name, pattern in _PREFIXES))
# One line per prefix as it is written, with the text and process name that must come out of
# it (tests/read/test_normalize_prefixes.py checks each, and that every prefix has one).
PREFIX_SAMPLES: tuple[tuple[str, str, str, str | None], ...] = (
    ("common-log", "0.00.012.345 I ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)",
     "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)", None),
    ("cri", "2026-01-01T00:00:00.000000000Z stderr F | llama 1B Q4_K - Medium | 636.18 MiB | 1.10 B | MTL,BLAS | 8 "
            "| tg128 | 12.63 ± 1.21 |",
     "| llama 1B Q4_K - Medium | 636.18 MiB | 1.10 B | MTL,BLAS | 8 | tg128 | 12.63 ± 1.21 |", None),
    ("cri", "2026-08-09T20:13:01.123456789+02:00 stdout P build: ee3d1b54c (10167)", "build: ee3d1b54c (10167)", None),
    ("kubectl", "[pod/llama-0/llama] | model | size | params | backend | threads | test | t/s |",
     "| model | size | params | backend | threads | test | t/s |", None),
    ("kubectl", '[pod/llama-bench-7d9f8-x2x/bench] 2026-08-09T18:13:03.412345678Z "build_commit": "ee3d1b54c",',
     '"build_commit": "ee3d1b54c",', None),
    ("nslog", "2026-08-09 12:41:47.024 llama-bench[2738:54808] ggml_metal_init: GPU name:   Apple M2 Max",
     "ggml_metal_init: GPU name:   Apple M2 Max", "llama-bench"),
    ("journald", "Aug 09 12:41:47 mac-mini llama-server[2738]: ggml_metal_init: GPU name:   Apple M2 Max",
     "ggml_metal_init: GPU name:   Apple M2 Max", "llama-server"),
    ("gh-actions", "2026-07-14T09:12:03.4411820Z | model | size | params | backend | threads | test | t/s |",
     "| model | size | params | backend | threads | test | t/s |", None),
    ("syslog-iso", "2026-08-09T12:41:47+0000 mac-mini llama-server[12]: build: ee3d1b54c (10167)",
     "build: ee3d1b54c (10167)", "llama-server"),
    ("lmstudio", "2025-01-07 11:04:10 [DEBUG] ggml_metal_init: GPU name:   Apple M2 Max",
     "ggml_metal_init: GPU name:   Apple M2 Max", None),
    ("bracket-time", "[2026-08-09 12:41:47] ggml_metal_init: GPU name:   Apple M2 Max",
     "ggml_metal_init: GPU name:   Apple M2 Max", None),
    ("go-log", "2023/10/06 16:33:43 llama.go:313: ggml_metal_init: GPU name:   Apple M2 Max",
     "ggml_metal_init: GPU name:   Apple M2 Max", None),
    ("compose", "llama-server-1  | ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)",
     "ggml_metal_device_init: GPU name:   MTL0 (Apple Paravirtual device)", None),
    # getumbrel/llama-gpt#129, as pasted
    ("compose", "llama-gpt-llama-gpt-api-cuda-ggml-1  | llama_model_load_internal: n_ctx      = 4096",
     "llama_model_load_internal: n_ctx      = 4096", None),
    ("compose", "ollama_1   | llama_model_loader: - type q4_0:  225 tensors",
     "llama_model_loader: - type q4_0:  225 tensors", None),
    ("quote", "> > | model | size | params | backend | threads | test | t/s |",
     "| model | size | params | backend | threads | test | t/s |", None),
    ("backticks", "`ggml_metal_init: GPU name:   Apple M2 Max`", "ggml_metal_init: GPU name:   Apple M2 Max", None),
)
_JSON_TEXT_KEYS = ("text", "msg", "message", "content")

# Log text stored as one escaped JSON string ("stderr_tail": "...\nggml_metal_device_init: ...\n..."),
# as CI artifacts and wrappers keep a program's stderr: each string literal of the line (a run of
# non-quote, non-backslash characters and escape pairs, unrolled: linear) that holds an escaped newline is
# decoded and read as lines when one of them opens like a log line. At most STRING_BUDGET
# characters of a value are read (cut at its last escaped newline before that).
STRING_BUDGET = 256 << 10
_JSON_STRING = regex.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"')
_LOG_OPENING = regex.compile(r"^(?:[a-z][a-z0-9_]{0,63}: |\| |build: |system_info: |main: |\[ Prompt: )")


def _unwrap_json(line: str) -> str | None:
    """JSON-lines log callbacks: {"level": "info", "text": "ggml_metal_init: ..."}."""
    if not (line.startswith("{") and line.endswith("}")):
        return None
    if "build_commit" in line or "supports_family" in line or '"timings"' in line:
        return None  # data objects, handled by their own formats
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: arrays nested 100,000 deep
        return None
    if not isinstance(obj, dict):
        return None
    info = obj.get("system_info")
    if obj.get("message") == "system info" and isinstance(info, str) and type(obj.get("n_threads")) is int:
        # the 2023-24 server's JSON log of its system_info (ollama issue 719): its CPU features are in the fields,
        # not the message; written as the server's text log prints the same line (parsers/system.py reads it)
        return f'system info | n_threads={obj["n_threads"]} system_info="{info.replace(chr(34), "")}"'
    for key in _JSON_TEXT_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            return value
    return None


def _embedded_lines(line: str) -> list[tuple[int, str]] | None:
    """The log lines held in the line's JSON string values, each with its line number inside the string
    (1-based, counted on across the line's strings so that two strings' lines stay distinct), or None."""
    if not line.startswith(("{", "[", '"')) or "\\n" not in line:
        return None  # a JSON record or member line; a log line quoting an escaped string stays itself
    out: list[tuple[int, str]] = []
    counted = 0
    for m in _JSON_STRING.finditer(line):
        body = m.group(1)
        if "\\n" not in body:
            continue
        if len(body) > STRING_BUDGET:
            cut = body.rfind("\\n", 0, STRING_BUDGET)
            body = body[:cut] if cut > 0 else ""
            if body.endswith("\\") and not body.endswith("\\\\"):
                body = body[:-1]
        try:
            value = json.loads(f'"{body}"')
        except (ValueError, RecursionError):
            continue
        split = value.splitlines()
        parts = [(counted + i, _strip_prefixes(clean(p))[0]) for i, p in enumerate(split, 1)]
        parts = [(i, p) for i, p in parts if p]
        if any(_LOG_OPENING.match(p) for _, p in parts):
            out.extend(parts)
            counted += len(split)
    return out or None


def normalize(raw: str) -> tuple[list[str], str | None]:
    """Return the printed line(s) inside ``raw`` and a process name if seen.

    A JSON callback's text, or a JSON string value holding a program's output,
    can hold several lines; everything else yields one.
    """
    numbered, proc = normalize_numbered(raw)
    return [text for _, text in numbered], proc


def normalize_numbered(raw: str) -> tuple[list[tuple[int | None, str]], str | None]:
    """``normalize``, each line with its number inside the JSON string that held it (1-based; None for a
    line that was not one of several lines of a JSON string), so evidence can say ``20:5``."""
    line = clean(raw.rstrip("\r\n")).strip().lstrip("\ufeff").strip()  # a BOM where files were concatenated
    proc: str | None = None
    inner = _unwrap_json(line)
    if inner is not None:
        split = inner.splitlines()
        several = len(split) > 1  # one line in a JSON-lines callback is that line itself, as before
        parts = [(i if several else None, _strip_prefixes(clean(p))[0]) for i, p in enumerate(split, 1)]
        return [(i, p) for i, p in parts if p], None
    embedded = _embedded_lines(line)
    if embedded is not None:
        return list(embedded), None
    line, proc = _strip_prefixes(line)
    return ([(None, line)] if line else []), proc


def _strip_prefixes(line: str) -> tuple[str, str | None]:
    proc: str | None = None
    line = line.strip()
    changed = True
    rounds = 0
    while changed and line and rounds < 6:
        changed = False
        rounds += 1
        m = _ANY_PREFIX.match(line)
        if m and m.end() > 0:
            if m.group("proc"):
                proc = m.group("proc")
            line = line[m.end():].lstrip()
            changed = True
    if line.endswith("`"):
        line = line.rstrip("`").rstrip()  # (a search for "`+$" is quadratic over a run of backticks)
    return line, proc
