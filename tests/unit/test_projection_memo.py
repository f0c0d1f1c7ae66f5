"""``projection.project`` keeps, in its reader, what each pod object with watched annotations
projects between passes (by object identity). Across passes where some pods stay the same object,
some are replaced by changed ones, some go and time moves on, a reader carried from pass to pass
must give exactly what a fresh reader gives, and what the plain per-pod reading (``reference``,
the pass as it was written before the memo) gives."""

from __future__ import annotations

import datetime as dt

from hypothesis import given, settings
from hypothesis import strategies as st

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, policy
from graceguard.engine import actions as act
from graceguard.engine import projection

NOW = dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC)

ANNOTATION_SETS: tuple[dict[str, str], ...] = (
    {},
    {"team": "data"},
    {ann.MIN_RUNTIME: "2h"},
    {ann.MIN_RUNTIME: "30m", ann.PROJECTED: ann.CA_SAFE_TO_EVICT, ann.CA_SAFE_TO_EVICT: "false"},
    {ann.MIN_RUNTIME: "not-a-duration"},
    {ann.PROJECTED: f"{ann.CA_SAFE_TO_EVICT},{ann.KARPENTER_DO_NOT_DISRUPT}"},
    {ann.MIN_RUNTIME: "1h", ann.KARPENTER_DO_NOT_DISRUPT: "true"},
    {ann.BLOCKED_SINCE: "2026-11-20T11:00:00Z", ann.MIN_RUNTIME: "3h"},
)

pod_states = st.tuples(
    st.sampled_from(range(len(ANNOTATION_SETS))),
    st.sampled_from((None, -180, -90, -20)),  # start, minutes from NOW (None: not started)
    st.booleans(),  # terminating
    st.sampled_from((None, "ProposedEviction", "ScheduledEviction")),
    st.sampled_from(("n1", "n2")),
)


def make(name: str, state: tuple[int, int | None, bool, str | None, str]) -> cluster.Pod:
    notes, start, terminating, stage, node = state
    return cluster.Pod(
        "ns",
        name,
        node,
        start_time=None if start is None else NOW + dt.timedelta(minutes=start),
        annotations=dict(ANNOTATION_SETS[notes]),
        deleting_since=NOW - dt.timedelta(minutes=1) if terminating else None,
        notice_stage=stage,
        uid=name,
    )


def reference(
    pods: tuple[cluster.Pod, ...], now: dt.datetime, disrupted: frozenset[str]
) -> projection.ProjectionResult:
    reader = projection.ProtectionReader(policy.DEFAULT.limits)
    out: list[act.Action] = []
    wake: dt.datetime | None = None
    protected = 0
    for pod in pods:
        notes = pod.annotations
        if (
            pod.notice_stage is not None or ann.BLOCKED_SINCE in notes
        ) and pod.node not in disrupted:
            out.append(act.WithdrawNotice(projection.ref(pod)))
        if not notes or notes.keys().isdisjoint(ann.WATCHED):
            continue
        spec = reader.spec(pod)
        out.extend(act.WarnAnnotation(projection.ref(pod), w) for w in spec.warnings)
        until = spec.until(pod.start_time, now)
        raw = notes.get(ann.PROJECTED)
        projected = tuple(raw.split(",")) if raw else ()
        if until is not None and until > now and not pod.finished and not pod.terminating:
            protected += 1
            wake = until if wake is None else min(wake, until)
            add = tuple((k, v) for k, v in ann.PROJECTION if k not in projected and k not in notes)
            if add:
                keys = (*projected, *(k for k, _ in add))
                out.append(act.ProjectProtection(projection.ref(pod), add, keys))
        elif projected:
            out.append(act.RetractProtection(projection.ref(pod), projected))
    return projection.ProjectionResult(tuple(out), wake, protected)


# Each pass: for each of 6 pod names, keep the previous object, replace it by a new state, or drop
# it; then move the clock on by some minutes.
passes = st.lists(
    st.tuples(
        st.lists(st.one_of(st.just("keep"), st.just("drop"), pod_states), min_size=6, max_size=6),
        st.integers(min_value=0, max_value=150),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(passes)
def test_a_carried_reader_projects_as_a_fresh_one(
    steps: list[tuple[list[object], int]],
) -> None:
    limits = policy.DEFAULT.limits
    carried = projection.ProtectionReader(limits)
    pods: dict[str, cluster.Pod] = {}
    now = NOW
    for changes, minutes in steps:
        for i, change in enumerate(changes):
            name = f"p{i}"
            if change == "drop":
                pods.pop(name, None)
            elif change != "keep":
                assert isinstance(change, tuple)
                pods[name] = make(name, change)
        now += dt.timedelta(minutes=minutes)
        snapshot = tuple(pods.values())
        disrupted = frozenset({"n2"})
        got = projection.project(snapshot, carried, now, disrupted_nodes=disrupted)
        fresh = projection.ProtectionReader(limits)
        want = projection.project(snapshot, fresh, now, disrupted_nodes=disrupted)
        assert got == want
        assert got == reference(snapshot, now, disrupted)


def test_the_memo_forgets_pods_gone() -> None:
    """Entries of pods no longer seen are dropped once they outnumber the pods of a pass."""
    reader = projection.ProtectionReader(policy.DEFAULT.limits)
    for generation in range(50):
        pods = [make(f"p{i}-{generation}", (2, -20, False, None, "n1")) for i in range(10)]
        projection.project(pods, reader, NOW)
    assert len(reader.watched) <= 2 * 10 + 64
