"""The DisruptionPolicy CRD's schema against the Python policy reader (``domain/policy.py``).

The apiserver checks a DisruptionPolicy with the CRD's OpenAPI v3 schema and then its CEL rules
(``x-kubernetes-validations``); the controller reads it with ``policy_from_manifest``. These tests
keep the three in step: the same fields, the same defaults, and the same verdict on sample
documents. The OpenAPI part is checked here with ``jsonschema`` (draft 4, which OpenAPI v3.0's
schema object is built on, after translating ``nullable`` and ``x-kubernetes-int-or-string``, and
with ``additionalProperties: false`` standing in for the strict field validation ``kubectl``
asks for; without it the apiserver drops unknown fields, and it drops a ``null`` given to a
field that is not ``nullable``, so such a field reads as omitted). CEL in general cannot be
evaluated offline; these are the CEL rules, which tests/e2e/test_crd.py checks on a real apiserver:

- ``maxProtection``, ``maxMinRuntime``, ``pdbMaxWait``, ``maintenanceWindows[].duration``:
  ``duration(self) > duration('0s')`` (positive; also refuses a duration too large for Go).
- ``noticeLead``: ``duration(self) >= duration('0s')``.
- ``maintenanceWindows[].timeZone``: ``self != 'Local' &&
  timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0`` (an IANA zone the apiserver knows; it
  embeds the tz database).
- ``priorityPhases``: ``self.map(p, p.minPriority).isSorted() && self.all(a, self.exists_one(b,
  b.minPriority == a.minPriority))`` (strictly increasing).
- ``maintenanceWindows[].schedule``: ``policies.SCHEDULE_RULES``, word for word: each cron field in
  its range, no range from a value to itself, no day none of the months has. These ARE evaluated
  here (``cel_offline``): each is ``self.matches(r'...')`` or its negation, so Python's ``re``
  runs the rule's own regex (written in the common subset of RE2 and ``re``); the e2e tier runs
  the same samples through the apiserver.

What none of these refuse (a never-firing schedule written with a range of months, such as
``0 0 31 4-6/2 *``) is the controller's to report: condition Accepted False with reason
InvalidSpec, and a Warning event InvalidPolicy.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import pathlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from graceguard.domain import (
    disruption,
    durations,
    intorpercent,
    notifications,
    policy,
    times,
    windows,
)
from graceguard.manifests import disruptions, policies
from graceguard.manifests.errors import ManifestError

from .test_disruption_manifest import DNS_SUBDOMAIN, T0, requests, statuses

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "deploy" / "crds" / "disruptionpolicy.yaml"
CHART_CRD_PATH = ROOT / "deploy" / "helm" / "graceguard" / "crds" / "disruptionpolicy.yaml"

CRD: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))
VERSION: dict[str, Any] = CRD["spec"]["versions"][0]
SCHEMA: dict[str, Any] = VERSION["schema"]["openAPIV3Schema"]
SPEC: dict[str, Any] = SCHEMA["properties"]["spec"]
FIELDS: dict[str, Any] = SPEC["properties"]
DURATION_FIELDS = ("maxProtection", "maxMinRuntime", "noticeLead", "pdbMaxWait", "disruptionTTL")


# ---- OpenAPI v3 (as the apiserver reads it) -> JSON Schema draft 4 ----


def go_pattern(pattern: str) -> str:
    """A pattern as Go's regexp reads it: a final ``$`` is the end of the text (Python's also
    matches before a final newline, which would take ``"drain\\n"``)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        return pattern[:-1] + r"\Z"
    return pattern


def to_json_schema(node: Mapping[str, Any]) -> dict[str, Any]:
    """Translate one structural-schema node; CEL rules, defaults and descriptions are dropped."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("description", "default", "nullable"):
            continue
        if key == "properties":
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = to_json_schema(value)
        elif key == "pattern":
            out[key] = go_pattern(value)
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if out.get("type") == "object" and "properties" in out:
        out["additionalProperties"] = False  # kubectl's strict field validation
    if node.get("nullable"):
        kind = out.get("type")
        out["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
    return out


VALIDATOR = jsonschema.Draft4Validator(to_json_schema(SCHEMA))


def list_map_errors(schema: Mapping[str, Any], value: object, path: str = "") -> list[str]:
    """What ``x-kubernetes-list-type: map`` refuses and JSON Schema cannot say: two items with the
    same keys (a key's ``default`` counts for an item without it, as the apiserver defaults it
    first)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                found += list_map_errors(sub, value[name], f"{path}.{name}".lstrip("."))
    if isinstance(value, list) and "items" in schema:
        item = schema["items"]
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen: set[tuple[str, ...]] = set()
        for i, entry in enumerate(value):
            found += list_map_errors(item, entry, f"{path}[{i}]")
            if schema.get("x-kubernetes-list-type") != "map" or not isinstance(entry, Mapping):
                continue
            key = tuple(repr(entry.get(k, item["properties"][k].get("default"))) for k in keys)
            if key in seen:
                found.append(f"{path}[{i}]: Duplicate value: {dict(zip(keys, key, strict=True))}")
            seen.add(key)
    return found


def document(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": policies.API_VERSION,
        "kind": policies.KIND,
        "metadata": {"name": "default"},
        "spec": dict(spec),
    }


def schema_errors(spec: Mapping[str, Any]) -> list[str]:
    doc = document(spec)
    return [
        f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in VALIDATOR.iter_errors(doc)
    ] + list_map_errors(SCHEMA, doc)


def python_errors(spec: Mapping[str, Any]) -> list[str]:
    try:
        policies.policy_from_manifest(document(spec))
    except policy.PolicyError as err:
        return [str(e) for e in err.errors]
    return []


def walk(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")


def cel_rules(node: Mapping[str, Any]) -> list[str]:
    return [" ".join(v["rule"].split()) for v in node.get("x-kubernetes-validations", [])]


SCHEDULE: dict[str, Any] = FIELDS["maintenanceWindows"]["items"]["properties"]["schedule"]
_MATCHES = re.compile(r"^(!?)self\.matches\(r'([^']*)'\)$")


def cel_offline(rule: str, value: str) -> bool:
    """Evaluate one of the schedule's CEL rules on ``value`` without an apiserver."""
    m = _MATCHES.match(rule)
    if m is not None:
        found = re.search(m.group(2), value, flags=re.ASCII) is not None
        return not found if m.group(1) else found
    twins = {r.rule: r.holds for r in policies.SCHEDULE_RULES}
    assert rule in twins, f"no offline evaluation for CEL rule {rule!r}"
    return twins[rule](value)


def cel_schedule_messages(value: str) -> list[str]:
    """The messages of the schedule's CEL rules that ``value`` breaks, as the apiserver lists
    them (it evaluates them only on a string the OpenAPI part let through)."""
    return [
        v["message"]
        for v in SCHEDULE.get("x-kubernetes-validations", [])
        if not cel_offline(v["rule"], value)
    ]


def cel_errors(spec: Mapping[str, Any]) -> list[str]:
    """The schedule rules' verdict on every window of a spec."""
    found = []
    for i, window in enumerate(spec.get("maintenanceWindows") or []):
        schedule = window.get("schedule") if isinstance(window, Mapping) else None
        if isinstance(schedule, str):
            found += [
                f"maintenanceWindows[{i}].schedule: {m}" for m in cel_schedule_messages(schedule)
            ]
    return found


# ---- the CRD's shape ----


def test_the_chart_carries_the_same_crd() -> None:
    assert CHART_CRD_PATH.read_bytes() == CRD_PATH.read_bytes(), (
        f"{CHART_CRD_PATH.relative_to(ROOT)} differs from {CRD_PATH.relative_to(ROOT)}: "
        "run `make crds`"
    )


def test_names_scope_and_subresources() -> None:
    spec = CRD["spec"]
    assert CRD["metadata"]["name"] == "disruptionpolicies.graceguard.io"
    assert spec["group"] == "graceguard.io"
    assert f"{spec['group']}/{VERSION['name']}" == policies.API_VERSION
    assert spec["names"]["kind"] == policies.KIND
    assert spec["scope"] == "Cluster"
    assert spec["names"]["shortNames"] == ["dpol"]
    assert [v["name"] for v in spec["versions"]] == ["v1alpha1"]
    assert VERSION["served"] and VERSION["storage"]
    assert VERSION["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in VERSION["additionalPrinterColumns"]}
    assert columns == {
        "Accepted": '.status.conditions[?(@.type=="Accepted")].status',
        "NoticeLead": ".spec.noticeLead",
        "Age": ".metadata.creationTimestamp",
    }
    assert '"default"' in SCHEMA["description"]  # says which policy is in force


def test_every_field_is_described_and_typed() -> None:
    """``kubectl explain`` prints the descriptions; a structural schema types every node."""
    for path, node in walk(SCHEMA, "<root>"):
        if path in ("<root>", "<root>.metadata"):
            continue
        assert node.get("description"), f"{path} has no description"
        assert "type" in node or node.get("x-kubernetes-int-or-string"), f"{path} has no type"


def test_status_conditions_are_metav1_conditions() -> None:
    conditions = SCHEMA["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert set(item["properties"]) == {
        "type",
        "status",
        "observedGeneration",
        "lastTransitionTime",
        "reason",
        "message",
    }
    assert set(item["required"]) == {"type", "status", "lastTransitionTime", "reason", "message"}
    assert item["properties"]["status"]["enum"] == ["True", "False", "Unknown"]
    assert "Accepted" in conditions["description"]


# ---- fields and defaults agree with domain/policy.py ----


def known_to_python() -> set[str]:
    """The spec fields ``policy_from_spec`` knows, from its own unknown-field message."""
    errors: list[policy.FieldError] = []
    policies.policy_from_spec({"noSuchField": 1}, errors=errors)
    (error,) = errors
    assert error.field == "spec.noSuchField"
    return set(error.reason.split("known: ", 1)[1].split(", "))


def test_spec_fields_are_those_python_reads() -> None:
    assert set(FIELDS) == known_to_python()


def test_window_and_phase_fields_are_those_python_reads() -> None:
    window = FIELDS["maintenanceWindows"]["items"]
    assert set(window["properties"]) == {"schedule", "duration", "timeZone"}
    assert set(window["required"]) == {"schedule", "duration"}
    errors = python_errors({"maintenanceWindows": [{"extra": 1}]})
    assert (
        "spec.maintenanceWindows[0].extra: unknown field; known: duration, schedule, timeZone"
        in (errors)
    )
    assert "spec.maintenanceWindows[0].schedule: required" in errors
    assert "spec.maintenanceWindows[0].duration: required" in errors
    phase = FIELDS["priorityPhases"]["items"]
    assert set(phase["properties"]) == {"name", "minPriority"}
    assert set(phase["required"]) == {"name", "minPriority"}


def test_schema_defaults_are_the_python_defaults() -> None:
    defaults = {name: node["default"] for name, node in FIELDS.items() if "default" in node}
    assert policies.policy_from_spec(defaults, errors=[]) == policy.DEFAULT
    errors: list[policy.FieldError] = []
    policies.policy_from_spec(defaults, errors=errors)
    assert errors == []
    # Each default on its own, so a wrong one is named.
    for name, value in defaults.items():
        alone = policies.policy_from_spec({name: value}, errors=[])
        assert alone == policy.DEFAULT, f"spec.{name} default {value!r} differs from DEFAULT"
    # Fields whose absence means something have no default in the schema.
    assert set(FIELDS) - set(defaults) == {"maintenanceWindows", "windowedSources"}
    assert policy.DEFAULT.maintenance_windows == ()
    assert policy.DEFAULT.windowed_sources is None  # omitted: every voluntary source
    assert SPEC["default"] == {}  # a policy without spec gets every default, too


def test_aws_choices_are_the_policys_enums() -> None:
    assert FIELDS["rebalance"]["enum"] == [a.value for a in policy.RebalanceAction]
    assert FIELDS["foreignInstance"]["enum"] == [a.value for a in policy.ForeignInstanceAction]


def test_window_time_zone_default_is_python_default() -> None:
    zone = FIELDS["maintenanceWindows"]["items"]["properties"]["timeZone"]
    field = {f.name: f for f in dataclasses.fields(windows.MaintenanceWindow)}["time_zone"]
    assert zone["default"] == field.default == "UTC"


def test_default_descriptions_name_the_default() -> None:
    for name, node in FIELDS.items():
        assert "Default:" in node["description"], f"spec.{name} does not say its default"
    for name in DURATION_FIELDS:
        default = FIELDS[name]["default"]
        assert f"Default: {default}." in FIELDS[name]["description"]


# ---- sample documents: the same verdict from both ----

VALID: dict[str, dict[str, Any]] = {
    "empty": {},
    "readme": {
        "maxProtection": "24h",
        "maxMinRuntime": "24h",
        "noticeLead": "10m",
        "defaultMinAvailable": "50%",
        "pdbMaxWait": "1h",
        "maintenanceWindows": [
            {"schedule": "0 2 * * *", "duration": "4h", "timeZone": "Europe/Berlin"}
        ],
        "windowedSources": ["drain", "asg-scale-in"],
        "priorityPhases": [
            {"name": "regular", "minPriority": -2147483648},
            {"name": "critical", "minPriority": 2000000000},
        ],
    },
    "go durations": {
        "maxProtection": "1h30m",
        "maxMinRuntime": "1.5h",
        "pdbMaxWait": "90s",
        "noticeLead": "0",
    },
    "fractions and micro": {"maxProtection": ".5h", "pdbMaxWait": "1.h", "noticeLead": "300µs"},
    "plus sign": {"noticeLead": "+10m"},
    "zero notice": {"noticeLead": "0s"},
    "floor as number": {"defaultMinAvailable": 2},
    "floor as digit string": {"defaultMinAvailable": "3"},
    "floor 0%": {"defaultMinAvailable": "0%"},
    "floor 100%": {"defaultMinAvailable": "100%"},
    "floor off": {"defaultMinAvailable": None},
    "window without zone": {"maintenanceWindows": [{"schedule": "30 1 * * 6", "duration": "2h"}]},
    "no windows": {"maintenanceWindows": []},
    "no windowed sources": {"windowedSources": []},
    "three phases": {
        "priorityPhases": [
            {"name": "batch", "minPriority": -100},
            {"name": "regular", "minPriority": 0},
            {"name": "critical", "minPriority": 2000000000},
        ]
    },
    "one phase": {"priorityPhases": [{"name": "all", "minPriority": 0}]},
    "takeover of every source": {"takeover": [{"source": "*"}]},
    "takeover default source": {"takeover": [{"minNotice": "15m"}]},
    "no takeover": {"takeover": []},
    "takeover per source": {
        "takeover": [
            {"source": "cluster-autoscaler", "minNotice": "30m"},
            {"source": "eviction-api", "minNotice": "0"},
            {"source": "system:node.x_y", "minNotice": "1h30m"},
            {"source": "*"},
        ]
    },
    "disruption ttl": {"disruptionTTL": "1h30m"},
    "rebalance drain": {"rebalance": "drain"},
    "rebalance ignored": {"rebalance": "ignore"},
    "foreign instances abandoned": {"foreignInstance": "abandon"},
    "deletion cost off": {"deletionCost": False},
    "deletion cost on": {"deletionCost": True},
    "surge bounded": {"surgeMaxWait": "3m"},
    "surges off": {"surgeMaxWait": "0s"},
    "no protect rules": {"protect": []},
    "protect jobs": {"protect": [{"ownerKind": "Job"}]},
    "protect labelled namespaces": {
        "protect": [{"namespaceSelector": {"matchLabels": {"team": "batch"}}}]
    },
    "protect every field": {
        "protect": [
            {
                "name": "batch-2h",
                "namespaces": ["batch", "ml"],
                "selector": {
                    "matchLabels": {"team": "ml"},
                    "matchExpressions": [
                        {"key": "tier", "operator": "In", "values": ["train"]},
                        {"key": "scratch", "operator": "DoesNotExist"},
                    ],
                },
                "ownerKind": "StatefulSet",
                "minRuntime": "2h",
            }
        ]
    },
    "protect every pod by empty selector": {"protect": [{"selector": {}}]},
    "protect min runtime at the cap": {
        "maxMinRuntime": "6h",
        "protect": [{"namespaces": ["batch"], "minRuntime": "6h"}],
    },
    "no notify": {"notify": []},
    "notify a sink": {"notify": [{"url": "https://hooks.example.com/services/T0/B0/x"}]},
    "notify every field": {
        "notify": [
            {
                "url": "http://127.0.0.1:8080/hook?team=batch#x",
                "events": ["ForcedEviction", "PrematureTermination"],
                "template": "$$ ${pod} in $namespace at ${evictionAt}: ${message} (${source})",
                "timeout": "2s",
            },
            {"url": "https://[::1]:8443/", "events": ["ScheduledEviction"], "timeout": "30s"},
        ]
    },
    "cron forms": {
        "maintenanceWindows": [
            {"schedule": "0 22-4 * * mon-fri", "duration": "1h"},  # a range past midnight
            {"schedule": "*/15 0-6/2 L * ?", "duration": "1h"},
            {"schedule": "00 02 1,15 JAN-Mar,oct *", "duration": "1h"},
            {"schedule": "0 0 29 2 *", "duration": "1h"},  # leap years
            {"schedule": "0 0 31 2 1", "duration": "1h"},  # or a Monday in February
            {"schedule": "0 0 30 feb,mar *", "duration": "1h"},
            {"schedule": "0 0 31 2/5 *", "duration": "1h"},  # 2, 7, 12: July and December
            {"schedule": "  59 23 31 dec 0,7  ", "duration": "1h"},
            {"schedule": "0\t2 * * *", "duration": "1h"},
        ]
    },
}

INVALID: dict[str, dict[str, Any]] = {
    # a takeover source is held to the form of a Disruption's spec.source, by both
    "takeover source with a space": {"takeover": [{"source": "cluster autoscaler"}]},
    "takeover source on two lines": {"takeover": [{"source": "cluster\nautoscaler"}]},
    "takeover source too long": {"takeover": [{"source": "x" * 64}]},
    "unknown field": {"maxProtecton": "24h"},
    "duration without unit": {"maxProtection": "24"},
    "duration in words": {"noticeLead": "ten minutes"},
    "duration in days": {"pdbMaxWait": "1d"},
    "duration as number": {"maxMinRuntime": 3600},
    "negative duration": {"pdbMaxWait": "-1h"},
    "negative notice": {"noticeLead": "-10m"},
    "empty duration": {"maxProtection": ""},
    "floor over 100%": {"defaultMinAvailable": "101%"},
    "floor negative": {"defaultMinAvailable": -1},
    "floor words": {"defaultMinAvailable": "half"},
    "floor fraction": {"defaultMinAvailable": 1.5},
    "floor boolean": {"defaultMinAvailable": True},
    "floor decimal percent": {"defaultMinAvailable": "12.5%"},
    "windows not a list": {"maintenanceWindows": {"schedule": "0 2 * * *", "duration": "4h"}},
    "window without duration": {"maintenanceWindows": [{"schedule": "0 2 * * *"}]},
    "window without schedule": {"maintenanceWindows": [{"duration": "4h"}]},
    "window extra field": {
        "maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "4h", "days": 1}]
    },
    "six cron fields": {"maintenanceWindows": [{"schedule": "0 0 2 * * *", "duration": "4h"}]},
    "cron macro": {"maintenanceWindows": [{"schedule": "@daily", "duration": "4h"}]},
    "window duration words": {"maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "4"}]},
    "zone with spaces": {
        "maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "4h", "timeZone": "New York"}]
    },
    "zone as offset": {
        "maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "4h", "timeZone": "+02:00"}]
    },
    "sources not a list": {"windowedSources": "drain"},
    "empty source": {"windowedSources": [""]},
    "source not a string": {"windowedSources": [1]},
    # A name no source can have: the windows would hold nothing to it.
    "source with a space": {"windowedSources": ["drain", "my drain"]},
    "source on two lines": {"windowedSources": ["drain\nupgrade"]},
    "source ending in a dot": {"windowedSources": ["expiry."]},
    "source starting with a dash": {"windowedSources": ["-drain"]},
    "source a wildcard": {"windowedSources": ["*"]},
    "source name too long": {"windowedSources": ["x" * 64]},
    "no phases": {"priorityPhases": []},
    "phase without name": {"priorityPhases": [{"minPriority": 0}]},
    "phase empty name": {"priorityPhases": [{"name": "", "minPriority": 0}]},
    "phase priority string": {"priorityPhases": [{"name": "a", "minPriority": "0"}]},
    "phase priority boolean": {"priorityPhases": [{"name": "a", "minPriority": True}]},
    "phase priority fraction": {"priorityPhases": [{"name": "a", "minPriority": 1.5}]},
    "takeover not a list": {"takeover": {"source": "*"}},
    "takeover of a name": {"takeover": ["cluster-autoscaler"]},
    "takeover twice": {"takeover": [{"source": "karpenter"}, {"source": "karpenter"}]},
    "takeover of every source twice": {"takeover": [{"source": "*"}, {"minNotice": "1m"}]},
    "takeover unknown key": {"takeover": [{"source": "*", "notice": "10m"}]},
    "takeover empty source": {"takeover": [{"source": ""}]},
    "takeover padded source": {"takeover": [{"source": " karpenter"}]},
    "takeover source number": {"takeover": [{"source": 7}]},
    "takeover negative notice": {"takeover": [{"minNotice": "-1m"}]},
    "takeover notice in words": {"takeover": [{"minNotice": "ten minutes"}]},
    "takeover notice as number": {"takeover": [{"minNotice": 600}]},
    "ttl negative": {"disruptionTTL": "-1h"},
    "ttl in days": {"disruptionTTL": "1d"},
    "ttl as number": {"disruptionTTL": 86400},
    "rebalance unknown": {"rebalance": "evict"},
    "rebalance capitalised": {"rebalance": "Notice"},
    "rebalance as list": {"rebalance": ["notice"]},
    "foreign instance unknown": {"foreignInstance": "ignore"},
    "foreign instance as boolean": {"foreignInstance": True},
    "deletion cost as word": {"deletionCost": "yes"},
    "deletion cost as string": {"deletionCost": "false"},
    "deletion cost as number": {"deletionCost": 0},
    "surge wait negative": {"surgeMaxWait": "-1m"},
    "surge wait in words": {"surgeMaxWait": "ten minutes"},
    "surge wait as number": {"surgeMaxWait": 600},
    "protect not a list": {"protect": {"ownerKind": "Job"}},
    "protect rule unknown field": {"protect": [{"ownerKind": "Job", "kind": "Job"}]},
    "protect rule name upper case": {"protect": [{"name": "Jobs", "ownerKind": "Job"}]},
    "protect no namespaces": {"protect": [{"namespaces": []}]},
    "protect namespace bad": {"protect": [{"namespaces": ["Batch_1"]}]},
    "protect owner kind lower case": {"protect": [{"ownerKind": "job"}]},
    "protect namespace selector not a mapping": {"protect": [{"namespaceSelector": "team=a"}]},
    "protect owner kind number": {"protect": [{"ownerKind": 5}]},
    "protect min runtime in words": {"protect": [{"ownerKind": "Job", "minRuntime": "2 hours"}]},
    "protect min runtime negative": {"protect": [{"ownerKind": "Job", "minRuntime": "-2h"}]},
    "protect selector unknown field": {"protect": [{"selector": {"matchLabel": {"a": "b"}}}]},
    "protect selector bad operator": {
        "protect": [{"selector": {"matchExpressions": [{"key": "a", "operator": "Has"}]}}]
    },
    "protect selector label not text": {"protect": [{"selector": {"matchLabels": {"a": 1}}}]},
    "protect too many rules": {"protect": [{"ownerKind": "Job"}] * 33},
    "notify not a list": {"notify": {"url": "https://hooks.example.com/x"}},
    "notify of a url": {"notify": ["https://hooks.example.com/x"]},
    "notify without url": {"notify": [{"events": ["ForcedEviction"]}]},
    "notify ftp url": {"notify": [{"url": "ftp://hooks.example.com/x"}]},
    "notify url without scheme": {"notify": [{"url": "hooks.example.com/x"}]},
    "notify url without host": {"notify": [{"url": "https:///x"}]},
    "notify url with a space": {"notify": [{"url": "https://hooks.example.com/a b"}]},
    "notify url on two lines": {"notify": [{"url": "https://hooks.example.com/x\n"}]},
    "notify url too long": {"notify": [{"url": "https://h/" + "x" * 2040}]},
    "notify unknown event": {"notify": [{"url": "https://h/x", "events": ["Evicted"]}]},
    "notify no events": {"notify": [{"url": "https://h/x", "events": []}]},
    "notify unknown key": {"notify": [{"url": "https://h/x", "channel": "#ops"}]},
    "notify empty template": {"notify": [{"url": "https://h/x", "template": ""}]},
    "notify template too long": {"notify": [{"url": "https://h/x", "template": "x" * 4097}]},
    "notify timeout in words": {"notify": [{"url": "https://h/x", "timeout": "five seconds"}]},
    "notify timeout as number": {"notify": [{"url": "https://h/x", "timeout": 5}]},
    "too many sinks": {"notify": [{"url": f"https://h/{i}"} for i in range(17)]},
}

CEL_ONLY: dict[str, tuple[dict[str, Any], str]] = {
    # Refused by the Python reader and by a CEL rule, not by the OpenAPI part checked here.
    "zero protection": ({"maxProtection": "0"}, "duration(self) > duration('0s')"),
    "zero min runtime": ({"maxMinRuntime": "0s"}, "duration(self) > duration('0s')"),
    "zero budget wait": ({"pdbMaxWait": "0h0m"}, "duration(self) > duration('0s')"),
    "duration too large for Go": (
        {"maxProtection": "9999999999h"},
        "duration(self) > duration('0s')",
    ),
    "zero window": (
        {"maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "0m"}]},
        "duration(self) > duration('0s')",
    ),
    "unknown zone": (
        {
            "maintenanceWindows": [
                {"schedule": "0 2 * * *", "duration": "4h", "timeZone": "Mars/Olympus"}
            ]
        },
        "self != 'Local' && timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0",
    ),
    "zone directory": (
        {"maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "4h", "timeZone": "Europe"}]},
        "self != 'Local' && timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0",
    ),
    "phases decreasing": (
        {"priorityPhases": [{"name": "a", "minPriority": 10}, {"name": "b", "minPriority": 0}]},
        "self.map(p, p.minPriority).isSorted() && "
        "self.all(a, self.exists_one(b, b.minPriority == a.minPriority))",
    ),
    "zero ttl": ({"disruptionTTL": "0s"}, "duration(self) > duration('0s')"),
    "takeover notice too large for Go": (
        {"takeover": [{"minNotice": "9999999999h"}]},
        "duration(self) >= duration('0s')",
    ),
    "notify zero timeout": (
        {"notify": [{"url": "https://h/x", "timeout": "0s"}]},
        "duration(self) > duration('0s') && duration(self) <= duration('30s')",
    ),
    "notify timeout over 30s": (
        {"notify": [{"url": "https://h/x", "timeout": "31s"}]},
        "duration(self) > duration('0s') && duration(self) <= duration('30s')",
    ),
    "protect rule choosing nothing": (
        {"protect": [{"minRuntime": "2h"}]},
        "has(self.namespaces) || has(self.namespaceSelector) || has(self.selector) || "
        "has(self.ownerKind)",
    ),
    "protect deployment": (
        {"protect": [{"ownerKind": "Deployment"}]},
        "self != 'Deployment' && self != 'CronJob'",
    ),
    "protect cronjob": (
        {"protect": [{"ownerKind": "CronJob"}]},
        "self != 'Deployment' && self != 'CronJob'",
    ),
    "protect zero min runtime": (
        {"protect": [{"ownerKind": "Job", "minRuntime": "0s"}]},
        "duration(self) > duration('0s')",
    ),
    "protect In without values": (
        {"protect": [{"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}]},
        "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : "
        "!has(self.values) || size(self.values) == 0",
    ),
    "protect Exists with values": (
        {
            "protect": [
                {
                    "selector": {
                        "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]
                    }
                }
            ]
        },
        "self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : "
        "!has(self.values) || size(self.values) == 0",
    ),
    "protect min runtime over the cap": (
        {"protect": [{"ownerKind": "Job", "minRuntime": "25h"}]},
        "!has(self.protect) || self.protect.all(r, !has(r.minRuntime) || "
        "duration(r.minRuntime) <= duration(has(self.maxMinRuntime) ? self.maxMinRuntime : '24h'))",
    ),
    "protect min runtime over a lowered cap": (
        {"maxMinRuntime": "1h", "protect": [{"ownerKind": "Job", "minRuntime": "2h"}]},
        "!has(self.protect) || self.protect.all(r, !has(r.minRuntime) || "
        "duration(r.minRuntime) <= duration(has(self.maxMinRuntime) ? self.maxMinRuntime : '24h'))",
    ),
    "phases equal": (
        {"priorityPhases": [{"name": "a", "minPriority": 0}, {"name": "b", "minPriority": 0}]},
        "self.map(p, p.minPriority).isSorted() && "
        "self.all(a, self.exists_one(b, b.minPriority == a.minPriority))",
    ),
}


def window(schedule: str) -> dict[str, Any]:
    return {"maintenanceWindows": [{"schedule": schedule, "duration": "4h"}]}


CRON_CEL: dict[str, tuple[str, str]] = {
    # Refused by the schedule's CEL rules (evaluated here offline) and, with the same message, by
    # the Python reader: (schedule, the start of the message).
    "minute out of range": ("99 * * * *", "the minute (1st field) must be"),
    "minute 60": ("60 2 * * *", "the minute (1st field) must be"),
    "hour 24": ("0 24 * * *", "the hour (2nd field) must be"),
    "day 0": ("0 0 0 * *", "the day of the month (3rd field) must be"),
    "day 32": ("0 0 32 * *", "the day of the month (3rd field) must be"),
    "month 13": ("0 0 * 13 *", "the month (4th field) must be"),
    "month 0 in a list": ("0 0 * 1,0 *", "the month (4th field) must be"),
    "weekday 8": ("0 0 * * 8", "the day of the week (5th field) must be"),
    "weekday in words": ("0 0 * * monday", "the day of the week (5th field) must be"),
    "zero step": ("*/0 * * * *", "the minute (1st field) must be"),
    "nth weekday": ("0 0 * * 5#3", "the day of the week (5th field) must be"),
    "nearest weekday": ("0 0 15W * *", "the day of the month (3rd field) must be"),
    "hash": ("H * * * *", "the minute (1st field) must be"),
    "words": ("a b c d e", "the minute (1st field) must be"),
    "february 31": ("0 0 31 2 *", "never fires"),
    "february 30": ("0 0 30 feb *", "never fires"),
    "february 30 and 31": ("0 0 30,31 2 ?", "never fires"),
    "30 to 31 of february": ("0 0 30-31 2 *", "never fires"),
    "31 in short months": ("0 0 31 apr,6,SEP,11 *", "never fires"),
    "31 every 7th month from february": ("0 0 31 2/7 *", "never fires"),  # 2, 9
    "31 with any weekday": ("0 0 31 2 1,*", "never fires"),
    "month range to itself": ("0 2 * 2-2 *", "a range from a value to itself"),
    "minute range to itself": ("0-0 * * * *", "a range from a value to itself"),
    "names to themselves": ("0 2 * feb-FEB *", "a range from a value to itself"),
    "leading zero to itself": ("0 05-5 * * *", "a range from a value to itself"),
}

CONTROLLER_ONLY: dict[str, dict[str, Any]] = {
    # Well-formed to the apiserver, CEL rules included; refused by the Python reader (croniter),
    # so the controller reports Accepted False, reason InvalidSpec, naming the field.
    "never fires with a range of months": window("0 0 31 4-6/2 *"),
    "never fires with a wrapping range": window("0 0 31 11-4/5 *"),  # 11, 4
    # A template is Python's string.Template: the schema cannot read it, the controller can.
    "notify unknown placeholder": {"notify": [{"url": "https://h/x", "template": "${node} goes"}]},
    "notify bare dollar": {"notify": [{"url": "https://h/x", "template": "costs $5 an hour"}]},
    "notify unclosed placeholder": {"notify": [{"url": "https://h/x", "template": "${pod goes"}]},
    # Names are optional, so the list cannot be a map keyed by them.
    "protect a name twice": {
        "protect": [{"name": "a", "ownerKind": "Job"}, {"name": "a", "namespaces": ["x"]}]
    },
}

SCHEMA_STRICTER: dict[str, dict[str, Any]] = {
    # Read by the Python reader (lenient for files given to `graceguard explain`), refused by the
    # apiserver: the cluster only ever holds the canonical form.
    "duration with spaces": {"noticeLead": " 10m "},
    "negative zero notice": {"noticeLead": "-0s"},
    "floor with spaces": {"defaultMinAvailable": " 50% "},
    "priority beyond int32": {"priorityPhases": [{"name": "a", "minPriority": 2**40}]},
    "too many windows": {
        "maintenanceWindows": [{"schedule": "0 2 * * *", "duration": "1h"}] * 33,
    },
    "too many phases": {
        "priorityPhases": [{"name": f"p{i}", "minPriority": i} for i in range(17)],
    },
    # the CRD caps the list; the reader takes any length
    "too many takeover entries": {"takeover": [{"source": f"s{i}"} for i in range(65)]},
}


@pytest.mark.parametrize("name", VALID)
def test_valid_documents_pass_both(name: str) -> None:
    spec = VALID[name]
    assert python_errors(spec) == []
    assert schema_errors(spec) == []
    assert cel_errors(spec) == []


@pytest.mark.parametrize("name", INVALID)
def test_invalid_documents_fail_both(name: str) -> None:
    spec = INVALID[name]
    assert python_errors(spec), "the Python reader accepted it"
    assert schema_errors(spec), "the schema accepted it"


@pytest.mark.parametrize("name", CEL_ONLY)
def test_cel_rules_cover_what_patterns_cannot(name: str) -> None:
    spec, rule = CEL_ONLY[name]
    assert python_errors(spec), "the Python reader accepted it"
    assert schema_errors(spec) == [], "now refused by the OpenAPI part: move it to INVALID"
    all_rules = {rule for _, node in walk(SCHEMA, "") for rule in cel_rules(node)}
    assert rule in all_rules


@pytest.mark.parametrize("name", CONTROLLER_ONLY)
def test_what_only_the_controller_refuses(name: str) -> None:
    spec = CONTROLLER_ONLY[name]
    assert python_errors(spec), "the Python reader accepted it"
    assert schema_errors(spec) == [], "now refused by the schema: move it to INVALID"
    assert cel_errors(spec) == [], "now refused by a CEL rule: move it to CRON_CEL"


@pytest.mark.parametrize("name", CRON_CEL)
def test_the_schedule_rules_refuse_bad_cron_as_python_does(name: str) -> None:
    schedule, message = CRON_CEL[name]
    spec = window(schedule)
    assert schema_errors(spec) == [], "refused by the OpenAPI part already"
    refused = cel_schedule_messages(schedule)
    assert refused and refused[0].startswith(message), refused
    # The Python reader says the same, naming the field (the controller's condition and event).
    said = python_errors(spec)
    assert said == [f"spec.maintenanceWindows[0].schedule: {m}" for m in refused]


def test_the_schedule_rules_are_policys_word_for_word() -> None:
    """One grammar: the CRD carries ``policies.SCHEDULE_RULES``, rule and message."""
    found = [(v["rule"], v["message"]) for v in SCHEDULE["x-kubernetes-validations"]]
    assert found == [(r.rule, r.message) for r in policies.SCHEDULE_RULES]
    for rule, message in found:
        assert "\n" not in rule and len(message) < 200
    # The apiserver estimates each rule's cost from the string's maxLength (times 32 windows).
    assert SCHEDULE["maxLength"] <= 128
    assert FIELDS["maintenanceWindows"]["maxItems"] <= 32


def test_every_cel_message_names_what_is_wrong() -> None:
    for v in SCHEDULE["x-kubernetes-validations"]:
        assert v["message"].startswith(("the ", "a range", "never fires")), v["message"]


@pytest.mark.parametrize("name", SCHEMA_STRICTER)
def test_where_the_schema_is_stricter(name: str) -> None:
    spec = SCHEMA_STRICTER[name]
    assert python_errors(spec) == [], "now refused by Python too: move it to INVALID"
    assert schema_errors(spec), "the schema accepted it: move it to VALID"


def test_duration_fields_share_one_pattern_and_a_cel_rule() -> None:
    window_duration = FIELDS["maintenanceWindows"]["items"]["properties"]["duration"]
    min_notice = FIELDS["takeover"]["items"]["properties"]["minNotice"]
    notify_timeout = FIELDS["notify"]["items"]["properties"]["timeout"]
    rule_min_runtime = FIELDS["protect"]["items"]["properties"]["minRuntime"]
    nodes = [FIELDS[name] for name in DURATION_FIELDS] + [
        window_duration,
        min_notice,
        notify_timeout,
        rule_min_runtime,
    ]
    assert len({node["pattern"] for node in nodes}) == 1
    for node in nodes:
        assert node["type"] == "string"
        assert node["maxLength"] <= 64  # bounds the CEL cost estimate
        assert cel_rules(node)


def test_the_apiserver_defaults_pass_the_schema_and_python() -> None:
    """Defaults are validated by the apiserver, too: a full, defaulted spec is valid."""
    defaults = {name: node["default"] for name, node in FIELDS.items() if "default" in node}
    assert schema_errors(defaults) == []
    assert python_errors(defaults) == []


# ---- properties: the patterns and the Python parsers agree ----

DURATION_PATTERN = re.compile(FIELDS["noticeLead"]["pattern"])
PERCENT_PATTERN = re.compile(FIELDS["defaultMinAvailable"]["pattern"])
duration_parts = st.tuples(
    st.sampled_from(["", "0", "1", "15", "007", "1.5", ".5", "2.", "10.25"]),
    st.sampled_from(["h", "m", "s", "ms", "us", "µs", "μs", "ns", "", "d", "x"]),
)


@given(st.lists(duration_parts, max_size=4), st.sampled_from(["", "+", "-"]))
@example(parts=[("15", ""), ("007", ""), ("007", "h")], sign="")  # beyond Go's range: well formed
def test_duration_pattern_matches_exactly_the_unsigned_go_durations(
    parts: list[tuple[str, str]], sign: str
) -> None:
    text = sign + "".join(number + unit for number, unit in parts)
    try:
        durations.parse_duration(text)
        parsed = True
    except durations.DurationTooLarge:
        parsed = True  # well formed: the pattern judges the form, the controller the size
    except durations.DurationError:
        parsed = False
    if sign == "-":  # negative: refused by both ("-0" aside, see SCHEMA_STRICTER)
        assert DURATION_PATTERN.search(text) is None
        return
    assert (DURATION_PATTERN.search(text) is not None) == parsed, text


@given(st.text(alphabet="0123456789%-+.x", max_size=6) | st.from_regex(r"\A[0-9]{1,4}%?\Z"))
def test_percent_pattern_matches_exactly_what_python_reads(text: str) -> None:
    try:
        intorpercent.parse_int_or_percent(text)
        parsed = True
    except intorpercent.IntOrPercentError:
        parsed = False
    assert (PERCENT_PATTERN.search(text) is not None) == parsed, text


@given(st.integers(min_value=-(2**40), max_value=2**40))
def test_integer_floors_agree(number: int) -> None:
    spec = {"defaultMinAvailable": number}
    assert (python_errors(spec) == []) == (schema_errors(spec) == [])


def test_translation_keeps_the_original_schema_untouched() -> None:
    before = copy.deepcopy(SCHEMA)
    to_json_schema(SCHEMA)
    assert before == SCHEMA


# ---- the schedule's CEL rules and croniter agree ----

MINUTES = st.integers(0, 59).map(str)
HOURS = st.integers(0, 23).map(str)
DAYS = st.one_of(st.integers(1, 31).map(str), st.sampled_from(["29", "30", "31"]))
MONTHS = st.one_of(
    st.integers(1, 12).map(str),
    st.sampled_from(["jan", "feb", "Apr", "JUN", "sep", "nov", "dec", "2", "02", "4", "11"]),
)
WEEKDAYS = st.one_of(st.integers(0, 7).map(str), st.sampled_from(["sun", "Mon", "fri", "SAT"]))


def cron_field(
    values: st.SearchStrategy[str], *, extra: tuple[str, ...] = ()
) -> st.SearchStrategy[str]:
    element = st.one_of(
        st.just("*"),
        values,
        st.builds(lambda a, b: f"{a}-{b}", values, values),
    )
    stepped = st.builds(
        lambda e, step: f"{e}/{step}" if step else e,
        element,
        st.one_of(st.none(), st.integers(1, 13)),
    )
    listed = st.lists(
        st.one_of(stepped, st.sampled_from(extra)) if extra else stepped, min_size=1, max_size=3
    )
    return st.one_of(listed.map(",".join), *(st.just(x) for x in extra))


SCHEDULES = st.builds(
    lambda *fields: " ".join(fields),
    cron_field(MINUTES),
    cron_field(HOURS),
    cron_field(DAYS, extra=("L", "?")),
    cron_field(MONTHS),
    st.one_of(st.just("*"), st.just("?"), cron_field(WEEKDAYS)),
)


@given(SCHEDULES)
def test_what_the_cel_rules_let_through_croniter_reads(schedule: str) -> None:
    """A schedule the CRD takes is read by the controller too; it refuses one only because it
    never fires with a range of months (CONTROLLER_ONLY), never for its syntax or ranges."""
    if cel_schedule_messages(schedule):
        assert python_errors(window(schedule))  # the same rules, in Python
        return
    try:
        windows.MaintenanceWindow.create(schedule=schedule, duration="1h")
    except windows.WindowError as err:
        assert err.field == "schedule"
        assert "never fires" in err.reason, err.reason
        month = schedule.split()[3]
        assert "-" in month, f"{schedule!r} never fires, yet the CEL rules took it"


def test_never_fires_agrees_with_croniter_on_single_values_and_steps() -> None:
    """Every day of the month written as 29, 30, 31, a step or 30-31, with every month written
    as a value, a name or a value with a step, on any day of the week: the CEL rule refuses
    exactly what croniter finds never fires."""
    days = ["29", "30", "31", "30/1", "30/2", "31/7", "30-31", "30-31/3", "30,31", "31,29"]
    months = [str(m) for m in range(1, 13)] + ["02", "feb", "Apr", "JUN", "sep", "NOV", "dec"]
    months += [f"{m}/{step}" for m in (2, 4, 6, 9, 11) for step in range(1, 14)]
    months += ["2,4", "4,6,9", "feb,mar", "11,2/7"]
    for day in days:
        for month in months:
            for weekday in ("*", "?", "1", "*,1"):
                schedule = f"0 0 {day} {month} {weekday}"
                try:
                    windows.MaintenanceWindow.create(schedule=schedule, duration="1h")
                    fires = True
                except windows.WindowError as err:
                    assert "never fires" in err.reason, (schedule, err.reason)
                    fires = False
                messages = cel_schedule_messages(schedule)
                assert len(messages) <= 1, messages
                assert (messages == []) == fires, schedule


# ==== the Disruption CRD (deploy/crds/disruption.yaml) against manifests/disruptions.py ====
#
# The same checks for the Disruption objects: ``object_for`` and ``status_document`` write only
# what the schema holds, the enums are the domain's, and the schema, the CEL rules and
# ``request_from_object`` agree on sample documents. The OpenAPI part runs through ``jsonschema``
# as above, with a ``date-time`` check that is the apiserver's (kube-openapi's ``IsDateTime``).
# The CEL rules are evaluated offline by their Python twins (``DIS_CEL``, one per rule, which
# ``test_every_disruption_rule_has_a_twin`` keeps complete); tests/e2e/test_crd.py runs the same
# samples, transitions included, through a real apiserver, which shows the twins right.

DIS_CRD_PATH = ROOT / "deploy" / "crds" / "disruption.yaml"
DIS_CHART_CRD_PATH = ROOT / "deploy" / "helm" / "graceguard" / "crds" / "disruption.yaml"
DIS_CRD: dict[str, Any] = yaml.safe_load(DIS_CRD_PATH.read_text(encoding="utf-8"))
DIS_VERSION: dict[str, Any] = DIS_CRD["spec"]["versions"][0]
DIS_SCHEMA: dict[str, Any] = DIS_VERSION["schema"]["openAPIV3Schema"]
DIS_SPEC: dict[str, Any] = DIS_SCHEMA["properties"]["spec"]
DIS_FIELDS: dict[str, Any] = DIS_SPEC["properties"]
DIS_STATUS: dict[str, Any] = DIS_SCHEMA["properties"]["status"]
CREATED = "2026-11-21T05:00:00Z"
"""The creation time the samples get when ``request_from_object`` reads them, as the apiserver
would set it."""

_GO_DATE = re.compile(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z")
_GO_TIME = re.compile(r"\A([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z")


def go_date_time(text: object) -> bool:
    """kube-openapi's ``strfmt.IsDateTime``, which the apiserver checks ``format: date-time``
    with: a date (Go's 2006-01-02), then after a ``t`` (any case) a time with a zone."""
    if not isinstance(text, str):
        return True
    if len(text) < 4:
        return False
    parts = text.lower().split("t")
    if len(parts) < 2 or not _GO_DATE.match(parts[0]):
        return False
    try:
        dt.date.fromisoformat(parts[0])
    except ValueError:
        return False
    m = _GO_TIME.match(parts[1])
    return m is not None and m[1] <= "23" and m[2] <= "59" and m[3] <= "59"


FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("date-time")(go_date_time)
DIS_VALIDATOR = jsonschema.Draft4Validator(to_json_schema(DIS_SCHEMA), format_checker=FORMATS)


def with_defaults(schema: Mapping[str, Any], value: object) -> object:
    """``value`` with the schema's defaults filled in, as the apiserver does before validating."""
    if isinstance(value, Mapping):
        out = dict(value)
        for name, sub in schema.get("properties", {}).items():
            if name not in out and "default" in sub:
                out[name] = copy.deepcopy(sub["default"])
            if name in out:
                out[name] = with_defaults(sub, out[name])
        return out
    if isinstance(value, list) and "items" in schema:
        return [with_defaults(schema["items"], item) for item in value]
    return value


def _seconds(text: str) -> float | None:
    """A Go duration in seconds; ``None`` when CEL's ``duration()`` would fail on it."""
    try:
        return durations.parse_duration(text).total_seconds()
    except durations.DurationError:
        return None


def _instant(text: str) -> dt.datetime:
    return times.parse_time(text)


Twin = Callable[[Any, Any], bool]
DIS_CEL: dict[str, Twin] = {
    # each CEL rule of the Disruption CRD, word for word (whitespace folded), and its twin:
    # (self, oldSelf) -> whether the rule holds; oldSelf is None on create.
    "(has(self.scope) && self.scope == 'pod') == has(self.pod)": (
        lambda s, _o: (s.get("scope") == "pod") == ("pod" in s)
    ),
    "!has(self.class) || self.class != 'imminent' || has(self.deadline)": (
        lambda s, _o: s.get("class") != "imminent" or "deadline" in s
    ),
    "!has(self.deadline) || !has(self.requestedAt) || self.deadline > self.requestedAt": (
        lambda s, _o: (
            "deadline" not in s
            or "requestedAt" not in s
            or _instant(s["deadline"]) > _instant(s["requestedAt"])
        )
    ),
    "self == oldSelf": lambda s, o: s == o,
    "self.provider != 'aws-autoscaling' || (has(self.autoScalingGroup) && "
    "has(self.lifecycleHook) && (has(self.instanceId) || has(self.lifecycleActionToken)))": (
        lambda s, _o: (
            s.get("provider") != "aws-autoscaling"
            or (
                "autoScalingGroup" in s
                and "lifecycleHook" in s
                and ("instanceId" in s or "lifecycleActionToken" in s)
            )
        )
    ),
    "duration(self) > duration('0s')": lambda s, _o: (_seconds(s) or 0) > 0,
    "duration(self) <= duration('48h')": (
        lambda s, _o: (n := _seconds(s)) is not None and n <= 48 * 3600
    ),
}


def cel_violations(
    schema: Mapping[str, Any], value: object, old: object = None, path: str = ""
) -> list[str]:
    """The messages (prefixed with the field's path) of the rules ``value`` breaks, given the
    stored ``old`` for an update; transition rules (``oldSelf``) only where both hold the field,
    as the apiserver evaluates them. ``value`` is taken with its defaults already applied."""
    found: list[str] = []
    for v in schema.get("x-kubernetes-validations", []):
        rule = " ".join(v["rule"].split())
        if "oldSelf" in rule and old is None:
            continue
        if not DIS_CEL[rule](value, old):
            found.append(f"{path}: {' '.join(v['message'].split())}")
    if isinstance(value, Mapping):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                was = old.get(name) if isinstance(old, Mapping) else None
                found += cel_violations(sub, value[name], was, f"{path}.{name}".lstrip("."))
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            found += cel_violations(schema["items"], item, None, f"{path}[{i}]")
    return found


def dis_document(spec: Mapping[str, Any], *, name: str = "d1") -> dict[str, Any]:
    return {
        "apiVersion": disruptions.API_VERSION,
        "kind": disruptions.KIND,
        "metadata": {"name": name},
        "spec": dict(spec),
    }


def dis_schema_errors(doc: Mapping[str, Any]) -> list[str]:
    return [
        f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}"
        for e in DIS_VALIDATOR.iter_errors(with_defaults(DIS_SCHEMA, doc))
    ]


def dis_cel_errors(doc: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[str]:
    defaulted = with_defaults(DIS_SCHEMA, doc)
    was = with_defaults(DIS_SCHEMA, old) if old is not None else None
    return cel_violations(DIS_SCHEMA, defaulted, was)


def dis_python_errors(spec: Mapping[str, Any]) -> list[str]:
    doc = dis_document(spec)
    doc["metadata"]["creationTimestamp"] = CREATED
    try:
        disruptions.request_from_object(doc)
    except ManifestError as err:
        return [str(err)]
    return []


HOLD = {
    "provider": "aws-autoscaling",
    "autoScalingGroup": "eks-workers-2c4f",
    "lifecycleHook": "graceguard-drain",
    "instanceId": "i-0123456789abcdef0",
    "heartbeatTimeout": "5m",
}
NODE = "ip-10-0-1-23.eu-west-1.compute.internal"

DIS_VALID: dict[str, dict[str, Any]] = {
    "minimal": {"node": "n1", "source": "drain"},
    "a drain": {
        "node": NODE,
        "scope": "node",
        "source": "drain",
        "class": "voluntary",
        "requestedAt": "2026-11-21T05:00:00Z",
        "reason": "kernel upgrade",
        "requestedBy": "kubernetes-admin",
    },
    "a takeover of a node": {
        "node": NODE,
        "source": "cluster-autoscaler",
        "requestedAt": "2026-11-21T05:00:00Z",
        "reason": "eviction of batch/train-x7k2 by cluster-autoscaler taken over by graceguard",
        "requestedBy": "system:serviceaccount:kube-system:cluster-autoscaler",
    },
    "a takeover of a pod": {
        "node": "n1",
        "scope": "pod",
        "pod": "batch/train-x7k2",
        "source": "eviction-api",
    },
    "a shutdown": {
        "node": "n1",
        "scope": "whole-node",
        "source": "node-shutdown",
        "class": "imminent",
        "requestedAt": "2026-11-21T05:00:00Z",
        "deadline": "2026-11-21T05:00:30Z",
    },
    "spot with offsets and fractions": {
        "node": "n1",
        "source": "spot-interruption",
        "class": "imminent",
        "requestedAt": "2026-11-21T06:00:00.25+01:00",
        "deadline": "2026-11-21T05:02:00.5Z",
    },
    "a deadline without requestedAt": {
        "node": "n1",
        "source": "drain",
        "deadline": "2099-01-01T00:00:00Z",
    },
    "every source character": {"node": "n1", "source": "a.B_c:d-9"},
    "one-character source": {"node": "n1", "source": "x"},
    "longest source": {"node": "n1", "source": "x" * 63},
    "longest node": {"node": ".".join(["a" * 63] * 3 + ["b" * 61]), "source": "drain"},
    "an Auto Scaling hold": {
        "node": NODE,
        "source": "asg-scale-in",
        "requestedAt": "2026-11-21T05:00:00Z",
        "hold": {**HOLD, "cap": "2026-11-23T05:00:00Z"},
    },
    "a hold by token": {
        "node": "n1",
        "source": "asg-scale-in",
        "hold": {
            "provider": "aws-autoscaling",
            "autoScalingGroup": "workers",
            "lifecycleHook": "drain",
            "lifecycleActionToken": "3f3a8c7e-2f6b-4c1e-9d7a-0e5b6c4d3a21",
            "heartbeatTimeout": "48h",
        },
    },
    "empty reason": {"node": "n1", "source": "drain", "reason": ""},
}

DIS_INVALID: dict[str, dict[str, Any]] = {
    "hold without provider": {
        "node": "n1",
        "source": "asg",
        "hold": {k: v for k, v in HOLD.items() if k != "provider"},
    },
    "hold of another provider": {
        "node": "n1",
        "source": "asg",
        "hold": {**HOLD, "provider": "gcp"},
    },
    # refused by the OpenAPI part and by request_from_object
    "no source": {"node": "n1"},
    "no node": {"source": "drain"},
    "empty source": {"node": "n1", "source": ""},
    "multi-line source": {"node": "n1", "source": "drain\nnow"},
    "source ending in a newline": {"node": "n1", "source": "drain\n"},
    "source with a space": {"node": "n1", "source": "cluster autoscaler"},
    "source too long": {"node": "n1", "source": "x" * 64},
    "source starting with a dash": {"node": "n1", "source": "-drain"},
    "source a list": {"node": "n1", "source": ["drain"]},
    "empty node": {"node": "", "source": "drain"},
    "node a number": {"node": 7, "source": "drain"},
    "bad scope": {"node": "n1", "source": "drain", "scope": "rack"},
    "scope in capitals": {"node": "n1", "source": "drain", "scope": "Node"},
    "class failed": {"node": "n1", "source": "drain", "class": "failed"},
    "class unknown": {"node": "n1", "source": "drain", "class": "urgent"},
    "pod without a namespace": {"node": "n1", "source": "drain", "scope": "pod", "pod": "train"},
    "pod with two slashes": {"node": "n1", "source": "drain", "scope": "pod", "pod": "a/b/c"},
    "deadline in words": {"node": "n1", "source": "drain", "deadline": "tomorrow"},
    "deadline without a zone": {"node": "n1", "source": "drain", "deadline": "2099-01-01T05:00:00"},
    "deadline a number": {"node": "n1", "source": "drain", "deadline": 4102444800},
    "requestedAt out of range": {
        "node": "n1",
        "source": "drain",
        "requestedAt": "2026-13-01T00:00:00Z",
    },
    "requestedAt in words": {"node": "n1", "source": "drain", "requestedAt": "now"},
    "time with a lower-case z": {
        "node": "n1",
        "source": "drain",
        "requestedAt": "2026-11-21T05:00:00z",
    },
    "reason a number": {"node": "n1", "source": "drain", "reason": 5},
    "hold not an object": {"node": "n1", "source": "asg", "hold": "workers"},
    "hold without heartbeatTimeout": {
        "node": "n1",
        "source": "asg",
        "hold": {k: v for k, v in HOLD.items() if k != "heartbeatTimeout"},
    },
    "negative heartbeatTimeout": {
        "node": "n1",
        "source": "asg",
        "hold": {**HOLD, "heartbeatTimeout": "-5m"},
    },
    "heartbeatTimeout without a unit": {
        "node": "n1",
        "source": "asg",
        "hold": {**HOLD, "heartbeatTimeout": "300"},
    },
    "heartbeatTimeout a number": {
        "node": "n1",
        "source": "asg",
        "hold": {**HOLD, "heartbeatTimeout": 300},
    },
    "hold with a bad cap": {"node": "n1", "source": "asg", "hold": {**HOLD, "cap": "in two days"}},
}

DIS_CEL_ONLY: dict[str, tuple[dict[str, Any], str]] = {
    # well formed to the OpenAPI part; refused by a CEL rule (its message, start) and by
    # request_from_object
    "an Auto Scaling hold without its hook": (
        {
            "node": "n1",
            "source": "asg",
            "hold": {"provider": "aws-autoscaling", "heartbeatTimeout": "5m"},
        },
        "an aws-autoscaling hold needs autoScalingGroup",
    ),
    "an Auto Scaling hold naming no lifecycle action": (
        {
            "node": "n1",
            "source": "asg",
            "hold": {
                "provider": "aws-autoscaling",
                "autoScalingGroup": "workers",
                "lifecycleHook": "graceguard",
                "heartbeatTimeout": "5m",
            },
        },
        "an aws-autoscaling hold needs autoScalingGroup",
    ),
    "absurd heartbeatTimeout": (
        {"node": "n1", "source": "asg", "hold": {**HOLD, "heartbeatTimeout": "1000h"}},
        "must be at most 48h",
    ),
    "pod without scope pod": (
        {"node": "n1", "source": "eviction-api", "pod": "batch/a"},
        "spec.pod is required exactly when spec.scope is pod",
    ),
    "pod with scope whole-node": (
        {"node": "n1", "source": "eviction-api", "scope": "whole-node", "pod": "batch/a"},
        "spec.pod is required exactly when spec.scope is pod",
    ),
    "scope pod without pod": (
        {"node": "n1", "source": "eviction-api", "scope": "pod"},
        "spec.pod is required exactly when spec.scope is pod",
    ),
    "imminent without deadline": (
        {"node": "n1", "source": "spot-interruption", "class": "imminent"},
        "an imminent disruption needs a spec.deadline",
    ),
    "deadline before requestedAt": (
        {
            "node": "n1",
            "source": "drain",
            "requestedAt": "2026-11-21T05:00:00Z",
            "deadline": "2026-11-21T03:00:00Z",
        },
        "spec.deadline must be after spec.requestedAt",
    ),
    "deadline at requestedAt": (
        {
            "node": "n1",
            "source": "drain",
            "requestedAt": "2026-11-21T05:00:00Z",
            "deadline": "2026-11-21T06:00:00+01:00",
        },
        "spec.deadline must be after spec.requestedAt",
    ),
    "zero heartbeatTimeout": (
        {"node": "n1", "source": "asg", "hold": {**HOLD, "heartbeatTimeout": "0s"}},
        "must be a positive duration",
    ),
    "heartbeatTimeout beyond Go": (
        {"node": "n1", "source": "asg", "hold": {**HOLD, "heartbeatTimeout": "9999999999h"}},
        "must be a positive duration",
    ),
}

DIS_SCHEMA_STRICTER: dict[str, dict[str, Any]] = {
    # read by request_from_object (lenient with objects stored before the schema was tightened),
    # refused by the apiserver
    "unknown field": {"node": "n1", "source": "drain", "nodes": ["n2"]},
    "node not a DNS name": {"node": "Node_1", "source": "drain"},
    "pod in capitals": {"node": "n1", "source": "drain", "scope": "pod", "pod": "Batch/Train"},
    "empty pod": {"node": "n1", "source": "drain", "pod": ""},
    "empty scope": {"node": "n1", "source": "drain", "scope": ""},
    "time with a space": {"node": "n1", "source": "drain", "requestedAt": "2026-11-21 05:00:00Z"},
    "time without seconds": {"node": "n1", "source": "drain", "requestedAt": "2026-11-21T05:00Z"},
    "time before 1970": {"node": "n1", "source": "drain", "requestedAt": "1969-12-31T23:59:59Z"},
    "reason too long": {"node": "n1", "source": "drain", "reason": "x" * 1025},
    "instance id in words": {
        "node": "n1",
        "source": "asg",
        "hold": {**HOLD, "instanceId": "worker"},
    },
}

DIS_CONTROLLER_ONLY: dict[str, dict[str, Any]] = {
    # taken by the apiserver (it cannot compare with the creation time), refused by
    # request_from_object: reported in the object's status, never acted on
    "deadline already past": {"node": "n1", "source": "drain", "deadline": "2020-01-01T00:00:00Z"},
    "imminent, deadline already past": {
        "node": "n1",
        "source": "spot-interruption",
        "class": "imminent",
        "deadline": "2026-11-21T04:59:59Z",
    },
}

DIS_IMMUTABLE: dict[str, tuple[dict[str, Any], dict[str, Any], str]] = {
    # (created, then changed to, the message of the rule that refuses the change)
    "node": (
        {"node": "n1", "source": "drain"},
        {"node": "n2", "source": "drain"},
        "spec.node cannot be changed",
    ),
    "source": (
        {"node": "n1", "source": "drain"},
        {"node": "n1", "source": "upgrade"},
        "spec.source cannot be changed",
    ),
    "scope": (
        {"node": "n1", "source": "drain"},
        {"node": "n1", "source": "drain", "scope": "whole-node"},
        "spec.scope cannot be changed",
    ),
    "pod": (
        {"node": "n1", "source": "drain", "scope": "pod", "pod": "a/b"},
        {"node": "n1", "source": "drain", "scope": "pod", "pod": "a/c"},
        "spec.pod cannot be changed",
    ),
}

DIS_MUTABLE: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # (created, then changed to): changes the apiserver takes
    "deadline moved": (
        {"node": "n1", "source": "drain", "deadline": "2099-01-01T00:00:00Z"},
        {"node": "n1", "source": "drain", "deadline": "2099-01-02T00:00:00Z"},
    ),
    "reason": (
        {"node": "n1", "source": "drain"},
        {"node": "n1", "source": "drain", "reason": "now with a reason"},
    ),
    "hold added": (
        {"node": "n1", "source": "asg"},
        {"node": "n1", "source": "asg", "hold": HOLD},
    ),
}


def test_the_chart_carries_the_same_disruption_crd() -> None:
    assert DIS_CHART_CRD_PATH.read_bytes() == DIS_CRD_PATH.read_bytes(), (
        f"{DIS_CHART_CRD_PATH.relative_to(ROOT)} differs from {DIS_CRD_PATH.relative_to(ROOT)}: "
        "run `make crds`"
    )


def test_the_chart_carries_every_crd_and_nothing_else() -> None:
    sources = sorted(p.name for p in (ROOT / "deploy" / "crds").glob("*.yaml"))
    chart = sorted(p.name for p in DIS_CHART_CRD_PATH.parent.iterdir())
    assert chart == sources == ["disruption.yaml", "disruptionpolicy.yaml"]


def test_disruption_names_scope_and_subresources() -> None:
    spec = DIS_CRD["spec"]
    assert DIS_CRD["metadata"]["name"] == "disruptions.graceguard.io"
    assert f"{spec['group']}/{DIS_VERSION['name']}" == disruptions.API_VERSION
    assert spec["names"]["kind"] == disruptions.KIND
    assert spec["scope"] == "Cluster"
    assert spec["names"]["shortNames"] == ["gdis"]
    assert spec["names"]["categories"] == ["graceguard"] == CRD["spec"]["names"]["categories"]
    assert [v["name"] for v in spec["versions"]] == ["v1alpha1"]
    assert DIS_VERSION["served"] and DIS_VERSION["storage"]
    assert DIS_VERSION["subresources"] == {"status": {}}
    assert DIS_CRD["metadata"]["labels"] == CRD["metadata"]["labels"]


def test_disruption_printer_columns() -> None:
    """``kubectl get gdis``: node, source, phase, pods left, next eviction, deadline, age; the
    scope, pod and class with ``-o wide``."""
    columns = [
        (c["name"], c["jsonPath"], c["type"], c.get("priority", 0))
        for c in DIS_VERSION["additionalPrinterColumns"]
    ]
    assert columns == [
        ("Node", ".spec.node", "string", 0),
        ("Source", ".spec.source", "string", 0),
        ("Phase", ".status.phase", "string", 0),
        ("Pods", ".status.podsRemaining", "integer", 0),
        ("Next", ".status.nextEvictionAt", "date", 0),
        ("Deadline", ".spec.deadline", "date", 0),
        ("Age", ".metadata.creationTimestamp", "date", 0),
        ("Scope", ".spec.scope", "string", 1),
        ("Pod", ".spec.pod", "string", 1),
        ("Class", ".spec.class", "string", 1),
    ]
    for column in DIS_VERSION["additionalPrinterColumns"]:
        if column["name"] != "Age":
            assert column.get("description"), column["name"]


def test_every_disruption_field_is_described_and_typed() -> None:
    for path, node in walk(DIS_SCHEMA, "<root>"):
        if path in ("<root>", "<root>.metadata"):
            continue
        assert node.get("description"), f"{path} has no description"
        assert "type" in node, f"{path} has no type"


def test_disruption_enums_are_the_domains() -> None:
    assert DIS_FIELDS["scope"]["enum"] == [s.value for s in disruption.Scope]
    assert DIS_FIELDS["scope"]["default"] == disruption.Scope.NODE.value
    # "failed" is a class the engine records, never one a Disruption asks for
    readable = [c.value for c in disruption.DisruptionClass if c != "failed"]
    assert DIS_FIELDS["class"]["enum"] == readable
    assert DIS_FIELDS["class"]["default"] == disruption.DisruptionClass.VOLUNTARY.value
    assert DIS_STATUS["properties"]["phase"]["enum"] == [p.value for p in disruption.Phase]
    for phase in disruption.Phase:  # each phase explained for kubectl explain
        assert f"{phase.value}:" in DIS_STATUS["properties"]["phase"]["description"]


def test_disruption_fields_are_those_python_reads_and_writes() -> None:
    """Every spec field is one ``object_for`` writes or the reader takes from the sources that
    hold a node (``hold``); every status field one ``status_document`` writes, or one kept for
    the parts that follow (conditions, observedGeneration, the hold's heartbeat)."""
    full = disruption.DisruptionRequest(
        id="d1",
        node="n1",
        source="drain",
        disruption_class=disruption.DisruptionClass.IMMINENT,
        requested_at=T0,
        deadline=T0 + dt.timedelta(hours=1),
        scope=disruption.Scope.POD,
        pod="a/b",
        reason="why",
        requested_by="who",
        taken_over=True,
    )
    written = disruptions.object_for(full)["spec"]
    assert set(DIS_FIELDS) == set(written) | {"hold"}
    assert set(DIS_SPEC["required"]) == {"node", "source"}
    status = disruptions.status_document(
        disruption.DisruptionStatus(disruption.Phase.DONE, (disruption.PodLeft("a/b", T0),), T0)
    )
    assert set(DIS_STATUS["properties"]) == set(status) | {
        "conditions",
        "observedGeneration",
        "hold",
    }
    pods = DIS_STATUS["properties"]["pods"]
    assert set(pods["items"]["properties"]) == set(status["pods"][0])
    assert pods["maxItems"] == disruptions.MAX_STATUS_PODS
    hold = DIS_FIELDS["hold"]["properties"]
    assert {"heartbeatTimeout", "cap"} <= set(hold)  # what _hold reads
    assert set(DIS_STATUS["properties"]["hold"]["properties"]) == {"lastHeartbeat"}


def test_nulls_the_status_document_writes_are_nullable() -> None:
    status = disruptions.status_document(
        disruption.DisruptionStatus(disruption.Phase.DRAINING, (disruption.PodLeft("a/b", None),))
    )
    props = DIS_STATUS["properties"]
    nulls = {k for k, v in status.items() if v is None}
    assert nulls == {"nextEvictionAt", "completedAt"}
    for name in nulls:
        assert props[name]["nullable"] is True
    assert status["pods"][0]["evictionAt"] is None
    assert props["pods"]["items"]["properties"]["evictionAt"]["nullable"] is True


def test_disruption_source_is_python_check_source() -> None:
    source = DIS_FIELDS["source"]
    assert source["pattern"] == disruptions.SOURCE_PATTERN.pattern
    assert source["maxLength"] == disruptions.SOURCE_MAX
    # a policy's takeover names sources the same way, or "*"
    takeover = FIELDS["takeover"]["items"]["properties"]["source"]
    assert takeover["pattern"] == "^([*]|" + disruptions.SOURCE_PATTERN.pattern[1:-1] + ")$"
    assert takeover["maxLength"] == disruptions.SOURCE_MAX
    assert takeover["default"] == policy.EVERY_SOURCE
    # and so does its windowedSources (a name no source has would hold nothing to the windows)
    windowed = FIELDS["windowedSources"]["items"]
    assert windowed["pattern"] == disruptions.SOURCE_PATTERN.pattern
    assert windowed["maxLength"] == disruptions.SOURCE_MAX


def test_disruption_durations_are_the_policys() -> None:
    timeout = DIS_FIELDS["hold"]["properties"]["heartbeatTimeout"]
    assert timeout["pattern"] == FIELDS["noticeLead"]["pattern"]
    assert timeout["maxLength"] <= 64
    assert "duration(self) > duration('0s')" in cel_rules(timeout)
    assert f"duration(self) <= duration('{disruption.ASG_HOOK_CAP.days * 24}h')" in cel_rules(
        timeout
    )


def test_the_status_conditions_are_metav1_conditions_as_the_policys() -> None:
    mine = DIS_STATUS["properties"]["conditions"]
    policys = SCHEMA["properties"]["status"]["properties"]["conditions"]
    assert mine["x-kubernetes-list-type"] == "map"
    assert mine["x-kubernetes-list-map-keys"] == ["type"]
    assert mine["items"]["required"] == policys["items"]["required"]

    def bare(node: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in node.items() if k != "description"}

    ours, theirs = mine["items"]["properties"], policys["items"]["properties"]
    assert {k: bare(v) for k, v in ours.items()} == {k: bare(v) for k, v in theirs.items()}


def test_every_disruption_rule_has_a_twin() -> None:
    rules = {rule for _, node in walk(DIS_SCHEMA, "") for rule in cel_rules(node)}
    assert rules == set(DIS_CEL), "a CEL rule changed: change its twin in DIS_CEL as well"
    for _, node in walk(DIS_SCHEMA, ""):
        for v in node.get("x-kubernetes-validations", []):
            assert v.get("message"), v["rule"]


@pytest.mark.parametrize("name", DIS_VALID)
def test_valid_disruptions_pass_all(name: str) -> None:
    spec = DIS_VALID[name]
    assert dis_python_errors(spec) == []
    assert dis_schema_errors(dis_document(spec)) == []
    assert dis_cel_errors(dis_document(spec)) == []


@pytest.mark.parametrize("name", DIS_INVALID)
def test_invalid_disruptions_fail_schema_and_python(name: str) -> None:
    spec = DIS_INVALID[name]
    assert dis_python_errors(spec), "the Python reader accepted it"
    assert dis_schema_errors(dis_document(spec)), "the schema accepted it"


@pytest.mark.parametrize("name", DIS_CEL_ONLY)
def test_disruption_cel_rules_refuse_what_the_schema_cannot(name: str) -> None:
    spec, message = DIS_CEL_ONLY[name]
    assert dis_python_errors(spec), "the Python reader accepted it"
    assert dis_schema_errors(dis_document(spec)) == [], "refused by the OpenAPI part: INVALID"
    refused = dis_cel_errors(dis_document(spec))
    assert refused and all(m.startswith("spec") for m in refused), refused
    assert any(message in m for m in refused), refused


@pytest.mark.parametrize("name", DIS_SCHEMA_STRICTER)
def test_where_the_disruption_schema_is_stricter(name: str) -> None:
    spec = DIS_SCHEMA_STRICTER[name]
    assert dis_python_errors(spec) == [], "now refused by Python too: move it to DIS_INVALID"
    assert dis_schema_errors(dis_document(spec)), "the schema accepted it"


@pytest.mark.parametrize("name", DIS_CONTROLLER_ONLY)
def test_what_only_the_controller_refuses_in_a_disruption(name: str) -> None:
    spec = DIS_CONTROLLER_ONLY[name]
    assert dis_python_errors(spec), "the Python reader accepted it"
    assert dis_schema_errors(dis_document(spec)) == []
    assert dis_cel_errors(dis_document(spec)) == []


@pytest.mark.parametrize("name", DIS_IMMUTABLE)
def test_what_cannot_change(name: str) -> None:
    before, after, message = DIS_IMMUTABLE[name]
    assert dis_cel_errors(dis_document(after)) == []  # a fine object to create
    refused = dis_cel_errors(dis_document(after), dis_document(before))
    assert [m for m in refused if message in m] == refused != [], refused


@pytest.mark.parametrize("name", DIS_MUTABLE)
def test_what_may_change(name: str) -> None:
    before, after = DIS_MUTABLE[name]
    assert dis_cel_errors(dis_document(after), dis_document(before)) == []
    assert dis_schema_errors(dis_document(after)) == []


@given(requests())
def test_what_object_for_writes_the_crd_takes(request: disruption.DisruptionRequest) -> None:
    doc = disruptions.object_for(request)
    assert dis_schema_errors(doc) == []
    assert dis_cel_errors(doc) == []
    assert DNS_SUBDOMAIN.match(doc["metadata"]["name"])
    assert len(doc["metadata"]["name"]) <= 253


@given(requests(), statuses())
def test_what_status_document_writes_the_crd_takes(
    request: disruption.DisruptionRequest, status: disruption.DisruptionStatus
) -> None:
    doc = disruptions.object_for(request)
    doc["status"] = disruptions.status_document(status)
    assert dis_schema_errors(doc) == []


def test_a_full_status_document_the_crd_takes() -> None:
    many = tuple(disruption.PodLeft(f"ns/p{i}", T0) for i in range(500))
    doc = dis_document({"node": "n1", "source": "drain"})
    doc["status"] = disruptions.status_document(
        disruption.DisruptionStatus(disruption.Phase.DRAINING, many, message="x" * 2000)
    )
    assert dis_schema_errors(doc) == []
    assert doc["status"]["podsRemaining"] == 500


GO_LIKE_TIMES = st.from_regex(
    r"\A[0-9]{4}-[01][0-9]-[0-3][0-9][tT][0-2][0-9]:[0-5][0-9]:[0-5][0-9](.[0-9]{1,12})?"
    r"([zZ]|[+-][0-9]{2}:[0-9]{2})\Z",
    fullmatch=True,
)


@given(st.one_of(st.text(max_size=40), GO_LIKE_TIMES))
@example("2026-11-21T05:00:00Z")
@example("2026-11-21t05:00:00.123456789+05:30")
@example("2026-02-30T05:00:00Z")
@example("2026-11-21T24:00:00Z")
@example("0001-01-01T00:00:00+01:00")  # beyond Python's datetime in UTC: OverflowError
@example("9999-12-31T23:59:59-01:00")
@example("2026-11-21T05:00:00x5Z")
@example("2026-11-21T05:00:00+99:00")
@example("2026-11-21T05:00:00z")
def test_what_the_date_time_format_takes_python_reads(text: str) -> None:
    """Every time the apiserver takes in a date-time field, request_from_object reads: the
    format (kube-openapi's check) takes 0001-01-01T00:00:00+01:00, a lower-case z or any
    character before the fraction, so the fields' pattern holds times to the form and the years
    Python's datetime reads."""
    for field in ("requestedAt", "cap"):
        spec: dict[str, Any] = {"node": "n1", "source": "drain", "requestedAt": text}
        if field == "cap":
            spec = {"node": "n1", "source": "asg", "hold": {**HOLD, "cap": text}}
        if dis_schema_errors(dis_document(spec)) == []:
            assert go_date_time(text)
            assert dis_python_errors(spec) == [], text


def test_date_times_share_one_pattern() -> None:
    nodes = [
        DIS_FIELDS["deadline"],
        DIS_FIELDS["requestedAt"],
        DIS_FIELDS["hold"]["properties"]["cap"],
    ]
    assert {n["format"] for n in nodes} == {"date-time"}
    assert len({n["pattern"] for n in nodes}) == 1


def test_notify_sinks_are_those_python_reads() -> None:
    """``spec.notify[]``: the fields, defaults, events, URL form and caps of
    ``domain/notifications.py``."""
    node = FIELDS["notify"]
    item = node["items"]
    assert node["maxItems"] == notifications.MAX_SINKS
    assert set(item["properties"]) == {"url", "events", "template", "timeout"}
    assert item["required"] == ["url"]
    props = item["properties"]
    assert props["url"]["pattern"] == notifications.URL_PATTERN
    assert props["url"]["maxLength"] == notifications.URL_MAX
    assert props["template"]["maxLength"] == notifications.TEMPLATE_MAX
    assert props["events"]["items"]["enum"] == [e.value for e in notifications.EVENTS]
    assert props["events"]["x-kubernetes-list-type"] == "set"
    defaults = {name: sub["default"] for name, sub in props.items() if "default" in sub}
    (sink,) = policies.policy_from_spec(
        {"notify": [{"url": "https://h/x", **defaults}]}, errors=[]
    ).notify
    assert sink == notifications.Sink(url="https://h/x")
    assert f'Default: "{notifications.DEFAULT_TEMPLATE}".' in " ".join(
        props["template"]["description"].split()
    )
    for name in notifications.PLACEHOLDERS:  # kubectl explain names every placeholder
        assert f"${{{name}}}" in props["template"]["description"]
