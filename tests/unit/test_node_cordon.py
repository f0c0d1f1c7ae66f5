"""The cordons graceguard makes and the uninstall cleanup takes back (``domain.node_cordon``, and
the adapter's reading of ``managedFields`` in ``adapters.kube.cordons``): only a node graceguard
marked whose ``spec.unschedulable`` graceguard set last is uncordoned. On the real control plane
(``kubectl cordon`` / ``uncordon``, ``graceguard drain``): ``tests/e2e/test_uninstall_cleanup.py``.
"""

from __future__ import annotations

import pytest

from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import cordons
from graceguard.domain import annotations as ann
from graceguard.domain import node_cordon

MARK = {ann.CORDONED_FOR: "drain-n1-20261126t0000"}
R = node_cordon.Retraction


@pytest.mark.parametrize(
    ("unschedulable", "annotations", "set_by", "expected"),
    [
        # graceguard cordoned it and nobody touched the field since: taken back
        (True, MARK, {"graceguard"}, R.UNCORDON),
        # a person cordoned it (graceguard found it cordoned and did not mark it): kept
        (True, {}, {"kubectl-cordon"}, R.NONE),
        (True, {}, {"graceguard"}, R.NONE),  # the node agent's cordon: not marked, kept
        # graceguard's cordon, then `kubectl uncordon` and `kubectl cordon`: the person's, kept
        (True, MARK, {"kubectl-cordon"}, R.DROP_MARK),
        # graceguard's cordon, then uncordoned by someone: nothing to uncordon, the mark goes
        (False, MARK, set(), R.DROP_MARK),
        (False, MARK, {"graceguard"}, R.DROP_MARK),
        # cordoned, marked, but nobody is recorded as its setter: not known to be graceguard's
        (True, MARK, set(), R.DROP_MARK),
        (False, {}, set(), R.NONE),
        # scale-down-disabled / held-for are the hold's, not the cordon's
        (True, {ann.HELD_FOR: "x", ann.CA_SCALE_DOWN_DISABLED: "true"}, {"graceguard"}, R.NONE),
    ],
)
def test_only_graceguards_own_cordon_is_taken_back(
    unschedulable: bool, annotations: dict[str, str], set_by: set[str], expected: R
) -> None:
    got = node_cordon.take_back(
        unschedulable=unschedulable,
        annotations=annotations,
        unschedulable_set_by=frozenset(set_by),
        manager="graceguard",
    )
    assert got is expected


def test_the_mark_says_which_disruption_and_goes_as_one_patch() -> None:
    assert node_cordon.annotation_changes(request_id="d1") == {ann.CORDONED_FOR: "d1"}
    assert node_cordon.annotation_changes(request_id=None) == {ann.CORDONED_FOR: None}
    assert node_cordon.cordoned_for({ann.CORDONED_FOR: "d1"}) == "d1"
    assert node_cordon.cordoned_for({ann.CORDONED_FOR: ""}) is None
    assert node_cordon.cordoned_for({}) is None


def _entry(manager: str, fields: object, operation: str = "Update") -> dict[str, object]:
    return {
        "manager": manager,
        "operation": operation,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }


def test_who_set_unschedulable_is_read_from_managed_fields() -> None:
    """As the API server records a merge patch of ``spec.unschedulable`` (graceguard's cordon with
    its mark) beside the kubelet's status and a label by someone else."""
    metadata = {
        "managedFields": [
            _entry("kubelet", {"f:status": {"f:conditions": {}}}),
            _entry(
                kube_client.FIELD_MANAGER,
                {
                    "f:metadata": {"f:annotations": {"f:graceguard.io/cordoned-for": {}}},
                    "f:spec": {"f:unschedulable": {}},
                },
            ),
            _entry("kubectl-label", {"f:metadata": {"f:labels": {"f:team": {}}}}),
            _entry("odd", "not a mapping"),
            "not an entry",
        ]
    }
    assert cordons.unschedulable_set_by(metadata) == frozenset({"graceguard"})
    assert cordons.unschedulable_set_by({}) == frozenset()
    moved = {"managedFields": [_entry("kubectl-cordon", {"f:spec": {"f:unschedulable": {}}})]}
    assert cordons.unschedulable_set_by(moved) == frozenset({"kubectl-cordon"})
