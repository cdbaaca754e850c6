"""capscan sources: known runtime log locations, found in a fake home tree."""

from __future__ import annotations

import os
import plistlib
import time
from pathlib import Path

from analyzer.read.sources import Roots, discover, existing, human_age, human_size

GUEST_LOG = Path(__file__).resolve().parent.parent.parent / "examples" / "m1-ultra-guest-stock.log"


def _write(path: Path, text: str = "x\n", age: float = 0.0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if age:
        t = time.time() - age
        os.utime(path, (t, t))
    return path


def _fake_machine(tmp_path: Path) -> tuple[Path, Roots]:
    home = tmp_path / "home"
    system = tmp_path / "system"
    _write(home / ".ollama/logs/server.log", GUEST_LOG.read_text())
    _write(home / ".ollama/logs/server-1.log", "old\n", age=7200)
    _write(home / ".lmstudio/server-logs/2026-11/2026-11-30.1.log", "lm\n", age=60)
    _write(home / "Library/Application Support/Jan/data/logs/app.log", "jan\n")
    _write(system / "opt/homebrew/var/log/ollama.log", "brew\n")
    _write(system / "opt/homebrew/var/log/postgres.log", "not ours\n")
    # a llama-server started at login by launchd, stderr in a file
    agents = home / "Library/LaunchAgents"
    agents.mkdir(parents=True)
    err = _write(tmp_path / "logs/llama-server.err", "ggml_metal_init: allocating\n")
    with open(agents / "local.llama-server.plist", "wb") as fh:
        plistlib.dump({"Label": "local.llama-server",
                       "ProgramArguments": ["/opt/homebrew/bin/llama-server", "-m", "/models/x.gguf"],
                       "StandardErrorPath": str(err), "StandardOutPath": str(tmp_path / "logs/missing.out")}, fh)
    with open(agents / "com.example.backup.plist", "wb") as fh:
        plistlib.dump({"Label": "com.example.backup", "ProgramArguments": ["/usr/bin/rsync"],
                       "StandardErrorPath": str(_write(tmp_path / "logs/backup.err"))}, fh)
    (agents / "broken.plist").write_bytes(b"\x00not a plist")
    # a systemd user unit with a file log
    units = home / ".config/systemd/user"
    units.mkdir(parents=True)
    unit_log = _write(tmp_path / "logs/unit.log", "unit\n")
    (units / "llama.service").write_text(
        f"[Service]\nExecStart=/usr/local/bin/llama-server --port 8080\nStandardError=append:{unit_log}\n")
    roots = Roots(homebrew=(str(system / "opt/homebrew"),), launchd=(str(system / "Library/LaunchDaemons"),),
                  systemd=(str(system / "etc/systemd/system"),))
    return home, roots


def test_discover_finds_each_kind_of_location(tmp_path):
    home, roots = _fake_machine(tmp_path)
    found = {s.path: s for s in discover(home, roots)}
    present = {p for p, s in found.items() if s.exists}
    assert str(home / ".ollama/logs/server.log") in present
    assert str(home / ".ollama/logs/server-1.log") in present
    assert str(home / ".lmstudio/server-logs/2026-11/2026-11-30.1.log") in present
    assert str(home / "Library/Application Support/Jan/data/logs/app.log") in present
    assert str(tmp_path / "system/opt/homebrew/var/log/ollama.log") in present
    assert str(tmp_path / "logs/llama-server.err") in present
    assert str(tmp_path / "logs/unit.log") in present
    # not an LLM runtime, or not a runtime's log
    assert str(tmp_path / "logs/backup.err") not in found
    assert str(tmp_path / "system/opt/homebrew/var/log/postgres.log") not in found
    # a known location with nothing there is listed, as missing
    missing = found[str(tmp_path / "logs/missing.out")]
    assert not missing.exists and missing.size is None and missing.via.startswith("launchd local.llama-server.plist")
    assert found[str(tmp_path / "logs/llama-server.err")].runtime == "llama-server"
    assert found[str(tmp_path / "logs/unit.log")].runtime == "llama-server"
    server = found[str(home / ".ollama/logs/server.log")]
    assert server.runtime == "ollama" and server.size == GUEST_LOG.stat().st_size
    assert found[str(home / ".ollama/logs/server-1.log")].age_seconds() > 7000
    # oldest first: a rotated log is read before the live one
    paths = existing(discover(home, roots))
    assert paths.index(str(home / ".ollama/logs/server-1.log")) < paths.index(str(home / ".ollama/logs/server.log"))


def test_empty_home_lists_locations_none_existing(tmp_path):
    home = tmp_path / "empty"
    home.mkdir()
    srcs = discover(home, Roots(homebrew=(), launchd=(), systemd=()))
    assert srcs and not any(s.exists for s in srcs)
    assert {"ollama", "lm-studio", "jan"} <= {s.runtime for s in srcs}


def test_human_units():
    assert human_size(512) == "512 B" and human_size(3 << 20) == "3.0 MiB" and human_size(None) == "-"
    assert human_age(30) == "30s" and human_age(600) == "10m" and human_age(3 * 86400) == "3d"
