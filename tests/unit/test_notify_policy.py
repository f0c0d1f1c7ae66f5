"""``spec.notify``: the policy reader's sinks, its errors naming the field, and the notice's text
(``domain/notifications.py``)."""

from __future__ import annotations

import datetime as dt
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graceguard.domain import notifications, policy
from graceguard.domain.notifications import Event, Notification, Sink
from graceguard.manifests import policies

T0 = dt.datetime(2026, 11, 21, 3, 0, tzinfo=dt.UTC)


def read(notify: object) -> policy.Policy:
    return policies.policy_from_manifest(
        {
            "apiVersion": policies.API_VERSION,
            "kind": policies.KIND,
            "metadata": {"name": "default"},
            "spec": {"notify": notify},
        }
    )


def problems(notify: object) -> list[str]:
    with pytest.raises(policy.PolicyError) as err:
        read(notify)
    return [str(e) for e in err.value.errors]


def test_no_notify_by_default() -> None:
    assert policy.DEFAULT.notify == ()
    assert read([]).notify == ()
    assert read(None).notify == ()


def test_a_sink_with_every_field() -> None:
    (sink,) = read(
        [
            {
                "url": "https://hooks.example.com/services/T0",
                "events": ["ForcedEviction", "PrematureTermination"],
                "template": "${pod}: ${message}",
                "timeout": "2s",
            }
        ]
    ).notify
    assert sink == Sink(
        url="https://hooks.example.com/services/T0",
        events=frozenset({Event.FORCED_EVICTION, Event.PREMATURE_TERMINATION}),
        template="${pod}: ${message}",
        timeout=dt.timedelta(seconds=2),
    )
    assert sink.wants(Event.FORCED_EVICTION)
    assert not sink.wants(Event.SCHEDULED_EVICTION)


def test_a_sink_with_only_its_url_gets_every_event_and_the_defaults() -> None:
    (sink,) = read([{"url": "http://127.0.0.1:9/x"}]).notify
    assert sink.events == frozenset(Event)
    assert sink.template == notifications.DEFAULT_TEMPLATE
    assert sink.timeout == dt.timedelta(seconds=5)


@pytest.mark.parametrize(
    ("notify", "expected"),
    [
        ({"url": "https://h/x"}, "spec.notify: expected a list of {url, events, template, "),
        (["https://h/x"], "spec.notify[0]: expected a mapping with url, events"),
        ([{"events": ["ForcedEviction"]}], "spec.notify[0].url: required"),
        ([{"url": "ftp://h/x"}], "spec.notify[0].url: expected an http:// or https:// URL"),
        ([{"url": "https://h/a b"}], "spec.notify[0].url: expected an http:// or https:// URL"),
        ([{"url": "https://h/x\n"}], "spec.notify[0].url: expected an http:// or https:// URL"),
        ([{"url": "https://h/x", "chanel": "#ops"}], "spec.notify[0].chanel: unknown field"),
        ([{"url": "https://h/x", "events": []}], "spec.notify[0].events: expected a non-empty"),
        (
            [{"url": "https://h/x", "events": ["ForcedEviction", "Evicted"]}],
            "spec.notify[0].events[1]: unknown event 'Evicted'; known: ProposedEviction, ",
        ),
        (
            [{"url": "https://h/x", "events": ["ForcedEviction", "ForcedEviction"]}],
            "spec.notify[0].events[1]: ForcedEviction is listed twice",
        ),
        (
            [{"url": "https://h/x"}, {"url": "https://h/y", "template": "${node} goes"}],
            "spec.notify[1].template: unknown placeholder ${node}; known: ${event}, ",
        ),
        (
            [{"url": "https://h/x", "template": "costs $5"}],
            "spec.notify[0].template: a $ at character 7 starts no placeholder",
        ),
        ([{"url": "https://h/x", "template": ""}], "spec.notify[0].template: expected a text"),
        ([{"url": "https://h/x", "timeout": "0s"}], "spec.notify[0].timeout: must be more than"),
        ([{"url": "https://h/x", "timeout": "1m"}], "spec.notify[0].timeout: must be more than"),
        ([{"url": "https://h/x", "timeout": 5}], "spec.notify[0].timeout: expected a duration"),
        ([{"url": "https://h/x", "timeout": "5 s"}], "spec.notify[0].timeout: "),
        ([{"url": f"https://h/{i}"} for i in range(17)], "spec.notify: at most 16 sinks, got 17"),
    ],
)
def test_bad_sinks_are_refused_naming_the_field(notify: object, expected: str) -> None:
    found = problems(notify)
    assert any(p.startswith(expected) for p in found), found


def test_every_problem_of_a_sink_is_named_at_once() -> None:
    found = problems([{"url": "gopher://x", "events": ["Nope"], "template": "$who"}])
    assert [p.split(":")[0] for p in found] == [
        "spec.notify[0].url",
        "spec.notify[0].events[0]",
        "spec.notify[0].template",
    ]


def notice(**changes: Any) -> Notification:
    base: dict[str, Any] = {
        "event": Event.SCHEDULED_EVICTION,
        "namespace": "batch",
        "pod": "train-x7k2",
        "uid": "u-1",
        "message": "The pod will be evicted after 10m0s at 2026-11-21T03:10:00Z, reason: drain",
        "at": T0,
        "source": "drain",
        "eviction_at": T0 + dt.timedelta(minutes=10),
        "disruption": "drain.n1.202611210300",
    }
    base.update(changes)
    return Notification(**base)


def test_the_default_body_is_slack_text() -> None:
    assert notifications.body(Sink(url="https://h/x"), notice()) == {
        "text": "graceguard: ScheduledEviction batch/train-x7k2: The pod will be evicted after "
        "10m0s at 2026-11-21T03:10:00Z, reason: drain"
    }


def test_every_placeholder_is_filled() -> None:
    template = " | ".join(f"{name}=${{{name}}}" for name in notifications.PLACEHOLDERS) + " $$"
    sink = Sink(url="https://h/x", template=template)
    assert notifications.template_problems(template) == []
    assert notifications.body(sink, notice())["text"] == (
        "event=ScheduledEviction | namespace=batch | pod=train-x7k2 | message=The pod will be "
        "evicted after 10m0s at 2026-11-21T03:10:00Z, reason: drain | source=drain | "
        "evictionAt=2026-11-21T03:10:00Z | at=2026-11-21T03:00:00Z | "
        "disruption=drain.n1.202611210300 $"
    )


def test_a_premature_termination_has_no_eviction_time() -> None:
    n = notice(event=Event.PREMATURE_TERMINATION, eviction_at=None, disruption="", source="kubectl")
    sink = Sink(url="https://h/x", template="$event by $source at [$evictionAt]")
    assert notifications.body(sink, n) == {"text": "PrematureTermination by kubectl at []"}


def test_the_dedupe_key() -> None:
    """The same notice is the same key; another eviction time, event or pod is another."""
    assert notice().key == notice(at=T0 + dt.timedelta(seconds=3), message="again").key
    renominated = notice(eviction_at=T0 + dt.timedelta(minutes=20))
    assert len({notice().key, renominated.key, notice(event=Event.PROPOSED_EVICTION).key}) == 3
    assert notice().key != notice(uid="u-2").key
    forced = notice(event=Event.FORCED_EVICTION, eviction_at=None)
    assert forced.key == "ForcedEviction/u-1/drain.n1.202611210300"


@given(st.text(max_size=60))
def test_a_template_the_reader_takes_always_renders(template: str) -> None:
    """What ``template_problems`` lets through renders every placeholder; what it refuses,
    ``string.Template.substitute`` would fail on."""
    fields = notice().fields()
    if notifications.template_problems(template) or not template:
        if template:
            with pytest.raises((KeyError, ValueError)):
                string.Template(template).substitute(fields)
        return
    assert (
        string.Template(template).substitute(fields)
        == notifications.body(Sink(url="https://h/x", template=template), notice())["text"]
    )
