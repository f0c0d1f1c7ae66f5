"""Whether a graceguard controller leads, for the webhook (``webhook.ports.ControllerPresence``)
and the node agent (``agent.ports.ControllerPresence``): the controller's Lease, read every
``EVERY`` seconds by the webhook, and by the agent only while a shutdown needs it
(``leads_now``).

A controller leads while the Lease has a holder and was renewed within its duration plus a grace.
For the webhook, ``GRACE``: a failover (about 12 s) is not an absence, and the webhook goes on
taking evictions over for the next leader. For the agent, ``FAILOVER``: a standby takes a Lease
within its retry period (2 s) of the Lease's expiry; past that, nobody carries on the shutdown's
drain the controller began, and the agent takes it back while logind's delay lasts. Until the
Lease is first read, and while it cannot be read (no permission, the API server away), the
controller is taken to lead, as before this check: only a Lease read and found stale, or
missing, makes the webhook decide without takeover, or the agent take a drain back.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging

import httpx2
import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.resources.coordination_v1 import Lease

log = logging.getLogger(__name__)

EVERY = 2.0
READ_TIMEOUT = 2.0
GRACE = dt.timedelta(seconds=30)
FAILOVER = dt.timedelta(seconds=5)


class LeasePresence:
    def __init__(
        self,
        client: lightkube.AsyncClient,
        *,
        namespace: str,
        name: str,
        grace: dt.timedelta = GRACE,
        absent: str = "no controller leads: no takeover",
    ) -> None:
        """``absent``: what the log says when no controller leads."""
        self._client = client
        self.namespace = namespace
        self.name = name
        self._grace = grace
        self._absent = absent
        self._until: dt.datetime | None = None
        """Until when the last read Lease counts as led (``datetime.min``: none leads)."""
        self._read = False
        self._was: bool | None = None

    def leads(self, now: dt.datetime) -> bool:
        if not self._read or self._until is None:
            return True
        return now <= self._until

    async def run(self) -> None:
        """Read the Lease every ``EVERY`` seconds (the webhook: ``leads`` is asked on every
        review)."""
        while True:
            await self.leads_now()
            await asyncio.sleep(EVERY)

    async def leads_now(self) -> bool:
        """Read the Lease now (``READ_TIMEOUT`` at most), then ``leads``; logged when it changed.
        The agent reads it only this way, while a shutdown needs to know: every node's agent
        reading it every two seconds, always, would load a large cluster's API server."""
        await self._refresh()
        leads = self.leads(dt.datetime.now(dt.UTC))
        if self._read and leads != self._was:
            log.info(
                "controller Lease %s/%s: %s",
                self.namespace,
                self.name,
                "a controller leads" if leads else self._absent,
            )
            self._was = leads
        return leads

    async def _refresh(self) -> None:
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                lease = await self._client.get(Lease, self.name, namespace=self.namespace)
        except ApiError as err:
            if err.status.code == 404:
                self._read, self._until = True, dt.datetime.min.replace(tzinfo=dt.UTC)
                return
            log.warning("cannot read controller Lease %s/%s: %s", self.namespace, self.name, err)
            return
        except (httpx2.HTTPError, OSError) as err:  # OSError: the timeout too
            log.warning("cannot read controller Lease %s/%s: %s", self.namespace, self.name, err)
            return
        spec = lease.spec
        renewed = (spec.renewTime or spec.acquireTime) if spec else None
        self._read = True
        if spec is None or not spec.holderIdentity or renewed is None:
            self._until = dt.datetime.min.replace(tzinfo=dt.UTC)
            return
        self._until = renewed + dt.timedelta(seconds=spec.leaseDurationSeconds or 0) + self._grace
