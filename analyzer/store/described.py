"""The schema described for people reading the database directly (``capscan db serve``,
Datasette): what each table and its less obvious columns hold, and canned queries."""

from __future__ import annotations

from typing import Any

CANNED_QUERIES: dict[str, dict[str, str]] = {
    "downgraded_by_host_chip": {
        "title": "Downgraded guests by host chip",
        "description": "Runs whose verdict is capability-downgrade, per host chip: how many, how many fixable, "
                       "how many distinct devices and sources, and the latest.",
        "sql": """SELECT coalesce(d.host_chip, 'unknown') AS host_chip,
       count(*) AS runs,
       sum(d.fixable) AS fixable_runs,
       count(DISTINCT r.source_id) AS sources,
       count(DISTINCT r.device_name) AS devices,
       max(r.created_at) AS latest
FROM diagnoses d JOIN runs r ON r.id = d.run_id
WHERE d.verdict = 'capability-downgrade'
GROUP BY coalesce(d.host_chip, 'unknown')
ORDER BY runs DESC, host_chip""",
    },
    "remedy_speedups": {
        "title": "Remedy speedups",
        "description": "Each run made by capscan remedy against the stock run it fixed: speed per test (the best "
                       "of the run's rows of that test, a printed figure, never their mean; *_rows: how many) and "
                       "the speedup (remedied / stock).",
        "sql": """WITH linked AS (SELECT run_id FROM run_links UNION SELECT stock_run_id FROM run_links),
t AS (SELECT run_id, test, max(tok_s) AS tok_s, count(*) AS n FROM throughput
      WHERE run_id IN (SELECT run_id FROM linked) AND tok_s > 0 GROUP BY run_id, test)
SELECT l.stock_run_id AS stock_run, l.run_id AS remedied_run, s.test,
       round(s.tok_s, 2) AS stock_tok_s, s.n AS stock_rows, round(r.tok_s, 2) AS remedied_tok_s,
       r.n AS remedied_rows, round(r.tok_s / s.tok_s, 2) AS speedup
FROM run_links l
JOIN t s ON s.run_id = l.stock_run_id
JOIN t r ON r.run_id = l.run_id AND r.test = s.test
ORDER BY speedup DESC, stock_run, s.test""",
    },
    "runs_without_baseline": {
        "title": "VM runs with no bare-metal baseline",
        "description": "Runs in a VM that capscan could not pair with a bare-metal run of the same model: "
                       "ingest a host log of that model to get ratios and per-token cost.",
        "sql": """SELECT r.id AS run, r.model, r.device_name, d.verdict, d.host_chip, r.created_at
FROM runs r JOIN diagnoses d ON d.run_id = r.id
WHERE d.environment = 'vm' AND json_extract(d.report, '$.paired') IS NULL
ORDER BY r.id DESC""",
    },
    "verdicts": {
        "title": "Runs per verdict",
        "description": "How many stored runs have each verdict (a chart plugin draws it as bars).",
        "sql": """SELECT verdict, count(*) AS runs, sum(fixable) AS fixable_runs
FROM diagnoses GROUP BY verdict ORDER BY runs DESC""",
    },
}

TABLES: dict[str, dict[str, Any]] = {
    "sources": {"description": "One row per input ingested (or piece of a watched file): path, size, sha256, "
                               "line counts; raw_gzip only with --keep-raw.",
                "columns": {"sha256": "sha256 of the (decompressed) content; the same content is stored once",
                            "raw_gzip": "the raw log, gzip, only when ingested with --keep-raw"}},
    "runs": {"description": "What one process showed about one device: capability block, benchmark rows, timings.",
             "columns": {"first_line": "first line of the run in its source", "last_line": "last line",
                         "apple_family": "highest MTLGPUFamilyApple code seen (1001-1999)",
                         "facts": "everything parsed, as JSON"}},
    "diagnoses": {"description": "The verdict of each run, with the full report as JSON.",
                  "columns": {"verdict": "capability-downgrade, hardware-limit, no-gpu-offload, "
                                         "virtualization-overhead, healthy or unknown",
                              "fixable": "1 when capscan remedy can fix it (positive evidence of an Apple-silicon "
                                         "host, no contrary sign)",
                              "environment": "vm, bare-metal or unknown",
                              "report": "the diagnosis as JSON (findings, next steps, pairing)"}},
    "throughput": {"description": "Every measured speed as printed, one row per printed figure: llama-bench rows "
                                  "and timing lines.",
                   "columns": {"tok_s": "tokens per second", "kind": "bench or timing"}},
    "evidence": {"description": "The recognised log lines each finding points at, numbered as in the source."},
    "remedy_actions": {"description": "What capscan remedy did, its result, and how to undo it."},
    "run_links": {"description": "Runs made by capscan remedy, linked to the stock run they fixed."},
    "watch_cursors": {"description": "Where capscan watch stopped in each followed file (restart-safe)."},
}
