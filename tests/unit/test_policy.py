"""The DisruptionPolicy: DESIGN.md's defaults, every field validated, errors naming the path."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any, cast

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from graceguard.adapters.kube import policy_status, view
from graceguard.domain import intorpercent, phases
from graceguard.domain.policy import (
    DEFAULT,
    FieldError,
    InForce,
    Policy,
    PolicyEntry,
    PolicyError,
    Reported,
    choose_in_force,
)
from graceguard.domain.protection import Limits
from graceguard.domain.windows import MaintenanceWindow
from graceguard.manifests.policies import (
    API_VERSION,
    KIND,
    policy_from_manifest,
)

H = dt.timedelta(hours=1)


def doc(body: object = None, **top: object) -> dict[str, Any]:
    """A DisruptionPolicy document with ``body`` as its spec; ``top`` replaces top-level keys."""
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "p"}}
    if body is not None:
        out["spec"] = body
    out.update(top)
    return out


def errors(document: object) -> list[FieldError]:
    with pytest.raises(PolicyError) as err:
        policy_from_manifest(document)
    assert err.value.errors
    assert str(err.value) == "; ".join(str(e) for e in err.value.errors)
    return err.value.errors


def fields(document: object) -> list[str]:
    return [e.field for e in errors(document)]


# --- defaults ------------------------------------------------------------------------------------


def test_defaults_are_designs() -> None:
    assert Policy() == DEFAULT
    assert DEFAULT.max_protection == 24 * H
    assert DEFAULT.max_min_runtime == 24 * H
    assert DEFAULT.notice_lead == dt.timedelta(minutes=10)
    assert DEFAULT.default_min_available == intorpercent.IntOrPercent(50, percent=True)
    assert DEFAULT.pdb_max_wait == H
    assert DEFAULT.maintenance_windows == ()
    assert DEFAULT.windowed_sources is None
    assert DEFAULT.priority_phases == phases.DEFAULT_PHASES
    assert DEFAULT.limits == Limits(24 * H, 24 * H, dt.timedelta(minutes=10))


@pytest.mark.parametrize("spec", [None, {}])
def test_empty_spec_gives_the_defaults(spec: object) -> None:
    got = policy_from_manifest(doc(spec) if spec is not None else doc(None, spec=None))
    assert got == Policy(name="p")


def test_every_field() -> None:
    got = policy_from_manifest(
        doc(
            {
                "maxProtection": "48h",
                "maxMinRuntime": "6h",
                "noticeLead": "15m",
                "defaultMinAvailable": 2,
                "pdbMaxWait": "30m",
                "maintenanceWindows": [
                    {"schedule": "0 2 * * *", "duration": "3h", "timeZone": "Europe/Berlin"},
                    {"schedule": "0 22 * * 6", "duration": "4h"},
                ],
                "windowedSources": ["drain", "asg-scale-in"],
                "priorityPhases": [
                    {"name": "batch", "minPriority": -100},
                    {"name": "critical", "minPriority": 2_000_000_000},
                ],
            }
        )
    )
    assert got == Policy(
        name="p",
        max_protection=48 * H,
        max_min_runtime=6 * H,
        notice_lead=dt.timedelta(minutes=15),
        default_min_available=intorpercent.IntOrPercent(2),
        pdb_max_wait=dt.timedelta(minutes=30),
        maintenance_windows=(
            MaintenanceWindow("0 2 * * *", 3 * H, "Europe/Berlin"),
            MaintenanceWindow("0 22 * * 6", 4 * H, "UTC"),
        ),
        windowed_sources=frozenset({"drain", "asg-scale-in"}),
        priority_phases=(phases.Phase("batch", -100), phases.Phase("critical", 2_000_000_000)),
    )
    assert got.limits == Limits(48 * H, 6 * H, dt.timedelta(minutes=15))


def test_default_min_available_null_turns_the_floor_off() -> None:
    assert policy_from_manifest(doc({"defaultMinAvailable": None})).default_min_available is None
    assert policy_from_manifest(
        doc({"defaultMinAvailable": "75%"})
    ).default_min_available == intorpercent.IntOrPercent(75, percent=True)


def test_notice_lead_may_be_zero_other_durations_not() -> None:
    assert policy_from_manifest(doc({"noticeLead": "0s"})).notice_lead == dt.timedelta(0)
    assert fields(doc({"pdbMaxWait": "0s"})) == ["spec.pdbMaxWait"]


def test_metadata_name_defaults() -> None:
    d = doc({})
    del d["metadata"]
    assert policy_from_manifest(d).name == "default"


# --- windows apply to the sources the policy names -----------------------------------------------


def test_windows_for_sources() -> None:
    w = MaintenanceWindow("0 2 * * *", H)
    every = Policy(maintenance_windows=(w,))
    assert every.windows_for("cluster-autoscaler") == (w,)
    named = Policy(maintenance_windows=(w,), windowed_sources=frozenset({"drain"}))
    assert named.windows_for("drain") == (w,)
    assert named.windows_for("cluster-autoscaler") == ()
    assert Policy().windows_for("drain") == ()


# --- every field validated -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("document", "field", "needle"),
    [
        ("just text", "<document>", "expected a mapping"),
        ([1, 2], "<document>", "expected a mapping"),
        (doc({}, apiVersion="v1"), "apiVersion", "expected 'graceguard.io/v1alpha1'"),
        (doc({}, kind="Policy"), "kind", "expected 'DisruptionPolicy'"),
        (doc({}, metadata="p"), "metadata", "expected a mapping"),
        (doc(None, spec=[1]), "spec", "expected a mapping"),
        (doc({"maxProtecton": "1h"}), "spec.maxProtecton", "unknown field; known: "),
        (doc({"maxProtection": "ten"}), "spec.maxProtection", "invalid duration 'ten'"),
        (doc({"maxProtection": 3600}), "spec.maxProtection", "expected a duration string"),
        (doc({"maxProtection": "-1h"}), "spec.maxProtection", "must be positive"),
        (doc({"maxMinRuntime": "0s"}), "spec.maxMinRuntime", "must be positive"),
        (doc({"maxMinRuntime": "1d"}), "spec.maxMinRuntime", "missing or unknown unit"),
        (doc({"noticeLead": "-5m"}), "spec.noticeLead", "must be positive"),
        (doc({"noticeLead": True}), "spec.noticeLead", "expected a duration string"),
        (doc({"pdbMaxWait": "forever"}), "spec.pdbMaxWait", "invalid duration"),
        (doc({"defaultMinAvailable": "half"}), "spec.defaultMinAvailable", "expected an integer"),
        (doc({"defaultMinAvailable": -1}), "spec.defaultMinAvailable", "must not be negative"),
        (doc({"defaultMinAvailable": "120%"}), "spec.defaultMinAvailable", "at most 100%"),
        (doc({"maintenanceWindows": "nightly"}), "spec.maintenanceWindows", "expected a list"),
        (doc({"maintenanceWindows": ["0 2 * * *"]}), "spec.maintenanceWindows[0]", "mapping"),
        (
            doc({"maintenanceWindows": [{"duration": "1h"}]}),
            "spec.maintenanceWindows[0].schedule",
            "required",
        ),
        (
            doc({"maintenanceWindows": [{"schedule": "0 2 * * *"}]}),
            "spec.maintenanceWindows[0].duration",
            "required",
        ),
        (
            doc({"maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "1h", "zone": "x"}]}),
            "spec.maintenanceWindows[0].zone",
            "unknown field",
        ),
        (
            doc({"maintenanceWindows": [{"schedule": "0 2 * *", "duration": "1h"}]}),
            "spec.maintenanceWindows[0].schedule",
            "not a cron expression",
        ),
        (
            doc({"maintenanceWindows": [{"schedule": "0 0 30 2 *", "duration": "1h"}]}),
            "spec.maintenanceWindows[0].schedule",
            "never fires",
        ),
        (
            doc({"maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "0s"}]}),
            "spec.maintenanceWindows[0].duration",
            "must be positive",
        ),
        (
            doc(
                {
                    "maintenanceWindows": [
                        {"schedule": "0 2 * * *", "duration": "1h"},
                        {"schedule": "0 2 * * *", "duration": "1h", "timeZone": "Europe/Brelin"},
                    ]
                }
            ),
            "spec.maintenanceWindows[1].timeZone",
            "unknown IANA time zone 'Europe/Brelin'",
        ),
        (
            doc(
                {
                    "maintenanceWindows": [
                        {"schedule": "0 2 * * *", "duration": "1h", "timeZone": None}
                    ]
                }
            ),
            "spec.maintenanceWindows[0].timeZone",
            "unknown IANA time zone",
        ),
        (
            doc({"windowedSources": "drain"}),
            "spec.windowedSources",
            "expected a list of source names such as drain, cluster-autoscaler",
        ),
        (
            doc({"windowedSources": ["drain", ""]}),
            "spec.windowedSources[1]",
            "expected a source name such as drain, cluster-autoscaler",
        ),
        (doc({"windowedSources": [1]}), "spec.windowedSources[0]", "expected a source name"),
        # A name no source can have: the windows would silently hold nothing to it.
        (
            doc({"windowedSources": ["drain", "my drain"]}),
            "spec.windowedSources[1]",
            "'my drain' is not a source name",
        ),
        (
            doc({"windowedSources": ["drain\nupgrade"]}),
            "spec.windowedSources[0]",
            "'drain\\nupgrade' is not a source name",
        ),
        (doc({"windowedSources": ["expiry."]}), "spec.windowedSources[0]", "starting and ending"),
        (doc({"windowedSources": ["x" * 64]}), "spec.windowedSources[0]", "at most 63 characters"),
        (doc({"priorityPhases": []}), "spec.priorityPhases", "non-empty list"),
        (doc({"priorityPhases": ["regular"]}), "spec.priorityPhases[0]", "expected a mapping"),
        (
            doc({"priorityPhases": [{"minPriority": 0}]}),
            "spec.priorityPhases[0].name",
            "required",
        ),
        (
            doc({"priorityPhases": [{"name": "a", "minPriority": "high"}]}),
            "spec.priorityPhases[0].minPriority",
            "expected an integer",
        ),
        (
            doc({"priorityPhases": [{"name": "a", "minPriority": True}]}),
            "spec.priorityPhases[0].minPriority",
            "expected an integer",
        ),
        (
            doc(
                {
                    "priorityPhases": [
                        {"name": "a", "minPriority": 10},
                        {"name": "b", "minPriority": 10},
                    ]
                }
            ),
            "spec.priorityPhases",
            "strictly increase",
        ),
    ],
)
def test_each_error_names_its_field(document: object, field: str, needle: str) -> None:
    errs = errors(document)
    assert [e.field for e in errs] == [field], errs
    assert needle in errs[0].reason


def test_every_error_is_reported_at_once() -> None:
    got = fields(
        doc(
            {
                "maxProtection": "x",
                "noticeLead": "y",
                "bogus": 1,
                "maintenanceWindows": [
                    {"schedule": "0 2 * * *", "duration": "1h", "timeZone": "?"}
                ],
            },
            kind="Nope",
        )
    )
    assert sorted(got) == sorted(
        [
            "kind",
            "spec.bogus",
            "spec.maxProtection",
            "spec.noticeLead",
            "spec.maintenanceWindows[0].timeZone",
        ]
    )


def test_windowed_sources_take_every_source_name_graceguard_gives() -> None:
    """Names graceguard's sources carry (docs/policy.md lists them) are accepted, as is any
    name of the Disruption's ``spec.source`` form up to its length."""
    names = [
        "drain",
        "cluster-autoscaler",
        "karpenter",
        "eks-nodegroup",
        "eviction-api",
        "os-shutdown",
        "spot-interruption",
        "ec2-rebalance",
        "aws-health",
        "asg-lifecycle",
        "asg-scale-in",
        "asg-az-rebalance",
        "asg-instance-refresh",
        "asg-health-check",
        "eks-nodegroup-scale-in",
        "node-expiry",
        "karpenter-expiry",
        "karpenter-termination",
        "maintenance-planned",
        "max-runtime",
        "upgrade",  # the simulator's
        "team.batch:nightly_v2",
        "a" * 63,
    ]
    pol = policy_from_manifest(doc({"windowedSources": names}))
    assert pol.windowed_sources == frozenset(names)


def test_field_error_text() -> None:
    assert str(FieldError("spec.noticeLead", 'invalid duration "ten"')) == (
        'spec.noticeLead: invalid duration "ten"'
    )


# --- properties: malformed documents give PolicyError, nothing else ------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.sampled_from(["1h", "0s", "-1h", "50%", "0 2 * * *", "Europe/Berlin", "Europe", "30m"]),
)
keys = st.one_of(
    st.sampled_from(
        [
            "maxProtection",
            "maxMinRuntime",
            "noticeLead",
            "defaultMinAvailable",
            "pdbMaxWait",
            "maintenanceWindows",
            "windowedSources",
            "priorityPhases",
            "schedule",
            "duration",
            "timeZone",
            "name",
            "minPriority",
        ]
    ),
    st.text(max_size=8),
    st.integers(-3, 3),
    st.booleans(),
    st.none(),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)),
    max_leaves=20,
)
known_prefixes = ("<document>", "apiVersion", "kind", "metadata", "spec")


@given(values)
def test_arbitrary_documents(document: object) -> None:
    try:
        policy_from_manifest(document)
    except PolicyError as err:
        assert err.errors
        for e in err.errors:
            assert e.field.startswith(known_prefixes) and e.reason


@given(st.dictionaries(keys, values, max_size=6))
@example(  # unknown window keys of mixed types could not be sorted: TypeError escaped
    {"maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "1h", 1: 2, "x": 3}]}
)
def test_arbitrary_specs(spec: dict[object, object]) -> None:
    try:
        got = policy_from_manifest(doc(spec))
    except PolicyError as err:
        assert err.errors
        for e in err.errors:
            assert e.field.startswith("spec") and e.reason
    else:
        assert isinstance(got, Policy)
        assert got.max_protection > dt.timedelta(0)
        assert got.pdb_max_wait > dt.timedelta(0)
        assert got.notice_lead >= dt.timedelta(0)


# --- the schedule's grammar (the CRD's CEL rules; tests/unit/test_crd.py checks they agree) ----


@pytest.mark.parametrize(
    ("schedule", "needle"),
    [
        ("99 * * * *", "the minute (1st field) must be * or 0-59"),
        ("0 0 31 2 *", "never fires"),
        ("0 0 30 feb *", "never fires"),
        ("0 0 31 4,6 *", "never fires"),
        ("0 2 * 2-2 *", "a range from a value to itself"),
        ("0 0 * * 5#3", "the day of the week (5th field)"),
    ],
)
def test_a_bad_schedule_is_named_with_the_cron_field(schedule: str, needle: str) -> None:
    (error,) = errors(doc({"maintenanceWindows": [{"schedule": schedule, "duration": "1h"}]}))
    assert error.field == "spec.maintenanceWindows[0].schedule"
    assert error.reason.startswith(needle), error.reason


def test_every_bad_cron_field_is_named() -> None:
    found = errors(doc({"maintenanceWindows": [{"schedule": "60 24 0 13 8", "duration": "1h"}]}))
    assert [e.reason.split(" (")[0] for e in found] == [
        "the minute",
        "the hour",
        "the day of the month",
        "the month",
        "the day of the week",
    ]


@pytest.mark.parametrize(
    "schedule", ["0 22-4 * * mon-fri", "*/15 * L * ?", "0 0 29 2 *", "0 0 31 2 1", "00 02 * * *"]
)
def test_good_schedules_pass_the_grammar(schedule: str) -> None:
    assert policy_from_manifest(
        doc({"maintenanceWindows": [{"schedule": schedule, "duration": "1h"}]})
    )


# --- the policy in force: the object as the cluster holds it, and the view's choice -----------

GOOD_SPEC = {
    "noticeLead": "4s",
    "maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "1h", "timeZone": "UTC"}],
}
BAD_SPEC = {"maintenanceWindows": [{"schedule": "99 * * * *", "duration": "1h"}]}


def raw_policy(
    spec: dict[str, Any],
    *,
    generation: int,
    uid: str = "u1",
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "default", "generation": generation, "uid": uid},
        "spec": spec,
    }
    if status is not None:
        out["status"] = status
    return out


def in_force_status(spec: dict[str, Any], generation: int) -> dict[str, Any]:
    return {
        "observedGeneration": generation,
        "conditions": [
            {
                "type": "Accepted",
                "status": "True",
                "reason": "Valid",
                "message": "the policy is in force",
                "observedGeneration": generation,
            }
        ],
        "inForce": {"generation": generation, "spec": spec},
    }


def good_policy() -> Policy:
    return policy_from_manifest(
        raw_policy(GOOD_SPEC, generation=1) | {"metadata": {"name": "default"}}
    )


def test_an_entry_keeps_the_spec_it_accepted() -> None:
    entry = view.policy_entry(raw_policy(GOOD_SPEC, generation=3))
    assert entry.policy == good_policy()
    assert (entry.name, entry.generation, entry.uid) == ("default", 3, "u1")
    assert entry.spec == GOOD_SPEC and entry.problem is None and entry.fields == ()
    assert entry.in_force is None and entry.reported is None


def test_an_invalid_entry_names_its_fields_and_carries_status_in_force() -> None:
    raw = raw_policy(BAD_SPEC, generation=4, status=in_force_status(GOOD_SPEC, 3))
    entry = view.policy_entry(raw)
    assert entry.policy is None
    assert entry.fields == ("spec.maintenanceWindows[0].schedule",)
    assert entry.problem is not None and "the minute (1st field)" in entry.problem
    assert entry.in_force == InForce(3, good_policy())
    assert entry.reported == Reported(3, True, "the policy is in force")


@pytest.mark.parametrize(
    "status",
    [
        {"inForce": "x"},
        {"inForce": {"generation": 2}},
        {"inForce": {"generation": 2, "spec": {"noticeLead": "soon"}}},
        {"inForce": {"generation": 2, "spec": {"fromTheFuture": 1}}},
        {"conditions": "x"},
        "not a mapping",
    ],
)
def test_a_malformed_status_is_none(status: Any) -> None:
    entry = view.policy_entry(raw_policy(BAD_SPEC, generation=4, status=status))
    assert entry.policy is None and entry.in_force is None


def cluster_view() -> view.ClusterView:
    return view.ClusterView(cast(Any, None))


def test_the_view_uses_a_valid_spec() -> None:
    v = cluster_view()
    assert v.policy() == (DEFAULT, None)  # no object: the built-in defaults
    entry = view.policy_entry(raw_policy(GOOD_SPEC, generation=1))
    v.policies.store["default"] = entry
    assert v.policy() == (good_policy(), entry)


def test_a_restarted_controller_keeps_the_policy_in_force_from_the_status() -> None:
    """A fresh process (nothing accepted in memory) finds the last accepted spec in the status,
    not the built-in defaults (which have no maintenance window)."""
    v = cluster_view()
    raw = raw_policy(BAD_SPEC, generation=2, status=in_force_status(GOOD_SPEC, 1))
    entry = view.policy_entry(raw)
    v.policies.store["default"] = entry
    pol, got = v.policy()
    assert pol == good_policy() and pol.maintenance_windows
    assert got is entry


def test_the_same_process_keeps_what_it_accepted_later_than_the_status() -> None:
    v = cluster_view()
    later = {**GOOD_SPEC, "noticeLead": "7s"}
    v.policies.store["default"] = view.policy_entry(
        raw_policy(later, generation=5, status=in_force_status(GOOD_SPEC, 1))
    )
    accepted, _ = v.policy()
    assert accepted.notice_lead == dt.timedelta(seconds=7)
    # Generation 6 is bad before the status caught up with generation 5: 5 stays in force.
    v.policies.store["default"] = view.policy_entry(
        raw_policy(BAD_SPEC, generation=6, status=in_force_status(GOOD_SPEC, 1))
    )
    assert v.policy()[0] == accepted


def test_a_recreated_object_is_judged_by_its_own_status() -> None:
    v = cluster_view()
    later = {**GOOD_SPEC, "noticeLead": "7s"}
    v.policies.store["default"] = view.policy_entry(raw_policy(later, generation=9, uid="old"))
    v.policy()
    v.policies.store["default"] = view.policy_entry(
        raw_policy(BAD_SPEC, generation=2, uid="new", status=in_force_status(GOOD_SPEC, 1))
    )
    assert v.policy()[0] == good_policy()  # the new object's inForce, not the old object's


def test_without_any_accepted_spec_the_defaults_are_in_force() -> None:
    v = cluster_view()
    v.policies.store["default"] = view.policy_entry(raw_policy(BAD_SPEC, generation=1))
    assert v.policy()[0] == DEFAULT


def test_a_deleted_policy_means_the_defaults() -> None:
    """As after a restart: without a ``default`` object the built-in defaults are in force."""
    v = cluster_view()
    v.policies.store["default"] = view.policy_entry(raw_policy(GOOD_SPEC, generation=1))
    assert v.policy()[0] == good_policy()
    del v.policies.store["default"]
    assert v.policy() == (DEFAULT, None)


@given(
    st.one_of(st.none(), st.integers(0, 9)),
    st.one_of(st.none(), st.tuples(st.sampled_from(["u1", "u2"]), st.integers(0, 9))),
)
def test_choose_in_force_takes_the_latest_of_the_same_object(
    recorded: int | None, mine: tuple[str, int] | None
) -> None:
    def pol(tag: int) -> Policy:
        return Policy(notice_lead=dt.timedelta(seconds=tag + 100))

    entry = PolicyEntry(
        "default",
        10,
        None,
        "bad",
        uid="u1",
        in_force=None if recorded is None else InForce(recorded, pol(recorded)),
    )
    accepted = None if mine is None else (mine[0], InForce(mine[1], pol(mine[1])))
    chosen = choose_in_force(entry, accepted)
    if recorded is None and mine is None:
        assert chosen == DEFAULT
    elif mine is None or (recorded is not None and mine[0] != "u1"):
        assert recorded is not None and chosen == pol(recorded)
    elif recorded is None:
        assert chosen == pol(mine[1])
    else:
        assert chosen == pol(max(recorded, mine[1]))


# --- the status writer: Accepted, inForce, and one Warning event per bad generation -----------


class FakeClient:
    def __init__(self) -> None:
        self.patches: list[tuple[str, Any, str]] = []
        self.created: list[dict[str, Any]] = []

    async def patch(self, resource: Any, name: str, body: Any, *, patch_type: Any) -> None:
        self.patches.append((name, body, str(patch_type.value)))

    async def create(self, obj: Any) -> None:
        self.created.append(obj.to_dict())


def report(writer: policy_status.PolicyStatusWriter, entry: PolicyEntry, in_force: Policy) -> None:
    asyncio.run(writer.report(entry, in_force))


def test_an_accepted_spec_is_recorded_in_force_in_one_json_patch() -> None:
    client = FakeClient()
    writer = policy_status.PolicyStatusWriter(cast(Any, client), instance="gg-a")
    entry = view.policy_entry(raw_policy(GOOD_SPEC, generation=3))
    report(writer, entry, good_policy())
    ((name, body, kind),) = client.patches
    assert name == "default" and kind == "application/json-patch+json"
    ((op),) = body
    assert (op["op"], op["path"]) == ("add", "/status")
    assert op["value"]["inForce"] == {"generation": 3, "spec": GOOD_SPEC}
    assert op["value"]["conditions"][0]["status"] == "True"
    assert client.created == []
    report(writer, entry, good_policy())
    assert len(client.patches) == 1  # written once


def test_an_invalid_spec_gets_one_warning_event_and_log_line_per_generation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeClient()
    writer = policy_status.PolicyStatusWriter(cast(Any, client), instance="gg-a")
    raw = raw_policy(BAD_SPEC, generation=4, status=in_force_status(GOOD_SPEC, 3))
    entry = view.policy_entry(raw)
    with caplog.at_level(logging.WARNING):
        report(writer, entry, good_policy())
        report(writer, entry, good_policy())
    (event,) = client.created
    assert event["type"] == "Warning" and event["reason"] == "InvalidPolicy"
    assert event["involvedObject"] == {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": "default",
        "uid": "u1",
    }
    assert event["metadata"]["namespace"] == "default"
    assert "spec.maintenanceWindows[0].schedule" in event["message"]
    assert "generation 4" in event["message"]
    assert "the policy in force is 'default' generation 3, the last accepted" in event["message"]
    logged = [
        r.getMessage()
        for r in caplog.records
        if "InvalidPolicy" in r.getMessage() or "not valid" in r.getMessage()
    ]
    assert len(logged) == 1 and "spec.maintenanceWindows[0].schedule" in logged[0]
    ((_, body, kind),) = client.patches
    assert kind == "application/merge-patch+json"
    assert "inForce" not in body["status"]  # the last accepted spec stays recorded
    condition = body["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "InvalidSpec")
    assert condition["message"].startswith("spec.maintenanceWindows[0].schedule: the minute")
    # The next generation, bad too: told again.
    report(
        writer,
        view.policy_entry({**raw, "metadata": {**raw["metadata"], "generation": 5}}),
        good_policy(),
    )
    assert len(client.created) == 2


def test_a_new_leader_does_not_tell_again_what_the_status_reports() -> None:
    """After a restart the status already says generation 4 is not accepted (a previous leader
    wrote it and posted the event): no second event, no rewrite."""
    first = FakeClient()
    bad = raw_policy(BAD_SPEC, generation=4, status=in_force_status(GOOD_SPEC, 3))
    entry = view.policy_entry(bad)
    report(policy_status.PolicyStatusWriter(cast(Any, first)), entry, good_policy())
    written = first.patches[0][1]["status"]
    after = view.policy_entry({**bad, "status": {**in_force_status(GOOD_SPEC, 3), **written}})
    second = FakeClient()
    report(policy_status.PolicyStatusWriter(cast(Any, second)), after, good_policy())
    assert second.created == [] and second.patches == []


def test_the_status_says_when_the_defaults_are_in_force() -> None:
    entry = view.policy_entry(raw_policy(BAD_SPEC, generation=1))
    message = policy_status.status_message(entry, DEFAULT)
    assert message.endswith("the policy in force is the built-in defaults (none was accepted)")
