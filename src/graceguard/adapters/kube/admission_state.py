"""The webhook's view of the cluster: informers (a ``ClusterView``, minus what a webhook never
reads) and the facts built from them, kept fresh without ever making a review wait.

A review reads its pod straight from the pod informer's store (a dictionary lookup, as fresh as
the watch) and the floors, the Deployments' replicas (for the surge rule) and the Namespaces'
labels (for ``spec.protect`` rules with a ``namespaceSelector``) from ``Facts``. Facts are
brought up to date only when a watched object changed, at most once per ``interval`` (1 s), by
an ``admission_facts.FactsTally``: a rebuild does the work of the pods and workloads that changed
since the last one plus a pointer comparison per pod (for 30,000 pods of which 300 were replaced:
3-4 ms in a loop, 11-15 ms measured once after a bench run with its memory cold; a whole build
took 25-30 ms in the loop; and next to nothing for the garbage collector), in chunks of about
``CHUNK`` pods' work with the event loop free for ``PAUSE`` in between, so a rebuild over a large
cluster delays a review by one chunk at most (well under a millisecond), never by the whole pass.
Until the first build the state is not ``synced``. ``after_build`` runs after each build (the
server freezes the heap then: ``HeapFreezer``).

For taking evictions over it also watches nodes (compact: cordoned? tainted by an autoscaler?) and
the ``Disruption`` objects (the open ones by node, rebuilt only when one changed); neither starts a
rebuild of the facts, which do not read them. A cluster without the Disruption CRD still reviews
(the informer is optional): it only cannot open takeovers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Pod

from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.adapters.kube import resources, view
from graceguard.adapters.kube.informer import Informer
from graceguard.domain import cluster, disruption, policy
from graceguard.engine import admission_facts
from graceguard.webhook import metrics as webhook_metrics

log = logging.getLogger(__name__)

CHUNK = 200
"""Pods (or budgets, or a fifth as many workloads, or ``admission_facts.WALK`` times as many pods
compared) added to the facts between two chances for reviews to run: about 0.1 ms of work
(0.09 ms median measured on a 30,000-pod cluster; 500 pods took 0.22 ms, a wait added to every
review arriving during a rebuild)."""
PAUSE = 0.001
"""Seconds the loop is left to reviews after each chunk. Handing it back for no time at all
(``sleep(0)``) ran a chunk in every turn of the loop while a rebuild lasted, so a review arriving
then waited for a chunk in each of the two or three turns it takes (request, handler, answer); a
pause lets it meet one chunk at most. The first build of 30,000 pods (about 250 chunks) then
spans about 0.3 s instead of about 0.04 s, a rebuild after 300 of them changed about 100 chunks:
both well within ``interval``."""
FETCH_TIMEOUT = 2.0


class LiveAdmissionState:
    def __init__(
        self,
        client: lightkube.AsyncClient,
        *,
        interval: float = 1.0,
        chunk: int = CHUNK,
        pause: float = PAUSE,
        after_build: Callable[[], None] | None = None,
        metrics: webhook_metrics.WebhookMetrics | None = None,
    ) -> None:
        self._client = client
        self._metrics = metrics or webhook_metrics.WebhookMetrics()
        self._view = view.ClusterView(client)
        self._owners = view.ReplicaSetOwners(self._view.replicasets.store)
        quiet = asyncio.Event()  # what facts do not read changes nothing the rebuild uses
        self._nodes = Informer(
            client=client, resource=resources.Node, convert=view.compact_node, changed=quiet
        )
        self._disruptions = kube_disruptions.watch(client, changed=quiet)
        self._open: dict[str, list[disruption.DisruptionRequest]] = {}
        self._open_generation = -1
        self._interval = interval
        self._chunk = chunk
        self._pause = pause
        self._after_build = after_build
        self._facts: admission_facts.Facts | None = None
        self._tally = admission_facts.FactsTally()
        self._keys: tuple[list[str], list[str]] = ([], [])
        self._pods: tuple[list[cluster.Pod], list[cluster.Pod]] = ([], [])
        """The pod store's keys and pods as each rebuild hands them to the tally: two lists
        filled in place in turn (the tally keeps the last pass's while the next is filled), not
        two new lists per rebuild: a new list of 30,000 pods is young, and every collection of
        the youngest generation while it is walks every pod it holds (2-3 ms, cold in memory,
        stalling every review under way)."""
        self.builds = 0

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        """What a webhook reads: no events."""
        v = self._view
        return (
            v.pods,
            v.budgets,
            v.deployments,
            v.statefulsets,
            v.replicasets,
            v.policies,
            v.namespaces,
            self._nodes,
            self._disruptions,
        )

    @property
    def synced(self) -> bool:
        return self._facts is not None

    def pod(self, namespace: str, name: str) -> cluster.Pod | None:
        found = self._view.pods.store.get(f"{namespace}/{name}")
        return None if found is None else self._resolved(found)

    def _resolved(self, pod: cluster.Pod) -> cluster.Pod:
        """``pod`` counting toward its workload's owner (``cluster.owned_by``), as the
        controller's snapshot has it."""
        w = pod.workload
        if w is not None and (owner := cluster.owned_by(w, self._owners)) is not w:
            return dataclasses.replace(pod, workload=owner)
        return pod

    async def fetch_pod(self, namespace: str, name: str) -> cluster.Pod | None:
        found = await self._fetch(Pod, name, namespace=namespace)
        return None if found is None else self._resolved(view.compact_pod(found))

    async def _fetch(
        self, resource: Any, name: str, *, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """One object read from the API (``FETCH_TIMEOUT`` at most), as a plain document;
        ``None`` when it does not exist."""
        try:
            async with asyncio.timeout(FETCH_TIMEOUT):
                found = await self._client.get(resource, name, namespace=namespace)
        except ApiError as err:
            if err.status.code == 404:
                return None
            raise
        return resources.document(found)

    def facts(self) -> admission_facts.Facts:
        return self._facts or admission_facts.EMPTY_FACTS

    def policy(self) -> policy.Policy:
        return self._view.policy()[0]

    def node(self, name: str) -> cluster.Node | None:
        return self._nodes.store.get(name)

    async def fetch_node(self, name: str) -> cluster.Node | None:
        found = await self._fetch(resources.Node, name)
        return None if found is None else view.compact_node(found)

    def open_disruptions(self, node: str) -> list[disruption.DisruptionRequest]:
        """The disruptions open on ``node``, from an index by node rebuilt only after the
        Disruption objects changed."""
        informer = self._disruptions
        if informer.generation != self._open_generation:
            by_node: dict[str, list[disruption.DisruptionRequest]] = {}
            for entry in informer.store.values():
                if entry.request is not None:
                    by_node.setdefault(entry.request.node, []).append(entry.request)
            self._open = by_node
            self._open_generation = informer.generation
        return list(self._open.get(node, ()))

    async def run(self) -> None:
        """Run the informers and keep the facts fresh (until cancelled)."""
        tasks = [asyncio.create_task(i.run(), name=f"informer-{i.name}") for i in self.informers]
        try:
            await asyncio.gather(*(i.synced.wait() for i in self.informers))
            log.info("cache synced: %d pods", len(self._view.pods.store))
            loop = asyncio.get_running_loop()
            changed = self._view.changed
            while True:
                changed.clear()
                started = loop.time()
                await self.rebuild()
                self._metrics.facts_build.observe(loop.time() - started)
                await asyncio.sleep(max(0.0, self._interval - (loop.time() - started)))
                await changed.wait()
        finally:
            for task in tasks:
                task.cancel()

    async def rebuild(self) -> None:
        """Bring the facts up to date with the stores (``admission_facts.FactsTally``: the work of
        the pods and workloads that changed since the last rebuild, plus a pointer comparison
        per pod)."""
        v = self._view
        workloads, owners = v.workloads()
        store = v.pods.store
        keys, pods = self._keys[self.builds % 2], self._pods[self.builds % 2]
        keys[:] = store
        pods[:] = store.values()
        for _ in self._tally.steps(
            keys=keys,
            pods=pods,
            workloads=workloads,
            budgets=list(v.budgets.store.values()),
            owners=owners,
            pol=self.policy(),
            namespaces=v.namespace_labels(),
            chunk=self._chunk,
        ):
            await asyncio.sleep(self._pause)
        self._facts = self._tally.facts()
        self.builds += 1
        if self._after_build is not None:
            self._after_build()

    @property
    def view(self) -> view.ClusterView:
        """The informers' stores (benchmarks fill them without an apiserver)."""
        return self._view
