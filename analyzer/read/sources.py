"""Where LLM runtimes already write their logs on this machine.

``capscan sources`` lists every location known here and which exist;
``capscan ingest --discover`` and ``capscan watch`` (with no paths) read the
ones that do. Locations come from three kinds of knowledge:

- fixed default paths and folders (ollama's ``~/.ollama/logs/server.log`` and
  its rotated ``server-1.log`` ..., LM Studio's server-log folders, Jan's data
  folder, Homebrew services' ``var/log``);
- launchd property lists (``~/Library/LaunchAgents``, ``/Library/LaunchAgents``,
  ``/Library/LaunchDaemons``) whose program is an LLM runtime: their
  ``StandardErrorPath`` / ``StandardOutPath`` (how a ``llama-server`` started at
  login keeps its stderr);
- systemd units (user and system) whose ``ExecStart`` is an LLM runtime and
  whose ``StandardError=``/``StandardOutput=`` is ``file:`` or ``append:``.

Nothing here reads a log; everything is a ``stat``. The home folder is
``Path.home()`` (``$HOME``), so tests point it at a fake tree; system folders
can be replaced with ``roots`` for the same reason.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import plistlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

# Program names (basename of the launched binary, or a word in its arguments)
# that make a launchd job or systemd unit an LLM runtime worth reading.
RUNTIME_WORDS = ("llama-server", "llama-cli", "llama-bench", "llama-completion", "ollama", "llamafile",
                 "lms", "lm-studio", "koboldcpp", "localai", "local-ai", "mlx_lm")
_RUNTIME_RE = re.compile(r"(?:^|[/\s\"'=])(" + "|".join(re.escape(w) for w in RUNTIME_WORDS) + r")(?:[\s\"'.]|$)",
                         re.IGNORECASE)
_MAX_MATCHES_PER_PATTERN = 200  # a folder of daily logs: the newest ones are enough


@dataclass(frozen=True)
class Location:
    """A place a runtime writes to: a file path or a glob pattern."""

    runtime: str
    pattern: str  # absolute path; may hold glob wildcards
    via: str  # why capscan looks here


@dataclass
class Source:
    runtime: str
    path: str
    via: str
    exists: bool
    size: int | None = None
    modified: float | None = None  # epoch seconds

    def age_seconds(self, now: float | None = None) -> float | None:
        if self.modified is None:
            return None
        return max(0.0, (now if now is not None else time.time()) - self.modified)

    def to_json(self, now: float | None = None) -> dict:
        return {
            "runtime": self.runtime,
            "path": self.path,
            "via": self.via,
            "exists": self.exists,
            "size_bytes": self.size,
            "modified": (dt.datetime.fromtimestamp(self.modified, dt.timezone.utc).isoformat(timespec="seconds")
                         if self.modified is not None else None),
            "age_seconds": (round(a, 1) if (a := self.age_seconds(now)) is not None else None),
        }


@dataclass(frozen=True)
class Roots:
    """Folders outside the home that are searched; replaced in tests."""

    homebrew: tuple[str, ...] = ("/opt/homebrew", "/usr/local", "/home/linuxbrew/.linuxbrew")
    launchd: tuple[str, ...] = ("/Library/LaunchAgents", "/Library/LaunchDaemons")
    systemd: tuple[str, ...] = ("/etc/systemd/system",)


def fixed_locations(home: Path, roots: Roots) -> list[Location]:
    h = str(home)
    out = [
        Location("ollama", f"{h}/.ollama/logs/server.log", "ollama app default (macOS)"),
        Location("ollama", f"{h}/.ollama/logs/server-[0-9]*.log", "ollama rotated logs"),
        Location("ollama", f"{h}/AppData/Local/Ollama/server.log", "ollama default (Windows)"),
        Location("lm-studio", f"{h}/.lmstudio/server-logs/**/*.log", "LM Studio server logs"),
        Location("lm-studio", f"{h}/.cache/lm-studio/server-logs/**/*.log", "LM Studio server logs (older versions)"),
        Location("lm-studio", f"{h}/Library/Application Support/LM Studio/logs/*.log", "LM Studio app logs (macOS)"),
        Location("lm-studio", f"{h}/.config/LM Studio/logs/*.log", "LM Studio app logs (Linux)"),
        Location("jan", f"{h}/Library/Application Support/Jan/data/logs/*.log", "Jan data folder (macOS)"),
        Location("jan", f"{h}/.config/Jan/data/logs/*.log", "Jan data folder (Linux)"),
        Location("jan", f"{h}/jan/logs/*.log", "Jan data folder (older versions)"),
        Location("gpt4all", f"{h}/Library/Application Support/nomic.ai/GPT4All/log*.txt", "GPT4All (macOS)"),
    ]
    for prefix in roots.homebrew:
        out.append(Location("ollama", f"{prefix}/var/log/ollama.log", "brew services (ollama formula)"))
        out.append(Location("llama.cpp", f"{prefix}/var/log/llama*.log", "brew services (llama.cpp)"))
    return out


def _is_runtime(words: Iterable[str]) -> str | None:
    for word in words:
        m = _RUNTIME_RE.search(word)
        if m:
            name = m.group(1).lower()
            return {"lms": "lm-studio", "local-ai": "localai"}.get(name, name)
    return None


def launchd_locations(home: Path, roots: Roots) -> list[Location]:
    """StandardErrorPath/StandardOutPath of launchd jobs that run an LLM runtime."""
    out: list[Location] = []
    folders = [home / "Library" / "LaunchAgents", *map(Path, roots.launchd)]
    for folder in folders:
        try:
            plists = sorted(folder.glob("*.plist"))
        except OSError:
            continue
        for plist in plists:
            try:
                with open(plist, "rb") as fh:
                    doc = plistlib.load(fh)
            except (OSError, plistlib.InvalidFileException, ValueError, OverflowError):
                continue  # unreadable or not a plist: nothing to learn
            if not isinstance(doc, dict):
                continue
            args = doc.get("ProgramArguments") or []
            words = [str(a) for a in args if isinstance(a, (str, bytes))] if isinstance(args, list) else []
            words += [str(doc.get("Program") or ""), str(doc.get("Label") or "")]
            runtime = _is_runtime(words)
            if runtime is None:
                continue
            for key in ("StandardErrorPath", "StandardOutPath"):
                value = doc.get(key)
                if isinstance(value, str) and value.startswith("/"):
                    out.append(Location(runtime, value, f"launchd {plist.name} {key}"))
    return out


_SYSTEMD_OUT = re.compile(r"^\s*Standard(?:Output|Error)\s*=\s*(?:file|append|truncate):(/\S+)\s*$", re.MULTILINE)
_SYSTEMD_EXEC = re.compile(r"^\s*ExecStart\s*=\s*(.+)$", re.MULTILINE)


def systemd_locations(home: Path, roots: Roots) -> list[Location]:
    """Log files of systemd units that run an LLM runtime (journald-only units have none)."""
    out: list[Location] = []
    for folder in [home / ".config" / "systemd" / "user", *map(Path, roots.systemd)]:
        try:
            units = sorted(folder.glob("*.service"))
        except OSError:
            continue
        for unit in units:
            try:
                text = unit.read_text(errors="replace")[:65536]
            except OSError:
                continue
            runtime = _is_runtime(_SYSTEMD_EXEC.findall(text))
            if runtime is None:
                continue
            for path in dict.fromkeys(_SYSTEMD_OUT.findall(text)):
                out.append(Location(runtime, path, f"systemd {unit.name}"))
    return out


def known_locations(home: Path | None = None, roots: Roots | None = None) -> list[Location]:
    home = home if home is not None else Path.home()
    roots = roots or Roots()
    seen: set[str] = set()
    out = []
    for loc in [*fixed_locations(home, roots), *launchd_locations(home, roots), *systemd_locations(home, roots)]:
        if loc.pattern not in seen:
            seen.add(loc.pattern)
            out.append(loc)
    return out


def _stat(path: str) -> tuple[int, float] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not os.path.isfile(path):
        return None
    return st.st_size, st.st_mtime


def _expand(loc: Location) -> Iterator[Source]:
    if not glob.has_magic(loc.pattern):
        st = _stat(loc.pattern)
        yield Source(loc.runtime, loc.pattern, loc.via, st is not None, *(st or (None, None)))
        return
    found = []
    for path in glob.iglob(loc.pattern, recursive=True):
        st = _stat(path)
        if st is not None:
            found.append(Source(loc.runtime, path, loc.via, True, *st))
    if not found:
        yield Source(loc.runtime, loc.pattern, loc.via, False)
        return
    found.sort(key=lambda s: (-(s.modified or 0), s.path))
    yield from found[:_MAX_MATCHES_PER_PATTERN]


def discover(home: Path | None = None, roots: Roots | None = None) -> list[Source]:
    """Every known location, expanded: one entry per existing file (newest
    first within a pattern), and one ``exists=False`` entry per location where
    nothing is found."""
    out: list[Source] = []
    seen: set[str] = set()
    for loc in known_locations(home, roots):
        for src in _expand(loc):
            key = os.path.realpath(src.path) if src.exists else src.path
            if key in seen:
                continue
            seen.add(key)
            out.append(src)
    return out


def existing(sources: Iterable[Source]) -> list[str]:
    """Paths of the sources that exist, oldest first (so a rotated
    ``server-1.log`` is read before the live ``server.log``)."""
    found = [s for s in sources if s.exists]
    found.sort(key=lambda s: (s.modified or 0, s.path))
    return [s.path for s in found]


def human_size(n: int | None) -> str:
    if n is None:
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def human_age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for limit, div, unit in ((120, 1, "s"), (7200, 60, "m"), (172800, 3600, "h")):
        if seconds < limit:
            return f"{seconds / div:.0f}{unit}"
    return f"{seconds / 86400:.0f}d"
