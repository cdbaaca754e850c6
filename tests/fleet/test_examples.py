"""examples/fleet: every config parses, and the Grafana dashboard only queries
metric names (and labels) that capscan exports."""

from __future__ import annotations

import json
import plistlib
import re
from pathlib import Path

import yaml

from analyzer.fleet.events import EVENT_FIELDS
from analyzer.fleet.metrics import INFO_LABELS
from analyzer.fleet.otlp import METRICS
from analyzer.fleet.prometheus import METRIC_NAMES

FLEET = Path(__file__).resolve().parents[2] / "examples" / "fleet"
# labels a PromQL expression may name: capscan's, the --label guest of the examples, PromQL's own
KNOWN_LABELS = set(INFO_LABELS) | {"test", "model", "guest", "__name__", "instance", "job"}


def _exprs(dashboard: dict) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]


def test_dashboard_uses_only_exported_metric_names():
    dashboard = json.loads((FLEET / "grafana-dashboard.json").read_text())
    exprs = _exprs(dashboard)
    assert exprs
    used = set()
    for expr in exprs:
        names = set(re.findall(r"\b(capscan_[a-z0-9_]+)", expr))
        assert names, f"{expr!r} queries no capscan metric"
        assert names <= set(METRIC_NAMES), f"{expr!r} uses {names - set(METRIC_NAMES)}"
        used |= names
        for labels in re.findall(r"\{([^}]*)\}", expr):
            for name in re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)", labels):
                assert name in KNOWN_LABELS, f"{expr!r} filters on unknown label {name}"
        for group in re.findall(r"\bby\s*\(([^)]*)\)", expr):
            assert {g.strip() for g in group.split(",")} <= KNOWN_LABELS, expr
    assert used == set(METRIC_NAMES)  # every exported metric has a panel
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            for name in re.findall(r"\{\{\s*([a-zA-Z_]+)\s*\}\}", target.get("legendFormat", "")):
                assert name in KNOWN_LABELS


def test_otlp_names_map_to_the_textfile_names():
    # what a collector's Prometheus exporter derives: dots -> underscores, unit suffix appended
    suffix = {"": "", "s": "_seconds", "{token}/s": "_per_second"}
    for name, unit, _, prom in METRICS:
        assert name.replace(".", "_") + suffix[unit] == prom
    assert {prom for *_, prom in METRICS} == set(METRIC_NAMES)


def test_collector_and_vector_configs_parse():
    collector = yaml.safe_load((FLEET / "otel-collector.yaml").read_text())
    assert "otlp" in collector["receivers"] and collector["receivers"]["otlp"]["protocols"]["http"]
    parser = collector["receivers"]["filelog/capscan"]["operators"][0]
    assert parser["type"] == "json_parser" and parser["timestamp"]["parse_from"] == "attributes.time"
    for pipeline in collector["service"]["pipelines"].values():
        assert set(pipeline["receivers"]) <= set(collector["receivers"])
        assert set(pipeline["exporters"]) <= set(collector["exporters"])
        assert set(pipeline.get("processors", [])) <= set(collector["processors"])
    vector = yaml.safe_load((FLEET / "vector.yaml").read_text())
    assert vector["transforms"]["capscan_parsed"]["inputs"] == ["capscan_events"]
    labels = vector["sinks"]["loki"]["labels"]
    # the event fields the shippers read exist in capscan's events
    for template in labels.values():
        for field in re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", template):
            assert field in EVENT_FIELDS
    assert "time" in EVENT_FIELDS and "verdict" in EVENT_FIELDS


def test_launchd_agent_parses():
    with open(FLEET / "com.capscan.watch.plist", "rb") as fh:
        agent = plistlib.load(fh)
    assert agent["Label"] == "com.capscan.watch" and agent["KeepAlive"] is True
    command = agent["ProgramArguments"][-1]
    assert "capscan watch" in command and "--prometheus" in command and "--nl" in command and "--label" in command
