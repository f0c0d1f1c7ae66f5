"""The node agent's instance-metadata watcher (``graceguard agent --imds``) through the real HTTP
adapter (``adapters.imds``, IMDSv2: token ``PUT``, then ``GET`` with it) and the watcher.

Against AWS's own emulator, ``amazon-ec2-metadata-mock`` (AEMM), when ``make aemm`` has built it
in ``$GRACEGUARD_CACHE/ec2-metadata-mock`` (default ``~/.cache/graceguard``; ``go install
github.com/aws/amazon-ec2-metadata-mock/cmd/ec2-metadata-mock@v1.13.0`` from the Go module proxy;
skipped, saying so, when it is not): its ``spot`` and
``events`` modes serve the documented notices. AEMM cannot serve a malformed answer, so that case
(and the token flow's refusal) runs against a small loopback server of this test that serves the
two documented paths (``/latest/meta-data/spot/instance-action``,
``/latest/meta-data/events/recommendations/rebalance``) and ``PUT /latest/api/token`` as the
documentation describes them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import logging
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Sequence

import pytest
import pytest_asyncio
from aiohttp import web

import controlplane
import localports
from graceguard.adapters import imds
from graceguard.agent import imds as watcher_module
from graceguard.agent import ports
from graceguard.domain import cluster, disruption, policy

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]
AEMM = controlplane.cache_root() / "ec2-metadata-mock" / "ec2-metadata-mock"
TOKEN = "token-abc"


@dataclasses.dataclass
class Served:
    spot: str | None = None
    rebalance: str | None = None
    token_puts: int = 0
    unauthorised: int = 0


@pytest_asyncio.fixture
async def server() -> AsyncIterator[tuple[str, Served]]:
    served = Served()

    async def token(request: web.Request) -> web.Response:
        if "X-aws-ec2-metadata-token-ttl-seconds" not in request.headers:
            return web.Response(status=400)
        served.token_puts += 1
        return web.Response(text=TOKEN)

    def path(attr: str) -> object:
        async def get(request: web.Request) -> web.Response:
            if request.headers.get("X-aws-ec2-metadata-token") != TOKEN:
                served.unauthorised += 1
                return web.Response(status=401)
            body = getattr(served, attr)
            return web.Response(status=404) if body is None else web.Response(text=body)

        return get

    app = web.Application()
    app.router.add_put("/latest/api/token", token)
    app.router.add_get(imds.SPOT, path("spot"))  # type: ignore[arg-type]
    app.router.add_get(imds.REBALANCE, path("rebalance"))  # type: ignore[arg-type]
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}", served
    finally:
        await runner.cleanup()


@dataclasses.dataclass
class Shutdowns:
    """The agent as far as the watcher calls it (``begin_shutdown``), and the cluster ports a
    rebalance uses: the policy in force (``rebalance``), the node's pods and their events,
    ``open_disruption``."""

    node: str = "node-a"
    rebalance: policy.RebalanceAction = policy.RebalanceAction.NOTICE
    begun: list[tuple[str, dt.datetime, str]] = dataclasses.field(default_factory=list)
    opened: list[disruption.DisruptionRequest] = dataclasses.field(default_factory=list)
    told: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    async def policy_in_force(self) -> policy.Policy:
        return dataclasses.replace(policy.DEFAULT, rebalance=self.rebalance)

    async def pods_on_node(self, node: str) -> Sequence[cluster.Pod]:
        at = dt.datetime.now(dt.UTC)
        return (
            cluster.Pod("web", "api-1", node=node, start_time=at),
            cluster.Pod("kube-system", "proxy", node=node, start_time=at, daemon=True),
        )

    async def pod_event(self, *, pod: cluster.Pod, reason: str, message: str) -> None:
        self.told.append((pod.name, reason))

    async def begin_shutdown(self, *, source: str, deadline: dt.datetime, reason: str) -> None:
        self.begun.append((source, deadline, reason))

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        self.opened.append(request)
        return True


def _watcher(endpoint: str, fake: Shutdowns) -> watcher_module.MetadataWatcher:
    return watcher_module.MetadataWatcher(
        metadata=imds.Imds(endpoint=endpoint),
        agent=fake,  # type: ignore[arg-type]
        cluster=fake,  # type: ignore[arg-type]
        policies=fake,
        events=fake,
        clock=lambda: dt.datetime.now(dt.UTC),
    )


def _soon(seconds: int) -> str:
    at = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=seconds)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_no_notice_nothing_done(server: tuple[str, Served]) -> None:
    endpoint, served = server
    fake = Shutdowns()
    await _watcher(endpoint, fake).check()
    assert fake.begun == [] and fake.opened == []
    assert served.token_puts == 1 and served.unauthorised == 0


async def test_spot_notice_is_the_imminent_path_with_its_deadline(
    server: tuple[str, Served],
) -> None:
    endpoint, served = server
    served.spot = f'{{"action": "terminate", "time": "{_soon(120)}"}}'
    fake = Shutdowns()
    watcher = _watcher(endpoint, fake)
    await watcher.check()
    await watcher.check()  # the same notice again: acted on once
    assert len(fake.begun) == 1
    source, deadline, reason = fake.begun[0]
    assert source == "spot-interruption"
    left = deadline - dt.datetime.now(dt.UTC)
    assert dt.timedelta(seconds=110) < left <= dt.timedelta(minutes=2)
    assert "terminate" in reason
    assert served.token_puts == 1  # the token is reused


async def test_rebalance_tells_the_pods_by_default(server: tuple[str, Served]) -> None:
    endpoint, served = server
    served.rebalance = f'{{"noticeTime": "{_soon(0)}"}}'
    fake = Shutdowns()
    await _watcher(endpoint, fake).check()
    assert fake.told == [("api-1", "ProposedEviction")] and fake.opened == []


async def test_rebalance_opens_a_voluntary_node_drain_when_the_policy_says_drain(
    server: tuple[str, Served],
) -> None:
    endpoint, served = server
    served.rebalance = f'{{"noticeTime": "{_soon(0)}"}}'
    fake = Shutdowns(rebalance=policy.RebalanceAction.DRAIN)
    await _watcher(endpoint, fake).check()
    assert fake.told == []
    (request,) = fake.opened
    assert request.source == "ec2-rebalance"  # the controller's rebalance drain's source
    assert request.disruption_class is disruption.DisruptionClass.VOLUNTARY
    assert request.scope is disruption.Scope.NODE and request.deadline is None


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("{not json", "not JSON"),
        ('["terminate"]', "expected a JSON object"),
        ('{"action": "terminate"}', "time: expected an RFC 3339 time"),
        ('{"action": "terminate", "time": "soon"}', "time:"),
        ('{"time": "2026-11-23T00:00:00Z"}', "action: expected terminate, stop or hibernate"),
    ],
)
async def test_malformed_answer_is_a_log_line_not_a_crash(
    server: tuple[str, Served], caplog: pytest.LogCaptureFixture, body: str, expected: str
) -> None:
    endpoint, served = server
    served.spot = body
    fake = Shutdowns()
    caplog.set_level(logging.WARNING)
    watcher = _watcher(endpoint, fake)
    await watcher.check()
    assert fake.begun == []
    lines = [r.getMessage() for r in caplog.records]
    assert any(imds.SPOT in line and expected in line for line in lines), lines
    # Fixed: the next poll acts on it.
    served.spot = f'{{"action": "stop", "time": "{_soon(120)}"}}'
    await watcher.check()
    assert [s for s, _, _ in fake.begun] == ["spot-interruption"]


async def test_unreachable_metadata_is_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    port = localports.free_port()  # nothing listens there
    caplog.set_level(logging.WARNING)
    fake = Shutdowns()
    await _watcher(f"http://127.0.0.1:{port}", fake).check()
    assert "instance metadata: cannot reach" in caplog.text
    assert fake.begun == []


# ---- against amazon-ec2-metadata-mock ----


@pytest.fixture
def aemm_spot() -> Iterator[str]:
    if not AEMM.exists():
        pytest.skip(f"amazon-ec2-metadata-mock is not built at {AEMM} (see the module docstring)")
    port = localports.free_port()
    process = subprocess.Popen(
        [
            str(AEMM),
            "spot",
            "--action",
            "terminate",
            "--port",
            str(port),
            "--imdsv2",
            "--mock-delay-sec",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


async def test_aemm_spot_interruption(aemm_spot: str) -> None:
    fake = Shutdowns()
    found: Sequence[ports.MetadataNotice] = []
    for _ in range(50):  # AEMM serves the notice once its delay has passed
        found = await imds.Imds(endpoint=aemm_spot).notices()
        if found:
            break
        await asyncio.sleep(0.2)
    kinds = {n.kind for n in found}
    assert ports.NoticeKind.SPOT_INTERRUPTION in kinds, found
    await _watcher(aemm_spot, fake).check()
    assert [s for s, _, _ in fake.begun] == ["spot-interruption"]
