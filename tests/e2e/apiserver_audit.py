"""The e2e control plane's API server audit log (``conftest.control_plane``): who deleted what,
for a test whose objects vanish under it to say so in its failure message.

The policy keeps every deletion (level ``Request``: its DeleteOptions, e.g. the propagation
policy) but the Events' and Leases', and every write to Karpenter's objects (``karpenter.sh``,
``karpenter.kwok.sh``: creations and deletions with the object, updates and patches as
metadata). Nothing else is logged, so the file stays small over the whole tier.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import controlplane

KARPENTER_GROUPS = [{"group": "karpenter.sh"}, {"group": "karpenter.kwok.sh"}]
POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "None", "resources": [{"group": "coordination.k8s.io"}]},
        {"level": "None", "resources": [{"group": "", "resources": ["events"]}]},
        {"level": "None", "resources": [{"group": "events.k8s.io"}]},
        {
            "level": "RequestResponse",
            "verbs": ["create", "delete", "deletecollection"],
            "resources": KARPENTER_GROUPS,
        },
        {"level": "Metadata", "verbs": ["update", "patch"], "resources": KARPENTER_GROUPS},
        {"level": "Request", "verbs": ["delete", "deletecollection"]},
        {"level": "None"},
    ],
}
LOG = "audit.log"
"""In the control plane's ``logs/``."""


def apiserver_args(workdir: pathlib.Path) -> tuple[str, ...]:
    """kube-apiserver's flags for the policy, the policy written into ``workdir``."""
    return controlplane.audit_args(
        policy=POLICY, policy_file=workdir / "audit-policy.json", log=workdir / "logs" / LOG
    )


def entries(logs: pathlib.Path, mentioning: str) -> list[dict[str, Any]]:
    """The audit events (stage ``ResponseComplete``) whose object's name contains
    ``mentioning`` (a NodePool's name is in its NodeClaims' and their nodes' names too)."""
    path = logs / LOG
    if not path.exists():
        return []
    found = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("stage") == "ResponseComplete" and mentioning in _name(event):
            found.append(event)
    return found


def _name(event: dict[str, Any]) -> str:
    """The object's name; a creation's from its answer (the request may give only a
    ``generateName``)."""
    name = (event.get("objectRef") or {}).get("name")
    if name:
        return str(name)
    for key in ("responseObject", "requestObject"):
        meta = (event.get(key) or {}).get("metadata") or {}
        if meta.get("name") or meta.get("generateName"):
            return str(meta.get("name") or meta.get("generateName"))
    return ""


def summary(event: dict[str, Any]) -> str:
    """One line: when, the verb, the object, its answer, and who asked (user and user agent);
    a deletion's options, if it gave any."""
    ref = event.get("objectRef") or {}
    what = "/".join(p for p in (ref.get("resource"), ref.get("subresource")) if p)
    status = (event.get("responseStatus") or {}).get("code")
    user = (event.get("user") or {}).get("username")
    options = ""
    body = event.get("requestObject")
    if event.get("verb") in ("delete", "deletecollection") and isinstance(body, dict):
        options = " " + json.dumps(
            {k: v for k, v in body.items() if k not in ("kind", "apiVersion")}, sort_keys=True
        )
    made = ""
    answer = event.get("responseObject")
    if event.get("verb") == "create" and isinstance(answer, dict):
        meta = answer.get("metadata") or {}
        owners = ",".join(
            f"{o.get('kind')}/{o.get('name')}/{o.get('uid')}"
            for o in meta.get("ownerReferences") or []
        )
        made = f" uid={meta.get('uid')}" + (f" owners={owners}" if owners else "")
    return (
        f"{event.get('stageTimestamp')} {event.get('verb')} {what} {_name(event)}"
        f" -> {status} by {user} ({event.get('userAgent')}){made}{options}"
    )
