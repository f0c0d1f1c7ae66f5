"""``agent.ports.InstanceMetadata`` over HTTP: EC2 instance metadata with IMDSv2 (a session
token from ``PUT /latest/api/token``, then ``GET`` with it) for the spot interruption notice
(``/latest/meta-data/spot/instance-action``) and the rebalance recommendation
(``/latest/meta-data/events/recommendations/rebalance``). 404 means no notice. Anything
unreadable is ``MetadataError`` naming the path and the reason.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import aiohttp

from graceguard.agent import ports
from graceguard.domain import times

DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_TTL = 21600
TOKEN_REUSE = 300.0
"""A token is asked for again after this many seconds (it lives ``TOKEN_TTL``)."""
SPOT = "/latest/meta-data/spot/instance-action"
REBALANCE = "/latest/meta-data/events/recommendations/rebalance"
TIMEOUT = aiohttp.ClientTimeout(total=3)


class Imds:
    def __init__(self, *, endpoint: str = DEFAULT_ENDPOINT) -> None:
        self._endpoint = endpoint.rstrip("/")
        self._token: tuple[str, float] | None = None

    async def notices(self) -> list[ports.MetadataNotice]:
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
                token = await self._get_token(session)
                found: list[ports.MetadataNotice] = []
                spot = await self._get(session, SPOT, token)
                if spot is not None:
                    found.append(_spot(spot))
                rebalance = await self._get(session, REBALANCE, token)
                if rebalance is not None:
                    found.append(_rebalance(rebalance))
                return found
        except (aiohttp.ClientError, TimeoutError, OSError) as err:
            raise ports.MetadataError(f"cannot reach {self._endpoint}: {err!r}") from None

    async def _get_token(self, session: aiohttp.ClientSession) -> str:
        if self._token is not None and time.monotonic() - self._token[1] < TOKEN_REUSE:
            return self._token[0]
        async with session.put(
            f"{self._endpoint}/latest/api/token",
            headers={"X-aws-ec2-metadata-token-ttl-seconds": str(TOKEN_TTL)},
        ) as resp:
            if resp.status != 200:
                raise ports.MetadataError(f"PUT /latest/api/token: HTTP {resp.status}")
            token = (await resp.text()).strip()
        if not token:
            raise ports.MetadataError("PUT /latest/api/token: an empty token")
        self._token = (token, time.monotonic())
        return token

    async def _get(self, session: aiohttp.ClientSession, path: str, token: str) -> str | None:
        async with session.get(
            f"{self._endpoint}{path}", headers={"X-aws-ec2-metadata-token": token}
        ) as resp:
            if resp.status == 404:
                return None
            if resp.status == 401:
                self._token = None  # expired: a new one next time
            if resp.status != 200:
                raise ports.MetadataError(f"GET {path}: HTTP {resp.status}")
            return await resp.text()


def _object(text: str, path: str) -> dict[str, object]:
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise ports.MetadataError(f"{path}: not JSON ({err}): {text[:80]!r}") from None
    if not isinstance(doc, dict):
        raise ports.MetadataError(f"{path}: expected a JSON object, got {text[:80]!r}")
    return doc


def _when(doc: dict[str, object], key: str, path: str) -> dt.datetime:
    raw = doc.get(key)
    if not isinstance(raw, str):
        raise ports.MetadataError(f"{path}: {key}: expected an RFC 3339 time, got {raw!r}")
    try:
        return times.parse_time(raw)
    except times.TimeError as err:
        raise ports.MetadataError(f"{path}: {key}: {err}") from None


def _spot(text: str) -> ports.MetadataNotice:
    doc = _object(text, SPOT)
    action = doc.get("action")
    if not isinstance(action, str) or not action:
        raise ports.MetadataError(f"{SPOT}: action: expected terminate, stop or hibernate")
    return ports.MetadataNotice(
        ports.NoticeKind.SPOT_INTERRUPTION, _when(doc, "time", SPOT), action
    )


def _rebalance(text: str) -> ports.MetadataNotice:
    doc = _object(text, REBALANCE)
    at = _when(doc, "noticeTime", REBALANCE)
    return ports.MetadataNotice(ports.NoticeKind.REBALANCE, at, "rebalance recommendation")
