"""The policy's ``notify`` sinks on the real control plane: the controller (a real process) posts
each notice to a local HTTP receiver once, in order per pod, with the template applied; a
receiver that is down (connection refused) or slow (answers after the sink's timeout) delays
nothing: the drain's evictions come at the times graceguard announced, as without a sink.

The receivers are plain HTTP servers in this test (``http.server`` on 127.0.0.1), standing in for
a Slack-compatible incoming webhook; the policy is the module's ``default`` one (noticeLead 4s)
with ``spec.notify`` patched in and removed again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import http.server
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

import controlplane

from . import graceguard_proc as gg
from .conftest import NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until

pytestmark = pytest.mark.e2e

TEMPLATE = "${event}|${namespace}|${pod}|${evictionAt}|${source}|${disruption}"


@dataclasses.dataclass
class Receiver:
    """An HTTP server recording each POST's JSON body; ``delay`` seconds before it answers."""

    delay: float = 0.0
    received: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hooks/T0/secret"

    def start(self) -> Receiver:
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.received.append(
                    {"at": time.time(), "path": self.path, "body": json.loads(body)}
                )
                time.sleep(receiver.delay)
                try:
                    self.send_response(200)
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:
                    pass  # the client gave up (the slow receiver)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def texts(self) -> list[str]:
        return [str(r["body"]["text"]) for r in self.received]


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    made: list[Receiver] = []
    yield made
    for r in made:
        r.stop()


def ours(receiver: Receiver, namespace: str) -> list[list[str]]:
    """The fields of each notice the receiver got for a pod of ``namespace``. The sink is the
    cluster-wide default policy's, so an earlier test's namespace still being deleted (its nodes
    gone first, its pods waiting for the pod garbage collector) can have its protected pods'
    ``PrematureTermination`` posted here too; those are another test's, not counted."""
    return [
        fields
        for fields in (text.split("|") for text in receiver.texts())
        if fields[1:2] == [namespace]
    ]


def set_notify(
    control_plane: controlplane.ControlPlane, kube: Client, sinks: list[dict[str, Any]] | None
) -> None:
    """Patch ``spec.notify`` of the default policy (``None`` removes it) and wait until the
    controller accepted that generation."""
    done = control_plane.kubectl(
        "patch",
        "disruptionpolicy",
        "default",
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"notify": sinks}}),
    )
    assert done.returncode == 0, done.stderr

    def accepted() -> bool:
        found = control_plane.kubectl("get", "disruptionpolicy", "default", "-o", "json")
        doc = json.loads(found.stdout)
        generation = doc["metadata"]["generation"]
        return any(
            c["type"] == "Accepted"
            and c["status"] == "True"
            and c.get("observedGeneration") == generation
            for c in (doc.get("status") or {}).get("conditions", [])
        )

    wait_until(accepted, timeout=30, what="the controller accepting the policy's notify")


@pytest.fixture
def no_notify_after(control_plane: controlplane.ControlPlane, kube: Client) -> Iterator[None]:
    yield
    control_plane.kubectl(
        "patch", "disruptionpolicy", "default", "--type", "merge", "-p", '{"spec":{"notify":null}}'
    )


def announced(kube: Client, namespace: str, name: str) -> tuple[dt.datetime, dt.datetime]:
    """The pod's announced eviction time (its ScheduledEviction's) and when it was evicted (its
    Evicted event), both as the API holds them (whole seconds)."""
    events = gg.events(kube, namespace, name)
    (scheduled,) = [e for e in events if e.reason == "ScheduledEviction"]
    (evicted,) = [e for e in events if e.reason == "Evicted"]
    found = re.search(r" at (\S+Z), reason", scheduled.message or "")
    assert found is not None, scheduled.message
    assert evicted.firstTimestamp is not None
    return dt.datetime.fromisoformat(found.group(1)), evicted.firstTimestamp


def test_each_notice_once_in_order_with_the_template(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    receivers: list[Receiver],
    no_notify_after: None,
    controller: gg.Controller,
) -> None:
    """A drain of two pods (one protected for 12s more) and a protected pod deleted by hand:
    ProposedEviction then ScheduledEviction for each drained pod, PrematureTermination for the
    deleted one, each once, in order per pod, the text as the template says."""
    receiver = Receiver().start()
    receivers.append(receiver)
    set_notify(control_plane, kube, [{"url": receiver.url, "template": TEMPLATE}])
    drained = gg.node_name(kwok_nodes("a"))
    other = gg.node_name(kwok_nodes("b"))
    run_pod(kube, namespace, pod("quick", grace_seconds=2, node_name=drained))
    run_pod(
        kube,
        namespace,
        pod(
            "slow",
            grace_seconds=2,
            annotations={"graceguard.io/min-runtime": "12s"},
            node_name=drained,
        ),
    )
    run_pod(
        kube,
        namespace,
        pod("kept", annotations={"graceguard.io/min-runtime": "1h"}, node_name=other),
    )
    gg.drain(control_plane, drained)
    wait_until(
        lambda: all(get_or_none(kube, Pod, n, namespace) is None for n in ("quick", "slow")),
        timeout=90,
        what="the drained pods gone",
    )
    kube.delete(Pod, "kept", namespace=namespace)  # by hand, 59 minutes early
    want = 5
    wait_until(
        lambda: len(ours(receiver, namespace)) >= want,
        timeout=30,
        what=f"{want} notices received",
    )
    time.sleep(3)  # anything sent twice would arrive by now

    assert all(len(text.split("|")) == 6 for text in receiver.texts()), receiver.texts()
    got = ours(receiver, namespace)
    per_pod: dict[str, list[str]] = {}
    for event, _ns, name, *_ in got:
        per_pod.setdefault(name, []).append(event)
    assert per_pod == {
        "quick": ["ProposedEviction", "ScheduledEviction"],
        "slow": ["ProposedEviction", "ScheduledEviction"],
        "kept": ["PrematureTermination"],
    }, got
    assert {r["path"] for r in receiver.received} == {"/hooks/T0/secret"}
    # Each notice is the event graceguard posted on the pod, with its eviction time and source.
    for name in ("quick", "slow"):
        eviction_at, _ = announced(kube, namespace, name)
        (scheduled,) = [f for f in got if f[2] == name and f[0] == "ScheduledEviction"]
        assert scheduled[3] == eviction_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        assert scheduled[4] == "drain"
        assert scheduled[5].startswith(f"drain.{drained}")
        reasons = gg.reasons(kube, namespace, name)
        assert reasons.count("ProposedEviction") == reasons.count("ScheduledEviction") == 1
    (premature,) = [f for f in got if f[0] == "PrematureTermination"]
    assert premature[3:] == ["", "api-delete", ""]
    assert "PrematureTermination" in gg.reasons(kube, namespace, "kept")
    sent = controller.metrics()
    assert 'graceguard_notifications_total{event="ScheduledEviction",outcome="sent"}' in sent


def lateness(kube: Client, namespace: str, names: list[str]) -> list[float]:
    """Seconds each pod was evicted after the time graceguard announced for it."""
    found = []
    for name in names:
        eviction_at, evicted = announced(kube, namespace, name)
        found.append((evicted - eviction_at).total_seconds())
    return found


def drain_three(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    node: str,
) -> list[str]:
    name = gg.node_name(kwok_nodes(node))
    pods = [f"{node}-{i}" for i in range(3)]
    for p in pods:
        run_pod(kube, namespace, pod(p, grace_seconds=1, node_name=name))
    gg.drain(control_plane, name)
    wait_until(
        lambda: all(get_or_none(kube, Pod, p, namespace) is None for p in pods),
        timeout=90,
        what=f"the pods of {name} gone",
    )
    return pods


def test_a_receiver_down_or_slow_delays_nothing(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    receivers: list[Receiver],
    no_notify_after: None,
    controller: gg.Controller,
) -> None:
    """The same drain without a sink, then with a sink whose port is closed and one that answers
    after 4s (timeout 1s): every pod evicted no later after its announced time than without."""
    set_notify(control_plane, kube, None)
    baseline = lateness(
        kube, namespace, drain_three(control_plane, kube, namespace, kwok_nodes, "a")
    )

    slow = Receiver(delay=4.0).start()
    receivers.append(slow)
    down = Receiver().start()
    down_url = down.url
    down.stop()  # nothing listens on its port now: connection refused
    set_notify(
        control_plane,
        kube,
        [{"url": down_url, "timeout": "1s"}, {"url": slow.url, "timeout": "1s"}],
    )
    started = time.monotonic()
    with_sinks = lateness(
        kube, namespace, drain_three(control_plane, kube, namespace, kwok_nodes, "b")
    )
    took = time.monotonic() - started
    print(f"lateness without a sink {baseline}, with a down and a slow one {with_sinks}")
    assert max(with_sinks) <= max(*baseline, 0) + 1, (baseline, with_sinks)
    assert max(with_sinks) <= 2, with_sinks
    assert took < 30, took  # notice lead 4s and grace 1s, not the receivers' minutes
    assert slow.received, "the slow receiver was never called"

    def failed() -> bool:
        text = controller.metrics()
        return 'outcome="failed"' in text

    # Each notice is given up after 5 attempts (1+2+4+8s of backoff): counted, logged.
    wait_until(failed, timeout=60, what="a notice given up after its attempts")
    assert "attempts: " in controller.output(), gg.output_of(controller)
    assert "secret" not in controller.output()


def test_a_template_with_an_unknown_placeholder_is_refused_naming_the_field(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    no_notify_after: None,
    controller: gg.Controller,
) -> None:
    """The apiserver takes any text as a template; the controller reads it, refuses the policy
    (Accepted False, InvalidSpec) naming the field and the placeholder, and keeps running."""
    bad = [{"url": "http://127.0.0.1:9/x", "template": "${node} is going at $evictionAt"}]
    done = control_plane.kubectl(
        "patch",
        "disruptionpolicy",
        "default",
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"notify": bad}}),
    )
    assert done.returncode == 0, done.stderr

    def refused() -> str | None:
        found = control_plane.kubectl("get", "disruptionpolicy", "default", "-o", "json")
        doc = json.loads(found.stdout)
        for c in (doc.get("status") or {}).get("conditions", []):
            if (
                c["type"] == "Accepted"
                and c["status"] == "False"
                and c.get("observedGeneration") == doc["metadata"]["generation"]
            ):
                return str(c["reason"]) + ": " + str(c["message"])
        return None

    said = wait_until(refused, timeout=30, what="the policy refused")
    assert said.startswith("InvalidSpec: "), said
    assert "spec.notify[0].template: unknown placeholder ${node}; known: ${event}" in said
    assert controller.alive() and controller.healthy(), gg.output_of(controller)
