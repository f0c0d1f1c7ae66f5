"""The chart's values.schema.json under ``policy.spec``: the DisruptionPolicy CRD's ``spec`` schema
turned into JSON Schema, so that ``helm install``/``template``/``lint`` refuse a policy value the
CRD would refuse (a field of the wrong type, a misspelt field, a value out of its range) before
anything is applied, naming the value.

The rest of values.schema.json (the keys the chart's templates read) is written by hand; this
script rewrites only ``properties.policy.properties.spec``, from
``deploy/crds/disruptionpolicy.yaml``, so the CRD stays the one source of the policy's fields.
``make crds`` runs it; ``make crds-check`` runs it with ``--check`` (exit 1 when the file differs
from what it would write).

OpenAPI (a CRD's structural schema) to JSON Schema: ``nullable: true`` adds ``"null"`` to the
type, ``x-kubernetes-int-or-string`` is ``["integer", "string"]``, an object with ``properties``
refuses other keys (the API server would silently prune them), and what JSON Schema does not
read (``description``, ``default``, ``format``, the ``x-kubernetes-*`` extensions, among them the
CEL rules, which the API server still checks) is left out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
CRD = ROOT / "deploy" / "crds" / "disruptionpolicy.yaml"
SCHEMA = ROOT / "deploy" / "helm" / "graceguard" / "values.schema.json"

_KEPT = frozenset(
    {
        "type",
        "enum",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "required",
        "multipleOf",
    }
)


def converted(node: dict[str, Any]) -> dict[str, Any]:
    """One CRD schema node as JSON Schema."""
    out: dict[str, Any] = {key: value for key, value in node.items() if key in _KEPT}
    if node.get("x-kubernetes-int-or-string"):
        out["type"] = ["integer", "string"]
    if node.get("nullable") and "type" in out:
        types = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*types, "null"]
    if "properties" in node:
        out["properties"] = {name: converted(sub) for name, sub in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), dict):
        out["additionalProperties"] = converted(node["additionalProperties"])
    if "items" in node:
        out["items"] = converted(node["items"])
    for key in ("allOf", "anyOf", "oneOf"):
        if key in node:
            out[key] = [converted(sub) for sub in node[key]]
    if "not" in node:
        out["not"] = converted(node["not"])
    return out


def policy_spec_schema(crd: dict[str, Any]) -> dict[str, Any]:
    (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    return converted(version["schema"]["openAPIV3Schema"]["properties"]["spec"])


def rendered(schema_text: str, crd_text: str) -> str:
    schema = json.loads(schema_text)
    spec = policy_spec_schema(yaml.safe_load(crd_text))
    schema["properties"]["policy"]["properties"]["spec"] = spec
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is out of date")
    args = parser.parse_args(argv)
    current = SCHEMA.read_text(encoding="utf-8")
    wanted = rendered(current, CRD.read_text(encoding="utf-8"))
    if args.check:
        if current != wanted:
            print(
                f"{SCHEMA.relative_to(ROOT)}: policy.spec differs from {CRD.relative_to(ROOT)}: "
                "run make crds",
                file=sys.stderr,
            )
            return 1
        return 0
    SCHEMA.write_text(wanted, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
