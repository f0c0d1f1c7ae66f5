"""An informer: list, then watch from the list's resourceVersion, into a store of domain values.

On any watch failure (410 Gone included) it lists again and drops what the new list no longer
has, so deletions during the gap are not missed. Objects that cannot be read are logged and
skipped: one malformed object never stops the watch. ``changed`` is set on every change so the
controller can reconcile; ``on_event`` sees raw events (the ledger watches deletions through it);
``writes`` (with its ``kind``) is told each version applied, so graceguard's own writes are known
seen (``written``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import httpx2
import lightkube
from lightkube.core import resource as lightkube_resource
from lightkube.core.exceptions import ApiError

from graceguard.adapters.kube import written
from graceguard.manifests.errors import ManifestError

log = logging.getLogger(__name__)
T = TypeVar("T")

Convert = Callable[[dict[str, Any]], T]
RawHook = Callable[[str, dict[str, Any]], Awaitable[None]]


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def resource_version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _status(err: ApiError | httpx2.HTTPStatusError) -> int:
    """The HTTP status of a failed call: the watch raises ``ApiError``, a paged list (sent
    through the generic client) ``httpx2.HTTPStatusError`` (an optional CRD's 404 among them)."""
    if isinstance(err, ApiError):
        return int(err.status.code or 0)
    return err.response.status_code


class Informer(Generic[T]):
    def __init__(
        self,
        *,
        client: lightkube.AsyncClient,
        resource: Any,
        convert: Convert[T],
        changed: asyncio.Event,
        on_event: RawHook | None = None,
        optional: bool = False,
        page_size: int = 500,
        fields: dict[str, str] | None = None,
        keep: bool = True,
        hook_on_relist: bool = False,
        writes: tuple[str, written.Writes] | None = None,
    ) -> None:
        """``writes``: the kind graceguard's writes name this resource by (``pod``, ``node``)
        and the registry told what is applied."""
        self.name = resource.__name__
        self._writes = writes
        self._client = client
        self._resource = resource
        self._convert = convert
        self._changed = changed
        self._on_event = on_event
        self._optional = optional
        self._page_size = page_size
        self._fields = fields
        self._keep = keep
        """``False``: only the hook sees the objects (events: seen, not kept)."""
        self._hook_on_relist = hook_on_relist
        namespaced = issubclass(resource, lightkube_resource.NamespacedResource)
        self._namespace = lightkube.ALL_NS if namespaced else None
        self.store: dict[str, T] = {}
        self.versions: dict[str, str] = {}
        self.synced = asyncio.Event()
        self.updated = asyncio.Event()
        """Set on every change of this store, as ``changed`` (shared by the informers) is: for
        one waiter on this resource alone, who clears it."""
        self.available = True
        """False when the resource does not exist on the server (an optional CRD)."""
        self.generation = 0
        """Counts the store's changes: a reader keeps what it derived from the store until this
        moves (the webhook's Disruptions by node)."""

    async def run(self) -> None:
        backoff = 0.5
        while True:
            try:
                rv = await self._relist()
                backoff = 0.5
                await self._watch(rv)
            except asyncio.CancelledError:
                raise
            except (ApiError, httpx2.HTTPStatusError) as err:
                code = _status(err)
                if code == 404 and self._optional:
                    self._missing()
                    self.synced.set()
                    await asyncio.sleep(30)
                    continue
                if code != 410:
                    log.warning("%s informer: %s; listing again", self.name, err)
                    await asyncio.sleep(backoff)
                    backoff = min(backoff * 2, 30)
            except (httpx2.HTTPError, OSError, ValueError) as err:
                log.warning("%s informer: %s; listing again in %.1fs", self.name, err, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 30)

    async def list_once(self) -> None:
        """Fill the store from one list, without watching (for one-shot commands)."""
        try:
            await self._relist()
        except (ApiError, httpx2.HTTPStatusError) as err:
            if not (_status(err) == 404 and self._optional):
                raise
            self._missing(say=False)  # a one-shot command goes on without it, quietly

    def _missing(self, *, say: bool = True) -> None:
        """An optional resource the server does not have (its CRD not installed): said once, the
        store emptied, and looked for again every 30 s by ``run``."""
        if self.available and say:
            log.warning(
                "%s: the API server has no such resource (its CRD is not installed); running "
                "without it, looking again every 30s",
                self.name,
            )
        self.available = False
        if self.store:
            self.store.clear()
            self.versions.clear()
            self._changed_store()

    async def _relist(self) -> str:
        generic = self._client._client
        request = generic.prepare_request(
            "list",
            res=self._resource,
            namespace=self._namespace,
            params={
                "limit": self._page_size,
                "fieldSelector": ",".join(f"{k}={v}" for k, v in (self._fields or {}).items())
                or None,
            },
        )
        seen: set[str] = set()
        rv = ""
        more = True
        began = self._writes[1].now() if self._writes is not None else 0.0
        while more:
            response = await generic.send(  # type: ignore[no-untyped-call]
                generic.build_adapter_request(request)
            )
            more, page_rv, items = generic.handle_response("list", response, request)
            rv = page_rv or rv
            for obj in items:
                raw = dict(obj)
                key = object_key(raw)
                seen.add(key)
                await self._apply("ADDED", raw, key, relist=True)
        for key in set(self.store) - seen:
            self.store.pop(key, None)
            self.versions.pop(key, None)
            self._changed_store()
        if self._writes is not None:
            kind, writes = self._writes
            writes.relisted(kind, began=began)
        if not self.available:
            log.info("%s: the resource is there now; watching it", self.name)
        self.available = True
        self.synced.set()
        return rv

    async def _watch(self, rv: str) -> None:
        selector: Any = self._fields
        async for event_type, obj in self._client.watch(
            self._resource, namespace=self._namespace, resource_version=rv, fields=selector
        ):
            raw = dict(obj)
            await self._apply(event_type, raw, object_key(raw), relist=False)

    async def _apply(self, event_type: str, raw: dict[str, Any], key: str, *, relist: bool) -> None:
        if self._on_event is not None and (self._hook_on_relist or not relist):
            try:
                await self._on_event(event_type, raw)
            except Exception:  # an observer's failure must not stop the watch
                log.exception("%s informer: event hook failed for %s", self.name, key)
        # No await from here to the store updated: ``settle`` never sees one without the other.
        if self._writes is not None:
            kind, writes = self._writes
            writes.observed(
                f"{kind}:{key}",
                version=resource_version(raw),
                going=written.going(raw),
                gone=event_type == "DELETED",
            )
        if event_type == "DELETED":
            if self.store.pop(key, None) is not None:
                self.versions.pop(key, None)
                self._changed_store()
            return
        if not self._keep:
            return
        try:
            value = self._convert(raw)
        except ManifestError as err:
            log.warning("%s %s cannot be read and is skipped: %s", self.name, key, err)
            return
        self.store[key] = value
        self.versions[key] = resource_version(raw)
        self._changed_store()

    def _changed_store(self) -> None:
        self.generation += 1
        self._changed.set()
        self.updated.set()
