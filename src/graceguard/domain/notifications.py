"""Notifications for humans: the policy's ``notify`` sinks and the notices sent to them.

A sink is a webhook URL that gets a Slack-compatible JSON body (``{"text": ...}``) for the events
it names (``ProposedEviction``, ``ScheduledEviction``, ``ForcedEviction``, ``PrematureTermination``,
``DeadlineExceeded``). The text comes from the sink's template, in Python's ``string.Template``
form: ``${pod}`` (or ``$pod``) is replaced by the notice's field, ``$$`` is a literal ``$``. The
placeholders are ``PLACEHOLDERS``; any other name is refused when the policy is read, naming the
field, so a template never fails when a notice is sent.

Pure: reading a sink from a policy document, the notice's value, its dedupe key, its body and its
outbox record (``to_record``). The
controller's ``controller/notify.py`` queues and sends them; ``adapters/notify_http.py`` posts.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import re
import string
from collections.abc import Mapping

from graceguard.domain import durations, times


class Event(enum.StrEnum):
    """The events graceguard posts that a human may want to hear of (the pod's Event reasons)."""

    PROPOSED_EVICTION = "ProposedEviction"
    SCHEDULED_EVICTION = "ScheduledEviction"
    FORCED_EVICTION = "ForcedEviction"
    PREMATURE_TERMINATION = "PrematureTermination"
    DEADLINE_EXCEEDED = "DeadlineExceeded"


EVENTS = tuple(Event)
_EVENT_NAMES = frozenset(e.value for e in Event)
PLACEHOLDERS: Mapping[str, str] = {
    "event": "the event: ProposedEviction, ScheduledEviction, ForcedEviction, "
    "PrematureTermination or DeadlineExceeded",
    "namespace": "the pod's namespace",
    "pod": "the pod's name",
    "message": "the event's message, as on the pod's Event",
    "source": "the disruption's source (drain, scale-down, ...); for PrematureTermination, who "
    "terminated the pod (cluster-autoscaler, kubectl, ...)",
    "evictionAt": "the announced eviction time (RFC 3339) for ProposedEviction and "
    "ScheduledEviction; empty for the others",
    "at": "when graceguard posted the event (RFC 3339)",
    "disruption": "the Disruption's name; empty for PrematureTermination",
}
DEFAULT_TEMPLATE = "graceguard: ${event} ${namespace}/${pod}: ${message}"
DEFAULT_TIMEOUT = dt.timedelta(seconds=5)
MAX_TIMEOUT = dt.timedelta(seconds=30)
MAX_SINKS = 16
URL_MAX = 2048
TEMPLATE_MAX = 4096
URL_PATTERN = r"^https?://[^\s/?#]+([/?#]\S*)?$"
"""An http(s) URL with a host and no whitespace (the CRD's pattern, word for word)."""
_URL = re.compile(URL_PATTERN[:-1] + r"\Z", re.ASCII)  # Go's $ is the end of the text
_FIELDS = ("url", "events", "template", "timeout")


@dataclasses.dataclass(frozen=True, slots=True)
class Sink:
    """``spec.notify[]``: where notices go, for which events, in which words."""

    url: str
    events: frozenset[Event] = frozenset(EVENTS)
    template: str = DEFAULT_TEMPLATE
    timeout: dt.timedelta = DEFAULT_TIMEOUT
    """How long one attempt may take before it counts as failed (at most ``MAX_TIMEOUT``)."""

    def wants(self, event: Event) -> bool:
        return event in self.events


@dataclasses.dataclass(frozen=True, slots=True)
class Notification:
    """One notice about one pod, as graceguard posted it on the pod."""

    event: Event
    namespace: str
    pod: str
    message: str
    at: dt.datetime
    uid: str = ""
    source: str = ""
    eviction_at: dt.datetime | None = None
    disruption: str = ""

    @property
    def pod_key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def key(self) -> str:
        """The same event about the same pod and the same eviction gives the same key (sent
        once); a pod renominated for another time gets a new ``ProposedEviction``."""
        who = self.uid or self.pod_key
        what = times.format_time(self.eviction_at) if self.eviction_at else self.disruption
        return f"{self.event.value}/{who}/{what}"

    def fields(self) -> dict[str, str]:
        """The template's placeholders, each a string."""
        return {
            "event": self.event.value,
            "namespace": self.namespace,
            "pod": self.pod,
            "message": self.message,
            "source": self.source,
            "evictionAt": times.format_time(self.eviction_at) if self.eviction_at else "",
            "at": times.format_time(self.at),
            "disruption": self.disruption,
        }


def to_record(notification: Notification) -> dict[str, str]:
    """``notification`` as strings, for the controller's outbox (``from_record`` reads it)."""
    n = notification
    record = {
        "event": n.event.value,
        "namespace": n.namespace,
        "pod": n.pod,
        "message": n.message,
        "at": times.format_time(n.at),
        "uid": n.uid,
        "source": n.source,
        "disruption": n.disruption,
    }
    if n.eviction_at is not None:
        record["evictionAt"] = times.format_time(n.eviction_at)
    return record


def from_record(record: Mapping[str, object]) -> Notification:
    """The notice ``to_record`` wrote. ``ValueError`` naming the field when one is missing or
    malformed (an outbox entry someone else edited)."""

    def text(name: str, *, required: bool = True) -> str:
        value = record.get(name, None if required else "")
        if not isinstance(value, str):
            raise ValueError(f"{name}: expected a string, got {value!r}")
        return value

    event = text("event")
    if event not in _EVENT_NAMES:
        raise ValueError(f"event: {event!r} is not one of {sorted(_EVENT_NAMES)}")
    try:
        at = times.parse_time(text("at"))
        raw_eviction = text("evictionAt", required=False)
        eviction_at = times.parse_time(raw_eviction) if raw_eviction else None
    except ValueError as err:
        raise ValueError(f"at/evictionAt: {err}") from err
    return Notification(
        event=Event(event),
        namespace=text("namespace"),
        pod=text("pod"),
        message=text("message"),
        at=at,
        uid=text("uid", required=False),
        source=text("source", required=False),
        eviction_at=eviction_at,
        disruption=text("disruption", required=False),
    )


def body(sink: Sink, notification: Notification) -> dict[str, str]:
    """The JSON body posted to ``sink``: Slack's incoming-webhook form, ``{"text": ...}``."""
    text = string.Template(sink.template).safe_substitute(notification.fields())
    return {"text": text}


def template_problems(template: str) -> list[str]:
    """What is wrong with a template (empty: every placeholder is known and well formed)."""
    parsed = string.Template(template)
    problems = []
    for match in parsed.pattern.finditer(template):
        if match.group("invalid") is not None:
            problems.append(
                f"a $ at character {match.start() + 1} starts no placeholder: write ${{name}} "
                f"with a name from {_known()}, or $$ for a literal $"
            )
    for name in parsed.get_identifiers():
        if name not in PLACEHOLDERS:
            problems.append(f"unknown placeholder ${{{name}}}; known: {_known()}")
    return problems


def _known() -> str:
    return ", ".join(f"${{{p}}}" for p in PLACEHOLDERS)


def read_sinks(raw: object, *, here: str) -> tuple[tuple[Sink, ...], list[tuple[str, str]]]:
    """``spec.notify``: the sinks read, and ``(field, reason)`` for each problem found."""
    problems: list[tuple[str, str]] = []
    if raw is None:
        return (), problems
    if not isinstance(raw, list):
        problems.append((here, "expected a list of {url, events, template, timeout}; [] for none"))
        return (), problems
    if len(raw) > MAX_SINKS:
        problems.append((here, f"at most {MAX_SINKS} sinks, got {len(raw)}"))
    found: list[Sink] = []
    for i, item in enumerate(raw):
        at = f"{here}[{i}]"
        if not isinstance(item, Mapping):
            problems.append((at, "expected a mapping with url, events, template, timeout"))
            continue
        before = len(problems)
        for key in sorted(item, key=str):
            if key not in _FIELDS:
                problems.append((f"{at}.{key}", f"unknown field; known: {', '.join(_FIELDS)}"))
        url = _url(item.get("url"), f"{at}.url", problems)
        events = _events(item.get("events"), f"{at}.events", problems)
        template = _template(item.get("template"), f"{at}.template", problems)
        timeout = _timeout(item.get("timeout"), f"{at}.timeout", problems)
        if len(problems) == before and url is not None:
            found.append(Sink(url=url, events=events, template=template, timeout=timeout))
    return tuple(found), problems


def _url(raw: object, here: str, problems: list[tuple[str, str]]) -> str | None:
    if raw is None:
        problems.append((here, "required: the http:// or https:// URL to post to"))
        return None
    if not isinstance(raw, str) or len(raw) > URL_MAX or _URL.match(raw) is None:
        shown = raw if not isinstance(raw, str) or len(raw) <= 80 else raw[:80] + "..."
        problems.append(
            (
                here,
                f"expected an http:// or https:// URL of at most {URL_MAX} characters with "
                f"no spaces, got {shown!r}",
            )
        )
        return None
    return raw


def _events(raw: object, here: str, problems: list[tuple[str, str]]) -> frozenset[Event]:
    if raw is None:
        return frozenset(EVENTS)
    names = ", ".join(EVENTS)
    if not isinstance(raw, list) or not raw:
        problems.append((here, f"expected a non-empty list of events from: {names}"))
        return frozenset(EVENTS)
    found: set[Event] = set()
    for i, name in enumerate(raw):
        if not isinstance(name, str) or name not in _EVENT_NAMES:
            problems.append((f"{here}[{i}]", f"unknown event {name!r}; known: {names}"))
            continue
        if Event(name) in found:
            problems.append((f"{here}[{i}]", f"{name} is listed twice"))
        found.add(Event(name))
    return frozenset(found)


def _template(raw: object, here: str, problems: list[tuple[str, str]]) -> str:
    if raw is None:
        return DEFAULT_TEMPLATE
    if not isinstance(raw, str) or not raw or len(raw) > TEMPLATE_MAX:
        problems.append((here, f"expected a text of 1 to {TEMPLATE_MAX} characters"))
        return DEFAULT_TEMPLATE
    problems.extend((here, problem) for problem in template_problems(raw))
    return raw


def _timeout(raw: object, here: str, problems: list[tuple[str, str]]) -> dt.timedelta:
    if raw is None:
        return DEFAULT_TIMEOUT
    if not isinstance(raw, str):
        problems.append((here, f'expected a duration string such as "5s", got {raw!r}'))
        return DEFAULT_TIMEOUT
    try:
        value = durations.parse_duration(raw)
    except durations.DurationError as err:
        problems.append((here, str(err)))
        return DEFAULT_TIMEOUT
    if value <= dt.timedelta(0) or value > MAX_TIMEOUT:
        problems.append((here, f"must be more than 0s and at most 30s, got {raw!r}"))
        return DEFAULT_TIMEOUT
    return value
