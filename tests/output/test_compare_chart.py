"""`capscan compare` draws (issue 25 item 3): per test a bar per run, scaled to the fastest run of that
test, the speed and the share of the reference beside it; the stock guest, remedied guest and host of the
bundled examples, through the real CLI and a real SQLite file."""

from __future__ import annotations

import pytest

from analyzer.output.chart import Bar, Group, bar_text, chart_groups, chart_html
from tests.conftest import REPO, run_capscan

EXAMPLES = REPO / "examples"


def _db(tmp_path):
    db = tmp_path / "c.db"
    for name in ("m1-ultra-guest-stock.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log"):
        run_capscan("ingest", str(EXAMPLES / name), db=db, check=True)
    return db


def test_compare_of_three_runs_draws_a_bar_per_run_and_test(tmp_path):
    out = run_capscan("compare", "1", "2", "3", db=_db(tmp_path), check=True).stdout.decode()
    lines = out.splitlines()
    assert lines[0].startswith("Throughput per test")
    assert lines[1] == "every test: threads=8"  # what all three tables state, said once
    bars = [line for line in lines[2:11] if "t/s" in line]
    assert [next(r for r in ("stock guest #1", "remedied guest #2", "host #3") if r in line) for line in bars] == [
        "stock guest #1", "remedied guest #2", "host #3"] * 2
    assert bars[0].startswith("pp512") and bars[3].startswith("tg128")
    tg = bars[3:6]
    stock, remedied, host = (line.count("█") for line in tg)
    assert stock < remedied < host          # 12.63 < 206.60 < 286.71, drawn to scale
    assert "12.63 t/s  4% of host" in tg[0] and "206.60 t/s  72% of host" in tg[1] and "reference" in tg[2]


def test_two_runs_draw_a_and_b():
    doc = {"pairs": [{"a": 3, "b": 1, "tests": [{"test": "tg128", "config": "", "a_tok_s": 286.71, "b_tok_s": 12.63,
                                                  "ratio": 12.63 / 286.71, "per_token_s": 0.0}]}]}
    (group,) = chart_groups(doc)
    assert [(b.role, b.run) for b in group.bars] == [("A", 3), ("B", 1)]
    assert abs(group.bars[1].share - 0.044) < 0.001


def test_bars_are_to_scale_and_never_vanish():
    assert bar_text(100, 100, 10) == "█" * 10
    assert bar_text(50, 100, 10) == "█" * 5
    assert bar_text(0.001, 100, 10) == "▏"     # a sliver for any speed above zero
    assert bar_text(0, 100, 10) == "" and bar_text(float("nan"), 100, 10) == ""


def test_the_html_chart_escapes_what_it_shows():
    table = chart_html([Group("<tg128>&\u202e\x1b[2J", [Bar("host", 1, 10.0, None)])])
    assert "&lt;tg128&gt;&amp;" in table and "<tg128>" not in table and "http" not in table
    assert 'title="&lt;tg128&gt;&amp;"' in table and "\u202e" not in table and "\x1b" not in table


# issue 41: the chart of the real llama-bench JSON example (its rows state ten parameters) fits 80, 120 and
# 200 columns, piped and on a terminal: labels name what varies, the figures and run names are whole
JSON_TRIO = ("m1-ultra-guest-stock-json.log", "m1-ultra-guest-shim.log", "m1-ultra-host.log")
FIGURES = {"stock guest #1": "431.86 t/s  9% of host", "remedied guest #2": "4,786.70 t/s  98% of host",
           "host #3": "4,871.99 t/s  reference"}
TG_FIGURES = {"stock guest #1": "12.63 t/s  4% of host", "remedied guest #2": "206.60 t/s  72% of host",
              "host #3": "286.71 t/s  reference"}


def _json_db(tmp_path):
    db = tmp_path / "j.db"
    for name in JSON_TRIO:
        run_capscan("ingest", str(EXAMPLES / name), db=db, check=True)
    return db


def _check_chart(out: str, columns: int) -> None:
    lines = out.splitlines()
    end = lines.index("run 3 (A) vs run 1 (B)")
    chart = lines[:end]
    assert chart[0].startswith("Throughput per test")
    assert all(len(line) <= columns for line in chart), [line for line in chart if len(line) > columns]
    shared = " ".join(line.strip() for line in chart if line.startswith(("every test:", "  ")) and "t/s" not in line)
    assert shared == ("every test: threads=8 n_batch=2048 n_ubatch=512 type_k=f16 type_v=f16 fa=-1 ngl=-1 nkvo=0 "
                      "dev=auto")
    bars = [line for line in chart if "t/s" in line]
    assert len(bars) == 6
    assert bars[0].startswith("pp512 ") and bars[3].startswith("tg128 ")  # no configuration repeated per test
    for line, want in zip(bars, [*FIGURES.items(), *TG_FIGURES.items()], strict=True):
        run, figures = want
        assert run in line and line.endswith(figures), (line, want)
    assert "pp512 [" not in out and "st..." not in out and "…" not in "\n".join(chart)


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_piped_compare_of_the_json_example_fits_columns(tmp_path, columns):
    out = run_capscan("compare", "1", "2", "3", db=_json_db(tmp_path), env={"COLUMNS": str(columns)},
                      check=True).stdout.decode()
    _check_chart(out, columns)
    bar_cells = max(line.count("█") for line in out.splitlines() if "t/s" in line)
    # the bar takes what the label (6), the run name (17), the figures (12, 11) and their gaps (4) leave, up to 36
    assert bar_cells == min(36, columns - 6 - 44)


def test_piped_without_columns_is_120_wide(tmp_path):
    db = _json_db(tmp_path)
    _check_chart(run_capscan("compare", "1", "2", "3", db=db, check=True).stdout.decode(), 120)
    for junk in ("wide", "0", "-80"):  # a COLUMNS that is no width is ignored
        _check_chart(run_capscan("compare", "1", "2", "3", db=db, env={"COLUMNS": junk}, check=True).stdout.decode(),
                     120)


@pytest.mark.parametrize("columns", [80, 120, 200])
def test_compare_on_a_terminal_fits_its_width(tmp_path, columns):
    """A real process whose stdout is a terminal of ``columns`` x 24 (and no COLUMNS): rich asks the terminal."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    db = _json_db(tmp_path)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")}
    env["NO_COLOR"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "--db", str(db), "compare", "1", "2", "3"],
                            stdin=subprocess.DEVNULL, stdout=slave, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    _check_chart(b"".join(chunks).decode().replace("\r\n", "\n"), columns)


def test_labels_name_only_the_parameters_that_vary():
    """compare-llama-bench.py's rule: a parameter is shown where the rows do not all agree on it."""
    from analyzer.output.chart import chart_labels, parse_config

    groups = [Group("pp512", [Bar("A", 1, 10.0, None)], parse_config("threads=4 n_batch=2048 type_k=f16")),
              Group("pp512", [Bar("A", 1, 20.0, None)], parse_config("threads=8 n_batch=2048 type_k=f16")),
              Group("tg128", [Bar("A", 1, 5.0, None)], parse_config("threads=8 n_batch=2048"))]
    labels, shared = chart_labels(groups)
    assert labels == ["pp512 [threads=4 type_k=f16]", "pp512 [threads=8 type_k=f16]", "tg128 [threads=8]"]
    assert shared == "n_batch=2048"
    assert chart_labels([Group("tg128", [Bar("A", 1, 5.0, None)])]) == (["tg128"], "")


def test_a_label_too_long_to_share_a_line_gets_its_own():
    from rich.console import Console

    from analyzer.output.chart import chart_labels, chart_table, parse_config

    dev = "MTL0/MTL1/BLAS/CPU/CPU-REPACK-01"
    groups = [Group("pp512", [Bar("A", 3, 4871.99, None), Bar("B", 1, 431.86, 431.86 / 4871.99)],
                    parse_config(f"threads=8 dev={dev}")),
              Group("pp512", [Bar("A", 3, 4000.0, None), Bar("B", 1, 400.0, 0.1)], parse_config("threads=8 dev=MTL0"))]
    assert chart_labels(groups)[0][0] == f"pp512 [dev={dev}]"
    console = Console(width=80, record=True, color_system=None, file=__import__("io").StringIO())
    console.print(chart_table(groups, columns=80))
    lines = console.export_text().splitlines()
    assert f"pp512 [dev={dev}]" in lines and "pp512 [dev=MTL0]" in lines  # each on a line of its own
    bars = [line for line in lines if "t/s" in line]
    assert bars[0] == "  A #3 " + "█" * 36 + " 4,871.99 t/s  reference"
    assert bars[1].startswith("  B #1 ███▎") and bars[1].endswith("  431.86 t/s  9% of A")
