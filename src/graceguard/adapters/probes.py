"""HTTP endpoints for Kubernetes and Prometheus: ``/healthz``, ``/readyz`` and ``/metrics``.

Plain HTTP on aiohttp; what each endpoint answers comes from the caller (callables and a
Prometheus registry), so this module knows nothing of the controller or the webhook.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence

import prometheus_client as prom
from aiohttp import web


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """An application served on one port."""

    app: web.Application
    port: int


def metrics_app(registry: prom.CollectorRegistry) -> web.Application:
    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(
            body=prom.generate_latest(registry),
            headers={"Content-Type": prom.CONTENT_TYPE_LATEST},
        )

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app


def probes_app(*, alive: Callable[[], bool], ready: Callable[[], bool]) -> web.Application:
    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n") if alive() else web.Response(status=503, text="stuck\n")

    async def readyz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n") if ready() else web.Response(status=503, text="syncing\n")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


async def serve(app: web.Application, *, host: str, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def serve_forever(endpoints: Sequence[Endpoint], *, host: str) -> None:
    """Serve every endpoint until cancelled, then stop them all (also those started before one
    failed to bind)."""
    runners: list[web.AppRunner] = []
    try:
        for endpoint in endpoints:
            runners.append(await serve(endpoint.app, host=host, port=endpoint.port))
        await asyncio.Event().wait()
    finally:
        for r in runners:
            await r.cleanup()
