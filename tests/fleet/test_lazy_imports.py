"""Piping a log through capscan never pays for the exporters."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_pipe_mode_imports_no_exporter(tmp_path):
    code = ("import sys, runpy\n"
            "sys.argv = ['capscan', '--db', sys.argv[1]]\n"
            "try:\n"
            "    runpy.run_module('analyzer', run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "heavy = ('prometheus_client', 'opentelemetry', 'datasette', 'uvicorn', 'analyzer.fleet.metrics', 'analyzer.fleet.prometheus', 'analyzer.fleet.otlp', "
            "'analyzer.fleet.watch', 'analyzer.read.sources')\n"
            "sys.stderr.write('LOADED=%s' % sorted(n for n in sys.modules if n.startswith(heavy)))\n")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.db")],
                          input=(EXAMPLES / "m1-ultra-guest-stock.log").read_bytes(), capture_output=True)
    assert b"CAPABILITY-DOWNGRADE" in proc.stdout
    assert proc.stderr.endswith(b"LOADED=[]"), proc.stderr[-500:]
