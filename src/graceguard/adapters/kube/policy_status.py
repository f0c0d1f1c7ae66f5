"""Writes what the controller made of the ``default`` DisruptionPolicy, and tells of a bad one.

- ``status.conditions``: ``Accepted`` True (reason ``Valid``), or False (reason ``InvalidSpec``)
  naming each field at fault and the policy that stays in force;
- ``status.inForce``: the spec last accepted and its generation, written when a spec is accepted,
  so a restarted controller or a new leader (and ``graceguard plan``) keeps using it while a later
  spec is not valid (``view.ClusterView.policy``);
- a spec that is not valid also gets a Warning event ``InvalidPolicy`` on the object and a log
  line, both naming the fields, once per generation (the event not again after a restart when the
  status already reports that generation).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from typing import Any

import httpx2
import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from graceguard.adapters.kube import resources
from graceguard.domain import policy, times
from graceguard.manifests import policies

log = logging.getLogger(__name__)

REASON = "InvalidPolicy"
EVENT_NAMESPACE = "default"
"""Events about a cluster-scoped object go to ``default`` (where kubectl describe finds them)."""
COMPONENT = "graceguard"


def in_force_message(entry: policy.PolicyEntry, in_force: policy.Policy) -> str:
    """Which policy stays in force while ``entry``'s spec is not valid."""
    if entry.in_force is not None and entry.in_force.policy == in_force:
        return (
            f"the policy in force is {entry.name!r} generation {entry.in_force.generation}, "
            "the last accepted"
        )
    if in_force == policy.DEFAULT:
        return "the policy in force is the built-in defaults (none was accepted)"
    return f"the policy in force is the last accepted {in_force.name!r}"


def status_message(entry: policy.PolicyEntry, in_force: policy.Policy) -> str:
    if entry.policy is not None:
        return "the policy is in force"
    return f"{entry.problem}; {in_force_message(entry, in_force)}"


def event_message(entry: policy.PolicyEntry, in_force: policy.Policy) -> str:
    fields = ", ".join(entry.fields) or "spec"
    return (
        f"DisruptionPolicy {entry.name} generation {entry.generation} is not valid "
        f"({fields}): {entry.problem}; {in_force_message(entry, in_force)}"
    )


class PolicyStatusWriter:
    def __init__(self, client: lightkube.AsyncClient, *, instance: str | None = None) -> None:
        self._client = client
        self._instance = instance or os.environ.get("POD_NAME", "graceguard")
        self._written: tuple[str, int, bool, str] | None = None
        self._told: set[tuple[str, str, int]] = set()
        """(uid, name, generation) already logged, and told with an event where due."""

    async def report(self, entry: policy.PolicyEntry | None, in_force: policy.Policy) -> None:
        if not isinstance(entry, policy.PolicyEntry):
            return
        accepted = entry.policy is not None
        message = status_message(entry, in_force)
        state = (entry.name, entry.generation, accepted, message)
        if state == self._written:
            return
        if not accepted:
            await self._tell(entry, in_force)
        if entry.reported == policy.Reported(entry.generation, accepted, message[:1024]) and (
            not accepted
            or (entry.in_force is not None and entry.in_force.generation == entry.generation)
        ):
            self._written = state  # a previous leader wrote exactly this
            return
        condition = {
            "type": "Accepted",
            "status": "True" if accepted else "False",
            "reason": "Valid" if accepted else "InvalidSpec",
            "message": message[:1024],
            "observedGeneration": entry.generation,
            "lastTransitionTime": times.format_time(dt.datetime.now(dt.UTC).replace(microsecond=0)),
        }
        try:
            if accepted:
                # The whole status at once (a JSON patch): a merge patch would merge the new spec
                # into the old one, keeping fields the new spec dropped.
                status = {
                    "conditions": [condition],
                    "observedGeneration": entry.generation,
                    "inForce": {"generation": entry.generation, "spec": dict(entry.spec or {})},
                }
                await self._client.patch(
                    resources.DisruptionPolicy.Status,
                    entry.name,
                    [{"op": "add", "path": "/status", "value": status}],
                    patch_type=PatchType.JSON,
                )
            else:
                # status.inForce stays as it is: the last accepted spec.
                await self._client.patch(
                    resources.DisruptionPolicy.Status,
                    entry.name,
                    {
                        "status": {
                            "conditions": [condition],
                            "observedGeneration": entry.generation,
                        }
                    },
                    patch_type=PatchType.MERGE,
                )
        except (ApiError, httpx2.HTTPError, OSError) as err:
            log.warning("cannot write the status of DisruptionPolicy %s: %s", entry.name, err)
            return
        self._written = state

    async def _tell(self, entry: policy.PolicyEntry, in_force: policy.Policy) -> None:
        """The log line (once per generation in this process) and the Warning event (once per
        generation: not when the status already reports this generation as not accepted, i.e. a
        previous leader told already)."""
        key = (entry.uid, entry.name, entry.generation)
        if key in self._told:
            return
        self._told.add(key)
        message = event_message(entry, in_force)
        log.warning("%s", message)
        reported = entry.reported
        if reported is not None and (reported.generation, reported.accepted) == (
            entry.generation,
            False,
        ):
            return  # a previous leader reported this generation not accepted, and told
        try:
            await self._client.create(resources.Event.from_dict(self._event(entry, message)))
        except (ApiError, httpx2.HTTPError, OSError) as err:
            log.warning(
                "cannot post the %s event on DisruptionPolicy %s: %s", REASON, entry.name, err
            )

    def _event(self, entry: policy.PolicyEntry, message: str) -> dict[str, Any]:
        now = times.format_time(dt.datetime.now(dt.UTC).replace(microsecond=0))
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{entry.name}.", "namespace": EVENT_NAMESPACE},
            "involvedObject": {
                "apiVersion": policies.API_VERSION,
                "kind": policies.KIND,
                "name": entry.name,
                **({"uid": entry.uid} if entry.uid else {}),
            },
            "reason": REASON,
            "message": message[:1024],
            "type": "Warning",
            "source": {"component": COMPONENT},
            "reportingComponent": "graceguard.io/controller",
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
