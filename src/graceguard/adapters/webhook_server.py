"""The webhook's HTTPS endpoint on aiohttp: ``POST /validate-eviction`` hands the body to the
service and returns its answer. TLS from a certificate and key on disk (a Secret's files, which
cert-manager or a chart upgrade may replace: they are reloaded when they change), or a self-signed
pair made at start for development (``self_signed``).

Limits, so that no input crashes or hangs it: a body larger than ``max_body`` is refused with 413
before it is read; a body that does not arrive within ``read_timeout`` is answered 408; whatever
the service cannot answer (not an AdmissionReview) is a 400 with the reason. The apiserver takes
any of these as a failed call, and the webhook's ``failurePolicy`` decides.

Why not kopf's admission server: graceguard does not use kopf (its informers and writers are
lightkube), and kopf's webhook server is itself a thin layer over aiohttp that would bring
kopf's operator machinery along; the endpoint is one route.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import pathlib
import ssl
import time
from collections.abc import Callable

from aiohttp import web

from graceguard.webhook import metrics as webhook_metrics
from graceguard.webhook.service import AdmissionService

log = logging.getLogger(__name__)

PATH = "/validate-eviction"
MAX_BODY = 1 << 20
"""1 MiB: an eviction review is a few KiB; an Eviction's annotations may add up to 256 KiB."""
READ_TIMEOUT = 10.0
JSON = "application/json"


def app(
    service: AdmissionService,
    *,
    max_body: int = MAX_BODY,
    read_timeout: float = READ_TIMEOUT,
    metrics: webhook_metrics.WebhookMetrics | None = None,
) -> web.Application:
    """The review endpoint; each answer's time observed in ``metrics`` (by default the
    service's own) once the answer is written."""
    latency = (metrics or service.metrics).latency

    async def validate(request: web.Request) -> web.StreamResponse:
        started = asyncio.get_running_loop().time()
        length = request.content_length
        if length is not None and length > max_body:
            return _text(413, f"graceguard: the body ({length} bytes) exceeds {max_body} bytes")
        try:
            if request.content.is_eof():  # arrived whole with its headers: nothing to wait for
                body = await request.read()
            else:
                async with asyncio.timeout(read_timeout):
                    body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _text(413, f"graceguard: the body exceeds {max_body} bytes")
        except TimeoutError:
            return _text(408, f"graceguard: the body did not arrive within {read_timeout:g}s")
        answer = await service.review(body)
        content_type = JSON if answer.status == 200 else "text/plain"
        response = web.Response(status=answer.status, body=answer.body, content_type=content_type)
        # Written here, then timed: the answer goes out before the histogram is counted, and its
        # time runs to the answer's last byte handed to the connection, as the metric says.
        await response.prepare(request)
        await response.write_eof()
        latency.observe(asyncio.get_running_loop().time() - started)
        return response

    application = web.Application(client_max_size=max_body)
    application.router.add_post(PATH, validate)
    return application


def _text(status: int, message: str) -> web.Response:
    """A refusal before the body was read whole: the connection's stream is in an unknown state,
    so it is closed after the answer."""
    response = web.Response(status=status, text=message + "\n")
    response.force_close()
    return response


# ---- garbage collection ----


class HeapFreezer:
    """Keeps the cyclic garbage collector's full passes short: the informer cache is tens of
    thousands of long-lived objects, and a full collection walks them all (about 30 ms for
    30,000 pods), stalling every review under way. After a facts build, at most every
    ``every`` seconds, collect what is garbage now and move everything alive into the
    permanent generation (``gc.freeze``), which later collections skip.

    The cost: cyclic garbage made of objects alive at a freeze (a request in flight) is never
    collected; refcounting still frees everything acyclic, which the cache's values are. At one
    freeze per 10 minutes that is a few kilobytes, not a leak that grows with traffic.
    """

    def __init__(self, every: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._every = every
        self._clock = clock
        self._last: float | None = None

    def __call__(self) -> None:
        now = self._clock()
        if self._last is not None and now - self._last < self._every:
            return
        self._last = now
        gc.collect()
        gc.freeze()


# ---- TLS ----


class ReloadingTLS:
    """An ``SSLContext`` for the server whose certificate is reloaded when its files change."""

    def __init__(self, cert: pathlib.Path, key: pathlib.Path) -> None:
        self.cert, self.key = cert, key
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamp = self._mtimes()
        self.context.load_cert_chain(cert, key)

    def _mtimes(self) -> tuple[float, float]:
        return (os.stat(self.cert).st_mtime, os.stat(self.key).st_mtime)

    def reload_if_changed(self) -> bool:
        try:
            stamp = self._mtimes()
            if stamp == self._stamp:
                return False
            self.context.load_cert_chain(self.cert, self.key)
        except (OSError, ssl.SSLError) as err:  # half-written files: try again next time
            log.warning("cannot reload the TLS certificate: %s", err)
            return False
        self._stamp = stamp
        log.info("reloaded the TLS certificate from %s", self.cert)
        return True

    async def watch(self, every: float = 30.0) -> None:
        while True:
            await asyncio.sleep(every)
            self.reload_if_changed()


async def serve(
    application: web.Application, *, host: str, port: int, tls: ssl.SSLContext
) -> web.AppRunner:
    runner = web.AppRunner(application, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=tls, backlog=1024).start()
    return runner
