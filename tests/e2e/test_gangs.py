"""A gang protected as one on the real control plane: an Indexed Job of 4 workers (the real Job
controller and scheduler place them, 2 on each of 2 kwok nodes), the chart's eviction webhook and
graceguard's controller (``test_takeover.guarded``), ``kubectl drain`` of one node.

One worker on the other node asks for a minimum runtime (``graceguard.io/min-runtime: 45s``, set
once it runs); the other three carry nothing. The gang holds every worker: the drain is taken
over and nothing is evicted, the drained node's workers told they wait for the gang; when the
last member's protection ends, all 4 workers, the 2 on the node that is not drained included,
go together in one round, no sooner. That other node is neither cordoned nor held by graceguard.

Without a gang (a NonIndexed Job of 4, one worker on the other node busy) the same drain evicts
the drained node's 2 workers after their notice while the busy worker still runs: the distributed
job has lost half its workers. The engine's part is ``tests/unit/test_gangs.py``.
"""

from __future__ import annotations

import pathlib
import time

import pytest
from lightkube import Client
from lightkube.models.batch_v1 import JobSpec
from lightkube.models.core_v1 import PodTemplateSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Node, Pod

import controlplane
from graceguard.domain import annotations as ann

from . import graceguard_proc as gg
from .conftest import NOTICE_LEAD, NodeFactory
from .kube import is_gone_or_going, pod_spec, wait_until
from .test_takeover import TAKEN_OVER, finished, guarded, kubectl_drain

pytestmark = pytest.mark.e2e

GANG = "gang batch.kubernetes.io/job-name=train"
MIN_RUNTIME = 45
"""Seconds of minimum runtime of the one protected worker: the gang's hold."""


def start_job(
    kube: Client, namespace: str, name: str, story: str, *, indexed: bool
) -> dict[str, list[str]]:
    """A Job of 4 workers (1 CPU each) on the two 2-CPU nodes labelled ``story``; its Running
    pods by node."""
    kube.create(
        Job(
            metadata=ObjectMeta(name=name),
            spec=JobSpec(
                completions=4,
                parallelism=4,
                completionMode="Indexed" if indexed else "NonIndexed",
                backoffLimit=8,
                template=PodTemplateSpec(
                    metadata=ObjectMeta(labels={"app": name}),
                    spec=pod_spec(
                        grace_seconds=1,
                        cpu="1",
                        node_selector={"story": story},
                        restart_policy="Never",
                    ),
                ),
            ),
        ),
        namespace=namespace,
    )

    def placed() -> dict[str, list[str]] | None:
        by_node: dict[str, list[str]] = {}
        for p in kube.list(Pod, namespace=namespace, labels={"app": name}):
            if p.status is None or p.status.phase != "Running" or p.spec is None:
                return None
            assert p.metadata is not None and p.metadata.name and p.spec.nodeName
            by_node.setdefault(p.spec.nodeName, []).append(p.metadata.name)
        return by_node if sum(len(v) for v in by_node.values()) == 4 else None

    return wait_until(placed, timeout=60, what=f"the 4 workers of Job {name} Running")


def annotate(
    control_plane: controlplane.ControlPlane, namespace: str, pod: str, key: str, value: str
) -> None:
    done = control_plane.kubectl(
        "annotate", "pod", pod, "-n", namespace, "--overwrite", f"{key}={value}"
    )
    assert done.returncode == 0, done.stderr


def terminating_at(kube: Client, namespace: str, names: list[str]) -> dict[str, float]:
    """When each pod was first seen terminating (or gone), in seconds since the epoch, polled
    every 0.2 s for 90 s."""
    seen: dict[str, float] = {}
    deadline = time.monotonic() + 90
    while len(seen) < len(names) and time.monotonic() < deadline:
        for name in names:
            if name in seen:
                continue
            if is_gone_or_going(kube, name, namespace):
                seen[name] = time.time()
        time.sleep(0.2)
    return seen


def projected(kube: Client, namespace: str, name: str) -> bool:
    p = kube.get(Pod, name, namespace=namespace)
    annotations = (p.metadata.annotations or {}) if p.metadata else {}
    return annotations.get(ann.CA_SAFE_TO_EVICT) == "false"


@pytest.mark.timeout(420)
def test_an_indexed_job_of_4_on_2_nodes_is_held_and_goes_together_and_without_a_gang_half_goes(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    policy: None,
    tmp_path: pathlib.Path,
) -> None:
    story = f"{namespace}-gang"
    drained = gg.node_name(kwok_nodes("a", labels={"story": story}, cpu="2"))
    other = gg.node_name(kwok_nodes("b", labels={"story": story}, cpu="2"))
    with guarded(control_plane, kube, namespace, tmp_path) as (hook, (controller,)):
        workers = start_job(kube, namespace, "train", story, indexed=True)
        assert sorted(len(v) for v in workers.values()) == [2, 2], workers
        on_drained, on_other = workers[drained], workers[other]
        longest = on_other[0]
        annotate(control_plane, namespace, longest, ann.MIN_RUNTIME, f"{MIN_RUNTIME}s")
        found = kube.get(Pod, longest, namespace=namespace)
        assert found.status is not None and found.status.startTime is not None
        due = found.status.startTime.timestamp() + MIN_RUNTIME
        # The gang's protection is projected onto every worker, unannotated ones included.
        wait_until(
            lambda: all(projected(kube, namespace, n) for n in (*on_drained, *on_other)),
            timeout=30,
            what="the gang's protection projected onto the 4 workers",
        )

        drain = kubectl_drain(control_plane, drained, timeout=180)
        held_from = time.monotonic()
        while time.monotonic() - held_from < 3 * NOTICE_LEAD + 4:
            for name in (*on_drained, *on_other):
                assert not is_gone_or_going(kube, name, namespace), (name, gg.output_of(controller))
            assert drain.poll() is None, drain.communicate()[0]
            time.sleep(0.5)
        for name in on_drained:
            proposed = [
                e.message or ""
                for e in gg.events(kube, namespace, name)
                if e.reason == "ProposedEviction"
            ]
            assert proposed and f"protected by {GANG}" in proposed[0], (name, proposed)

        # The last member's protection ends: the gang may go, all 4 together, no sooner.
        gone = terminating_at(kube, namespace, [*on_drained, *on_other])
        assert set(gone) == {*on_drained, *on_other}, (gone, gg.output_of(controller))
        assert max(gone.values()) - min(gone.values()) < 3.0, gone  # one round, not one by one
        assert min(gone.values()) >= due - 1.0, (min(gone.values()), due)  # not before
        for name in (*on_drained, *on_other):
            told = [
                r
                for r in gg.reasons(kube, namespace, name)
                if r in ("ScheduledEviction", "Evicted")
            ]
            assert told.count("ScheduledEviction") == 1, (name, told)
        code, out = finished(drain, timeout=120)
        assert code == 0, out + gg.output_of(controller)
        assert TAKEN_OVER in out, out
        # The other node: never cordoned, never held for the drain.
        node = kube.get(Node, other)
        assert node.spec is not None and not node.spec.unschedulable
        assert ann.HELD_FOR not in ((node.metadata.annotations or {}) if node.metadata else {})
        assert hook.ready()

        # Without a gang: a NonIndexed Job, the same busy worker, the same drain.
        story_b = f"{namespace}-loose"
        drained_b = gg.node_name(kwok_nodes("c", labels={"story": story_b}, cpu="2"))
        other_b = gg.node_name(kwok_nodes("d", labels={"story": story_b}, cpu="2"))
        loose = start_job(kube, namespace, "loose", story_b, indexed=False)
        assert sorted(len(v) for v in loose.values()) == [2, 2], loose
        annotate(control_plane, namespace, loose[other_b][0], ann.BUSY, "true")
        wait_until(
            lambda: projected(kube, namespace, loose[other_b][0]),
            timeout=30,
            what="the busy loose worker protected",
        )
        drain_b = kubectl_drain(control_plane, drained_b, timeout=120)
        started = time.time()
        lost = terminating_at(kube, namespace, loose[drained_b])
        assert set(lost) == set(loose[drained_b]), lost
        assert max(lost.values()) - started < 3 * NOTICE_LEAD + 20, lost
        assert not is_gone_or_going(kube, loose[other_b][0], namespace)  # its peers are gone
        code_b, out_b = finished(drain_b, timeout=90)
        assert code_b == 0, out_b
