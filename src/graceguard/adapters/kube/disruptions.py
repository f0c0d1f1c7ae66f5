"""The ``Disruption`` store: every creation, read, watch and write of a ``Disruption`` object
(``graceguard.io/v1alpha1``) on the Kubernetes API goes through this module, and every document
it sends or reads is ``manifests.disruptions``'s (the one reading of a request, its status and
its hold). ``DisruptionStore`` creates, reads and writes; ``watch`` is the informer on them that
the controller's and the webhook's views hold (each object read into a ``DisruptionEntry``), and
the store asks that informer's cache for a phase before the API.

Creating: the object's name is the request's id; a create that finds one of that name already
(409 AlreadyExists: another webhook replica took the same node over in the same minute, a
redelivered SQS message) answers ``False``, joined. ``open_for_node`` (``graceguard drain``) joins
an open node-wide Disruption of that name and makes way for a finished one with a suffix.

Writing: a status is written over the version the round read (409: ``StatusWrite.CHANGED``); a
cancel reads the object, leaves a finished one as it is and writes over the version it read.
A Disruption CRD that is not installed comes out as ``client.KubeError`` naming it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import secrets
import typing
from collections.abc import Mapping
from typing import Any

import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from graceguard.adapters.kube import client, resources
from graceguard.adapters.kube.informer import Informer
from graceguard.controller import ports
from graceguard.domain import disruption
from graceguard.manifests import disruptions
from graceguard.manifests.errors import ManifestError

log = logging.getLogger(__name__)

NO_CRD = (
    "the Disruption CRD is not installed (kubectl apply -f deploy/crds/disruption.yaml, or "
    "install the chart)"
)
FINISHED = frozenset({disruption.Phase.DONE, disruption.Phase.CANCELLED})
"""Phases a cancel leaves as they are."""
CONFLICTS = 5
"""Reads and writes a cancel tries before it gives up on an object that keeps changing."""


@dataclasses.dataclass(frozen=True, slots=True)
class Stored:
    """A ``Disruption`` object as read now."""

    name: str
    version: str
    """``metadata.resourceVersion``."""
    status: disruption.DisruptionStatus | None
    """``None``: none reported yet (or one this graceguard cannot read)."""
    drained_by: str = ""
    """The node agent that took its drain over (``graceguard.io/drained-by``); empty: none."""

    @property
    def phase(self) -> disruption.Phase:
        return self.status.phase if self.status is not None else disruption.Phase.PENDING


@dataclasses.dataclass(frozen=True, slots=True)
class DisruptionEntry:
    """A ``Disruption`` object as the informer read it: exactly one of ``request`` (open),
    ``finished`` (Done or Cancelled) and ``rejected`` (it cannot be carried out as written) is
    set."""

    name: str
    request: disruption.DisruptionRequest | None = None
    finished: disruptions.Finished | None = None
    rejected: disruption.Rejected | None = None

    @property
    def phase(self) -> disruption.Phase | None:
        """The phase a finished one has or an open one reports; ``None``: an open one that
        reports none yet, or one that cannot be read (the store then asks the API)."""
        if self.finished is not None:
            return self.finished.phase
        if self.request is not None and self.request.status is not None:
            return self.request.status.phase
        return None


def entry(raw: dict[str, Any]) -> DisruptionEntry:
    """A ``Disruption`` object read; one that cannot be read at all (a malformed object stored
    before the schema was tightened) is rejected with why, never an error out of the watch."""
    name = str((raw.get("metadata") or {}).get("name", ""))
    try:
        finished = disruptions.finished_from_object(raw)
    except ManifestError:
        finished = None
    if finished is not None:
        return DisruptionEntry(name, finished=finished)
    try:
        return DisruptionEntry(name, request=disruptions.request_from_object(raw))
    except ManifestError as err:
        problem = str(err)
    except (TypeError, ValueError, AttributeError) as err:
        problem = f"the object cannot be read: {err}"
    try:
        status = raw.get("status")
        reported = disruptions.status_from_object(status) if isinstance(status, dict) else None
    except (TypeError, ValueError, AttributeError):
        reported = None
    return DisruptionEntry(name, rejected=disruption.Rejected(name, problem, reported))


def watch(api: lightkube.AsyncClient, *, changed: asyncio.Event) -> Informer[DisruptionEntry]:
    """The informer on the ``Disruption`` objects, by name; optional: a cluster without the
    CRD has none."""
    return Informer(
        client=api, resource=resources.Disruption, convert=entry, changed=changed, optional=True
    )


class DisruptionStore:
    """The one way to the ``Disruption`` objects on the API server: ``webhook.ports.
    DisruptionOpener``, ``controller.ports.Disruptions`` and ``HoldRecords``, the status writes
    of ``LightkubeWriter``, the node agent's and ``graceguard drain``'s.

    ``cache``: the store of a ``watch`` informer (the controller's view holds one), where
    ``phase`` looks before it asks the API."""

    def __init__(
        self,
        api: lightkube.AsyncClient,
        *,
        cache: Mapping[str, DisruptionEntry] | None = None,
    ) -> None:
        self._api = api
        self._cache = cache

    # ---- creating ----

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        """Create the object for ``request`` (its hold in ``spec.hold``); ``False`` when one of
        that name exists (409: joined, as the names are deterministic)."""
        try:
            await self._create(request)
        except ApiError as err:
            if err.status.code == 409:
                return False
            raise
        return True

    async def open_for_node(
        self, request: disruption.DisruptionRequest
    ) -> tuple[disruption.DisruptionRequest, bool]:
        """Create the object for a node-wide ``request``; when one of that name is open and
        node-wide already, that one and ``False``. A finished one of that name (an empty node
        drained twice within a minute) makes way for a name with a suffix."""
        for attempt in range(3):
            try:
                await self._create(request)
            except ApiError as err:
                if err.status.code != 409 or attempt == 2:
                    raise
                found = await self.request(request.id)
                if found is not None and _open_node_wide(found, request.node):
                    return found, False
                stem = request.id[:240].rstrip("-.")
                request = dataclasses.replace(request, id=f"{stem}.{secrets.token_hex(3)}")
                continue
            return request, True
        raise AssertionError("not reached: the third attempt returns or raises")

    async def _create(self, request: disruption.DisruptionRequest) -> None:
        body = resources.Disruption.from_dict(disruptions.object_for(request))
        try:
            await self._api.create(typing.cast(Any, body))
        except ApiError as err:
            if err.status.code == 404:
                raise client.KubeError(NO_CRD) from None
            raise

    # ---- reading ----

    async def read(self, name: str) -> Stored | None:
        """The object ``name`` now; ``None`` when there is none."""
        doc = await self._get(name)
        if doc is None:
            return None
        meta = doc.get("metadata") or {}
        return Stored(
            name=name,
            version=str(meta.get("resourceVersion") or ""),
            status=disruptions.status_from_object(doc.get("status") or {}),
            drained_by=disruptions.drained_by(meta),
        )

    async def request(self, name: str) -> disruption.DisruptionRequest | None:
        """The request the object ``name`` holds (``None``: gone, or it cannot be read)."""
        doc = await self._get(name)
        if doc is None:
            return None
        try:
            return disruptions.request_from_object(doc)
        except ManifestError as err:
            log.info("Disruption %s cannot be read: %s", name, err)
            return None

    async def phase(self, *, request_id: str) -> disruption.Phase | None:
        """Its phase now (``Pending`` when nothing is reported yet); ``None`` when gone."""
        cached = self._cache.get(request_id) if self._cache is not None else None
        if cached is not None and cached.phase is not None:
            return cached.phase
        found = await self.read(request_id)
        return found.phase if found is not None else None

    async def open_on(self, node: str) -> list[disruption.DisruptionRequest]:
        """The node-wide Disruptions open on ``node`` (not Done or Cancelled), earliest first;
        one that cannot be read is left out (the controller reports it in its status)."""
        found: list[disruption.DisruptionRequest] = []
        try:
            async for obj in self._api.list(
                resources.Disruption,
                labels={disruptions.NODE_LABEL: disruptions.label_value(node)},
            ):
                try:
                    request = disruptions.request_from_object(resources.document(obj))
                except ManifestError:
                    continue
                if _open_node_wide(request, node):
                    found.append(request)
        except ApiError as err:
            if err.status.code == 404:
                raise client.KubeError(NO_CRD) from None
            raise
        return sorted(found, key=lambda r: (r.requested_at, r.id))

    async def open_with_versions(self, node: str) -> list[tuple[disruption.DisruptionRequest, str]]:
        """Every Disruption open on ``node`` (any scope; not Done or Cancelled, readable), with
        its ``resourceVersion``: what a node agent that drains its node plans from."""
        found: list[tuple[disruption.DisruptionRequest, str]] = []
        try:
            async for obj in self._api.list(
                resources.Disruption,
                labels={disruptions.NODE_LABEL: disruptions.label_value(node)},
            ):
                doc = resources.document(obj)
                read = entry(doc)
                if read.request is not None and read.request.node == node:
                    version = str((doc.get("metadata") or {}).get("resourceVersion") or "")
                    found.append((read.request, version))
        except ApiError as err:
            if err.status.code == 404:
                raise client.KubeError(NO_CRD) from None
            raise
        return found

    async def _get(self, name: str) -> dict[str, Any] | None:
        try:
            return resources.document(await self._api.get(resources.Disruption, name))
        except ApiError as err:
            if err.status.code == 404:
                return None
            raise

    # ---- writing ----

    async def write_status(
        self, *, request_id: str, status: disruption.DisruptionStatus, read_version: str | None
    ) -> ports.StatusWrite:
        """``status`` over ``read_version`` (none: unconditionally)."""
        body: dict[str, Any] = {"status": disruptions.status_document(status)}
        if read_version:
            # A precondition: the API server applies the patch only to this very version.
            body["metadata"] = {"resourceVersion": read_version}
        try:
            await self._api.patch(
                resources.Disruption.Status, request_id, body, patch_type=PatchType.MERGE
            )
        except ApiError as err:
            if err.status.code == 409:  # Conflict: not the version read (the executor logs it)
                return ports.StatusWrite.CHANGED
            if err.status.code == 404:
                log.info("disruption %s is gone; its status was not written", request_id)
                return ports.StatusWrite.GONE
            raise
        return ports.StatusWrite.WRITTEN

    async def take_over(self, *, request_id: str, drainer: str, read_version: str) -> bool:
        """Node agent ``drainer`` takes the drain over (``graceguard.io/drained-by``), applied
        only to the object at ``read_version``; ``False`` when it changed since (a controller
        began it) or is gone."""
        body = disruptions.take_over_patch(drainer=drainer, read_version=read_version)
        try:
            await self._api.patch(
                resources.Disruption, request_id, body, patch_type=PatchType.MERGE
            )
        except ApiError as err:
            if err.status.code in (404, 409):
                return False
            raise
        return True

    async def cancel(self, *, request_id: str, at: dt.datetime, message: str) -> None:
        """Mark it ``Cancelled`` over the version read: one already finished (``Done``: the
        node was drained before the shutdown was called off) keeps its phase; one gone is fine;
        a conflict is read again."""
        status = disruption.DisruptionStatus(
            disruption.Phase.CANCELLED, completed_at=at, message=message
        )
        for _ in range(CONFLICTS):
            found = await self.read(request_id)
            if found is None:
                return
            if found.phase in FINISHED:
                log.info("Disruption %s is already %s: left as it is", request_id, found.phase)
                return
            written = await self.write_status(
                request_id=request_id, status=status, read_version=found.version
            )
            if written is not ports.StatusWrite.CHANGED:
                return
        raise RuntimeError(
            f"Disruption {request_id} kept changing under the cancel ({CONFLICTS} conflicts)"
        )

    async def record_heartbeat(self, *, request_id: str, at: dt.datetime) -> None:
        """``status.hold.lastHeartbeat``: the next heartbeat is due from it, for any leader."""
        try:
            await self._api.patch(
                resources.Disruption.Status,
                request_id,
                disruptions.heartbeat_status(at),
                patch_type=PatchType.MERGE,
            )
        except ApiError as err:
            if err.status.code != 404:
                raise
            log.info("disruption %s is gone; its heartbeat was not recorded", request_id)

    async def delete(self, *, request_id: str) -> None:
        try:
            await self._api.delete(resources.Disruption, request_id)
        except ApiError as err:
            if err.status.code != 404:
                raise


def _open_node_wide(request: disruption.DisruptionRequest, node: str) -> bool:
    """A Disruption of ``node`` covering the node (not one pod), not Done or Cancelled."""
    finished = request.status is not None and request.status.phase in FINISHED
    return request.node == node and request.scope is not disruption.Scope.POD and not finished
