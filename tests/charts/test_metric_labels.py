"""The per-job series keep their own ``namespace`` and ``job`` labels through Prometheus, and the
shipped dashboard reads the labels the controller exports.

The controller names a job's series by its ``namespace`` and ``job``, labels Prometheus also sets
on every scraped series (the target's namespace and scrape job). Without ``honorLabels`` the
target's win and ours are renamed ``exported_namespace`` / ``exported_job``, and the dashboard's
``{{namespace}}/{{job}}`` legends and ``sum by (namespace)`` would name the controller's namespace
and Service instead of the jobs'. kube-state-metrics, which exports objects' namespaces too, is
scraped the same way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client.metrics import MetricWrapperBase

from advisor.controller.metrics import Metrics
from tests.charts.render import MANIFESTS, NAMESPACE, helm_template, of_kind

#: labels Prometheus (and prometheus-operator's relabelling) attach to every scraped series
TARGET_LABELS = {"job", "namespace", "instance", "pod", "service", "endpoint", "container"}
DASHBOARD = MANIFESTS / "dashboards" / "trainjob-advisor.json"


def exported_labels() -> dict[str, set[str]]:
    """Each metric family the controller exports, by its exposed name(s), with its label names."""
    out: dict[str, set[str]] = {}
    for metric in vars(Metrics()).values():
        if not isinstance(metric, MetricWrapperBase):
            continue
        labels = set(metric._labelnames)
        name = metric._name
        if metric._type == "counter":
            out[f"{name}_total"] = labels
        elif metric._type == "histogram":
            for suffix in ("_bucket", "_count", "_sum"):
                out[name + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
        else:
            out[name] = labels
    return out


def test_the_service_monitor_honours_the_labels_the_controller_exports() -> None:
    clashing = set().union(*exported_labels().values()) & TARGET_LABELS
    assert clashing == {"job", "namespace"}  # what honorLabels is for
    (monitor,) = of_kind(helm_template("metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint.get("honorLabels") is True, (
            f"endpoint {endpoint.get('port')}: without honorLabels Prometheus renames {sorted(clashing)} "
            "to exported_*, and the dashboard's per-job legends and sums show the controller's instead"
        )


def test_every_monitor_in_the_manifests_honours_the_exported_labels() -> None:
    for path in sorted(Path(MANIFESTS).rglob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") in ("ServiceMonitor", "PodMonitor"):
                endpoints = doc["spec"].get("endpoints") or doc["spec"].get("podMetricsEndpoints") or []
                assert all(e.get("honorLabels") is True for e in endpoints), path


def test_the_dashboard_reads_only_labels_its_metrics_carry() -> None:
    """Every label a query groups or matches by, a legend shows or a variable lists is one the
    metrics of that query export (so ``namespace`` and ``job`` are the jobs', never the target's)."""
    exported = exported_labels()
    dash = json.loads(DASHBOARD.read_text())
    queries: list[tuple[str, str]] = [
        (t["expr"], t.get("legendFormat", "")) for p in dash["panels"] for t in p.get("targets", [])
    ]
    queries += [(v["query"], "") for v in dash["templating"]["list"] if v.get("type") == "query"]
    used_namespace_or_job = False
    for expr, legend in queries:
        names = re.findall(r"trainjob_advisor_\w+", expr)
        assert names, expr
        assert all(n in exported for n in names), expr
        carried = set().union(*(exported[n] for n in names))
        referenced = set(re.findall(r"\{\{(\w+)\}\}", legend))
        for group in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", expr):
            referenced |= {label.strip() for label in group.split(",") if label.strip()}
        referenced |= set(re.findall(r"[{,]\s*(\w+)\s*(?:=~|!~|!=|=)", expr))
        referenced |= set(re.findall(r"label_values\(\w+,\s*(\w+)\)", expr))
        assert referenced <= carried, f"{expr!r} / {legend!r}: {sorted(referenced - carried)} not exported"
        used_namespace_or_job |= bool(referenced & {"namespace", "job"})
    assert used_namespace_or_job  # the panels honorLabels keeps right


def test_the_dashboards_joins_of_per_job_series_match_on_the_whole_job_identity() -> None:
    """A job's series are named by ``namespace``, ``kind`` and ``job`` (a TrainJob and a PyTorchJob
    may share a name): a join of two per-job metrics that leaves ``kind`` out matches the two jobs'
    series with each other, which Prometheus refuses (many-to-many) and the panel goes blank."""
    identity = {"namespace", "kind", "job"}
    assert all(identity <= labels for name, labels in exported_labels().items() if "_job_" in name)
    dash = json.loads(DASHBOARD.read_text())
    joins = 0
    for expr in (t["expr"] for p in dash["panels"] for t in p.get("targets", [])):
        if len(set(re.findall(r"trainjob_advisor_job_\w+", expr))) < 2:
            continue
        for group in re.findall(r"\bon\s*\(([^)]*)\)", expr):
            joins += 1
            on = {label.strip() for label in group.split(",")}
            assert identity <= on, f"{expr!r}: on({group}) leaves {sorted(identity - on)} out"
    assert joins  # the judged-series panel joins two per-job metrics


def test_the_shipped_alerts_read_metrics_and_labels_the_controller_serves() -> None:
    """``metrics.prometheusRule``: each alert's expression names served metrics only, and matches
    or groups by labels they carry, or by the scrape's ``namespace`` where the series carry none
    of their own (the controller's health gauges), which selects the release. Off by default."""
    assert of_kind(helm_template(), "PrometheusRule") == []
    (rule,) = of_kind(
        helm_template("metrics.prometheusRule.enabled=true", "metrics.prometheusRule.gpusNotLearning=4"),
        "PrometheusRule",
    )
    exported = exported_labels()
    alerts = [r for g in rule["spec"]["groups"] for r in g["rules"]]
    assert {a["alert"] for a in alerts} >= {"TrainJobAdvisorNoLeader", "TrainJobAdvisorAPIUnreachable"}
    for alert in alerts:
        expr = alert["expr"]
        names = re.findall(r"trainjob_advisor_\w+", expr)
        assert names and all(n in exported for n in names), expr
        carried = set().union(*(exported[n] for n in names))
        matched = set(re.findall(r"[{,]\s*(\w+)\s*(?:=~|!~|!=|=)", expr))
        grouped = {
            label.strip()
            for group in re.findall(r"\b(?:by|on|without|ignoring)\s*\(([^)]*)\)", expr)
            for label in group.split(",")
            if label.strip()
        }
        assert grouped <= carried, expr
        # the release's namespace, as the scrape sets it on series that carry no namespace of their own
        assert matched == {"namespace"} and "namespace" not in carried, expr
        assert f'namespace="{NAMESPACE}"' in expr
        assert alert["labels"]["severity"] in ("warning", "info") and alert["annotations"]["summary"]
    (gpus,) = [a for a in alerts if a["alert"] == "TrainJobAdvisorGPUsNotLearning"]
    assert gpus["expr"].endswith(">= 4")
