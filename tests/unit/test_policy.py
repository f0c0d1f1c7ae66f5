"""The DisruptionPolicy: DESIGN.md's defaults, every field validated, errors naming the path."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from graceguard.domain import intorpercent, phases
from graceguard.domain.policy import (
    API_VERSION,
    DEFAULT,
    KIND,
    FieldError,
    Policy,
    PolicyError,
    policy_from_manifest,
)
from graceguard.domain.protection import Limits
from graceguard.domain.windows import MaintenanceWindow

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
                "windowedSources": ["upgrade", "expiry"],
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
        windowed_sources=frozenset({"upgrade", "expiry"}),
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
    named = Policy(maintenance_windows=(w,), windowed_sources=frozenset({"upgrade"}))
    assert named.windows_for("upgrade") == (w,)
    assert named.windows_for("cluster-autoscaler") == ()
    assert Policy().windows_for("upgrade") == ()


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
        (doc({"windowedSources": "upgrade"}), "spec.windowedSources", "expected a list"),
        (doc({"windowedSources": ["upgrade", ""]}), "spec.windowedSources", "expected a list"),
        (doc({"windowedSources": [1]}), "spec.windowedSources", "expected a list"),
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
