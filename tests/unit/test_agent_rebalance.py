"""The agent's instance-metadata rebalance recommendation follows the ``DisruptionPolicy`` in
force (``rebalance: ignore|notice|drain``), as the controller's EventBridge path does: the
watcher (``agent.imds``) over fake ports (metadata, agent, cluster, policy, pod events)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence

import pytest

from graceguard.agent import imds, ports
from graceguard.domain import cluster, disruption, interruptions, policy

pytestmark = pytest.mark.asyncio

T0 = dt.datetime(2026, 11, 23, 2, 0, tzinfo=dt.UTC)
NOTICE = ports.MetadataNotice(ports.NoticeKind.REBALANCE, T0, "")


@dataclasses.dataclass
class Fakes:
    """Every port the watcher calls; ``fail`` names the calls that raise (the API away)."""

    choice: policy.RebalanceAction | None = None
    fail: set[str] = dataclasses.field(default_factory=set)
    node: str = "node-a"
    opened: list[disruption.DisruptionRequest] = dataclasses.field(default_factory=list)
    told: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    policy_reads: int = 0

    async def notices(self) -> Sequence[ports.MetadataNotice]:
        return [NOTICE]

    async def policy_in_force(self) -> policy.Policy:
        self.policy_reads += 1
        if "policy" in self.fail:
            raise ConnectionError("apiserver away")
        if self.choice is None:
            return policy.DEFAULT
        return dataclasses.replace(policy.DEFAULT, rebalance=self.choice)

    async def pods_on_node(self, node: str) -> Sequence[cluster.Pod]:
        if "pods" in self.fail:
            raise ConnectionError("apiserver away")
        return (
            cluster.Pod("web", "api-1", node=node, start_time=T0, uid="u1"),
            cluster.Pod("batch", "job-1", node=node, start_time=T0, uid="u2"),
            cluster.Pod("kube-system", "proxy", node=node, start_time=T0, daemon=True),
            cluster.Pod("web", "gone", node=node, start_time=T0, deleting_since=T0),
            cluster.Pod("web", "done", node=node, start_time=T0, phase=cluster.PodPhase.SUCCEEDED),
        )

    async def pod_event(self, *, pod: cluster.Pod, reason: str, message: str) -> None:
        if pod.name in self.fail:
            raise ConnectionError("refused")
        self.told.append((f"{pod.namespace}/{pod.name}", reason, message))

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        if "open" in self.fail:
            raise ConnectionError("apiserver away")
        self.opened.append(request)
        return True

    async def begin_shutdown(self, *, source: str, deadline: dt.datetime, reason: str) -> None:
        raise AssertionError("a rebalance is no shutdown")


def _watcher(fakes: Fakes) -> imds.MetadataWatcher:
    return imds.MetadataWatcher(
        metadata=fakes,
        agent=fakes,  # type: ignore[arg-type]
        cluster=fakes,  # type: ignore[arg-type]
        policies=fakes,
        events=fakes,
        clock=lambda: T0,
    )


async def test_notice_by_default_tells_each_pod_a_drain_would_evict() -> None:
    fakes = Fakes()
    watcher = _watcher(fakes)
    await watcher.check()
    await watcher.check()  # the same recommendation again: told once
    said = interruptions.rebalance_notice(node="node-a", instance_id=None)
    assert fakes.told == [
        ("web/api-1", "ProposedEviction", said),
        ("batch/job-1", "ProposedEviction", said),
    ]
    assert fakes.opened == [] and "no eviction is planned yet" in said


async def test_ignore_is_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    fakes = Fakes(choice=policy.RebalanceAction.IGNORE)
    with caplog.at_level("INFO"):
        await _watcher(fakes).check()
    assert fakes.told == [] and fakes.opened == []
    assert "rebalance recommendation for node-a: ignored (policy rebalance: ignore)" in caplog.text


async def test_drain_opens_a_voluntary_node_disruption() -> None:
    fakes = Fakes(choice=policy.RebalanceAction.DRAIN)
    await _watcher(fakes).check()
    (request,) = fakes.opened
    assert request.source == "ec2-rebalance" and request.node == "node-a"
    assert request.disruption_class is disruption.DisruptionClass.VOLUNTARY
    assert request.scope is disruption.Scope.NODE and request.deadline is None
    assert fakes.told == []


@pytest.mark.parametrize("away", ["policy", "pods"])
async def test_the_api_away_is_tried_again_at_the_next_poll(
    away: str, caplog: pytest.LogCaptureFixture
) -> None:
    fakes = Fakes(fail={away})
    watcher = _watcher(fakes)
    await watcher.check()
    assert fakes.told == [] and "cannot be read" in caplog.text
    fakes.fail.clear()
    await watcher.check()
    assert [who for who, _, _ in fakes.told] == ["web/api-1", "batch/job-1"]


async def test_one_pods_event_refused_does_not_keep_the_others_from_being_told(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fakes = Fakes(fail={"api-1"})
    await _watcher(fakes).check()
    assert [who for who, _, _ in fakes.told] == ["batch/job-1"]
    assert "cannot tell web/api-1 of the rebalance" in caplog.text


async def test_the_policy_is_read_at_each_recommendation() -> None:
    fakes = Fakes(choice=policy.RebalanceAction.IGNORE)
    watcher = _watcher(fakes)
    await watcher.check()
    fakes.choice = policy.RebalanceAction.DRAIN
    later = ports.MetadataNotice(ports.NoticeKind.REBALANCE, T0 + dt.timedelta(hours=1), "")

    async def newer() -> Sequence[ports.MetadataNotice]:
        return [NOTICE, later]

    fakes.notices = newer  # type: ignore[method-assign]
    await watcher.check()
    assert fakes.policy_reads == 2 and len(fakes.opened) == 1
