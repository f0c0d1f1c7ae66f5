"""A DaemonSet pod's eviction taken over: a node disruption leaves DaemonSet pods (as kubectl drain
does), so such an eviction is not joined to one, which would leave it refused for good while
nothing ever evicts the pod. It gets a pod disruption of its own, which the controller carries
out: notice, then its own grace period. A whole-node disruption (the node agent's) removes
DaemonSet pods too, and is joined.

The engine's scope (``admission.admit``), the webhook's join (``webhook.service``, with the fakes
of test_webhook_service) and the controller's plan for the disruptions that result
(``reconciler.reconcile``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, policy, times
from graceguard.engine import actions as act
from graceguard.engine import admission, reconciler

from .test_webhook_service import AUTOSCALER, NOW, ask, capped, pod, takeover_rig

TAINTED = cluster.Node("n1", taints=frozenset({"ToBeDeletedByClusterAutoscaler"}))


def request(
    scope: disruption.Scope, *, id_: str, pod_key: str | None = None
) -> disruption.DisruptionRequest:
    return disruption.DisruptionRequest(
        id=id_,
        node="n1",
        source="cluster-autoscaler",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=NOW,
        scope=scope,
        pod=pod_key,
    )


def test_the_engine_takes_a_daemon_pods_eviction_over_with_a_pod_disruption() -> None:
    daemon = pod("logs", daemon=True, grace_seconds=120)
    job = pod("job", grace_seconds=7200)
    on_tainted = {"pol": policy.DEFAULT, "now": NOW, "source": "cluster-autoscaler"}
    v = admission.admit(pod=daemon, node=TAINTED, grace_seconds=30, **on_tainted)  # type: ignore[arg-type]
    assert v.rule is admission.Rule.TAKEOVER and v.takeover is disruption.Scope.POD
    assert "graceguard evicts it itself" in v.reason
    w = admission.admit(pod=job, node=TAINTED, grace_seconds=30, **on_tainted)  # type: ignore[arg-type]
    assert w.takeover is disruption.Scope.NODE


@pytest.mark.asyncio
async def test_a_node_disruption_is_not_joined_by_a_daemon_pods_eviction() -> None:
    daemon = pod("logs", daemon=True, grace_seconds=120)
    job = pod("job", grace_seconds=7200)
    r = takeover_rig(daemon, job)
    r.state.open = [request(disruption.Scope.NODE, id_="cluster-autoscaler.n1.1")]
    assert not (await ask(r, capped("job")))["allowed"]
    assert r.opener.created == {}  # the job's eviction joins the node disruption
    found = await ask(r, capped("logs", grace=30))
    assert not found["allowed"] and found["status"]["code"] == 429
    await r.service.settle()
    (opened,) = r.opener.created.values()
    assert (opened.scope, opened.pod, opened.node) == (disruption.Scope.POD, "team/logs", "n1")
    assert opened.requested_by == AUTOSCALER


@pytest.mark.asyncio
async def test_a_daemon_pods_eviction_after_this_replica_opened_the_node_takeover() -> None:
    """The replica's own memory of the node takeover it opened (before the cache shows it) does
    not swallow a DaemonSet pod's eviction either."""
    daemon = pod("logs", daemon=True, grace_seconds=120)
    job = pod("job", grace_seconds=7200)
    r = takeover_rig(daemon, job)
    await ask(r, capped("job"))
    await ask(r, capped("logs", grace=30))
    await r.service.settle()
    scopes = sorted((o.scope.value, o.pod or "") for o in r.opener.created.values())
    assert scopes == [("node", ""), ("pod", "team/logs")]


@pytest.mark.asyncio
async def test_a_whole_node_disruption_is_joined_by_a_daemon_pods_eviction() -> None:
    r = takeover_rig(pod("logs", daemon=True, grace_seconds=120))
    r.state.open = [request(disruption.Scope.WHOLE_NODE, id_="shutdown.n1.1")]
    assert not (await ask(r, capped("logs", grace=30)))["allowed"]
    await r.service.settle()
    assert r.opener.created == {}


def _evicted(
    requests: list[disruption.DisruptionRequest], pods: tuple[cluster.Pod, ...]
) -> dict[str, dt.datetime]:
    """Reconcile every minute for an hour, the pods taking the notices posted and leaving when
    evicted, as the cluster would; when each pod was evicted."""
    snap = cluster.Snapshot(nodes=(TAINTED,), pods=pods)
    evicted: dict[str, dt.datetime] = {}
    for minute in range(60):
        now = NOW + dt.timedelta(minutes=minute)
        result = reconciler.reconcile(snapshot=snap, requests=requests, pol=policy.DEFAULT, now=now)
        told = {a.pod.key: a.notice for a in result.actions if isinstance(a, act.PostNotice)}
        for a in result.actions:
            if isinstance(a, act.Evict):
                evicted.setdefault(a.pod.key, now)
        snap = dataclasses.replace(
            snap,
            pods=tuple(
                p
                if p.key not in told
                else dataclasses.replace(
                    p,
                    notice_stage=told[p.key].reason.value,
                    annotations={
                        ann.EVICTION_AT: times.format_time(told[p.key].eviction_at),
                        ann.EVICTION_REASON: told[p.key].source,
                    },
                )
                for p in snap.pods
                if p.key not in evicted
            ),
        )
    return evicted


def test_the_pod_disruption_evicts_the_daemon_pod_the_node_one_never_does() -> None:
    daemon = pod("logs", daemon=True, grace_seconds=120)
    job = pod("job", grace_seconds=60)
    node_only = [request(disruption.Scope.NODE, id_="ca.n1")]
    assert set(_evicted(node_only, (daemon, job))) == {"team/job"}
    both = [*node_only, request(disruption.Scope.POD, id_="ca.n1.logs", pod_key="team/logs")]
    evicted = _evicted(both, (daemon, job))
    assert set(evicted) == {"team/job", "team/logs"}
    assert evicted["team/logs"] >= NOW + policy.DEFAULT.notice_lead  # after its notice
