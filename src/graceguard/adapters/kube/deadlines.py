"""The deadlines nodes and Karpenter's NodeClaims announce, kept by two informers
(``controller.ports.Announcements``): Nodes (``graceguard.io/expires-at``, the
``MaintenancePlanned`` condition) and ``karpenter.sh/v1`` NodeClaims (their expiry,
``spec.expireAfter`` from creation, and their termination timestamp), the latter optional: a
cluster without Karpenter has no such resource, and the informer looks for it again every 30 s.
Each object is kept as what it announces (``manifests.deadlines``), nothing more."""

from __future__ import annotations

import asyncio
from typing import Any

import lightkube

from graceguard.adapters.kube import resources
from graceguard.adapters.kube.informer import Informer
from graceguard.domain import deadlines
from graceguard.manifests import deadlines as manifests


class DeadlineWatch:
    def __init__(self, client: lightkube.AsyncClient) -> None:
        self.changed = asyncio.Event()
        self.nodes = Informer(
            client=client,
            resource=resources.Node,
            convert=manifests.node_announced,
            changed=self.changed,
        )
        self.nodeclaims = Informer(
            client=client,
            resource=resources.NodeClaim,
            convert=manifests.nodeclaim_announced,
            changed=self.changed,
            optional=True,
        )

    @property
    def informers(self) -> tuple[Informer[Any], ...]:
        return (self.nodes, self.nodeclaims)

    def announced(self) -> list[deadlines.NodeDeadline | deadlines.Problem]:
        found: list[deadlines.NodeDeadline | deadlines.Problem] = []
        for store in (self.nodes.store, self.nodeclaims.store):
            for items in store.values():
                found.extend(items)
        return found
