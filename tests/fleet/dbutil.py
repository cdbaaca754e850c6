"""A real database with a stock guest run, its bare-metal host, a remedied
guest linked to the stock run, and a verified remedy action."""

from __future__ import annotations

from pathlib import Path

from analyzer.rules.diagnose import diagnose_runs
from analyzer.ingest import ingest
from analyzer.read.reader import open_input
from analyzer.store import remedy_records as records
from analyzer.store.db import open_db

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# guests whose logs name their host chip (llama-bench JSON's cpu_info 'Apple M1 Ultra (Virtual)'): only such a
# guest is paired with the bare-metal run of its host (issue 10: baselines on the same hardware only)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GUEST_NAMING_HOST = FIXTURES / "baselines" / "guest-stock-block-and-json.log"
SHIM_NAMING_HOST = FIXTURES / "shims" / "lume-shim-apple9-on-m1.log"


def ingest_file(db, path: Path) -> list[int]:
    src = open_input(str(path))
    try:
        return ingest(db, src, force=True).run_ids
    finally:
        src.close()


def fleet_db(path: Path) -> dict[str, int]:
    db = open_db(path)
    host = ingest_file(db, EXAMPLES / "m1-ultra-host.log")[0]
    stock = ingest_file(db, GUEST_NAMING_HOST)[0]
    shim = ingest_file(db, SHIM_NAMING_HOST)[0]
    diagnose_runs(db, [host, stock, shim], refresh_peers=True)
    action = records.record(db, "remedy-run", {"stock_run_id": stock}, "verified", None)
    records.link_runs(db, [shim], stock, "remedy-run", action)
    db.conn.close()
    return {"host": host, "stock": stock, "shim": shim}


def samples(text: str) -> dict[str, list[tuple[dict, float]]]:
    """A Prometheus text exposition, parsed back by prometheus_client's own parser: name -> [(labels, value)]."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out
