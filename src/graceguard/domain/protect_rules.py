"""Protection by policy: the ``DisruptionPolicy``'s ``spec.protect`` rules, which protect pods that
carry no protection annotation, chosen by namespace (by name, or by a label selector on the
Namespace's labels), label selector and owner kind.

A rule protects the pods it chooses until they complete (bounded by ``maxProtection``, as
``graceguard.io/protect: "true"``), or for ``minRuntime`` from their start (bounded by
``maxMinRuntime``, as ``graceguard.io/min-runtime``). How a rule's protection combines with the
pod's own annotations is ``protection.read_protection_spec``'s: the longer protection wins, and an
annotation that says ``false`` lifts the rules. Pure values; the manifest is read in
``manifests.policies``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping

from graceguard.domain import cluster, durations

NAME_LABEL = "kubernetes.io/metadata.name"
"""The label Kubernetes sets on every Namespace to its name (immutable): a namespace whose labels
were not read still carries this one (``namespace_labels``)."""


def namespace_labels(namespace: str, labels: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    """The labels of ``namespace`` as read (``labels``: name -> labels), else the one label every
    Namespace carries: its name."""
    found = labels.get(namespace)
    return found if found is not None else {NAME_LABEL: namespace}


@dataclasses.dataclass(frozen=True, slots=True)
class ProtectRule:
    """One ``spec.protect[]`` entry. Every chooser set must match; one left out matches every
    pod."""

    label: str
    """How events, ``explain`` and ``audit`` name the rule: its ``name``, else ``protect[i]``."""
    namespaces: frozenset[str] = frozenset()
    """The namespaces whose pods it chooses; empty: every namespace."""
    namespace_selector: cluster.LabelSelector | None = None
    """The labels of the Namespaces whose pods it chooses; ``None``: any namespace."""
    selector: cluster.LabelSelector | None = None
    """The pods' labels it chooses; ``None``: any labels."""
    owner_kind: str | None = None
    """The kind of the pod's controlling owner (``Job``, ``StatefulSet``, ``ReplicaSet``...)."""
    min_runtime: dt.timedelta | None = None
    """Protected for this long from the pod's start; ``None``: until the pod completes."""

    def matches(
        self, pod: cluster.Pod, namespaces: Mapping[str, Mapping[str, str]] | None = None
    ) -> bool:
        """Whether the rule chooses ``pod``; ``namespaces``: the Namespaces' labels by name, for
        ``namespace_selector`` (a namespace not among them carries only its name label)."""
        if self.namespaces and pod.namespace not in self.namespaces:
            return False
        if self.namespace_selector is not None and not self.namespace_selector.matches(
            namespace_labels(pod.namespace, namespaces or {})
        ):
            return False
        if self.owner_kind is not None and pod.owner_kind != self.owner_kind:
            return False
        return self.selector is None or self.selector.matches(pod.labels)

    @property
    def protects(self) -> str:
        """What it asks for, as ``explain`` shows it: ``until completion`` or ``minRuntime 2h``."""
        if self.min_runtime is None:
            return "until completion"
        return f"minRuntime {durations.format_duration(self.min_runtime)}"
