"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

Defaults: a 10 s Lease renewed every 2 s, so a crashed leader is replaced within about 12 s.

The leader renews every ``retry`` seconds; a Lease not renewed for ``duration`` seconds may be
taken over. A leader that fails to renew for ``renew_deadline`` stops acting at once (before
another replica can take over), so two replicas never act together. Writes use the Lease's
resourceVersion: of two replicas racing for an expired Lease only one update succeeds.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import httpx2
import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.models.coordination_v1 import LeaseSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.coordination_v1 import Lease

log = logging.getLogger(__name__)


class LeaseElector:
    def __init__(
        self,
        client: lightkube.AsyncClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        duration: float = 10.0,
        renew_deadline: float = 7.0,
        retry: float = 2.0,
    ) -> None:
        self._client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.renew_deadline = renew_deadline
        self.retry = retry
        self._renewed_at: float | None = None  # monotonic time of the last successful renewal
        self.changed = asyncio.Event()

    @property
    def is_leader(self) -> bool:
        loop = asyncio.get_running_loop()
        return self._renewed_at is not None and loop.time() - self._renewed_at < self.renew_deadline

    async def run(self) -> None:
        while True:
            was = self.is_leader
            try:
                if await self._try_acquire_or_renew():
                    self._renewed_at = asyncio.get_running_loop().time()
            except (ApiError, httpx2.HTTPError, OSError) as err:
                log.warning("lease %s/%s: %s", self.namespace, self.name, err)
            if self.is_leader != was:
                log.info(
                    "%s %s leadership of %s/%s",
                    self.identity,
                    "acquired" if self.is_leader else "lost",
                    self.namespace,
                    self.name,
                )
                self.changed.set()
            await asyncio.sleep(self.retry)

    async def release(self) -> None:
        """Give the Lease up on a clean shutdown so a peer takes over at once."""
        if not self.is_leader:
            return
        self._renewed_at = None
        try:
            lease = await self._client.get(Lease, self.name, namespace=self.namespace)
            if lease.spec and lease.spec.holderIdentity == self.identity:
                lease.spec.holderIdentity = None
                await self._client.replace(lease)
        except (ApiError, httpx2.HTTPError, OSError) as err:
            log.warning("releasing lease: %s", err)

    async def _try_acquire_or_renew(self) -> bool:
        now = dt.datetime.now(dt.UTC)
        try:
            lease = await self._client.get(Lease, self.name, namespace=self.namespace)
        except ApiError as err:
            if err.status.code != 404:
                raise
            await self._client.create(
                Lease(
                    metadata=ObjectMeta(name=self.name, namespace=self.namespace),
                    spec=LeaseSpec(
                        holderIdentity=self.identity,
                        leaseDurationSeconds=int(self.duration),
                        acquireTime=now,
                        renewTime=now,
                        leaseTransitions=0,
                    ),
                )
            )
            return True
        spec = lease.spec or LeaseSpec()
        holder = spec.holderIdentity
        renewed = spec.renewTime or spec.acquireTime
        duration = dt.timedelta(seconds=spec.leaseDurationSeconds or self.duration)
        expired = renewed is None or renewed + duration < now
        if holder and holder != self.identity and not expired:
            return False
        if holder != self.identity:
            spec.leaseTransitions = (spec.leaseTransitions or 0) + 1
            spec.acquireTime = now
        spec.holderIdentity = self.identity
        spec.renewTime = now
        spec.leaseDurationSeconds = int(self.duration)
        lease.spec = spec
        try:
            await self._client.replace(lease)
        except ApiError as err:
            if err.status.code == 409:  # another replica won the race
                return False
            raise
        return True
