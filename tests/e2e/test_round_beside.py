"""A drain asked while the controller is still telling another node's pods (issue 22): on the real
control plane with ``graceguard controller`` running, the second node's pods get their
``ProposedEviction`` while the round telling the first node's pods is still going, in a round
beside it (``loop.Controller._beside``), not after it; and no pod is told twice.

Node ``a`` has ``BIG`` pods and node ``b`` ``SMALL``. The first Disruption (node ``a``) is
created; once its first ``ProposedEviction`` is seen, the second (node ``b``) is created straight
through the API (a CLI process would take longer to start than the round lasts). The round
telling ``a``'s pods gives each its notice patch and ``ProposedEviction`` first, then each its
``ScheduledEviction`` (the policy's ``noticeLead`` is short, so both are due at once): it ends
with ``a``'s last ``ScheduledEviction``. Without the round beside, ``b``'s notices wait for that
end. Checked with ``rounds.beside`` keeping nothing: ``b``'s came 0.0-0.09 s after ``a``'s last
``ScheduledEviction`` (this test fails); with it, 0.3-0.5 s before.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Event, Pod

import controlplane
from graceguard.adapters.kube import resources
from graceguard.domain import disruption
from graceguard.manifests import disruptions

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import is_running_ready, pod, wait_until

pytestmark = pytest.mark.e2e

BIG, SMALL = 200, 5
PROPOSED, SCHEDULED = "ProposedEviction", "ScheduledEviction"


def _open(kube: Client, node: str) -> None:
    request = disruption.DisruptionRequest(
        id=disruptions.request_name(
            source="e2e-drain", node=node, pod=None, at=dt.datetime.now(dt.UTC)
        ),
        node=node,
        source="e2e-drain",
        disruption_class=disruption.DisruptionClass.VOLUNTARY,
        requested_at=dt.datetime.now(dt.UTC),
        reason="e2e",
        requested_by="e2e",
    )
    body: Any = resources.Disruption.from_dict(disruptions.object_for(request))
    kube.create(body)


class Seen:
    """Each pod's first ``ProposedEviction`` and ``ScheduledEviction`` in the namespace, when
    this test first listed them (every ``0.05`` s, from a thread)."""

    def __init__(self, kube: Client, namespace: str) -> None:
        self.at: dict[str, float] = {}
        self.scheduled: dict[str, float] = {}
        self.told: dict[tuple[str, str], int] = {}
        self._kube, self._namespace = kube, namespace
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            told: dict[tuple[str, str], int] = {}
            for e in self._kube.list(Event, namespace=self._namespace):
                name = e.involvedObject.name or ""
                told[(name, e.reason or "")] = told.get((name, e.reason or ""), 0) + (e.count or 1)
                if e.reason == PROPOSED:
                    self.at.setdefault(name, now)
                elif e.reason == SCHEDULED:
                    self.scheduled.setdefault(name, now)
            self.told = told
            time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_a_drain_asked_mid_round_is_told_beside_it(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    controller: gg.Controller,
) -> None:
    a, b = gg.node_name(kwok_nodes("a", pods=BIG + 10)), gg.node_name(kwok_nodes("b"))
    names = {a: [f"a-{i}" for i in range(BIG)], b: [f"b-{i}" for i in range(SMALL)]}
    for node, pods in names.items():
        for name in pods:
            kube.create(pod(name, cpu="10m", node_name=node), namespace=namespace)

    def running() -> bool | None:
        ready = [p for p in kube.list(Pod, namespace=namespace) if is_running_ready(p)]
        return len(ready) == BIG + SMALL or None

    wait_until(running, timeout=120, what=f"{BIG + SMALL} pods Running")
    seen = Seen(kube, namespace)
    try:
        _open(kube, a)
        wait_until(lambda: bool(seen.at) or None, timeout=30, what=f"a first {PROPOSED} on {a}")
        _open(kube, b)

        def everyone() -> bool | None:
            return len(seen.at) == len(seen.scheduled) == BIG + SMALL or None

        wait_until(everyone, timeout=90, what=f"every pod's {PROPOSED} and {SCHEDULED}")
    finally:
        seen.stop()
    round_end = max(seen.scheduled[n] for n in names[a])
    on_b = sorted(seen.at[n] for n in names[b])
    assert on_b[-1] < round_end, (
        f"{b}'s pods were told {[round(t - round_end, 2) for t in on_b]} s after the round "
        f"telling {a}'s pods ended"
    )
    twice = {k: n for k, n in seen.told.items() if n > 1}
    assert not twice, f"told twice: {twice}"
