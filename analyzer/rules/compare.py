"""Numbers between runs: throughput ratios, the fixed per-token cost of a
virtual GPU, the share of a guest's excess time that the capability
downgrade explains, and a prediction of a remedied guest's speed.

All pure functions over stored runs (or plain numbers); nothing here reads
the database.

Per-token time is 1/tok_s. For a stock guest S, a remedied guest R and the
bare-metal host H of one model and test:

    excess    = 1/S - 1/H          (seconds per token the guest loses)
    downgrade = (1/S - 1/R) / excess   (removed by the remedy)
    residual  = (1/R - 1/H) / excess   (the virtual GPU's own cost)

and a remedied guest of another model M on the same host is predicted as
1 / (1/H_M + c), with c = 1/R - 1/H measured on the first model.
"""

from __future__ import annotations

from typing import Any

from analyzer.model import StoredRun, figure_key, figure_parts, like_pairs

CAP_FIELDS = ("simdgroup_reduction", "simdgroup_mm", "bfloat", "tensor")


def best_by_test(run: StoredRun) -> dict[str, float]:
    """figure (test and configuration, model.figure_key) -> best tok/s; compare two runs' figures
    through model.like_pairs."""
    out: dict[str, float] = {}
    for t in run.throughput:
        v = t["tok_s"]
        if v is None or v != v or v == float("inf") or v <= 0:
            continue
        key = figure_key(t["test"], t.get("config"))
        out[key] = max(out.get(key, 0.0), v)
    return out


def rows_by_figure(run: StoredRun) -> dict[str, int]:
    """figure -> how many printed rows its best (``best_by_test``) is the best of."""
    out: dict[str, int] = {}
    for t in run.throughput:
        key = figure_key(t["test"], t.get("config"))
        out[key] = out.get(key, 0) + (t.get("n") or 1)
    return out


def per_token_cost(slow_tok_s: float, fast_tok_s: float) -> float:
    """Seconds per token that the slower run pays over the faster one."""
    return 1.0 / slow_tok_s - 1.0 / fast_tok_s


def predict_tok_s(bare_metal_tok_s: float, cost_s: float) -> float:
    """A guest's speed from the host's speed and a fixed per-token cost."""
    return 1.0 / (1.0 / bare_metal_tok_s + cost_s)


def decompose_numbers(stock: float, remedied: float, host: float) -> dict[str, float]:
    excess = 1.0 / stock - 1.0 / host
    if excess <= 0:
        return {"excess_s": excess, "downgrade_share": 0.0, "residual_share": 0.0}
    return {
        "excess_s": excess,
        "downgrade_share": (1.0 / stock - 1.0 / remedied) / excess,
        "residual_share": (1.0 / remedied - 1.0 / host) / excess,
    }


def _caps(run: StoredRun) -> dict[str, Any]:
    diag = run.diagnosis
    caps = (diag and diag.capabilities) or run.facts.capabilities.as_dict()
    f = run.facts
    return {
        "device": f.device.name,
        "environment": diag and diag.environment,
        "host_chip": diag and diag.host_chip,
        "apple_family": f.device.apple_family,
        "families": ", ".join(str(c) for c in f.device.families) or None,
        "shim": f.shim.name if f.shim else None,
        **{k: caps.get(k) for k in CAP_FIELDS},
        "verdict": diag and diag.verdict,
    }


def compare_runs(a: StoredRun, b: StoredRun) -> dict[str, Any]:
    """Side by side: capability diff and, per shared test, b/a and 1/b - 1/a."""
    ca, cb = _caps(a), _caps(b)
    caps = [{"field": k, "a": ca[k], "b": cb[k], "differs": ca[k] != cb[k]} for k in ca]
    ta, tb = best_by_test(a), best_by_test(b)
    ra, rb = rows_by_figure(a), rows_by_figure(b)
    tests = []
    for test, other in like_pairs(ta, tb):
        (name, config), b_config = figure_parts(test), figure_parts(other)[1]
        # each side's figure is the best printed row of its configuration: *_rows says of how many (issue 38)
        tests.append({"test": name, "config": config, "b_config": b_config, "a_tok_s": ta[test], "b_tok_s": tb[other],
                      "a_rows": ra.get(test, 1), "b_rows": rb.get(other, 1), "ratio": tb[other] / ta[test],
                      "per_token_s": per_token_cost(tb[other], ta[test])})
    return {"a": a.id, "b": b.id, "model_a": a.facts.model, "model_b": b.facts.model, "capabilities": caps,
            "tests": tests}


def decompose(stock: StoredRun, remedied: StoredRun, host: StoredRun) -> dict[str, Any]:
    """For each test all three runs share: how much of the guest's excess
    per-token time the downgrade explains, and how much is residual."""
    s, r, h = best_by_test(stock), best_by_test(remedied), best_by_test(host)
    tests = []
    with_r, with_h = dict(like_pairs(s, r)), dict(like_pairs(s, h))
    for test in [t for t in s if t in with_r and t in with_h]:
        rv, hv = r[with_r[test]], h[with_h[test]]
        d = decompose_numbers(s[test], rv, hv)
        name, config = figure_parts(test)
        tests.append({"test": name, "config": config, "stock_tok_s": s[test], "remedied_tok_s": rv, "host_tok_s": hv,
                      "remedied_of_host": rv / hv, **d})
    return {"stock": stock.id, "remedied": remedied.id, "host": host.id, "tests": tests}


def assign_roles(runs: list[StoredRun]) -> tuple[StoredRun, StoredRun, StoredRun] | None:
    """(stock, remedied, host) among three runs of one model, from their diagnoses."""
    if len(runs) != 3:
        return None
    host = [r for r in runs if r.diagnosis and r.diagnosis.environment == "bare-metal"]
    guests = [r for r in runs if r.diagnosis and r.diagnosis.environment == "vm"]
    if len(host) != 1 or len(guests) != 2:
        return None
    g1, g2 = guests
    stock, remedied = (g1, g2) if _speed(g1) < _speed(g2) else (g2, g1)
    return stock, remedied, host[0]


def _speed(run: StoredRun) -> float:
    best = best_by_test(run)
    gen = [v for t, v in best.items() if t.startswith("tg") or t == "generation"]
    return max(gen or list(best.values()) or [0.0])
