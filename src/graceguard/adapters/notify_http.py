"""The notify sinks' HTTP client (``controller.ports.Sender``) on aiohttp: one POST of a JSON
body per attempt, bounded by the sink's timeout; a 2xx answer is success, anything else raises
``SendError`` naming the status or the connection error (retries are the service layer's).

No redirects are followed (a webhook that moves is a configuration to fix, and following one would
resend the body elsewhere); the answer's body is read only to quote its start in the error.
"""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

USER_AGENT = "graceguard-notify"
QUOTED = 200
"""Characters of a refusing receiver's answer quoted in the error."""


class SendError(Exception):
    """The receiver did not take the notice; the message says why."""


class HttpSender:
    """``Sender`` over one aiohttp session (opened on first use, in the running loop)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    async def send(self, *, url: str, body: Mapping[str, str], timeout: float) -> None:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(headers={"User-Agent": USER_AGENT})
        try:
            async with self._session.post(
                url,
                json=dict(body),
                timeout=aiohttp.ClientTimeout(total=timeout),
                allow_redirects=False,
            ) as response:
                if 200 <= response.status < 300:
                    return
                text = (await response.text(errors="replace"))[:QUOTED]
                raise SendError(f"HTTP {response.status} {response.reason or ''}: {text}".strip())
        except TimeoutError as err:
            raise SendError(f"no answer within {timeout:g}s") from err
        except aiohttp.ClientError as err:
            raise SendError(f"{type(err).__name__}: {err}") from err

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
