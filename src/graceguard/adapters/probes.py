"""HTTP endpoints for Kubernetes and Prometheus: ``/healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import prometheus_client as prom
from aiohttp import web


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


async def serve_forever(apps: list[tuple[web.Application, int]], *, host: str) -> None:
    runners = [await serve(app, host=host, port=port) for app, port in apps]
    try:
        await asyncio.Event().wait()
    finally:
        for r in runners:
            await r.cleanup()
