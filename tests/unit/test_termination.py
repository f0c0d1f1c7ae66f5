"""Who killed my pod: the ledger's pure rules (initiator, start, grace, premature, forced)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from graceguard.domain import ledger
from graceguard.domain import termination as t

NOW = dt.datetime(2026, 11, 21, 5, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def obs(**changes: object) -> t.Observation:
    base = t.Observation(
        namespace="batch",
        pod="train-0",
        uid="uid-0",
        node="node-a",
        observed_at=NOW + 10 * MIN,
        requested_grace_seconds=7200,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


DELETED = t.Deletion(started_at=NOW, grace_seconds=7200)
BY_EVICTION_API = t.DisruptionCondition("EvictionByEvictionAPI", "Eviction API: evicting", NOW)


def scale_down(at: dt.datetime = NOW) -> t.ObservedEvent:
    return t.ObservedEvent(
        "ScaleDown", "deleting pod for node scale down", "cluster-autoscaler", at
    )


def test_kubectl_delete_is_an_api_delete() -> None:
    rec = t.build_record(
        obs(deletion=t.Deletion(started_at=NOW, grace_seconds=30)), recorded_at=NOW + MIN
    )
    assert (rec.initiator, rec.cause) == (t.Initiator.API_DELETE, "Deleted")
    assert "kubectl delete" in rec.message
    assert (rec.requested_grace_seconds, rec.given_grace_seconds) == (7200, 30)
    assert rec.started_at == NOW
    assert rec.premature
    assert rec.premature_reason == "granted 30s of the 7200s grace period it asked for"
    assert not rec.forced
    assert rec.request_id is None
    assert rec.log_status == t.LOG_NOT_CAPTURED


def test_graceguard_eviction_names_graceguard_its_request_and_carries_the_logs() -> None:
    logs = t.CapturedLogs(("step 41", "step 42"), t.LOG_CAPTURED)
    eviction = t.GraceguardEviction(
        request_id="asg-i-0abc", source="asg-scale-in", at=NOW, grace_seconds=7200, logs=logs
    )
    rec = t.build_record(
        obs(deletion=DELETED, condition=BY_EVICTION_API, eviction=eviction), recorded_at=NOW
    )
    assert (rec.initiator, rec.cause) == (t.Initiator.GRACEGUARD, "Evicted")
    assert rec.request_id == "asg-i-0abc"
    assert rec.message == "evicted by graceguard for asg-scale-in (request asg-i-0abc)"
    assert rec.log_lines == ("step 41", "step 42")
    assert rec.log_status == "captured"
    assert not rec.premature
    assert not rec.forced


def test_graceguard_forced_eviction_is_forced() -> None:
    eviction = t.GraceguardEviction(
        request_id="r", source="drain", at=NOW, grace_seconds=7200, forced=True
    )
    rec = t.build_record(obs(eviction=eviction), recorded_at=NOW)
    assert (rec.initiator, rec.cause, rec.forced) == ("graceguard", "ForcedEviction", True)
    assert rec.started_at == NOW
    assert rec.given_grace_seconds == 7200


def test_cluster_autoscaler_evicting_through_the_eviction_api_is_named() -> None:
    rec = t.build_record(
        obs(
            deletion=t.Deletion(started_at=NOW, grace_seconds=600),
            condition=BY_EVICTION_API,
            events=(scale_down(NOW - MIN),),
        ),
        recorded_at=NOW,
    )
    assert (rec.initiator, rec.cause) == ("cluster-autoscaler", "ScaleDown")
    assert rec.message == "deleting pod for node scale down"
    assert rec.premature  # 600 s of 7200 s


def test_eviction_api_without_a_naming_event_is_eviction_api() -> None:
    rec = t.build_record(obs(deletion=DELETED, condition=BY_EVICTION_API), recorded_at=NOW)
    assert (rec.initiator, rec.cause) == ("eviction-api", "EvictionByEvictionAPI")
    assert rec.message == "Eviction API: evicting"


@pytest.mark.parametrize(
    ("reason", "initiator"),
    [
        ("EvictionByEvictionAPI", "eviction-api"),
        ("PreemptionByScheduler", "kube-scheduler"),
        ("PreemptionByKubeScheduler", "kube-scheduler"),
        ("DeletionByTaintManager", "taint-manager"),
        ("DeletionByPodGC", "pod-gc"),
        ("TerminationByKubelet", "kubelet"),
        ("SomethingNew", "unknown"),
    ],
)
def test_disruption_target_reasons(reason: str, initiator: str) -> None:
    cond = t.DisruptionCondition(reason, "why", NOW)
    rec = t.build_record(obs(condition=cond), recorded_at=NOW)
    assert (rec.initiator, rec.cause, rec.message) == (initiator, reason, "why")
    assert rec.started_at == NOW  # the condition's transition dates it without a deletion
    assert rec.given_grace_seconds is None


@pytest.mark.parametrize(
    ("reason", "component", "initiator"),
    [
        ("ScaleDown", "cluster-autoscaler", "cluster-autoscaler"),
        ("Preempted", "default-scheduler", "kube-scheduler"),
        ("TaintManagerEviction", "taint-eviction-controller", "taint-manager"),
        ("Evicted", "kubelet", "kubelet"),
        ("Evicted", "", "kubelet"),
        ("Evicted", "karpenter", "karpenter"),
        ("Evicted", "graceguard", "graceguard"),
        ("ForcedEviction", "graceguard", "graceguard"),
        ("Preempting", "kubelet", "kubelet"),
    ],
)
def test_events_name_their_initiator(reason: str, component: str, initiator: str) -> None:
    event = t.ObservedEvent(reason, "msg", component, NOW)
    rec = t.build_record(obs(deletion=DELETED, events=(event,)), recorded_at=NOW)
    assert (rec.initiator, rec.cause, rec.message) == (initiator, reason, "msg")


def test_a_condition_beats_an_event_from_another_actor() -> None:
    cond = t.DisruptionCondition("DeletionByTaintManager", "Taint manager: deleting", NOW)
    rec = t.build_record(
        obs(deletion=DELETED, condition=cond, events=(scale_down(),)), recorded_at=NOW
    )
    assert rec.initiator == "taint-manager"


def test_an_event_from_an_earlier_attempt_is_not_this_termination() -> None:
    """cluster-autoscaler tried an hour ago and was refused; now someone ran kubectl delete."""
    rec = t.build_record(
        obs(deletion=DELETED, events=(scale_down(NOW - 60 * MIN),)), recorded_at=NOW
    )
    assert rec.initiator == "api-delete"


def test_the_latest_naming_event_wins() -> None:
    karpenter = t.ObservedEvent("Evicted", "Evicted pod", "karpenter", NOW)
    rec = t.build_record(
        obs(deletion=DELETED, condition=BY_EVICTION_API, events=(karpenter, scale_down(NOW - MIN))),
        recorded_at=NOW,
    )
    assert rec.initiator == "karpenter"


def test_killing_only_names_the_kubelet_when_nothing_else_does() -> None:
    killing = t.ObservedEvent("Killing", "Stopping container main", "kubelet", NOW + MIN)
    alone = t.build_record(obs(events=(killing,)), recorded_at=NOW)
    assert (alone.initiator, alone.cause, alone.message) == (
        "kubelet",
        "Killing",
        "Stopping container main",
    )
    assert alone.started_at == NOW + MIN
    with_deletion = t.build_record(obs(deletion=DELETED, events=(killing,)), recorded_at=NOW)
    assert with_deletion.initiator == "api-delete"


def test_failed_kill_pod_is_noted_in_the_message() -> None:
    failed = t.ObservedEvent("FailedKillPod", "error killing pod: timeout", "kubelet", NOW)
    rec = t.build_record(obs(deletion=DELETED, events=(failed,)), recorded_at=NOW)
    assert rec.initiator == "api-delete"
    assert rec.message.endswith("(FailedKillPod: error killing pod: timeout)")


def test_nothing_seen_is_unknown_and_dated_when_observed() -> None:
    rec = t.build_record(obs(), recorded_at=NOW)
    assert (rec.initiator, rec.cause) == ("unknown", "Gone")
    assert rec.started_at == NOW + 10 * MIN
    assert not rec.premature


def test_force_delete_with_no_grace_is_forced_and_premature() -> None:
    rec = t.build_record(obs(deletion=t.Deletion(started_at=NOW, grace_seconds=0)), recorded_at=NOW)
    assert rec.forced
    assert rec.premature


def test_start_prefers_the_deletion_then_the_eviction_then_the_condition() -> None:
    eviction = t.GraceguardEviction(request_id="r", source="s", at=NOW - MIN, grace_seconds=1)
    cond = t.DisruptionCondition("EvictionByEvictionAPI", "", NOW - 2 * MIN)
    assert t.termination_start(obs(deletion=DELETED, eviction=eviction, condition=cond)) == NOW
    assert t.termination_start(obs(eviction=eviction, condition=cond)) == NOW - MIN
    assert t.termination_start(obs(condition=cond)) == NOW - 2 * MIN


def test_premature_before_protection_ends_not_at_its_end() -> None:
    def premature(protected_until: dt.datetime) -> tuple[str, ...]:
        return t.premature_reasons(
            started_at=NOW,
            protected_until=protected_until,
            requested_grace_seconds=30,
            given_grace_seconds=30,
        )

    assert premature(NOW) == ()
    assert premature(NOW - MIN) == ()
    assert premature(NOW + dt.timedelta(hours=2, minutes=30)) == (
        "began 2h30m0s before its protection ended at 2026-11-21T07:30:00Z",
    )


def test_premature_grace_needs_both_sides() -> None:
    def reasons(requested: int | None, given: int | None) -> tuple[str, ...]:
        return t.premature_reasons(
            started_at=NOW,
            protected_until=None,
            requested_grace_seconds=requested,
            given_grace_seconds=given,
        )

    assert reasons(7200, 7200) == ()
    assert reasons(30, 7200) == ()
    assert reasons(None, 0) == ()
    assert reasons(7200, None) == ()
    assert reasons(7200, 7199) == ("granted 7199s of the 7200s grace period it asked for",)


def test_both_premature_reasons_are_joined() -> None:
    rec = t.build_record(
        obs(
            protected_until=NOW + dt.timedelta(hours=1),
            deletion=t.Deletion(started_at=NOW, grace_seconds=600),
        ),
        recorded_at=NOW,
    )
    assert rec.premature_reason == (
        "began 1h0m0s before its protection ended at 2026-11-21T06:00:00Z; "
        "granted 600s of the 7200s grace period it asked for"
    )


def test_explicit_logs_override_and_no_logs_reads_well() -> None:
    kwok = t.CapturedLogs((), t.no_logs("kwok node: no kubelet serves logs"))
    rec = t.build_record(obs(deletion=DELETED), recorded_at=NOW, logs=kwok)
    assert rec.log_status == "no logs available: kwok node: no kubelet serves logs"
    assert not kwok.captured
    assert t.no_logs("") == "no logs available"


def test_records_refuse_naive_times() -> None:
    rec = t.build_record(obs(deletion=DELETED), recorded_at=NOW)
    with pytest.raises(ValueError, match="started_at"):
        dataclasses.replace(rec, started_at=NOW.replace(tzinfo=None))


def test_latest_eviction_among_actions() -> None:
    def action(kind: ledger.ActionKind, minutes: int) -> ledger.ActionRecord:
        return ledger.ActionRecord(
            namespace="batch",
            pod="train-0",
            uid="uid-0",
            kind=kind,
            request_id=f"r{minutes}",
            source="drain",
            at=NOW + minutes * MIN,
            grace_seconds=7200,
        )

    notice = action(ledger.ActionKind.SCHEDULED_EVICTION, 0)
    assert notice.as_eviction() is None
    assert ledger.latest_eviction((notice,)) is None
    latest = ledger.latest_eviction(
        (
            notice,
            action(ledger.ActionKind.FORCED_EVICTION, 9),
            action(ledger.ActionKind.EVICTION, 5),
        )
    )
    assert latest is not None
    assert (latest.request_id, latest.forced, latest.grace_seconds) == ("r9", True, 7200)


_times = st.datetimes(
    min_value=dt.datetime(2026, 1, 1), max_value=dt.datetime(2027, 1, 1), timezones=st.just(dt.UTC)
)
_grace = st.none() | st.integers(min_value=0, max_value=100_000)


@given(
    started=_times,
    protected=st.none() | _times,
    requested=_grace,
    given_grace=_grace,
)
def test_premature_is_exactly_early_or_short_of_grace(
    started: dt.datetime,
    protected: dt.datetime | None,
    requested: int | None,
    given_grace: int | None,
) -> None:
    reasons = t.premature_reasons(
        started_at=started,
        protected_until=protected,
        requested_grace_seconds=requested,
        given_grace_seconds=given_grace,
    )
    early = protected is not None and started < protected
    short = requested is not None and given_grace is not None and given_grace < requested
    assert bool(reasons) == (early or short)
    assert len(reasons) == early + short


_text = st.text(max_size=12)
_event = st.builds(
    t.ObservedEvent,
    reason=st.sampled_from([*t.EventReason, "Pulled", ""]) | _text,
    message=_text,
    component=st.sampled_from(["kubelet", "cluster-autoscaler", "karpenter", ""]) | _text,
    at=st.none() | _times,
)


@given(
    events=st.lists(_event, max_size=4).map(tuple),
    condition=st.none()
    | st.builds(
        t.DisruptionCondition,
        reason=st.sampled_from([*t.DisruptionTargetReason]) | _text,
        message=_text,
        at=st.none() | _times,
    ),
    deletion=st.none()
    | st.builds(t.Deletion, started_at=_times, grace_seconds=st.integers(0, 10_000)),
)
@example(events=(), condition=t.DisruptionCondition(""), deletion=None)  # cause was ""
def test_any_observation_gives_a_record(
    events: tuple[t.ObservedEvent, ...],
    condition: t.DisruptionCondition | None,
    deletion: t.Deletion | None,
) -> None:
    rec = t.build_record(
        obs(events=events, condition=condition, deletion=deletion), recorded_at=NOW
    )
    assert rec.initiator
    assert rec.cause
    if deletion is not None:
        assert rec.started_at == deletion.started_at
        assert rec.given_grace_seconds == deletion.grace_seconds
