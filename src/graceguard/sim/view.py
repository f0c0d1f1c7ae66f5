"""The simulated cluster as the reconcile round's view (``controller.ports.RoundView``): the world
at the instant it was advanced to, as the controller's informers would show it.

A simulated source forgets a request once graceguard completes it (``RequestBook.release``), so no
finished Disruption is kept for ``disruptionTTL`` and none is shown; a scenario's requests are
built by its actors, never written wrong, so none is rejected. The simulated API answers at once:
there are no versions to write over, and every write is seen as soon as it is made.
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import cluster, disruption
from graceguard.sim.world import World


class SimView:
    def __init__(self, world: World) -> None:
        self.world = world

    def snapshot(self) -> cluster.Snapshot:
        return self.world.api.snapshot(self.world.now)

    def requests(self) -> list[disruption.DisruptionRequest]:
        return [r.request for r in self.world.requests.values()]

    def finished(self) -> list[tuple[str, dt.datetime]]:
        return []

    def rejected(self) -> list[disruption.Rejected]:
        return []

    def versions(self, keys: list[str]) -> dict[str, str]:
        return {}

    async def settle(self, before: dict[str, str], *, timeout: float = 5.0) -> bool:
        return True
