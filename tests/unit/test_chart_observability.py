"""The chart's Grafana dashboard and PrometheusRule, the chart's version against the package's.

Reads what ``make chart-check`` renders: ``out/chart.yaml`` (defaults: neither is there) and
``out/chart-observability.yaml`` (ci/observability-values.yaml: both, the webhook, the
ServiceMonitors). Every metric a panel or an alert names must be one graceguard exposes: the
names are taken from the metrics modules' registries (controller, webhook, agent), with the
samples Prometheus sees (``_total`` for counters, ``_bucket``/``_sum``/``_count`` for
histograms), and every label a query groups or matches on must be one of the metric's own or one
the scrape adds.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import pkgutil
import re
import tomllib
from collections.abc import Iterator
from typing import Any

import prometheus_client as prom
import pytest
import yaml

import graceguard
from graceguard.controller import metrics
from graceguard.domain import disruption
from graceguard.engine import reconciler

from .test_chart_render import ROOT, one, rendered

CHART_DIR = ROOT / "deploy" / "helm" / "graceguard"
DASHBOARD_FILE = CHART_DIR / "dashboards" / "graceguard.json"
SCRAPE_LABELS = {"namespace", "pod", "job", "instance", "service", "container", "endpoint"}
AGENT_SCRAPE_LABELS = SCRAPE_LABELS | {"node"}
"""The agents' PodMonitor also gives each series the node its pod runs on."""
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
}
METRIC = re.compile(r"\bgraceguard_[a-z0-9_]+\b")
BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")


def _metric_objects() -> Iterator[prom.metrics.MetricWrapperBase]:
    """Every metric defined in a ``graceguard.<package>.metrics`` module: at its top level, or
    by a class of it that owns its metrics (``controller.metrics.ControllerMetrics``)."""
    for info in pkgutil.iter_modules(graceguard.__path__):
        try:
            module = importlib.import_module(f"graceguard.{info.name}.metrics")
        except ModuleNotFoundError:
            continue
        for value in vars(module).values():
            if isinstance(value, prom.metrics.MetricWrapperBase):
                yield value
            elif isinstance(value, type) and value.__module__ == module.__name__:
                for owned in vars(value()).values():
                    if isinstance(owned, prom.metrics.MetricWrapperBase):
                        yield owned


def _exposed() -> dict[str, set[str]]:
    """Sample name -> the metric's label names, as Prometheus scrapes them."""
    names: dict[str, set[str]] = {}
    for m in _metric_objects():
        # prometheus_client keeps a metric's name and label names in these attributes only.
        base, kind, labels = m._name, str(m._type), set(m._labelnames)
        for suffix in SUFFIXES[kind]:
            names[base + suffix] = labels | ({"le"} if suffix == "_bucket" else set())
    return names


EXPOSED = _exposed()


def check_expr(expr: str) -> list[str]:
    """Problems with one PromQL expression: unknown metrics, labels no metric in it has."""
    used = set(METRIC.findall(expr))
    problems = [f"{expr!r}: names no graceguard metric"] if not used else []
    problems += [f"{expr!r}: {n} is not a metric graceguard exposes" for n in used - set(EXPOSED)]
    agents_only = bool(used) and all(n.startswith("graceguard_agent_") for n in used)
    scrape = AGENT_SCRAPE_LABELS if agents_only else SCRAPE_LABELS
    known = set().union(*(EXPOSED.get(n, set()) for n in used)) | scrape
    labels = {lb.strip() for group in BY.findall(expr) for lb in group.split(",") if lb.strip()}
    labels |= set(MATCHER.findall(expr))
    problems += [f"{expr!r}: label {lb} is on none of its metrics" for lb in labels - known]
    return problems


def test_the_metric_names_come_from_the_code() -> None:
    """The set the checks below compare with is the real one (a sample of each kind)."""
    assert EXPOSED["graceguard_premature_terminations_total"] == {"initiator"}
    assert EXPOSED["graceguard_evictions_total"] == {"reason", "outcome"}
    assert EXPOSED["graceguard_webhook_review_seconds_bucket"] == {"le"}
    assert EXPOSED["graceguard_disruption_deadline_seconds"] == {"disruption", "node", "source"}
    assert "graceguard_evictions" not in EXPOSED  # a counter is scraped as _total
    assert check_expr('rate(graceguard_nope_total{namespace="x"}[5m])') != []
    assert check_expr("sum by (colour) (graceguard_protected_pods)") != []
    assert check_expr("max by (node) (graceguard_agent_lock_held)") == []
    assert check_expr("sum by (node) (graceguard_premature_terminations_total)") != []


@pytest.fixture(scope="module")
def observability() -> list[dict[str, Any]]:
    return rendered("chart-observability.yaml")


@pytest.fixture(scope="module")
def dashboard(observability: list[dict[str, Any]]) -> dict[str, Any]:
    cm = one(observability, "ConfigMap", "graceguard-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "graceguard-system"
    doc: dict[str, Any] = json.loads(cm["data"]["graceguard.json"])
    return doc


def _panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


def test_the_configmap_carries_the_dashboard_file_unchanged(dashboard: dict[str, Any]) -> None:
    """Helm does not template the file: Grafana's {{label}} legends survive."""
    assert dashboard == json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    legends = [t["legendFormat"] for p in _panels(dashboard) for t in p["targets"]]
    assert "{{initiator}}" in legends


def test_every_panel_queries_metrics_graceguard_exposes(dashboard: dict[str, Any]) -> None:
    panels = _panels(dashboard)
    assert len(panels) >= 10
    problems = [msg for p in panels for t in p["targets"] for msg in check_expr(t["expr"])]
    assert problems == []
    for p in panels:
        assert p["targets"], f"panel {p['title']!r} has no query"
        assert p["datasource"]["uid"] == "${datasource}", "a data source hard-coded"


def test_the_dashboard_covers_the_controller_and_the_webhook(dashboard: dict[str, Any]) -> None:
    queried = {
        m for p in _panels(dashboard) for t in p["targets"] for m in METRIC.findall(t["expr"])
    }
    for needed in (
        "graceguard_protected_pods",
        "graceguard_open_disruptions",
        "graceguard_premature_terminations_total",
        "graceguard_evictions_total",
        "graceguard_disruption_deadline_seconds",
        "graceguard_notice_lead_seconds_bucket",
        "graceguard_webhook_reviews_total",
        "graceguard_webhook_review_seconds_bucket",
    ):
        assert needed in queried
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


@pytest.fixture(scope="module")
def rules(observability: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    rule = one(observability, "PrometheusRule")
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}


def test_the_alerts_asked_for_are_there(rules: dict[str, dict[str, Any]]) -> None:
    assert {
        "GraceguardPrematureTermination",
        "GraceguardForcedEviction",
        "GraceguardDisruptionNearDeadline",
        "GraceguardDeadlineExceeded",
        "GraceguardWebhookErrors",
        "GraceguardWebhookAbsent",
        "GraceguardAgentNoLock",
        "GraceguardAgentDelayShort",
        "GraceguardAgentAbsent",
    } <= set(rules)
    for name, rule in rules.items():
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"], name


def test_every_alert_queries_metrics_graceguard_exposes(rules: dict[str, dict[str, Any]]) -> None:
    problems = [msg for r in rules.values() for msg in check_expr(r["expr"])]
    assert problems == []
    for name, rule in rules.items():
        assert 'namespace="graceguard-system"' in rule["expr"], f"{name} not scoped to the release"


def test_the_webhook_absent_alert_reads_a_series_that_exists_from_start() -> None:
    """absent() of a labelled counter would fire before the first review: the latency histogram
    has no labels, so its _count is scraped as 0 from the start."""
    assert EXPOSED["graceguard_webhook_review_seconds_count"] == set()


def test_the_webhook_is_scraped_when_the_rules_read_it(observability: list[dict[str, Any]]) -> None:
    monitors = [d for d in observability if d["kind"] == "ServiceMonitor"]
    selected = {
        m["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] for m in monitors
    }
    assert selected == {"controller", "webhook"}
    service = one(observability, "Service", "graceguard-webhook")
    assert "metrics" in {p["name"] for p in service["spec"]["ports"]}


def test_the_agents_are_scraped_on_their_pods_with_their_node(
    observability: list[dict[str, Any]],
) -> None:
    """The DaemonSet has no Service: a PodMonitor selects its pods by the labels the DaemonSet
    gives them, on the port its container names, and labels each series with the pod's node
    (the agent alerts group by it)."""
    monitor = one(observability, "PodMonitor")
    daemonset = one(observability, "DaemonSet")
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert selector["app.kubernetes.io/component"] == "agent"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    assert endpoint["port"] in {p["name"] for p in container["ports"]}
    assert {
        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
        "targetLabel": "node",
    } in endpoint["relabelings"]


def test_the_agent_alerts_name_the_node(rules: dict[str, dict[str, Any]]) -> None:
    for name in ("GraceguardAgentNoLock", "GraceguardAgentDelayShort"):
        assert "by (namespace, node)" in rules[name]["expr"], name
        assert "$labels.node" in rules[name]["annotations"]["description"], name


def test_neither_is_rendered_by_default() -> None:
    docs = rendered("chart.yaml")
    assert not [d for d in docs if d["kind"] == "PrometheusRule"]
    assert not [
        d for d in docs if d["kind"] == "ConfigMap" and "dashboard" in d["metadata"]["name"]
    ]


def test_the_chart_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART_DIR / "Chart.yaml").read_text(encoding="utf-8"))
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert chart["appVersion"] == project["version"]
    deployment = one(rendered("chart.yaml"), "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text(encoding="utf-8"))
    assert values["image"]["tag"] == ""
    assert container["image"] == f"{values['image']['repository']}:{project['version']}"


def _deadline_series(counted: metrics.ControllerMetrics) -> dict[str, float]:
    return {
        s.labels["disruption"]: s.value
        for f in counted.registry.collect()
        if f.name == "graceguard_disruption_deadline_seconds"
        for s in f.samples
    }


def test_the_deadline_gauge_follows_the_open_disruptions() -> None:
    """What GraceguardDisruptionNearDeadline reads: seconds to each open disruption's deadline
    (its own, or its node hold's cap, whichever is first); a finished one leaves no series."""
    now = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    spot = disruption.DisruptionRequest(
        id="spot-n1",
        node="n1",
        source="spot-interruption",
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=now,
        deadline=now + dt.timedelta(minutes=2),
    )
    held = disruption.DisruptionRequest(
        id="asg-n2",
        node="n2",
        source="asg-scale-in",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=now,
        hold=disruption.Hold(
            heartbeat_timeout=dt.timedelta(hours=1),
            last_heartbeat=now,
            cap=now + dt.timedelta(minutes=20),
        ),
    )
    free = disruption.DisruptionRequest(
        id="upgrade-n3",
        node="n3",
        source="upgrade",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=now,
    )
    result = reconciler.Reconciliation(actions=(), next_wakeup=None, plans=())
    counted = metrics.ControllerMetrics()
    counted.observe_round(result=result, outcomes=(), requests=[spot, held, free], now=now)
    assert _deadline_series(counted) == {"spot-n1": 120.0, "asg-n2": 1200.0}
    later = now + dt.timedelta(minutes=3)
    counted.observe_round(result=result, outcomes=(), requests=[spot], now=later)
    assert _deadline_series(counted) == {"spot-n1": -60.0}
    counted.observe_round(result=result, outcomes=(), requests=[], now=later)
    assert _deadline_series(counted) == {}
    # each owner counts apart: a second controller's metrics start empty
    assert _deadline_series(metrics.ControllerMetrics()) == {}
