"""A node held for a Disruption and the annotations that say so (``domain/node_hold.py``), the one
mapping every writer of a hold applies. That the writers apply it alike (the Kubernetes one on the
real apiserver, the simulator's, the unit tests' in-memory one) is
tests/e2e/test_adapter_contract.py; the uninstall cleanup's release is
tests/e2e/test_uninstall_cleanup.py."""

from __future__ import annotations

from graceguard.adapters.kube import cleanup
from graceguard.domain import annotations as ann
from graceguard.domain import node_hold
from graceguard.manifests import objects


def test_a_hold_is_scale_down_disabled_and_the_disruption_it_is_for() -> None:
    assert node_hold.annotation_changes(request_id="r1") == {
        ann.CA_SCALE_DOWN_DISABLED: "true",
        ann.HELD_FOR: "r1",
    }


def test_letting_go_removes_both_and_keeps_the_rest() -> None:
    held = node_hold.merged({"team": "a"}, request_id="r1")
    assert node_hold.read(held) == (True, "r1")
    assert node_hold.merged(held, request_id=None) == {"team": "a"}
    assert node_hold.read({"team": "a"}) == (False, None)


def test_scale_down_disabled_by_someone_else_is_not_graceguards_hold() -> None:
    assert node_hold.read({ann.CA_SCALE_DOWN_DISABLED: "true"}) == (True, None)
    assert node_hold.read({ann.HELD_FOR: ""}) == (False, None)


def test_the_manifest_reader_and_the_cleanup_use_the_same_mapping() -> None:
    held = node_hold.merged({}, request_id="r2")
    node = objects.node_from_manifest({"metadata": {"name": "n1", "annotations": held}})
    assert (node.scale_down_disabled, node.held_for) == (True, "r2")
    assert cleanup.node_patch(held) == {
        "metadata": {"annotations": {ann.CA_SCALE_DOWN_DISABLED: None, ann.HELD_FOR: None}}
    }
    assert cleanup.node_patch({ann.CA_SCALE_DOWN_DISABLED: "true"}) is None
