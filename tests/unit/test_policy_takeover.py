"""The DisruptionPolicy's ``takeover`` and ``disruptionTTL``: defaults, every bad entry named, and
which rule an evictor gets (``Policy.takeover_for``: its own entry before ``*``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain.policy import (
    DEFAULT,
    EVERY_SOURCE,
    FieldError,
    Policy,
    PolicyError,
    TakeoverRule,
)
from graceguard.manifests.policies import (
    API_VERSION,
    KIND,
    policy_from_manifest,
)

M = dt.timedelta(minutes=1)
H = dt.timedelta(hours=1)


def read(spec: dict[str, Any]) -> Policy:
    return policy_from_manifest(
        {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "default"}, "spec": spec}
    )


def errors(spec: dict[str, Any]) -> list[FieldError]:
    with pytest.raises(PolicyError) as err:
        read(spec)
    return err.value.errors


# ---- defaults ----


def test_by_default_every_source_is_taken_over_with_the_notice_lead() -> None:
    assert DEFAULT.takeover == (TakeoverRule(EVERY_SOURCE, None),)
    assert TakeoverRule() == TakeoverRule("*", None)
    for source in ("cluster-autoscaler", "karpenter", "eviction-api", "eks-nodegroup"):
        assert DEFAULT.takeover_for(source) == TakeoverRule("*", None)


def test_finished_disruptions_are_kept_a_day_by_default() -> None:
    assert DEFAULT.disruption_ttl == 24 * H


@pytest.mark.parametrize("spec", [{}, {"takeover": None}, {"disruptionTTL": None}])
def test_omitted_or_null_means_the_default(spec: dict[str, Any]) -> None:
    got = read(spec)
    assert got.takeover == DEFAULT.takeover
    assert got.disruption_ttl == DEFAULT.disruption_ttl


def test_an_empty_list_takes_nothing_over() -> None:
    got = read({"takeover": []})
    assert got.takeover == ()
    assert got.takeover_for("cluster-autoscaler") is None
    assert got.takeover_for("*") is None


# ---- entries ----


def test_entries_read_in_order() -> None:
    got = read(
        {
            "takeover": [
                {"source": "cluster-autoscaler", "minNotice": "30m"},
                {"source": "eviction-api", "minNotice": "0"},
                {"source": "karpenter", "minNotice": None},
                {"minNotice": "1h30m"},
            ]
        }
    )
    assert got.takeover == (
        TakeoverRule("cluster-autoscaler", 30 * M),
        TakeoverRule("eviction-api", dt.timedelta(0)),
        TakeoverRule("karpenter", None),
        TakeoverRule("*", 90 * M),
    )


def test_a_source_not_listed_and_no_star_is_not_taken_over() -> None:
    got = read({"takeover": [{"source": "cluster-autoscaler"}]})
    assert got.takeover_for("cluster-autoscaler") == TakeoverRule("cluster-autoscaler")
    assert got.takeover_for("karpenter") is None
    assert got.takeover_for("eviction-api") is None


@pytest.mark.parametrize("star_first", [True, False])
def test_a_source_of_its_own_beats_the_star(star_first: bool) -> None:
    own = {"source": "cluster-autoscaler", "minNotice": "2h"}
    star = {"source": "*", "minNotice": "5m"}
    got = read({"takeover": [star, own] if star_first else [own, star]})
    assert got.takeover_for("cluster-autoscaler") == TakeoverRule("cluster-autoscaler", 2 * H)
    assert got.takeover_for("karpenter") == TakeoverRule("*", 5 * M)
    assert got.takeover_for("Cluster-Autoscaler") == TakeoverRule("*", 5 * M)  # exact names


def test_disruption_ttl() -> None:
    assert read({"disruptionTTL": "1h30m"}).disruption_ttl == 90 * M
    assert read({"disruptionTTL": "90s"}).disruption_ttl == dt.timedelta(seconds=90)


# ---- every bad entry named ----

BAD: list[tuple[str, dict[str, Any], str, str]] = [
    # (case, spec, the field named, words in the reason)
    ("not a list", {"takeover": {"source": "*"}}, "spec.takeover", "expected a list"),
    ("a word", {"takeover": "*"}, "spec.takeover", "[] for none"),
    ("a name, not an entry", {"takeover": ["karpenter"]}, "spec.takeover[0]", "mapping"),
    (
        "unknown key",
        {"takeover": [{"source": "*", "notice": "1m"}]},
        "spec.takeover[0].notice",
        "unknown field; known: minNotice, source",
    ),
    ("empty source", {"takeover": [{"source": ""}]}, "spec.takeover[0].source", "source name"),
    ("padded source", {"takeover": [{"source": "karpenter "}]}, "spec.takeover[0].source", '"*"'),
    ("source a number", {"takeover": [{"source": 1}]}, "spec.takeover[0].source", "got 1"),
    ("source null", {"takeover": [{"source": None}]}, "spec.takeover[0].source", "got None"),
    (
        "a source twice",
        {"takeover": [{"source": "karpenter"}, {"source": "karpenter", "minNotice": "1m"}]},
        "spec.takeover[1].source",
        "'karpenter' is listed twice",
    ),
    (
        "the star twice",
        {"takeover": [{"source": "*"}, {"minNotice": "1m"}]},
        "spec.takeover[1].source",
        "'*' is listed twice",
    ),
    (
        "negative notice",
        {"takeover": [{"minNotice": "-1m"}]},
        "spec.takeover[0].minNotice",
        "must be positive",
    ),
    (
        "notice in words",
        {"takeover": [{"minNotice": "ten minutes"}]},
        "spec.takeover[0].minNotice",
        "invalid duration",
    ),
    (
        "notice in days",
        {"takeover": [{"minNotice": "1d"}]},
        "spec.takeover[0].minNotice",
        "unit",
    ),
    (
        "notice a number",
        {"takeover": [{"minNotice": 600}]},
        "spec.takeover[0].minNotice",
        "expected a duration string",
    ),
    (
        "notice beyond Go",
        {"takeover": [{"minNotice": "9999999999h"}]},
        "spec.takeover[0].minNotice",
        "",
    ),
    ("ttl zero", {"disruptionTTL": "0s"}, "spec.disruptionTTL", "must be positive"),
    ("ttl negative", {"disruptionTTL": "-1h"}, "spec.disruptionTTL", "must be positive"),
    ("ttl in days", {"disruptionTTL": "1d"}, "spec.disruptionTTL", "unit"),
    ("ttl a number", {"disruptionTTL": 86400}, "spec.disruptionTTL", "expected a duration"),
]


@pytest.mark.parametrize(("case", "spec", "field", "words"), BAD, ids=[b[0] for b in BAD])
def test_each_bad_entry_is_named(case: str, spec: dict[str, Any], field: str, words: str) -> None:
    got = errors(spec)
    assert [e.field for e in got] == [field], got
    assert words in got[0].reason, got[0]


def test_every_bad_entry_is_reported_at_once() -> None:
    got = errors(
        {
            "takeover": [
                {"source": "karpenter", "minNotice": "soon"},
                {"source": "karpenter"},
                {"source": "*", "extra": 1},
                "descheduler",
            ],
            "disruptionTTL": "0",
        }
    )
    assert [e.field for e in got] == [
        "spec.takeover[0].minNotice",
        "spec.takeover[1].source",
        "spec.takeover[2].extra",
        "spec.takeover[3]",
        "spec.disruptionTTL",
    ]


# ---- takeover_for: the source's own rule, else the first "*", else none ----

names = st.sampled_from(["*", "cluster-autoscaler", "karpenter", "eviction-api"])
rules = st.builds(TakeoverRule, names, st.one_of(st.none(), st.integers(0, 3600).map(M.__mul__)))


@given(st.lists(rules, max_size=6), names.filter(lambda n: n != "*"))
def test_takeover_for_picks_the_sources_own_rule_first(
    takeover: list[TakeoverRule], source: str
) -> None:
    got = Policy(takeover=tuple(takeover)).takeover_for(source)
    own = [r for r in takeover if r.source == source]
    star = [r for r in takeover if r.source == EVERY_SOURCE]
    expected = own[0] if own else star[0] if star else None
    assert got == expected
