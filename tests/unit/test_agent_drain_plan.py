"""The engine's plan for the node agent's request: an imminent whole-node Disruption (an OS
shutdown held by a logind delay lock). Regular pods are asked first, critical and DaemonSet pods
last, each with its own grace before the deadline; graceguard's own agent pod is not evicted (it
holds the shutdown until the others are gone)."""

from __future__ import annotations

import dataclasses
import datetime as dt

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, policy, times
from graceguard.engine import actions as act
from graceguard.engine import reconciler

T0 = dt.datetime(2026, 11, 23, 1, 0, tzinfo=dt.UTC)
NODE = "node-a"
AGENT_LABELS = dict(disruption.NODE_AGENT_LABELS)


def _pod(
    name: str, *, grace: int, priority: int = 0, daemon: bool = False, **kw: object
) -> cluster.Pod:
    return cluster.Pod(
        namespace="default",
        name=name,
        node=NODE,
        start_time=T0 - dt.timedelta(hours=1),
        grace_seconds=grace,
        priority=priority,
        daemon=daemon,
        uid=f"uid-{name}",
        **kw,  # type: ignore[arg-type]
    )


PODS = (
    _pod("job", grace=10),
    _pod("web", grace=8),
    _pod("dns", grace=5, priority=2_000_000_000),
    _pod("logs", grace=5, daemon=True),
    _pod("agent", grace=3, daemon=True, priority=2_000_001_000, labels=AGENT_LABELS),
)


def _shutdown(deadline: dt.timedelta) -> disruption.DisruptionRequest:
    return disruption.DisruptionRequest(
        id="os-shutdown.node-a.1",
        node=NODE,
        source="os-shutdown",
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=T0,
        deadline=T0 + deadline,
        scope=disruption.Scope.WHOLE_NODE,
    )


def _evicted_at(
    deadline: dt.timedelta, pol: policy.Policy = policy.DEFAULT
) -> dict[str, dt.timedelta]:
    """Step the engine second by second over the deadline; the pods as the cluster would show
    them (an evicted pod terminating); when each eviction was asked, from the request."""
    request = _shutdown(deadline)
    pods = {p.name: p for p in PODS}
    asked: dict[str, dt.timedelta] = {}
    for second in range(int(deadline.total_seconds()) + 1):
        now = T0 + dt.timedelta(seconds=second)
        pods = {  # a pod asked to stop is gone after its grace (it uses all of it)
            n: p
            for n, p in pods.items()
            if p.deleting_since is None or now < p.deleting_since + p.grace
        }
        snap = cluster.Snapshot(nodes=(cluster.Node(NODE),), pods=tuple(pods.values()))
        result = reconciler.reconcile(snapshot=snap, requests=[request], pol=pol, now=now)
        for action in result.actions:
            if isinstance(action, act.PostNotice):  # as the controller writes a notice
                told = action.notice
                pods[action.pod.name] = dataclasses.replace(
                    pods[action.pod.name],
                    notice_stage=told.reason.value,
                    annotations={
                        ann.EVICTION_AT: times.format_time(told.eviction_at),
                        ann.EVICTION_REASON: told.source,
                    },
                )
            if isinstance(action, act.Evict | act.ForceDelete):
                name = action.pod.name
                asked.setdefault(name, now - T0)
                pods[name] = dataclasses.replace(pods[name], deleting_since=now)
    return asked


def test_regular_pods_first_daemon_and_critical_last_agent_left() -> None:
    asked = _evicted_at(dt.timedelta(seconds=60))
    assert "agent" not in asked  # the agent holds the lock until the others are gone
    assert set(asked) == {"job", "web", "dns", "logs"}
    last_regular = max(asked["job"], asked["web"])
    assert asked["dns"] >= last_regular
    # A DaemonSet pod of priority 0 goes with the critical ones, at the critical phase's time.
    assert asked["logs"] == asked["dns"] > last_regular
    # Each pod is asked early enough to use its whole grace before the deadline, the regular
    # ones also before the critical phase's own reserve (its longest grace, 5 s).
    for name, grace in (("job", 10), ("web", 8)):
        assert asked[name] + dt.timedelta(seconds=grace) <= dt.timedelta(seconds=60 - 5)
    for name in ("dns", "logs"):
        assert asked[name] + dt.timedelta(seconds=5) <= dt.timedelta(seconds=60)


def test_cordons_and_covers_daemon_pods_only_for_whole_node() -> None:
    request = _shutdown(dt.timedelta(seconds=60))
    assert request.covers(PODS[3])  # the DaemonSet pod
    assert not request.covers(PODS[4])  # graceguard's agent
    drain = disruption.DisruptionRequest(
        id="d",
        node=NODE,
        source="drain",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=T0,
    )
    assert not drain.covers(PODS[3])
    snap = cluster.Snapshot(nodes=(cluster.Node(NODE),), pods=PODS)
    result = reconciler.reconcile(snapshot=snap, requests=[request], pol=policy.DEFAULT, now=T0)
    assert act.Cordon(NODE, request.id) in result.actions
    assert {p.pod.name: p.phase for p in result.plans} == {
        "job": "regular",
        "web": "regular",
        "dns": "critical",
        "logs": "critical",
    }
    status = next(a for a in result.actions if isinstance(a, act.ReportDisruption)).status
    assert sorted(p.pod for p in status.pods) == [
        "default/dns",
        "default/job",
        "default/logs",
        "default/web",
    ]


def test_a_pod_merely_labelled_like_the_agent_is_still_covered() -> None:
    """Only a DaemonSet pod with the agent's labels is left: a Deployment's pod copying them is
    drained like any other."""
    impostor = _pod("impostor", grace=5, labels=AGENT_LABELS)
    assert _shutdown(dt.timedelta(seconds=30)).covers(impostor)


def test_with_time_to_spare_critical_pods_wait_until_regular_ones_are_gone() -> None:
    """A short notice lead and a long deadline: the regular pods are asked after their notice,
    and the critical and DaemonSet pods only once the regular ones are gone (their grace used),
    as kubelet's ``shutdownGracePeriodByPodPriority`` orders the groups; a logging DaemonSet
    thus outlives the pods whose logs it ships."""
    pol = dataclasses.replace(policy.DEFAULT, notice_lead=dt.timedelta(seconds=4))
    asked = _evicted_at(dt.timedelta(seconds=120), pol)
    regular_gone = max(
        asked["job"] + dt.timedelta(seconds=10), asked["web"] + dt.timedelta(seconds=8)
    )
    assert asked["job"] <= dt.timedelta(seconds=6)  # after the notice lead, not held back
    assert asked["dns"] >= regular_gone
    assert asked["logs"] >= regular_gone
    assert asked["logs"] + dt.timedelta(seconds=5) <= dt.timedelta(seconds=120)
