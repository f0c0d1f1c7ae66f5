"""``graceguard drain`` and ``graceguard plan`` against a small fake API server (aiohttp, plain
HTTP, in a thread): the drain request written on the node (cordon + ``graceguard.io/disruption*``),
written once, followed with ``--wait`` until the node is marked drained, pods' notices read back
(``adapters.kube.drains``); the plan from the listed cluster; and every API problem as one line
with exit code 2."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from aiohttp import web
from typer.testing import CliRunner

from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import drains
from graceguard.cli.main import app
from graceguard.domain import annotations as ann
from graceguard.domain import times

runner = CliRunner()
START = "2026-11-21T00:00:00Z"
NOTICE = "2026-11-21T05:00:00Z"


def _node(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "resourceVersion": "1", "annotations": annotations or {}},
        "spec": {},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }


def _pod(name: str, node: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "batch",
            "uid": f"uid-{name}",
            "resourceVersion": "1",
            "creationTimestamp": START,
            "annotations": annotations or {},
        },
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 60,
            "containers": [{"name": "main", "image": "busybox"}],
        },
        "status": {
            "phase": "Running",
            "startTime": START,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


class FakeAPI:
    """Nodes and pods in memory; the lists ``plan`` makes of everything else are empty, the
    DisruptionPolicy CRD is not installed (404). ``finish_drains``: the controller's part, done
    at once — every node patched with a request is marked drained."""

    def __init__(self) -> None:
        self.nodes = {"node-a": _node("node-a"), "node-b": _node("node-b")}
        self.pods = [
            _pod("train-0", "node-a", {ann.EVICTION_AT: NOTICE}),
            _pod("train-1", "node-a", {ann.EVICTION_AT: "soon"}),
            _pod("web-0", "node-b"),
        ]
        self.patches: list[dict[str, Any]] = []
        self.finish_drains = False

    def app(self) -> web.Application:
        application = web.Application()
        application.router.add_get("/api/v1/nodes", self.list_nodes)
        application.router.add_get("/api/v1/nodes/{name}", self.get_node)
        application.router.add_patch("/api/v1/nodes/{name}", self.patch_node)
        application.router.add_get("/api/v1/pods", self.list_pods)
        application.router.add_get("/apis/graceguard.io/v1alpha1/disruptionpolicies", _missing)
        for path in (
            "/apis/policy/v1/poddisruptionbudgets",
            "/apis/apps/v1/deployments",
            "/apis/apps/v1/statefulsets",
            "/apis/apps/v1/replicasets",
        ):
            application.router.add_get(path, _empty)
        return application

    async def list_nodes(self, _request: web.Request) -> web.Response:
        return _list("NodeList", list(self.nodes.values()))

    async def get_node(self, request: web.Request) -> web.Response:
        node = self.nodes.get(request.match_info["name"])
        return _json(node) if node else _not_found("nodes", request)

    async def patch_node(self, request: web.Request) -> web.Response:
        node = self.nodes.get(request.match_info["name"])
        if node is None:
            return _not_found("nodes", request)
        assert request.content_type == "application/merge-patch+json"
        patch = await request.json()
        self.patches.append(patch)
        node["spec"].update(patch.get("spec", {}))
        marks = node["metadata"]["annotations"]
        for key, value in patch["metadata"]["annotations"].items():
            if value is None:
                marks.pop(key, None)
            else:
                marks[key] = value
        if self.finish_drains:
            marks[ann.DISRUPTION_DONE_AT] = START
        return _json(node)

    async def list_pods(self, request: web.Request) -> web.Response:
        selector = request.query.get("fieldSelector") or ""
        node = selector.removeprefix("spec.nodeName=") if selector else None
        return _list("PodList", [p for p in self.pods if node in (None, p["spec"]["nodeName"])])


def _json(body: dict[str, Any], *, status: int = 200) -> web.Response:
    """As the API server answers: ``Content-Type: application/json`` exactly (lightkube reads a
    failure's Status only then)."""
    return web.Response(
        body=json.dumps(body).encode(), status=status, headers={"Content-Type": "application/json"}
    )


def _list(kind: str, items: list[dict[str, Any]]) -> web.Response:
    return _json(
        {"apiVersion": "v1", "kind": kind, "metadata": {"resourceVersion": "1"}, "items": items}
    )


async def _empty(_request: web.Request) -> web.Response:
    return _list("List", [])


def _status(code: int, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message}
    return _json({**body, "code": code}, status=code)


def _not_found(resource: str, request: web.Request) -> web.Response:
    return _status(404, f'{resource} "{request.match_info["name"]}" not found')


async def _missing(_request: web.Request) -> web.Response:
    return _status(404, "the server could not find the requested resource")


def _kubeconfig(path: pathlib.Path, port: int) -> pathlib.Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "me", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "me"}}],
                "current-context": "fake",
            }
        )
    )
    return path


@pytest.fixture
def api() -> Iterator[tuple[FakeAPI, int]]:
    fake = FakeAPI()
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        server = web.AppRunner(fake.app(), access_log=None)
        await server.setup()
        site = web.TCPSite(server, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = server
        holder["port"] = server.addresses[0][1]
        started.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
    started.wait(10)
    try:
        yield fake, holder["port"]
    finally:
        asyncio.run_coroutine_threadsafe(holder["runner"].cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture
def kubeconfig(api: tuple[FakeAPI, int], tmp_path: pathlib.Path) -> pathlib.Path:
    return _kubeconfig(tmp_path / "kubeconfig", api[1])


def gg(*args: str) -> Any:
    return runner.invoke(app, list(args))


def test_drain_cordons_the_node_and_writes_the_request_once(
    api: tuple[FakeAPI, int], kubeconfig: pathlib.Path
) -> None:
    fake, _port = api
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    result = gg("drain", "node-a", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        "node-a cordoned; drain requested (drain); the graceguard controller carries it out"
    )
    (patch,) = fake.patches
    assert patch["spec"] == {"unschedulable": True}
    marks = fake.nodes["node-a"]["metadata"]["annotations"]
    assert marks[ann.DISRUPTION] == "drain"
    assert marks[ann.DISRUPTION_CLASS] == "voluntary"
    assert ann.DISRUPTION_DEADLINE not in marks
    requested = times.parse_time(marks[ann.DISRUPTION_REQUESTED_AT])
    assert before <= requested <= dt.datetime.now(dt.UTC)

    again = gg("drain", "node-a", "--kubeconfig", str(kubeconfig), "--source", "upgrade")
    assert again.exit_code == 0, again.output
    assert again.output.strip() == (
        f"node-a is already being drained (drain, since {times.format_time(requested)})"
    )
    assert len(fake.patches) == 1


def test_a_deadline_makes_the_request_imminent(
    api: tuple[FakeAPI, int], kubeconfig: pathlib.Path
) -> None:
    fake, _port = api
    result = gg(
        "drain", "node-b", "--deadline", "2026-11-21T05:00:00Z", "--kubeconfig", str(kubeconfig)
    )
    assert result.exit_code == 0, result.output
    marks = fake.nodes["node-b"]["metadata"]["annotations"]
    assert (marks[ann.DISRUPTION_CLASS], marks[ann.DISRUPTION_DEADLINE]) == (
        "imminent",
        "2026-11-21T05:00:00Z",
    )


def test_wait_follows_the_drain_until_the_node_is_marked_drained(
    api: tuple[FakeAPI, int], kubeconfig: pathlib.Path
) -> None:
    fake, _port = api
    fake.finish_drains = True
    result = gg("drain", "node-a", "--wait", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 0, result.output
    assert "draining node-a: 2 pods left" in result.output
    assert NOTICE in result.output
    assert result.output.strip().endswith("node-a is drained.")


@pytest.mark.asyncio
async def test_progress_reads_each_pods_notice_and_whether_the_node_is_done(
    api: tuple[FakeAPI, int], kubeconfig: pathlib.Path
) -> None:
    fake, _port = api
    async with drains.NodeDrains(kubeconfig=kubeconfig) as cluster:
        progress = await cluster.progress(node="node-a")
        assert not progress.done
        assert {(p.key, p.eviction_at, p.terminating) for p in progress.pods} == {
            ("batch/train-0", times.parse_time(NOTICE), False),
            ("batch/train-1", None, False),  # not a time: no notice read
        }
        fake.nodes["node-a"]["metadata"]["annotations"][ann.DISRUPTION_DONE_AT] = START
        assert (await cluster.progress(node="node-a")).done


def test_plan_lists_the_cluster_once_and_plans_the_nodes_pods(
    api: tuple[FakeAPI, int], kubeconfig: pathlib.Path
) -> None:
    fake, _port = api
    result = gg("plan", "node-a", "-o", "json", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["node"] == "node-a"
    assert shown["request"]["id"] is None  # no drain open: a voluntary one from now
    assert (shown["request"]["class"], shown["request"]["policy"]) == ("voluntary", "default")
    assert sorted(p["pod"] for p in shown["pods"]) == ["batch/train-0", "batch/train-1"]
    assert fake.patches == []  # plan writes nothing

    dry = gg("drain", "node-a", "--dry-run", "-o", "json", "--kubeconfig", str(kubeconfig))
    assert dry.exit_code == 0, dry.output
    assert json.loads(dry.output)["pods"] == shown["pods"]
    assert fake.patches == []


@pytest.mark.parametrize("command", ["plan", "drain"])
def test_an_unknown_node_is_one_line_and_exit_2(
    command: str, api: tuple[FakeAPI, int], kubeconfig: pathlib.Path
) -> None:
    result = gg(command, "node-x", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    expected = "no node named 'node-x'" if command == "plan" else 'nodes "node-x" not found'
    assert line.startswith("graceguard: ") and expected in line, line


@pytest.mark.parametrize("command", ["plan", "drain"])
def test_an_unreachable_api_server_is_one_line_and_exit_2(
    command: str, tmp_path: pathlib.Path
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    config = _kubeconfig(tmp_path / "kubeconfig", port)
    result = gg(command, "node-a", "--kubeconfig", str(config))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("graceguard: cannot reach the API server: "), line


def test_a_kubeconfig_that_cannot_be_loaded_is_one_line_and_exit_2(
    tmp_path: pathlib.Path,
) -> None:
    result = gg("drain", "node-a", "--kubeconfig", str(tmp_path / "missing"))
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("graceguard: cannot load a kubeconfig: "), line
    with pytest.raises(kube_client.KubeError, match="cannot load a kubeconfig"):
        kube_client.connect(tmp_path / "missing")
