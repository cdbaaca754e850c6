"""The core never imports textual: piping a log through capscan must not pay for the TUI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FIX = Path(__file__).resolve().parent / "fixtures"


def test_core_modules_do_not_import_textual():
    code = ("import sys, pkgutil, importlib, analyzer\n"
            "for m in pkgutil.walk_packages(analyzer.__path__, 'analyzer.'):\n"
            "    if not m.name.startswith('analyzer.tui'):\n"
            "        importlib.import_module(m.name)\n"
            "bad = sorted(n for n in sys.modules if n == 'textual' or n.startswith('textual.'))\n"
            "print(bad); sys.exit(1 if bad else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_pipe_mode_does_not_load_textual(tmp_path):
    code = ("import sys, runpy\n"
            "sys.argv = ['capscan', '--db', sys.argv[1]]\n"
            "try:\n"
            "    runpy.run_module('analyzer', run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "sys.stderr.write('TEXTUAL=%d' % any(n.startswith('textual') for n in sys.modules))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "h.db")],
                          input=(FIX / "metal/m4-2026-08-guest-stock.log").read_bytes(), capture_output=True)
    assert b"CAPABILITY-DOWNGRADE" in proc.stdout
    assert proc.stderr.endswith(b"TEXTUAL=0"), proc.stderr
