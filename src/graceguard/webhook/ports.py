"""Every port the eviction webhook's service needs, as protocols typed with domain values.

Adapters implement them (``adapters.kube.admission_state``, ``adapters.kube.writer``,
``adapters.ledger``), the simulator implements them over its simulated cluster (``sim.admission``,
``sim.cluster``, ``sim.ledger``), and tests fake them. Nothing here does I/O.
"""

from __future__ import annotations

import datetime as dt
from typing import Protocol

from graceguard.domain import cluster, disruption, ledger, policy
from graceguard.engine import actions as act
from graceguard.engine import admission_facts


class AdmissionState(Protocol):
    """The cluster as the webhook sees it (an informer cache in production)."""

    @property
    def synced(self) -> bool:
        """The cache has listed everything once."""

    def pod(self, namespace: str, name: str) -> cluster.Pod | None:
        """The pod from the cache, its workload resolved to the Deployment owning its ReplicaSet."""

    async def fetch_pod(self, namespace: str, name: str) -> cluster.Pod | None:
        """The pod from the API (a pod too new for the cache); ``None`` when it does not exist."""

    def facts(self) -> admission_facts.Facts:
        """Floors and PDBs, rebuilt at most about once a second."""

    def policy(self) -> policy.Policy:
        """The DisruptionPolicy in force."""

    def node(self, name: str) -> cluster.Node | None:
        """The node from the cache (cordoned? tainted by an autoscaler?)."""

    async def fetch_node(self, name: str) -> cluster.Node | None:
        """The node from the API (a cordon too new for the cache); ``None`` when it does not
        exist."""

    def open_disruptions(self, node: str) -> list[disruption.DisruptionRequest]:
        """The disruptions open on ``node`` (not Done or Cancelled), from the cache."""


class DisruptionOpener(Protocol):
    """Creates the ``Disruption`` a takeover opens."""

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        """Create it under the name ``request.id``; ``False`` when one by that name exists
        already (another replica opened it: joined)."""


class EventPort(Protocol):
    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None: ...


class EvictorSightings(Protocol):
    """Tells the controller that the evictor of a Disruption taken over from it asked again
    (``engine.takeovers``: a taken-over drain ends once its evictor has given up)."""

    async def evictor_asked(self, *, request_id: str, source: str, pod: str) -> None: ...


class DenialLedger(Protocol):
    async def record_denial(self, rec: ledger.DenialRecord) -> bool: ...


class ControllerPresence(Protocol):
    """Whether a graceguard controller leads (its Lease), so that a takeover has someone to
    carry it out."""

    def leads(self, now: dt.datetime) -> bool: ...
