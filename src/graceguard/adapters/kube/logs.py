"""``LogSource`` on the ``pods/log`` subresource (the kubelet serves it; a kwok node has none,
and the API then answers with an error that becomes "no logs available"). The last lines are
read to their end, never followed: the controller reads them through its client of unary
requests (``client.connect(writers=...)``, connections kept open), beside the executor's
writes, so that the captures before a mass drain's evictions open no new connection each."""

from __future__ import annotations

from collections.abc import Sequence

import lightkube
from lightkube.resources.core_v1 import Pod

from graceguard.engine import actions as act


class KubeLogSource:
    def __init__(self, client: lightkube.AsyncClient) -> None:
        self._client = client

    async def containers(self, pod: act.PodRef) -> Sequence[str]:
        found = await self._client.get(Pod, pod.name, namespace=pod.namespace)
        spec = found.spec
        return [c.name for c in spec.containers] if spec is not None else []

    async def last_lines(self, *, pod: act.PodRef, container: str, lines: int) -> Sequence[str]:
        return [
            line.rstrip("\n")
            async for line in self._client.log(
                pod.name, namespace=pod.namespace, container=container, tail_lines=lines
            )
        ]
