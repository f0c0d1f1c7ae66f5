"""``ClusterWriter`` on the Kubernetes API through lightkube.

Notices: the ``PodEviction`` condition and the notice's annotations go in one strategic merge
patch of the status subresource (``conditions`` keyed by ``type``); every other pod write is a
JSON merge patch of the annotations. Events are core
``v1`` Events reported by ``graceguard``. Evictions use the Eviction subresource with the pod's own
grace period; 429 means a budget or a webhook refused. A ``Disruption``'s progress goes through
the Disruption store (``adapters.kube.disruptions``) to its status subresource, carrying the
``metadata.resourceVersion`` the controller's round read, so the API server refuses it (409
Conflict) when anyone changed the object since: a Disruption cancelled or completed by someone else
mid-round is never written back to the phase the round planned from. One deleted meanwhile is
simply gone.

With ``writes``, each pod and node write is registered there before it is sent and answered
with the version it made (an eviction or a delete: with the pod going), so the view's ``settle``
waits until its informers have seen each one (``written``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from graceguard.adapters.kube import cordons, events, sightings, written
from graceguard.adapters.kube import disruptions as kube_disruptions
from graceguard.controller import ports
from graceguard.domain import annotations as ann
from graceguard.domain import (
    cluster,
    disruption,
    node_cordon,
    node_hold,
    notices,
    pod_writes,
    times,
)
from graceguard.engine import actions as act

log = logging.getLogger(__name__)

CONDITION = "PodEviction"
COMPONENT = "graceguard"


def status_patch(
    annotations: Mapping[str, str | None], condition: Mapping[str, str]
) -> dict[str, object]:
    """The body of a strategic merge patch of a pod's status subresource that merges
    ``condition`` into its conditions by ``type`` and sets ``annotations`` (``None``: removed)."""
    return {"metadata": {"annotations": dict(annotations)}, "status": {"conditions": [condition]}}


def notice_patch(notice: notices.Notice) -> dict[str, object]:
    """``status_patch`` posting ``notice``: the ``PodEviction`` condition saying it and the
    annotations ``pod_writes`` maps it to (bench/ceiling.py replays this very body)."""
    condition = {
        "type": CONDITION,
        "status": "True",
        "reason": notice.reason.value,
        "message": notice.message,
        "lastTransitionTime": times.format_time(notice.at.replace(microsecond=0)),
    }
    posted = pod_writes.NoticePosted(notice=notice)
    return status_patch(pod_writes.annotation_changes(posted), condition)


class LightkubeWriter:
    def __init__(
        self,
        client: lightkube.AsyncClient,
        *,
        instance: str | None = None,
        component: str = "graceguard.io/controller",
        writes: written.Writes | None = None,
    ) -> None:
        self._client = client
        self._writes = writes
        self._disruptions = kube_disruptions.DisruptionStore(client)
        self._instance = instance or os.environ.get("POD_NAME", "graceguard")
        self._component = component

    async def post_event(
        self, *, pod: act.PodRef, reason: str, message: str, warning: bool = False
    ) -> None:
        await self._client.create(
            events.event(
                involved=events.pod_object(namespace=pod.namespace, name=pod.name, uid=pod.uid),
                namespace=pod.namespace,
                reason=reason,
                message=message,
                warning=warning,
                source={"component": COMPONENT},
                reporting_component=self._component,
                reporting_instance=self._instance,
            )
        )

    async def evictor_asked(self, *, request_id: str, source: str, pod: str) -> None:
        """``webhook.ports.EvictorSightings``: an ``EvictionRequested`` event on the Disruption
        (``sightings``)."""
        await self._client.create(
            sightings.event(
                request_id=request_id,
                source=source,
                pod=pod,
                component=self._component,
                instance=self._instance,
            )
        )

    async def write_pod(self, *, pod: act.PodRef, write: pod_writes.PodWrite) -> None:
        """The annotations ``pod_writes`` maps ``write`` to, in one patch; for a notice (posted
        or withdrawn) the ``PodEviction`` condition in the same patch, through the status
        subresource, which takes the pod's annotations with its status (only its spec,
        deletion timestamp and owners are kept from a status write; tests/e2e
        test_adapter_contract.py shows it on the API server): a notice is one write, never
        half on the pod."""
        annotations = pod_writes.annotation_changes(write)
        resource: Any = Pod.Status
        how = PatchType.STRATEGIC
        match write:
            case pod_writes.NoticePosted(notice=notice):
                body = notice_patch(notice)
            case pod_writes.NoticeWithdrawn():
                body = status_patch(annotations, {"type": CONDITION, "$patch": "delete"})
            case _:
                body, resource, how = (
                    {"metadata": {"annotations": annotations}},
                    Pod,
                    PatchType.MERGE,
                )
        await self._tracked(
            f"pod:{pod.key}",
            lambda: self._client.patch(
                resource, pod.name, body, namespace=pod.namespace, patch_type=how
            ),
        )

    async def _tracked(
        self,
        key: str,
        send: Callable[[], Awaitable[Any]],
        *,
        going: bool = False,
        version: Callable[[Any], str | None] = written.version_of,
    ) -> Any:
        """``send()``'s answer, the write registered in ``writes`` (if any) before it is sent
        and answered with the version it made (``version`` of the answer); a failed one is
        dropped."""
        if self._writes is None:
            return await send()
        write = self._writes.begin(key, going=going)
        try:
            answer = await send()
        except BaseException:
            self._writes.failed(write)
            raise
        self._writes.answered(write, version=version(answer))
        return answer

    async def evict(
        self, *, pod: act.PodRef, grace_seconds: int
    ) -> tuple[ports.EvictionResult, str]:
        eviction = Pod.Eviction(
            metadata=ObjectMeta(name=pod.name, namespace=pod.namespace),
            deleteOptions=DeleteOptions(gracePeriodSeconds=grace_seconds),
        )
        try:
            await self._tracked(
                f"pod:{pod.key}",
                lambda: self._client.create(eviction, name=pod.name, namespace=pod.namespace),
                going=True,
            )
        except ApiError as err:
            if err.status.code == 429:
                return ports.EvictionResult.REFUSED, str(err.status.message)
            if err.status.code == 404:
                return ports.EvictionResult.GONE, str(err.status.message)
            raise
        return ports.EvictionResult.EVICTED, ""

    async def delete(self, *, pod: act.PodRef, grace_seconds: int) -> bool:
        try:
            await self._tracked(
                f"pod:{pod.key}",
                lambda: self._client.delete(
                    Pod, pod.name, namespace=pod.namespace, grace_period=grace_seconds
                ),
                going=True,
            )
        except ApiError as err:
            if err.status.code == 404:
                return False
            raise
        return True

    async def cordon(
        self, *, node: str, request_id: str, read_version: str | None = None, hold: bool = False
    ) -> None:
        """Marked as graceguard's, and only when nobody had cordoned it (``cordons.cordon``),
        held in the same patch with ``hold``."""
        await self._tracked(
            f"node:{node}",
            lambda: cordons.cordon(
                self._client,
                node=node,
                request_id=request_id,
                read_version=read_version,
                hold=hold,
            ),
            version=lambda made: made or None,  # None: cordoned already, nothing written
        )

    async def roll_out(self, *, workload: cluster.WorkloadRef, at: dt.datetime) -> None:
        """A merge patch of the Deployment's pod template annotations (a rollout, as ``kubectl
        rollout restart`` makes one); a Deployment that is gone is fine."""
        patch = {
            "spec": {
                "template": {"metadata": {"annotations": {ann.RESTARTED_AT: times.format_time(at)}}}
            }
        }
        try:
            await self._client.patch(
                Deployment,
                workload.name,
                patch,
                namespace=workload.namespace,
                patch_type=PatchType.MERGE,
            )
        except ApiError as err:
            if err.status.code != 404:
                raise

    async def uncordon(self, *, node: str) -> None:
        """``spec.unschedulable`` and graceguard's mark removed, in one merge patch (the engine
        asks only for a node its mark names: ``engine.takeovers``)."""
        changes = node_cordon.annotation_changes(request_id=None)
        await self._tracked(
            f"node:{node}",
            lambda: self._client.patch(
                Node,
                node,
                {"spec": {"unschedulable": None}, "metadata": {"annotations": changes}},
                patch_type=PatchType.MERGE,
            ),
        )

    async def hold_node(self, *, node: str, request_id: str | None) -> None:
        """The annotations ``node_hold`` maps the hold for ``request_id`` to (``None``: let
        go), in one merge patch."""
        changes = node_hold.annotation_changes(request_id=request_id)
        await self._tracked(
            f"node:{node}",
            lambda: self._client.patch(
                Node, node, {"metadata": {"annotations": changes}}, patch_type=PatchType.MERGE
            ),
        )

    async def complete_disruption(
        self, *, request_id: str, node: str, at: dt.datetime, read_version: str | None
    ) -> ports.StatusWrite:
        """The disruption's status says ``Done`` at ``at``, no pods left; the node stays
        cordoned (the source, an autoscaler, removes it)."""
        done = disruption.DisruptionStatus(
            disruption.Phase.DONE,
            completed_at=at,
            message=f"every pod it covers is gone from {node}" if node else "done",
        )
        return await self.report_disruption(
            request_id=request_id, status=done, read_version=read_version
        )

    async def report_disruption(
        self,
        *,
        request_id: str,
        status: disruption.DisruptionStatus,
        read_version: str | None,
    ) -> ports.StatusWrite:
        return await self._disruptions.write_status(
            request_id=request_id, status=status, read_version=read_version
        )

    async def delete_disruption(self, *, request_id: str) -> None:
        await self._disruptions.delete(request_id=request_id)
