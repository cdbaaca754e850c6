"""Undo what pasting and logging frameworks do to a llama.cpp line.

Users paste logs with timestamps (llama.cpp's common logger), journald and
NSLog prefixes, LM Studio and ollama framing, JSON log callbacks, ``> ``
quoting, stray backticks, ANSI colour codes and CRLF endings. This module
turns such a line back into the text the program printed, and remembers the
process name when a prefix names one.

Every line leaves here cleaned of escape sequences, control and bidi
characters (``analyzer.safe_text``): before the JSON callback is decoded, and
again after, since ``\u001b`` inside a JSON string only becomes an ESC then.
"""

from __future__ import annotations

import json
import re

from analyzer.safe_text import clean

# Prefixes, tried repeatedly at the start of the line (they can stack).
_PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # llama.cpp common logger: "0.00.012.345 I "
    ("common-log", re.compile(r"^\d+\.\d{2}\.\d{3}\.\d{3}(?: [IWEDT])? ")),
    # NSLog: "2026-08-09 12:41:47.024 llama-bench[2738:54808] "
    ("nslog", re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3} (?P<proc>[^\[\s]+)\[\d+:[0-9a-fx]+\] ")),
    # journald short format: "Aug 09 12:41:47 host llama-server[2738]: "
    ("journald", re.compile(r"^[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \S+ (?P<proc>[^\[\s:]+)(?:\[\d+\])?: ")),
    # GitHub Actions raw logs: "2026-07-14T09:12:03.4411820Z "
    ("gh-actions", re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z ")),
    # journald iso / syslog RFC3339: "2026-08-09T12:41:47+0000 host proc[12]: "
    ("syslog-iso", re.compile(r"^\d{4}-\d{2}-\d{2}T[\d:.]+(?:Z|[+-]\d{2}:?\d{2})? \S+ (?P<proc>[^\[\s:]+)(?:\[\d+\])?: ")),
    # LM Studio: "2025-01-07 11:04:10 [DEBUG] " (often alone on its line)
    ("lmstudio", re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} \[[A-Z]+\] ?")),
    # bracketed timestamps: "[2026-08-09 12:41:47] ", "[12:41:47.123] "
    ("bracket-time", re.compile(r"^\[\d{2,4}[-:/][\d\-:/ .T]+Z?\] ")),
    # 2023 ollama: "2023/10/06 16:33:43 llama.go:313: "
    ("go-log", re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2} (?:\S+\.go:\d+: )?")),
    # markdown quote
    ("quote", re.compile(r"^(?:> ?)+")),
    # stray backticks around pasted lines
    ("backticks", re.compile(r"^`+")),
)
_TRAILING_BACKTICKS = re.compile(r"`+$")
_JSON_TEXT_KEYS = ("text", "msg", "message", "content")


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
    for key in _JSON_TEXT_KEYS:
        value = obj.get(key)
        if isinstance(value, str):
            return value
    return None


def normalize(raw: str) -> tuple[list[str], str | None]:
    """Return the printed line(s) inside ``raw`` and a process name if seen.

    A JSON callback's text can hold several lines; everything else yields one.
    """
    line = clean(raw.rstrip("\r\n")).strip()
    proc: str | None = None
    inner = _unwrap_json(line)
    if inner is not None:
        return [part for part in (_strip_prefixes(clean(p))[0] for p in inner.splitlines()) if part], None
    line, proc = _strip_prefixes(line)
    return ([line] if line else []), proc


def _strip_prefixes(line: str) -> tuple[str, str | None]:
    proc: str | None = None
    line = line.strip()
    changed = True
    rounds = 0
    while changed and line and rounds < 6:
        changed = False
        rounds += 1
        for _name, pattern in _PREFIXES:
            m = pattern.match(line)
            if m and m.end() > 0:
                if "proc" in pattern.groupindex and m.group("proc"):
                    proc = m.group("proc")
                line = line[m.end():].lstrip()
                changed = True
                break
    if line.endswith("`"):
        line = _TRAILING_BACKTICKS.sub("", line).rstrip()
    return line, proc
