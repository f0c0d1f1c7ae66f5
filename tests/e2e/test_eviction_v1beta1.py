"""``policy/v1beta1`` Eviction bodies on the real control plane (issue 20 item 5): the form some
evictors still send (older clients, cluster-autoscaler releases that build their Eviction from
``policy/v1beta1``). The apiserver takes them on ``pods/eviction`` and calls graceguard's webhook
(the chart's, ``webhook_install``; the policy's ``takeover: []``, the rules alone, as in
``test_eviction_webhook.py``): a protected pod's eviction is refused with graceguard's message, an
unprotected pod's goes through, exactly as for a ``policy/v1`` body. The unit side:
``tests/unit/test_webhook_service.py`` (the same body read and taken over)."""

from __future__ import annotations

import json
import pathlib
import secrets
import subprocess

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod

import controlplane

from . import graceguard_proc as gg
from . import webhook_install as wi
from .conftest import NodeFactory
from .kube import get_or_none, pod, run_pod, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_takeover")]


def evict_v1beta1(
    control_plane: controlplane.ControlPlane, namespace: str, name: str
) -> subprocess.CompletedProcess[str]:
    body = {
        "apiVersion": "policy/v1beta1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": namespace},
        "deleteOptions": {"gracePeriodSeconds": 1},
    }
    path = control_plane.workdir / f"eviction-v1beta1-{secrets.token_hex(4)}.json"
    path.write_text(json.dumps(body))
    try:
        return control_plane.kubectl(
            "create",
            "--raw",
            f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
            "-f",
            str(path),
        )
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.timeout(180)
def test_a_policy_v1beta1_eviction_is_answered_by_graceguards_rules(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(
        kube,
        namespace,
        pod(
            "long", annotations={"graceguard.io/min-runtime": "1h"}, grace_seconds=1, node_name=node
        ),
    )
    run_pod(kube, namespace, pod("web", grace_seconds=1, node_name=node))
    with wi.installed(control_plane, kube, namespace, tmp_path):
        wi.wait_until_reviewing(control_plane, namespace, "long")
        refused = evict_v1beta1(control_plane, namespace, "long")
        assert refused.returncode != 0, refused.stdout
        assert (
            f'admission webhook "evictions.graceguard.io" denied the request: graceguard: pod '
            f"{namespace}/long: protected by graceguard.io/min-runtime=1h until"
        ) in refused.stderr, refused.stderr
        admitted = evict_v1beta1(control_plane, namespace, "web")
        assert admitted.returncode == 0, admitted.stderr
        wait_until(
            lambda: get_or_none(kube, Pod, "web", namespace) is None,
            timeout=30,
            what="web evicted",
        )
        assert get_or_none(kube, Pod, "long", namespace) is not None
