"""Gangs: pods that belong together and are protected as one (a distributed job dies when one of
its workers goes), recognised by the labels and annotations their controllers and schedulers put
on them. Pure; ``engine.gangs`` computes how long each gang holds its members.

A pod belongs to at most one gang, the first of these it carries (each named with where it is
defined):

- ``graceguard.io/group`` (label): graceguard's own, for any set of pods.
- ``jobset.sigs.k8s.io/jobset-name`` (label): every pod of a JobSet (kubernetes-sigs/jobset,
  ``api/jobset/v1alpha2/jobset_types.go``, ``JobSetNameKey``), across its replicated Jobs.
- ``kueue.x-k8s.io/pod-group-name`` (label): a Kueue pod group (kubernetes-sigs/kueue, plain
  pods integration, ``GroupNameLabel``).
- ``scheduling.x-k8s.io/pod-group`` (label): the coscheduling plugin's PodGroup
  (kubernetes-sigs/scheduler-plugins, ``pkg/coscheduling/README.md``).
- ``scheduling.k8s.io/group-name`` (annotation): a Volcano PodGroup (volcano-sh/volcano; the
  annotation its job controller sets on every pod of a Volcano Job).
- an Indexed Job's pods: a pod owned by a ``Job`` that carries ``batch.kubernetes.io/job-name``
  and ``batch.kubernetes.io/job-completion-index`` (labels the Job controller sets since
  Kubernetes 1.28; KEP-2214 Indexed Job, KEP-4017 pod index label). Every Indexed Job counts: one
  with ``parallelism`` 1 has one member running at a time, a gang of one.

Gang keys are per namespace: pods of two namespaces never form one gang.
"""

from __future__ import annotations

import dataclasses

from graceguard.domain import cluster

GROUP = "graceguard.io/group"
JOBSET = "jobset.sigs.k8s.io/jobset-name"
KUEUE = "kueue.x-k8s.io/pod-group-name"
COSCHEDULING = "scheduling.x-k8s.io/pod-group"
VOLCANO = "scheduling.k8s.io/group-name"
JOB_NAME = "batch.kubernetes.io/job-name"
JOB_INDEX = "batch.kubernetes.io/job-completion-index"

LABELS = (GROUP, JOBSET, KUEUE, COSCHEDULING)
"""The gang labels, in the order they are looked for."""
ANNOTATIONS = frozenset({VOLCANO})
"""The gang annotations (the Kubernetes view keeps them on its compact pods): Volcano's alone,
which ``gang_of`` and ``maybe_in_gang`` look up by key."""
LABEL_KEYS = frozenset({*LABELS, JOB_INDEX})
"""A pod carrying none of these labels (and no gang annotation) is in no gang."""


def maybe_in_gang(pod: cluster.Pod) -> bool:
    """The cheap test before ``gang_of``: whether ``pod`` carries any gang label or annotation.
    Callers that scan every pod inline it (``engine.gangs.holds``)."""
    labels = pod.labels
    # The set test iterates the pod's few labels; the one gang annotation is a key lookup.
    return bool(labels and not LABEL_KEYS.isdisjoint(labels)) or VOLCANO in pod.annotations


@dataclasses.dataclass(frozen=True, slots=True)
class Gang:
    namespace: str
    by: str
    """The label or annotation that makes the pods one gang (``JOB_NAME`` for an Indexed Job)."""
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.by}={self.name}"

    @property
    def label(self) -> str:
        """For people: ``gang graceguard.io/group=trainers`` or ``gang Indexed Job train``."""
        if self.by == JOB_NAME:
            return f"gang Indexed Job {self.name}"
        return f"gang {self.by}={self.name}"


def gang_of(pod: cluster.Pod) -> Gang | None:
    """The gang ``pod`` belongs to, if any."""
    labels = pod.labels
    if labels and not labels.keys().isdisjoint(LABEL_KEYS):  # most pods: one C-level check
        for key in LABELS:
            value = labels.get(key)
            if value:
                return Gang(pod.namespace, key, value)
    volcano = pod.annotations.get(VOLCANO) if pod.annotations else None
    if volcano:
        return Gang(pod.namespace, VOLCANO, volcano)
    if pod.owner_kind == "Job" and labels and JOB_INDEX in labels:
        job = labels.get(JOB_NAME)
        if job:
            return Gang(pod.namespace, JOB_NAME, job)
    return None
