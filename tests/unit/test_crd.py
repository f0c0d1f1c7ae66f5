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
- ``maintenanceWindows[].schedule``: ``policy.SCHEDULE_RULES``, word for word: each cron field in
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
import pathlib
import re
from collections.abc import Iterator, Mapping
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import example, given
from hypothesis import strategies as st

from graceguard.domain import durations, intorpercent, policy, windows

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
        "apiVersion": policy.API_VERSION,
        "kind": policy.KIND,
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
        policy.policy_from_manifest(document(spec))
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
    twins = {r.rule: r.holds for r in policy.SCHEDULE_RULES}
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
    assert f"{spec['group']}/{VERSION['name']}" == policy.API_VERSION
    assert spec["names"]["kind"] == policy.KIND
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
    policy.policy_from_spec({"noSuchField": 1}, errors=errors)
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
    assert policy.policy_from_spec(defaults, errors=[]) == policy.DEFAULT
    errors: list[policy.FieldError] = []
    policy.policy_from_spec(defaults, errors=errors)
    assert errors == []
    # Each default on its own, so a wrong one is named.
    for name, value in defaults.items():
        alone = policy.policy_from_spec({name: value}, errors=[])
        assert alone == policy.DEFAULT, f"spec.{name} default {value!r} differs from DEFAULT"
    # Fields whose absence means something have no default in the schema.
    assert set(FIELDS) - set(defaults) == {"maintenanceWindows", "windowedSources"}
    assert policy.DEFAULT.maintenance_windows == ()
    assert policy.DEFAULT.windowed_sources is None  # omitted: every voluntary source
    assert SPEC["default"] == {}  # a policy without spec gets every default, too


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
        "windowedSources": ["upgrade", "expiry"],
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
    "sources not a list": {"windowedSources": "upgrade"},
    "empty source": {"windowedSources": [""]},
    "source not a string": {"windowedSources": [1]},
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
    "source name too long": {"windowedSources": ["x" * 64]},
    # a takeover source is held to the form of a Disruption's spec.source
    "takeover source with a space": {"takeover": [{"source": "cluster autoscaler"}]},
    "takeover source on two lines": {"takeover": [{"source": "cluster\nautoscaler"}]},
    "takeover source too long": {"takeover": [{"source": "x" * 64}]},
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
    """One grammar: the CRD carries ``policy.SCHEDULE_RULES``, rule and message."""
    found = [(v["rule"], v["message"]) for v in SCHEDULE["x-kubernetes-validations"]]
    assert found == [(r.rule, r.message) for r in policy.SCHEDULE_RULES]
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
    nodes = [FIELDS[name] for name in DURATION_FIELDS] + [window_duration, min_notice]
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
