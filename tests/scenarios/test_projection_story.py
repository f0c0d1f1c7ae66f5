"""The projection story of issue 13, in the simulator: the same steps and the same annotations as
``tests/e2e/test_projection.py`` shows on the real control plane with the real controller.

A pod with ``graceguard.io/min-runtime: 45s`` and the user's own ``safe-to-evict: "false"`` gets
``do-not-disrupt: "true"`` projected; the user removes their ``safe-to-evict`` and graceguard
projects it too, listing both as its own; when the 45 s end, both are retracted.
"""

from __future__ import annotations

import datetime as dt

from graceguard.domain import annotations as ann
from graceguard.sim import runner
from graceguard.sim.eventloop import EventLoop
from graceguard.sim.scenario import read_scenario
from graceguard.sim.world import Mode, World

START = dt.datetime(2026, 11, 20, 0, 0, tzinfo=dt.UTC)
OURS = (ann.CA_SAFE_TO_EVICT, ann.KARPENTER_DO_NOT_DISRUPT, ann.PROJECTED)


def mine(annotations: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in annotations.items() if k in OURS}


def test_a_second_projection_is_retracted_with_the_first() -> None:
    scenario = read_scenario(
        {
            "name": "projection-story",
            "start": START.isoformat(),
            "nodes": [{"name": "n1"}],
            "pods": [
                {
                    "name": "api",
                    "node": "n1",
                    "work": "1h",
                    "owner": "Job/api",
                    "annotations": {ann.MIN_RUNTIME: "45s", ann.CA_SAFE_TO_EVICT: "false"},
                }
            ],
            # a scenario needs an actor; this one is never stepped here
            "actors": [{"type": "cluster-autoscaler", "events": [{"at": "5h", "node": "n1"}]}],
        }
    )
    world = World(scenario, Mode.WITH)
    loop = EventLoop()
    try:
        graceguard = runner.install_graceguard(world, loop)
        world.advance(START)
        graceguard.step(START)
        (api,) = world.pods
        assert mine(api.annotations) == {
            ann.CA_SAFE_TO_EVICT: "false",
            ann.KARPENTER_DO_NOT_DISRUPT: "true",
            ann.PROJECTED: ann.KARPENTER_DO_NOT_DISRUPT,
        }
        # the user removes their own safe-to-evict
        del api.annotations[ann.CA_SAFE_TO_EVICT]
        api.kube = None
        later = START + dt.timedelta(seconds=10)
        world.advance(later)
        graceguard.step(later)
        assert mine(api.annotations) == {
            ann.CA_SAFE_TO_EVICT: "false",
            ann.KARPENTER_DO_NOT_DISRUPT: "true",
            ann.PROJECTED: f"{ann.KARPENTER_DO_NOT_DISRUPT},{ann.CA_SAFE_TO_EVICT}",
        }
        # protection ends at 45 s: graceguard's wake-up says so, and both keys go
        assert graceguard.wake == START + dt.timedelta(seconds=45)
        world.advance(graceguard.wake)
        graceguard.step(graceguard.wake)
        assert mine(api.annotations) == {}
    finally:
        loop.close()
