"""Where a simulated pod starts: the simulator's scheduler, kept simple.

A pod that asks for a node runs there while that node is alive and schedulable (and waits until
it has launched); otherwise, like a replacement, it runs on the live, schedulable node with the
fewest pods (ties by name) that is neither scheduled to go nor being disrupted.
"""

from __future__ import annotations

import datetime as dt

from graceguard.sim.fleet import Fleet
from graceguard.sim.pods import SimNode, SimPod
from graceguard.sim.population import Population
from graceguard.sim.requests import RequestBook


def node_for(
    pod: SimPod,
    now: dt.datetime,
    *,
    fleet: Fleet,
    population: Population,
    requests: RequestBook,
) -> SimNode | None:
    """The node ``pod`` starts on at ``now``; ``None``: it waits (no node takes it yet)."""
    wanted = fleet.nodes.get(pod.want_node) if pod.want_node else None
    if wanted is not None and wanted.end is None and not wanted.cordoned:
        return wanted if wanted.start <= now else None  # waits for its node to launch
    disrupted = requests.nodes()
    choices = [
        n
        for n in fleet.alive(now)
        if not n.cordoned and n.ends_at is None and n.name not in disrupted
    ]
    if not choices:
        return None
    return min(choices, key=lambda n: (population.count_on(n.name), n.name))
