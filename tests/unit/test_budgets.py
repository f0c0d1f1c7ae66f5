"""Budgets: PDB status as the disruption controller computes it, PDBs as the Eviction API applies
them (``pkg/registry/core/pod/storage/eviction.go``), and graceguard's workload floor."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain import annotations as ann
from graceguard.domain import budgets, cluster, intorpercent, policy
from graceguard.domain.intorpercent import IntOrPercent, IntOrPercentError, parse_int_or_percent
from graceguard.engine import index

NOW = dt.datetime(2026, 11, 21, 2, 0, tzinfo=dt.UTC)
WEB = cluster.WorkloadRef("Deployment", "ns", "web")
API = cluster.WorkloadRef("StatefulSet", "ns", "api")
SELECT_APP = cluster.LabelSelector({"app": "web"})
IF_HEALTHY = cluster.UnhealthyPodEvictionPolicy.IF_HEALTHY_BUDGET
ALWAYS = cluster.UnhealthyPodEvictionPolicy.ALWAYS_ALLOW


def pod(
    name: str,
    *,
    workload: cluster.WorkloadRef | None = WEB,
    ready: bool = True,
    phase: cluster.PodPhase = cluster.PodPhase.RUNNING,
    deleting: bool = False,
    labels: dict[str, str] | None = None,
) -> cluster.Pod:
    return cluster.Pod(
        "ns",
        name,
        node="n1",
        start_time=NOW,
        workload=workload,
        ready=ready,
        phase=phase,
        deleting_since=NOW if deleting else None,
        labels=labels if labels is not None else {"app": "web"},
    )


def pdb(
    *,
    min_available: str | int | None = None,
    max_unavailable: str | int | None = None,
    policy: cluster.UnhealthyPodEvictionPolicy = IF_HEALTHY,
    status: cluster.BudgetStatus | None = None,
    name: str = "web",
) -> cluster.PodDisruptionBudget:
    return cluster.PodDisruptionBudget(
        "ns",
        name,
        SELECT_APP,
        min_available=None if min_available is None else parse_int_or_percent(min_available),
        max_unavailable=None if max_unavailable is None else parse_int_or_percent(max_unavailable),
        unhealthy_pod_eviction_policy=policy,
        status=status,
    )


def status(healthy: int, desired: int, expected: int, allowed: int) -> cluster.BudgetStatus:
    return cluster.BudgetStatus(healthy, desired, expected, allowed)


# --- IntOrPercent --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (2, IntOrPercent(2)),
        (0, IntOrPercent(0)),
        ("2", IntOrPercent(2)),
        ("50%", IntOrPercent(50, percent=True)),
        (" 50% ", IntOrPercent(50, percent=True)),
        ("0%", IntOrPercent(0, percent=True)),
        ("100%", IntOrPercent(100, percent=True)),
    ],
)
def test_parse_int_or_percent(raw: object, expected: IntOrPercent) -> None:
    assert parse_int_or_percent(raw) == expected
    assert str(expected) in {"2", "0", "50%", "0%", "100%"}


@pytest.mark.parametrize(
    "raw", [-1, True, 1.5, "half", "50 %", "%", "", "101%", "-1", "½", "\u0661", None, [1]]
)
def test_bad_int_or_percent(raw: object) -> None:
    with pytest.raises(IntOrPercentError):
        parse_int_or_percent(raw)


@pytest.mark.parametrize(
    ("value", "total", "scaled"),
    [
        (IntOrPercent(2), 10, 2),
        (IntOrPercent(50, True), 4, 2),
        (IntOrPercent(50, True), 3, 2),  # 1.5 rounds up
        (IntOrPercent(50, True), 1, 1),
        (IntOrPercent(10, True), 1, 1),
        (IntOrPercent(1, True), 1000, 10),
        (IntOrPercent(33, True), 10, 4),
        (IntOrPercent(0, True), 10, 0),
        (IntOrPercent(100, True), 7, 7),
        (IntOrPercent(50, True), 0, 0),
    ],
)
def test_percent_rounds_up(value: IntOrPercent, total: int, scaled: int) -> None:
    assert value.scaled(total) == scaled


@given(st.integers(0, 100), st.integers(0, 10_000))
def test_percent_scaling_is_the_least_integer_not_below(pct: int, total: int) -> None:
    n = IntOrPercent(pct, percent=True).scaled(total)
    assert n * 100 >= pct * total
    assert (n - 1) * 100 < pct * total or n == 0


# --- pdb_status: the disruption controller -------------------------------------------------------


def test_min_available_int_counts_selected_pods() -> None:
    pods = [pod("a"), pod("b"), pod("c", ready=False)]
    got = budgets.pdb_status(pdb(min_available=1), pods, desired_replicas={WEB.key: 5})
    assert got == status(healthy=2, desired=1, expected=3, allowed=1)


def test_min_available_int_above_healthy_allows_nothing() -> None:
    pods = [pod("a"), pod("b")]
    got = budgets.pdb_status(pdb(min_available=3), pods, desired_replicas={WEB.key: 2})
    assert got == status(healthy=2, desired=3, expected=2, allowed=0)


def test_min_available_percent_uses_the_workload_scale_rounding_up() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    got = budgets.pdb_status(pdb(min_available="50%"), pods, desired_replicas={WEB.key: 5})
    assert got == status(healthy=3, desired=3, expected=5, allowed=0)  # ceil(2.5) = 3


def test_max_unavailable_int_uses_the_workload_scale() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    got = budgets.pdb_status(pdb(max_unavailable=1), pods, desired_replicas={WEB.key: 3})
    assert got == status(healthy=3, desired=2, expected=3, allowed=1)


def test_max_unavailable_percent_rounds_up_the_unavailable() -> None:
    pods = [pod(str(i)) for i in range(3)]
    got = budgets.pdb_status(pdb(max_unavailable="50%"), pods, desired_replicas={WEB.key: 3})
    assert got == status(healthy=3, desired=1, expected=3, allowed=2)  # 3 - ceil(1.5)


def test_max_unavailable_never_makes_desired_negative() -> None:
    pods = [pod("a")]
    got = budgets.pdb_status(pdb(max_unavailable=5), pods, desired_replicas={WEB.key: 2})
    assert got == status(healthy=1, desired=0, expected=2, allowed=1)


def test_scale_sums_every_workload_once() -> None:
    pods = [pod("a"), pod("b"), pod("x", workload=API), pod("y", workload=API)]
    got = budgets.pdb_status(
        pdb(min_available="50%"), pods, desired_replicas={WEB.key: 4, API.key: 2}
    )
    assert got == status(healthy=4, desired=3, expected=6, allowed=1)


def test_unhealthy_pods_do_not_count_as_healthy() -> None:
    pods = [
        pod("ready"),
        pod("unready", ready=False),
        pod("deleting", deleting=True),
        pod("pending", phase=cluster.PodPhase.PENDING, ready=False),
    ]
    got = budgets.pdb_status(pdb(min_available=1), pods, desired_replicas={WEB.key: 4})
    assert got.current_healthy == 1


def test_terminal_pods_are_selected_but_not_healthy() -> None:
    """The controller lists every pod the selector matches; only ``len(pods)`` sees the
    finished ones (integer ``minAvailable``)."""
    pods = [pod("a"), pod("done", phase=cluster.PodPhase.SUCCEEDED, ready=False)]
    got = budgets.pdb_status(pdb(min_available=1), pods, desired_replicas={WEB.key: 2})
    assert got == status(healthy=1, desired=1, expected=2, allowed=0)


def test_unmanaged_pods_add_nothing_to_the_expected_scale() -> None:
    """Bare pods have no scale: with a percentage or ``maxUnavailable`` the controller leaves them
    out (an ``UnmanagedPods`` warning) and a PDB that expects no pods allows no disruption."""
    bare = [pod("a", workload=None), pod("b", workload=None), pod("c", workload=None)]
    got = budgets.pdb_status(pdb(max_unavailable=1), bare, desired_replicas={})
    assert got.expected_pods == 0
    assert got.disruptions_allowed == 0
    mixed = [*bare, pod("w1"), pod("w2")]
    got = budgets.pdb_status(pdb(max_unavailable=1), mixed, desired_replicas={WEB.key: 2})
    assert (got.expected_pods, got.desired_healthy) == (2, 1)


def test_bare_pods_with_integer_min_available_count() -> None:
    bare = [pod("a", workload=None), pod("b", workload=None)]
    got = budgets.pdb_status(pdb(min_available=1), bare, desired_replicas={})
    assert got == status(healthy=2, desired=1, expected=2, allowed=1)


def test_a_workload_scaled_to_zero_allows_nothing() -> None:
    pods = [pod("a"), pod("b")]
    got = budgets.pdb_status(pdb(max_unavailable="50%"), pods, desired_replicas={WEB.key: 0})
    assert got.expected_pods == 0
    assert got.disruptions_allowed == 0


def test_a_pdb_without_min_or_max_allows_nothing() -> None:
    pods = [pod("a"), pod("b")]
    got = budgets.pdb_status(pdb(), pods, desired_replicas={WEB.key: 2})
    assert got.disruptions_allowed == 0


def test_no_pods_allow_nothing() -> None:
    got = budgets.pdb_status(pdb(min_available=0), [], desired_replicas={})
    assert got.disruptions_allowed == 0


# --- the Eviction API ----------------------------------------------------------------------------


def check(
    p: cluster.Pod,
    pdbs: list[cluster.PodDisruptionBudget],
    floor: budgets.Floor | None = None,
    allowances: budgets.Allowances | None = None,
) -> str | None:
    return (allowances or budgets.Allowances({}, {})).check(p, pdbs, floor)


def test_no_pdb_no_refusal() -> None:
    assert check(pod("a"), []) is None


def test_healthy_pod_needs_a_disruption_allowed() -> None:
    ok = pdb(min_available=1, status=status(2, 1, 2, 1))
    assert check(pod("a"), [ok]) is None
    full = pdb(min_available=2, status=status(2, 2, 2, 0))
    refusal = check(pod("a"), [full])
    assert refusal == "PodDisruptionBudget web allows no disruption (2 healthy, 2 required)"


def test_each_eviction_in_a_pass_consumes_one() -> None:
    budget = pdb(min_available=1, status=status(3, 1, 3, 2))
    allowances = budgets.Allowances({}, {})
    for name in ("a", "b"):
        assert allowances.check(pod(name), [budget], None) is None
        allowances.consume(pod(name), [budget], None)
    assert allowances.check(pod("c"), [budget], None) is not None


def test_more_than_one_pdb_is_refused() -> None:
    one = pdb(min_available=1, status=status(3, 1, 3, 2), name="one")
    two = pdb(min_available=1, status=status(3, 1, 3, 2), name="two")
    assert check(pod("a"), [two, one]) == (
        "more than one PodDisruptionBudget selects the pod (one, two)"
    )


def test_a_pdb_without_status_is_refused() -> None:
    assert check(pod("a"), [pdb(min_available=1)]) == ("PodDisruptionBudget web has no status yet")


def test_unhealthy_pod_if_healthy_budget_goes_when_the_budget_is_met() -> None:
    met = pdb(min_available=2, status=status(2, 2, 3, 0))
    allowances = budgets.Allowances({}, {})
    assert allowances.check(pod("x", ready=False), [met], None) is None
    allowances.consume(pod("x", ready=False), [met], None)
    assert allowances.pdb_allowed.get(met.key, 0) == 0  # nothing consumed


def test_unhealthy_pod_if_healthy_budget_stays_when_the_budget_is_not_met() -> None:
    unmet = pdb(min_available=3, status=status(2, 3, 3, 0))
    assert check(pod("x", ready=False), [unmet]) == (
        "PodDisruptionBudget web is not met (2 healthy, 3 required)"
    )


def test_unhealthy_pod_with_nothing_desired_needs_a_disruption_allowed() -> None:
    """``desiredHealthy`` 0 skips the unhealthy shortcut: the API then checks and decrements
    ``disruptionsAllowed`` as for a healthy pod."""
    nobody = pdb(max_unavailable="100%", status=status(0, 0, 2, 0))
    assert check(pod("x", ready=False), [nobody]) is not None
    some = pdb(max_unavailable="100%", status=status(1, 0, 2, 1))
    allowances = budgets.Allowances({}, {})
    assert allowances.check(pod("x", ready=False), [some], None) is None
    allowances.consume(pod("x", ready=False), [some], None)
    assert allowances.check(pod("y", ready=False), [some], None) is not None


def test_unhealthy_pod_always_allow() -> None:
    unmet = pdb(min_available=3, policy=ALWAYS, status=status(0, 3, 3, 0))
    assert check(pod("x", ready=False), [unmet]) is None
    # ... but a healthy pod still needs the budget.
    assert check(pod("y"), [unmet]) is not None


@pytest.mark.parametrize(
    "phase", [cluster.PodPhase.PENDING, cluster.PodPhase.SUCCEEDED, cluster.PodPhase.FAILED]
)
def test_pending_and_terminal_pods_ignore_pdbs(phase: cluster.PodPhase) -> None:
    """``canIgnorePDB``: such pods are deleted without looking at any PDB, even two or one
    without status."""
    p = pod("x", phase=phase, ready=False)
    unmet = pdb(min_available=3, status=status(0, 3, 3, 0))
    assert check(p, [unmet]) is None
    assert check(p, [pdb(name="one"), pdb(name="two")]) is None
    assert check(p, [pdb(min_available=1)]) is None


# --- the workload floor --------------------------------------------------------------------------


def workload(
    replicas: int, annotations: dict[str, str] | None = None, ref: cluster.WorkloadRef = WEB
) -> cluster.Workload:
    return cluster.Workload(ref, replicas, annotations or {})


def test_default_floor_is_half_the_replicas_rounded_up() -> None:
    floor, warning = budgets.workload_floor(workload(3), default=policy.HALF, current_healthy=3)
    assert warning is None
    assert floor is not None
    assert (floor.desired_healthy, floor.disruptions_allowed, floor.explicit) == (2, 1, False)
    single, _ = budgets.workload_floor(workload(1), default=policy.HALF, current_healthy=1)
    assert single is not None and single.disruptions_allowed == 0


@pytest.mark.parametrize(
    ("raw", "replicas", "healthy", "desired"),
    [("2", 4, 4, 2), ("75%", 4, 4, 3), ("0", 4, 4, 0), ("10", 4, 4, 4), ("100%", 3, 3, 3)],
)
def test_annotation_overrides_the_default(
    raw: str, replicas: int, healthy: int, desired: int
) -> None:
    floor, warning = budgets.workload_floor(
        workload(replicas, {ann.MIN_AVAILABLE: raw}), default=policy.HALF, current_healthy=healthy
    )
    assert warning is None
    assert floor is not None and floor.explicit
    assert floor.desired_healthy == desired
    assert floor.disruptions_allowed == healthy - desired


@pytest.mark.parametrize("raw", ["lots", "150%", "-1", "2.5"])
def test_bad_annotation_warns_and_the_default_applies(raw: str) -> None:
    floor, warning = budgets.workload_floor(
        workload(4, {ann.MIN_AVAILABLE: raw}), default=policy.HALF, current_healthy=4
    )
    assert floor is not None and not floor.explicit
    assert floor.min_available == policy.HALF
    assert warning is not None
    assert (warning.annotation, warning.value) == (ann.MIN_AVAILABLE, raw)
    assert warning.problem.endswith("the default floor applies")


def test_no_default_no_floor_unless_annotated() -> None:
    none, _ = budgets.workload_floor(workload(4), default=None, current_healthy=4)
    assert none is None
    some, _ = budgets.workload_floor(
        workload(4, {ann.MIN_AVAILABLE: "3"}), default=None, current_healthy=4
    )
    assert some is not None and some.desired_healthy == 3


def test_floor_blocks_healthy_pods_only() -> None:
    floor = budgets.Floor(WEB, IntOrPercent(2), replicas=2, current_healthy=2)
    refusal = check(pod("a"), [], floor)
    assert refusal == ("Deployment web must keep 2 of 2 replicas Ready (min-available 2; 2 Ready)")
    assert check(pod("b", ready=False), [], floor) is None


def test_floor_is_consumed_per_eviction() -> None:
    floor = budgets.Floor(WEB, IntOrPercent(50, True), replicas=4, current_healthy=4)
    allowances = budgets.Allowances({}, {})
    for name in ("a", "b"):
        assert allowances.check(pod(name), [], floor) is None
        allowances.consume(pod(name), [], floor)
    assert allowances.check(pod("c"), [], floor) is not None


def snapshot_with(
    pdbs: tuple[cluster.PodDisruptionBudget, ...], workload_annotations: dict[str, str]
) -> index.ClusterIndex:
    pods = (*(pod(f"web-{i}") for i in range(4)), pod("bare", workload=None))
    snap = cluster.Snapshot(
        nodes=(cluster.Node("n1"),),
        pods=pods,
        budgets=pdbs,
        workloads=(workload(4, workload_annotations),),
    )
    return index.build(snap, policy.DEFAULT)


def test_default_floor_yields_to_a_user_pdb() -> None:
    user = pdb(min_available=1, status=status(4, 1, 4, 3))
    idx = snapshot_with((user,), {})
    p = idx.snapshot.pods[0]
    assert idx.floor_for(p, idx.pdbs_for(p)) is None
    idx = snapshot_with((), {})
    floor = idx.floor_for(p, idx.pdbs_for(p))
    assert floor is not None and floor.desired_healthy == 2 and floor.current_healthy == 4


def test_annotated_floor_applies_beside_a_user_pdb() -> None:
    user = pdb(min_available=1, status=status(4, 1, 4, 3))
    idx = snapshot_with((user,), {ann.MIN_AVAILABLE: "3"})
    p = idx.snapshot.pods[0]
    floor = idx.floor_for(p, idx.pdbs_for(p))
    assert floor is not None and floor.explicit and floor.desired_healthy == 3


def test_bare_pods_get_no_default_floor() -> None:
    idx = snapshot_with((), {})
    bare = idx.snapshot.pods[-1]
    assert bare.workload is None
    assert idx.floor_for(bare, idx.pdbs_for(bare)) is None


def test_pdbs_select_by_namespace_and_labels() -> None:
    other_ns = dataclasses.replace(pdb(min_available=1), namespace="other")
    expr = cluster.PodDisruptionBudget(
        "ns",
        "expr",
        cluster.LabelSelector(
            match_expressions=(cluster.SelectorRequirement("app", "In", ("web", "api")),)
        ),
    )
    idx = snapshot_with((other_ns, expr), {})
    assert [b.name for b in idx.pdbs_for(idx.snapshot.pods[0])] == ["expr"]


# --- property: the controller's status and the Eviction API agree --------------------------------


@given(
    st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=8),
    st.one_of(
        st.builds(lambda n: ("min", intorpercent.IntOrPercent(n)), st.integers(0, 8)),
        st.builds(lambda n: ("min", IntOrPercent(n, True)), st.integers(0, 100)),
        st.builds(lambda n: ("max", intorpercent.IntOrPercent(n)), st.integers(0, 8)),
        st.builds(lambda n: ("max", IntOrPercent(n, True)), st.integers(0, 100)),
    ),
    st.integers(0, 10),
    st.sampled_from([IF_HEALTHY, ALWAYS]),
)
def test_evicting_what_the_api_allows_keeps_the_budget(
    flags: list[tuple[bool, bool]],
    spec: tuple[str, IntOrPercent],
    replicas: int,
    unhealthy_policy: cluster.UnhealthyPodEvictionPolicy,
) -> None:
    """Evict, one by one, every pod the Eviction API lets go: the PDB's healthy count never ends
    below its desired count unless it started below it."""
    pods = [pod(f"p{i}", ready=ready) for i, (ready, _) in enumerate(flags)]
    kind, value = spec
    budget = cluster.PodDisruptionBudget(
        "ns",
        "web",
        SELECT_APP,
        min_available=value if kind == "min" else None,
        max_unavailable=value if kind == "max" else None,
        unhealthy_pod_eviction_policy=unhealthy_policy,
    )
    replicas_map = {WEB.key: replicas}
    before = budgets.pdb_status(budget, pods, desired_replicas=replicas_map)
    budget = dataclasses.replace(budget, status=before)
    allowances = budgets.Allowances({}, {})
    evicted: set[str] = set()
    for p, (_, want) in zip(pods, flags, strict=True):
        if want and allowances.check(p, [budget], None) is None:
            allowances.consume(p, [budget], None)
            evicted.add(p.name)
    remaining = [
        dataclasses.replace(p, deleting_since=NOW) if p.name in evicted else p for p in pods
    ]
    after = budgets.pdb_status(budget, remaining, desired_replicas=replicas_map)
    assert after.current_healthy >= min(before.desired_healthy, before.current_healthy)
    assert before.current_healthy - after.current_healthy <= before.disruptions_allowed
