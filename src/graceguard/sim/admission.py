"""The eviction webhook in the simulated cluster: the real ``AdmissionService`` answers every
eviction a simulated actor asks for, over the world as its admission state.

``SimAdmission`` is the service's ``AdmissionState`` port over a ``World`` (the pod as the API
serves it, its node, the open disruptions, the floors and PDBs as
``engine.admission_facts.Facts``, the scenario's policy) and its ``DisruptionOpener`` (a
takeover becomes an open request graceguard's simulated controller carries out, as a
``Disruption`` object does in a cluster); it builds the ``AdmissionReview`` the API server would
send for an eviction, so that the service parses and answers exactly what it does in a cluster.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import uuid

from graceguard.domain import cluster, disruption, policy
from graceguard.engine import admission_facts
from graceguard.sim.eventloop import EventLoop
from graceguard.sim.pods import SimPod
from graceguard.sim.ports import Refusal
from graceguard.sim.requests import OpenRequest
from graceguard.sim.world import World
from graceguard.webhook.service import AdmissionService, Answer


class SimAdmission:
    """The webhook service's ``AdmissionState`` over the simulated world."""

    def __init__(self, world: World, pol: policy.Policy) -> None:
        self._world = world
        self._policy = pol
        self._facts: tuple[int, admission_facts.Facts] | None = None

    @property
    def synced(self) -> bool:
        return True

    def pod(self, namespace: str, name: str) -> cluster.Pod | None:
        found = self._world.pod(f"{namespace}/{name}")
        return None if found is None else self._world.api.kube_pod(found)

    async def fetch_pod(self, namespace: str, name: str) -> cluster.Pod | None:
        return self.pod(namespace, name)

    def facts(self) -> admission_facts.Facts:
        """Rebuilt whenever a pod started, stopped or ended since the last build."""
        world = self._world
        if self._facts is None or self._facts[0] != world.generation:
            snap = world.api.snapshot(world.now)
            built = admission_facts.FactsBuilder(
                workloads=snap.workloads,
                budgets=snap.budgets,
                owners={},
                pol=self._policy,
                namespaces=snap.namespaces,
            ).build(snap.pods)
            self._facts = (world.generation, built)
        return self._facts[1]

    def policy(self) -> policy.Policy:
        return self._policy

    def node(self, name: str) -> cluster.Node | None:
        found = self._world.nodes.get(name)
        if found is None or found.end is not None:
            return None
        return self._world.api.kube_node(found)

    async def fetch_node(self, name: str) -> cluster.Node | None:
        return self.node(name)

    def open_disruptions(self, node: str) -> list[disruption.DisruptionRequest]:
        return [r.request for r in self._world.requests.values() if r.request.node == node]

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        """The takeover opens a request; the evictor does not wait for it (it retries, or gives
        up and comes back), so its release only marks the timeline."""
        if request.id in self._world.requests:
            return False
        self._world.requests.open(OpenRequest(request, _no_release), self._world.now)
        return True

    async def evictor_asked(self, *, request_id: str, source: str, pod: str) -> None:
        """``webhook.ports.EvictorSightings``: the open request notes when its evictor asked."""
        found = self._world.requests.get(request_id)
        if found is not None:
            found.request = dataclasses.replace(found.request, evictor_asked_at=self._world.now)


def _no_release(_at: dt.datetime) -> None:
    """The evictor whose drain was taken over waits for nothing: it finds the node empty."""


def eviction_review(*, pod: cluster.Pod, username: str, grace_seconds: int | None) -> bytes:
    """The ``AdmissionReview`` the API server sends for ``CREATE pods/eviction`` by ``username``."""
    options = {} if grace_seconds is None else {"gracePeriodSeconds": grace_seconds}
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "subResource": "eviction",
                "operation": "CREATE",
                "namespace": pod.namespace,
                "name": pod.name,
                "userInfo": {"username": username},
                "dryRun": False,
                "object": {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": pod.name, "namespace": pod.namespace},
                    "deleteOptions": options,
                },
            },
        }
    ).encode()


class SimWebhook:
    """``sim.ports.Webhook``: each eviction an actor asks for, reviewed by the real service."""

    def __init__(self, world: World, service: AdmissionService, loop: EventLoop) -> None:
        self._world = world
        self._service = service
        self._loop = loop

    def __call__(self, pod: SimPod, *, username: str, grace_seconds: int) -> Refusal | None:
        body = eviction_review(
            pod=self._world.api.kube_pod(pod), username=username, grace_seconds=grace_seconds
        )
        answer = self._loop.run(self._review(body))
        verdict = answer.verdict
        if verdict is not None:
            return None if verdict.allowed else Refusal(verdict.message, verdict.until)
        # no verdict: the pod was not found, or the service could not decide (failure policy)
        if answer.status != 200:
            return Refusal(answer.body.decode(errors="replace"))
        response = json.loads(answer.body)["response"]
        if response["allowed"]:
            return None
        return Refusal(str(response.get("status", {}).get("message", "refused")))

    async def _review(self, body: bytes) -> Answer:
        answer = await self._service.review(body)
        # Its report (event, ledger) lands at this instant; a takeover's when it is due.
        await self._service.settle(waiting=False)
        return answer

    def release(self, now: dt.datetime) -> bool:
        """Write the reports of refusals taken over that are due at ``now`` (the service's
        ``release``), at this instant; whether there were any."""
        due = self._service.next_release
        if due is None or due > now:
            return False  # most steps: no loop to run

        async def release() -> int:
            released = self._service.release(now)
            await self._service.settle(waiting=False)
            return released

        return self._loop.run(release()) > 0

    @property
    def next_release(self) -> dt.datetime | None:
        """When the next report of a refusal taken over is due."""
        return self._service.next_release
