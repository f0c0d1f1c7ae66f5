"""heartbeats: 1,000 Auto Scaling holds kept alive at once for 6 simulated hours, by the real
reconcile loop, engine, executor and hold keeper (``controller.holds.AsgHoldKeeper``) on a
simulated clock, with in-memory ports (the AWS calls and the Disruptions' ``lastHeartbeat``).

Each hold's node runs one pod protected for 7 h, so every hold lasts the whole run. The holds'
lifecycle actions begin spread over one heartbeat timeout (300 s), as instances of many groups
would. Prints one JSON line: the worst gap between two heartbeats of one hold (target: under
half the timeout, i.e. the engine's schedule is kept however many holds there are), heartbeats
sent, reconcile rounds, CPU seconds per simulated hour (target: under 5), and the process's peak
RSS; and the same run without holds (``baseline_no_holds_*``: the loop reconciles at least
every 30 s anyway) and the difference, ``holds_cpu_s_per_sim_hour``, what the holds cost. No
task sleeps per hold: the loop wakes for the earliest heartbeat due.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import itertools
import json
import resource
import time

from graceguard.controller import executor, holds, loop, ports
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, interruptions, pod_writes, policy
from graceguard.engine import actions as act

T0 = dt.datetime(2026, 11, 23, 0, 0, tzinfo=dt.UTC)


class World:
    """The cluster, the Disruptions and AWS, in memory."""

    def __init__(self, *, holds_count: int, timeout: dt.timedelta, held: bool = True) -> None:
        self.now = T0
        self.timeout = timeout
        nodes, pods, self.requests = [], [], []
        self.last: dict[str, dt.datetime] = {}
        self.beats: dict[str, list[dt.datetime]] = {}
        for i in range(holds_count):
            node = f"ip-10-0-{i // 250}-{i % 250}"
            start = T0 + timeout * i / holds_count
            nodes.append(cluster.Node(node))
            pods.append(
                cluster.Pod(
                    "batch",
                    f"job-{i}",
                    node=node,
                    start_time=T0,
                    grace_seconds=60,
                    annotations={ann.MIN_RUNTIME: "7h"},
                )
            )
            rid = f"asg-lifecycle.{node}"
            cap = interruptions.hook_cap(start, timeout)
            action = disruption.ActionRef(
                "ng", "graceguard", f"i-{i:017x}", f"{i:08x}-0000-4000-8000-000000000000"
            )
            self.requests.append(
                disruption.DisruptionRequest(
                    id=rid,
                    node=node,
                    source="asg-lifecycle",
                    disruption_class=disruption.DisruptionClass.VOLUNTARY,
                    requested_at=start,
                    deadline=cap,
                    hold=(
                        disruption.Hold(
                            heartbeat_timeout=timeout, last_heartbeat=start, cap=cap, action=action
                        )
                        if held
                        else None
                    ),
                )
            )
            self.beats[rid] = [start]
        self.nodes = {n.name: n for n in nodes}
        self.pods = {p.key: p for p in pods}
        self.dirty = True
        self._snapshot = cluster.Snapshot()
        self.statuses: dict[str, disruption.DisruptionStatus] = {}
        self.order = {r.id: i for i, r in enumerate(self.requests)}
        self.current = {r.id: r for r in self.requests}
        self.stale: set[str] = set(self.order)
        """Requests whose object changed since ``requests_`` last read them."""
        self.changed = asyncio.Event()

    def requests_(self) -> list[disruption.DisruptionRequest]:
        """The open requests as the API server keeps them: lastHeartbeat and status as last
        written. Like the informer's store (``adapters.kube.view``), a request is rebuilt only
        when its object was written (the cost of the watch event), not on every round."""
        for rid in self.stale:
            r = self.requests[self.order[rid]]
            last = self.last.get(rid)
            if last is not None and r.hold is not None:
                r = dataclasses.replace(r, hold=dataclasses.replace(r.hold, last_heartbeat=last))
            self.current[rid] = dataclasses.replace(r, status=self.statuses.get(rid))
        self.stale.clear()
        return list(self.current.values())

    # ---- ClusterWriter (what the engine asks during a hold: notices, cordons, status) ----
    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None: ...

    def _pod(self, ref: act.PodRef, **changes: object) -> None:
        self.pods[ref.key] = dataclasses.replace(self.pods[ref.key], **changes)  # type: ignore[arg-type]
        self.dirty = True

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        """As the API server stores it: the condition's reason and the annotations."""
        found = self.pods[pod.key]
        stage = found.notice_stage
        match write:
            case pod_writes.NoticePosted(notice=notice):
                stage = notice.reason.value
            case pod_writes.NoticeWithdrawn():
                stage = None
        self._pod(pod, notice_stage=stage, annotations=pod_writes.merged(found.annotations, write))

    async def evict(
        self, *, pod: act.PodRef, grace_seconds: int
    ) -> tuple[ports.EvictionResult, str]:
        raise AssertionError("no pod is due within the run")

    async def delete(self, *, pod: act.PodRef, grace_seconds: int) -> bool:
        raise AssertionError("no pod is due within the run")

    def _node(self, name: str, **changes: object) -> None:
        self.nodes[name] = dataclasses.replace(self.nodes[name], **changes)  # type: ignore[arg-type]
        self.dirty = True

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        self._node(node, unschedulable=True, cordoned_for=request_id)
        if hold:
            await self.hold_node(node=node, request_id=request_id)

    async def uncordon(self, *, node: str) -> None:
        self._node(node, unschedulable=False, cordoned_for=None)

    async def hold_node(self, *, node: str, request_id: str | None) -> None:
        self._node(node, scale_down_disabled=request_id is not None, held_for=request_id)

    async def roll_out(self, *, workload: cluster.WorkloadRef, at: dt.datetime) -> None:
        """No Deployment here (every pod is a bare pod): nothing to roll out."""

    @property
    def snapshot(self) -> cluster.Snapshot:
        if self.dirty:
            self._snapshot = cluster.Snapshot(
                nodes=tuple(self.nodes.values()), pods=tuple(self.pods.values())
            )
            self.dirty = False
        return self._snapshot

    async def complete_disruption(
        self, *, request_id: str, node: str, at: dt.datetime, read_version: str | None
    ) -> ports.StatusWrite:
        raise AssertionError("no hold ends within the run")

    async def report_disruption(
        self,
        *,
        request_id: str,
        status: disruption.DisruptionStatus,
        read_version: str | None,
    ) -> ports.StatusWrite:
        self.statuses[request_id] = status
        self.stale.add(request_id)
        return ports.StatusWrite.WRITTEN

    async def delete_disruption(self, *, request_id: str) -> None: ...

    # ---- Autoscaling and HoldRecords ----
    async def heartbeat_timeout(self, *, group: str, hook: str) -> dt.timedelta:
        return self.timeout

    async def record_heartbeat(self, *, action: disruption.ActionRef) -> None: ...

    async def complete(self, *, action: disruption.ActionRef, result: str) -> None: ...

    async def record_heartbeat_at(self, *, request_id: str, at: dt.datetime) -> None:
        self.last[request_id] = at
        self.stale.add(request_id)
        self.beats[request_id].append(at)


class Records:
    def __init__(self, world: World) -> None:
        self.world = world

    async def record_heartbeat(self, *, request_id: str, at: dt.datetime) -> None:
        await self.world.record_heartbeat_at(request_id=request_id, at=at)


class ViewOf:
    def __init__(self, world: World) -> None:
        self.w = world
        self.changed = world.changed

    async def wait_synced(self) -> None: ...

    def snapshot(self) -> cluster.Snapshot:
        return self.w.snapshot

    def requests(self) -> list[disruption.DisruptionRequest]:
        return self.w.requests_()

    def finished(self) -> list[tuple[str, dt.datetime]]:
        return []

    def rejected(self) -> list[disruption.Rejected]:
        return []

    def policy(self) -> tuple[policy.Policy, None]:
        return policy.DEFAULT, None

    def versions(self, keys: list[str]) -> dict[str, str]:
        return {}

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        return True


class Leader:
    changed = asyncio.Event()
    is_leader = True


async def run(
    holds_count: int, hours: float, timeout_s: int, *, held: bool = True
) -> dict[str, object]:
    timeout = dt.timedelta(seconds=timeout_s)
    world = World(holds_count=holds_count, timeout=timeout, held=held)
    keeper = holds.AsgHoldKeeper(autoscaling=world, records=Records(world), clock=lambda: world.now)
    ctl = loop.Controller(
        view=ViewOf(world),
        leadership=Leader(),
        executor=executor.Executor(cluster=world, holds=keeper),
        clock=lambda: world.now,
    )
    end = T0 + dt.timedelta(hours=hours)
    rounds = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while world.now < end:
        rounds += 1
        wake = await ctl.reconcile_once()
        step = loop.RESYNC if wake is None else max(wake - world.now, dt.timedelta(seconds=0.1))
        world.now += min(step, loop.RESYNC)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    worst = max(
        (b - a for beats in world.beats.values() for a, b in itertools.pairwise(beats)),
        default=dt.timedelta(0),
    )
    return {
        "bench": "heartbeats",
        "holds": holds_count,
        "simulated_hours": hours,
        "heartbeat_timeout_s": timeout_s,
        "heartbeats": keeper.heartbeats_sent,
        "rounds": rounds,
        "worst_gap_s": worst.total_seconds(),
        "target_worst_gap_s": timeout_s / 2,
        "cpu_s": round(cpu, 2),
        "cpu_s_per_sim_hour": round(cpu / hours, 2),
        "target_cpu_s_per_sim_hour": 5,
        "wall_s": round(wall, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--holds", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--timeout", type=int, default=300)
    args = parser.parse_args()
    found = asyncio.run(run(args.holds, args.hours, args.timeout))
    # The same 1,000 Disruptions and pods without a hold: what the reconcile loop costs anyway
    # (a round at least every RESYNC); the difference is what keeping the holds costs.
    baseline = asyncio.run(run(args.holds, args.hours, args.timeout, held=False))
    found["baseline_no_holds_cpu_s_per_sim_hour"] = baseline["cpu_s_per_sim_hour"]
    found["baseline_no_holds_rounds"] = baseline["rounds"]
    found["holds_cpu_s_per_sim_hour"] = round(
        float(str(found["cpu_s_per_sim_hour"])) - float(str(baseline["cpu_s_per_sim_hour"])), 2
    )
    print(json.dumps(found))


if __name__ == "__main__":
    main()
