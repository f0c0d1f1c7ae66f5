"""A failed install does not block the cluster: the chart registers the eviction webhook with
``failurePolicy: Ignore`` and a serving webhook replica arms it with ``webhook.failurePolicy``
(``graceguard webhook --arm-configuration``), on the real control plane.

- No webhook replica answers (the configuration as the chart renders it, its webhook an address
  nothing listens on, as when the image cannot be pulled): a protected pod's eviction goes
  through. The same configuration with ``Fail`` (as the chart registered it before): refused,
  every eviction in the reviewed namespaces would be (the loss this prevents).
- A replica that serves arms it (``webhook_install.installed`` waits for ``Fail``); stopped, the
  configuration stays armed and evictions wait (the README's ``Fail``), until a ``helm upgrade``
  re-applies ``Ignore``, which a serving replica sets back.
"""

from __future__ import annotations

import json
import pathlib
import signal

import pytest
from lightkube import ApiError, Client
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

import controlplane
import localports

from . import graceguard_proc as gg
from . import webhook_install as wi
from .conftest import NodeFactory
from .kube import evict, get_or_none, is_gone_or_going, pod, run_pod, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("no_takeover")]

PROTECTED = {"graceguard.io/min-runtime": "1h"}


def _set_policy(kube: Client, name: str, policy: str) -> None:
    kube.patch(
        ValidatingWebhookConfiguration,
        name,
        [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": policy}],
        patch_type=PatchType.JSON,
    )


def test_a_webhook_that_never_answers_blocks_no_eviction(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(kube, namespace, pod("first", annotations=PROTECTED, node_name=node))
    run_pod(kube, namespace, pod("second", annotations=PROTECTED, node_name=node))
    docs = wi.render(f"gg{namespace[-4:]}", f"gg-system-{namespace[-4:]}")
    config = wi.one(docs, "ValidatingWebhookConfiguration")
    name = config["metadata"]["name"] = f"{config['metadata']['name']}-{namespace}"[:63]
    (webhook,) = config["webhooks"]
    assert webhook["failurePolicy"] == "Ignore"  # as the chart registers it
    webhook["clientConfig"] = {"url": f"https://127.0.0.1:{localports.free_port()}/x"}
    webhook["namespaceSelector"]["matchLabels"] = {"kubernetes.io/metadata.name": namespace}
    path = tmp_path / "configuration.json"
    path.write_text(json.dumps(config))
    done = control_plane.kubectl("apply", "-f", str(path))
    assert done.returncode == 0, done.stderr
    try:
        # Without graceguard's arming (Fail from the start): refused while nothing answers.
        _set_policy(kube, name, "Fail")

        def refused() -> ApiError | None:
            try:
                evict(kube, "second", namespace, dry_run=True)
            except ApiError as err:
                return err
            return None

        err = wait_until(refused, timeout=30, what="the unreachable webhook refusing (Fail)")
        assert "failed calling webhook" in (err.status.message or ""), err.status.message

        # As the chart registers it: the eviction goes through.
        _set_policy(kube, name, "Ignore")
        wait_until(lambda: refused() is None, timeout=30, what="Ignore taking effect")
        evict(kube, "first", namespace)  # admitted: no ApiError

        wait_until(
            lambda: is_gone_or_going(kube, "first", namespace), timeout=30, what="first evicted"
        )
    finally:
        kube.delete(ValidatingWebhookConfiguration, name)


def test_a_serving_replica_arms_it_and_an_upgrade_is_armed_again(
    control_plane: controlplane.ControlPlane,
    kube: Client,
    namespace: str,
    kwok_nodes: NodeFactory,
    tmp_path: pathlib.Path,
) -> None:
    node = gg.node_name(kwok_nodes("a"))
    run_pod(kube, namespace, pod("long", annotations=PROTECTED, node_name=node))
    with wi.installed(control_plane, kube, namespace, tmp_path) as hook:
        assert wi.armed(kube, hook.configuration) == "Fail"  # armed by the replica
        # helm upgrade re-applies the chart's Ignore: the serving replica sets Fail back.
        _set_policy(kube, hook.configuration, "Ignore")
        wait_until(
            lambda: wi.armed(kube, hook.configuration) == "Fail",
            timeout=30,
            what="the configuration armed again",
        )
        hook.process.send_signal(signal.SIGTERM)
        hook.process.wait(timeout=15)
        # No replica answers now: Fail stays, the protected pod's eviction waits.
        assert wi.armed(kube, hook.configuration) == "Fail"
        with pytest.raises(ApiError):
            evict(kube, "long", namespace)
        found = get_or_none(kube, Pod, "long", namespace)
        assert found is not None and found.metadata is not None
        assert found.metadata.deletionTimestamp is None
