"""The audit's checks over the Kubernetes objects: pods, budgets, the autoscaler's cap, the
DisruptionPolicy objects and graceguard's eviction webhook (``findings.CHECKS`` says what each
looks for). Protection is read with graceguard's own reader (``projection.ProtectionReader``
under the policy in force), so the audit and the controller agree on what protects a pod."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

from graceguard.domain import annotations as ann
from graceguard.domain import cluster, durations, policy, protection
from graceguard.engine import projection
from graceguard.engine.audit import inputs
from graceguard.engine.audit.findings import Finding, Severity

LONG_GRACE_SECONDS = 15 * 60
"""A grace period this long says the pod's work takes long to wind down."""
RUN_TO_COMPLETION = frozenset({"Never", "OnFailure"})
KARPENTER_LABELS = ("karpenter.sh/nodepool", "karpenter.sh/provisioner-name")
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"


def check_cluster(found: inputs.ClusterInputs, *, now: dt.datetime) -> list[Finding]:
    """Every cluster check over ``found``; the cluster-wide ones only when no namespace is set."""
    reader = projection.ProtectionReader.of(found.policy)
    out: list[Finding] = []
    live = [p for p in found.pods if _live(p.pod)]
    out += grace_over_autoscaler_cap(found, live, reader=reader, now=now)
    out += unprotected_work_on_removable_node(found, live, reader=reader, now=now)
    out += pdb_never_allows(found.budgets)
    out += pods_under_several_pdbs(live, found.budgets)
    out += permanent_do_not_evict(live)
    out += invalid_annotations(live, reader=reader)
    out += protected_by_policy(found, live, reader=reader, now=now)
    out += bare_pods(live)
    out += prestop_over_grace(live)
    out += unreadable(found.unreadable)
    if found.namespace is None:
        out += policy_problems(found.policies)
        out += webhook_problems(found.webhooks)
    return out


def _live(pod: cluster.Pod) -> bool:
    return not pod.finished and not pod.terminating


def _pod(check: str, severity: Severity, pod: cluster.Pod, risk: str, fix: str) -> Finding:
    return Finding(check, severity, "Pod", pod.namespace, pod.name, risk, fix)


def _seconds(value: int) -> str:
    return durations.format_duration(dt.timedelta(seconds=value))


def takes_over(found: inputs.ClusterInputs, source: str) -> bool:
    """graceguard takes evictions by ``source`` over: its webhook is installed (and not known to
    be down) and the policy's takeover names the source (or ``*``)."""
    webhook = any(w.graceguard and w.ready_endpoints != 0 for w in found.webhooks)
    return webhook and found.policy.takeover_for(source) is not None


def _cap(found: inputs.ClusterInputs) -> tuple[int, str, str]:
    """The shortest cap of the cluster's autoscalers: (seconds, where it was read, its source)."""
    if not found.autoscalers:
        return (
            inputs.DEFAULT_MAX_GRACEFUL_TERMINATION,
            "cluster-autoscaler's default (no cluster-autoscaler Deployment found)",
            "cluster-autoscaler",
        )
    a = min(found.autoscalers, key=lambda x: x.max_graceful_termination)
    return (
        a.max_graceful_termination,
        f"--max-graceful-termination-sec of Deployment {a.namespace}/{a.name}",
        a.source,
    )


def grace_over_autoscaler_cap(
    found: inputs.ClusterInputs,
    pods: list[inputs.AuditPod],
    *,
    reader: projection.ProtectionReader,
    now: dt.datetime,
) -> Iterator[Finding]:
    cap, where, source = _cap(found)
    if takes_over(found, source):
        return
    # Without an autoscaler Deployment in sight (a managed one runs outside the cluster), the
    # default cap is assumed: worth a look, not certain.
    severity = Severity.HIGH if found.autoscalers else Severity.MEDIUM
    for p in pods:
        pod = p.pod
        if p.mirror or pod.daemon or pod.grace_seconds <= cap:
            continue
        if reader.read(pod, now).active(now):
            continue
        yield _pod(
            "grace-over-autoscaler-cap",
            severity,
            pod,
            f"its grace period ({_seconds(pod.grace_seconds)}) is longer than the "
            f"{_seconds(cap)} cluster-autoscaler allows ({where}), so a scale-down kills it "
            "before it has wound down.",
            f"turn on graceguard's takeover for {source!r} (the webhook and the policy's "
            "takeover), or protect the pod (graceguard.io/min-runtime), or raise "
            "--max-graceful-termination-sec.",
        )


def _removable_by(found: inputs.ClusterInputs, node: cluster.Node) -> str | None:
    """Which autoscaler may remove ``node`` (``None``: none that graceguard knows of)."""
    if node.scale_down_disabled and node.held_for is None:
        return None
    if any(label in node.labels for label in KARPENTER_LABELS):
        return "Karpenter"
    if EKS_NODEGROUP_LABEL in node.labels:
        return f"the EKS managed node group {node.labels[EKS_NODEGROUP_LABEL]!r}"
    if found.autoscalers:
        a = found.autoscalers[0]
        return f"cluster-autoscaler ({a.namespace}/{a.name})"
    return None


def unprotected_work_on_removable_node(
    found: inputs.ClusterInputs,
    pods: list[inputs.AuditPod],
    *,
    reader: projection.ProtectionReader,
    now: dt.datetime,
) -> Iterator[Finding]:
    nodes = {n.node.name: n.node for n in found.nodes}
    for p in pods:
        pod = p.pod
        if p.mirror or pod.daemon or pod.node is None or pod.node not in nodes:
            continue
        long_work = p.restart_policy in RUN_TO_COMPLETION or pod.grace_seconds >= LONG_GRACE_SECONDS
        if not long_work:
            continue
        by = _removable_by(found, nodes[pod.node])
        if by is None or reader.spec(pod).offsets:
            continue
        why = (
            f"runs to completion (restartPolicy {p.restart_policy})"
            if p.restart_policy in RUN_TO_COMPLETION
            else f"has a {_seconds(pod.grace_seconds)} grace period"
        )
        yield _pod(
            "unprotected-work-on-removable-node",
            Severity.HIGH,
            pod,
            f"it {why} on node {pod.node}, which {by} may remove, and nothing protects it, so a "
            "scale-down stops its work midway.",
            "annotate it with graceguard.io/min-runtime (how long its work takes) or "
            'graceguard.io/protect: "true" (until it completes).',
        )


def _never_allows(pdb: cluster.PodDisruptionBudget) -> str | None:
    """Why ``pdb`` can never allow a disruption (``None``: it can)."""
    mu, ma = pdb.max_unavailable, pdb.min_available
    if mu is not None and mu.value == 0:
        return f"maxUnavailable is {mu}"
    if mu is None and ma is not None and ma.percent and ma.value >= 100:
        return f"minAvailable is {ma}"
    st = pdb.status
    if st is not None and st.expected_pods > 0 and st.desired_healthy >= st.expected_pods:
        return (
            f"it wants {st.desired_healthy} healthy pods of the {st.expected_pods} it expects "
            "(status.desiredHealthy >= status.expectedPods)"
        )
    return None


def pdb_never_allows(budgets: tuple[cluster.PodDisruptionBudget, ...]) -> Iterator[Finding]:
    for pdb in budgets:
        why = _never_allows(pdb)
        if why is None:
            continue
        yield Finding(
            "pdb-never-allows",
            Severity.HIGH,
            "PodDisruptionBudget",
            pdb.namespace,
            pdb.name,
            f"{why}, so no eviction of its pods ever succeeds and every drain of their nodes "
            "blocks until someone forces it.",
            "allow at least one disruption (maxUnavailable: 1, or minAvailable below the "
            "replicas) and protect pods that must not stop with graceguard annotations instead.",
        )


def pods_under_several_pdbs(
    pods: list[inputs.AuditPod], budgets: tuple[cluster.PodDisruptionBudget, ...]
) -> Iterator[Finding]:
    by_namespace: dict[str, list[cluster.PodDisruptionBudget]] = {}
    for pdb in budgets:
        by_namespace.setdefault(pdb.namespace, []).append(pdb)
    for p in pods:
        pod = p.pod
        matching = [
            b.name for b in by_namespace.get(pod.namespace, ()) if b.selector.matches(pod.labels)
        ]
        if len(matching) < 2:
            continue
        yield _pod(
            "pod-under-several-pdbs",
            Severity.HIGH,
            pod,
            f"it is selected by {len(matching)} PodDisruptionBudgets "
            f"({', '.join(sorted(matching))}), and the Eviction API refuses to evict such a pod.",
            "change the budgets' selectors so that exactly one selects it.",
        )


def _hand_set(pod: cluster.Pod) -> list[tuple[str, str]]:
    projected = set((pod.annotations.get(ann.PROJECTED) or "").split(","))
    out = []
    for key, value in ann.PROJECTION:
        raw = pod.annotations.get(key)
        if raw is not None and raw.strip().lower() == value and key not in projected:
            out.append((key, raw))
    return out


def permanent_do_not_evict(pods: list[inputs.AuditPod]) -> Iterator[Finding]:
    for p in pods:
        hand_set = _hand_set(p.pod)
        if not hand_set:
            continue
        names = " and ".join(f"{k}: {v!r}" for k, v in hand_set)
        yield _pod(
            "permanent-do-not-evict",
            Severity.MEDIUM,
            p.pod,
            f"{names} is set by hand with no end, so its node can never scale down (cost) and "
            "the pod is never moved, however long it has been idle.",
            "replace it with graceguard.io/min-runtime (how long its work takes) or "
            'graceguard.io/protect: "true" (capped by the policy\'s maxProtection); graceguard '
            "projects the autoscalers' annotations itself while the pod is protected.",
        )


def invalid_annotations(
    pods: list[inputs.AuditPod], *, reader: projection.ProtectionReader
) -> Iterator[Finding]:
    for p in pods:
        for w in reader.spec(p.pod).warnings:
            yield _pod(
                "invalid-annotation",
                Severity.MEDIUM,
                p.pod,
                f"{w.annotation}: {w.value!r}: {w.problem}, so the pod is not protected as its "
                "owner meant.",
                f"set {w.annotation} to a valid value (see graceguard explain for how it reads).",
            )


SHOWN_PODS = 5
"""Pods a ``protected-by-policy`` finding names; the rest are counted."""


def protected_by_policy(
    found: inputs.ClusterInputs,
    pods: list[inputs.AuditPod],
    *,
    reader: projection.ProtectionReader,
    now: dt.datetime,
) -> Iterator[Finding]:
    """Per ``spec.protect`` rule of the policy in force: the live pods it protects now, by name
    (information), or that it protects none (a rule that chooses nothing is likely mistyped)."""
    rules = found.policy.protect
    if not rules:
        return
    chosen: dict[str, list[str]] = {r.label: [] for r in rules}
    for p in pods:
        for reason in reader.read(p.pod, now).reasons:
            if (
                reason.policy_rule in chosen
                and reason.rule is not protection.Rule.EXEMPT
                and reason.until is not None
                and reason.until > now
            ):
                chosen[reason.policy_rule].append(p.pod.key)
    where = "" if found.namespace is None else f" in namespace {found.namespace}"
    for r in rules:
        keys = chosen[r.label]
        if keys:
            more = len(keys) - SHOWN_PODS
            shown = ", ".join(keys[:SHOWN_PODS]) + (f" and {more} more" if more > 0 else "")
            risk = (
                f"policy rule {r.label} ({r.protects}) protects {len(keys)} running pod(s)"
                f"{where}: {shown}; their drains wait for it."
            )
            fix = (
                "nothing, if they should be protected; else narrow the rule, or annotate a pod "
                'graceguard.io/protect: "false" to lift it (graceguard explain shows the rule).'
            )
        else:
            risk = f"policy rule {r.label} ({r.protects}) protects no running pod{where}."
            fix = (
                "check its namespaces, selector and ownerKind (a Deployment's pods are owned by "
                "its ReplicaSets), if it should protect some."
            )
        yield Finding(
            "protected-by-policy",
            Severity.INFO,
            "DisruptionPolicy",
            None,
            found.policy.name,
            risk,
            fix,
        )


def bare_pods(pods: list[inputs.AuditPod]) -> Iterator[Finding]:
    for p in pods:
        if p.controller_kind is not None or p.mirror or p.pod.daemon:
            continue
        yield _pod(
            "bare-pod",
            Severity.MEDIUM,
            p.pod,
            "no controller owns it, so once it is evicted or its node goes nothing recreates it.",
            "run it from a Deployment, StatefulSet or Job.",
        )


def prestop_over_grace(pods: list[inputs.AuditPod]) -> Iterator[Finding]:
    for p in pods:
        pod = p.pod
        for hook in p.prestops:
            if hook.seconds is None or hook.seconds < pod.grace_seconds:
                continue
            yield _pod(
                "prestop-over-grace",
                Severity.HIGH,
                pod,
                f"container {hook.container}'s preStop hook ({hook.how}) takes "
                f"{_seconds(hook.seconds)}, not less than its {_seconds(pod.grace_seconds)} "
                "grace period, so it is killed before it ever sees SIGTERM.",
                "raise terminationGracePeriodSeconds above the hook's length plus the time the "
                "application needs after SIGTERM, or shorten the hook.",
            )


def unreadable(objects: tuple[inputs.Unreadable, ...]) -> Iterator[Finding]:
    for u in objects:
        yield Finding(
            "unreadable",
            Severity.INFO,
            u.kind,
            u.namespace,
            u.name,
            f"the audit could not read it ({u.problem}), so it was not checked.",
            "correct the field named.",
        )


def _policy(name: str, severity: Severity, risk: str, fix: str) -> Finding:
    return Finding("policy-problem", severity, "DisruptionPolicy", None, name, risk, fix)


def policy_problems(entries: tuple[policy.PolicyEntry, ...] | None) -> Iterator[Finding]:
    if entries is None:
        yield _policy(
            "(CRD)",
            Severity.HIGH,
            "the DisruptionPolicy CRD is not installed, so graceguard is not installed here and "
            "no pod is protected, told or held.",
            "install the chart (helm install graceguard deploy/helm/graceguard).",
        )
        return
    names = {e.name for e in entries}
    if policy.OBJECT_NAME not in names:
        yield _policy(
            policy.OBJECT_NAME,
            Severity.INFO,
            "there is no 'default' DisruptionPolicy, so graceguard runs on its built-in defaults.",
            "create one (the chart does, from policy.spec) to set notice, windows and takeover.",
        )
    for e in sorted(entries, key=lambda x: x.name):
        yield from _policy_entry(e)


def _policy_entry(e: policy.PolicyEntry) -> Iterator[Finding]:
    if e.name != policy.OBJECT_NAME:
        yield _policy(
            e.name,
            Severity.MEDIUM,
            f"graceguard reads only the DisruptionPolicy named 'default', so {e.name!r} has no "
            "effect.",
            "move its spec into 'default' and delete it.",
        )
        return
    if e.policy is None:
        yield _policy(
            e.name,
            Severity.HIGH,
            f"its spec is not valid ({e.problem}), so an older policy or the built-in defaults "
            "stay in force.",
            "correct the fields named (kubectl explain dpol.spec).",
        )
        return
    if e.reported is None or e.reported.generation != e.generation:
        yield _policy(
            e.name,
            Severity.MEDIUM,
            f"no graceguard controller has reported on generation {e.generation} (no Accepted "
            "condition for it), so no controller may be running.",
            "check the controller: kubectl -n graceguard-system get deploy,pods.",
        )
    elif not e.reported.accepted:
        yield _policy(
            e.name,
            Severity.HIGH,
            f"the controller did not accept it ({e.reported.message}), so another policy is in "
            "force.",
            "correct the spec as the Accepted condition's message says.",
        )


def webhook_problems(webhooks: tuple[inputs.Webhook, ...]) -> Iterator[Finding]:
    ours = [w for w in webhooks if w.graceguard]
    if not ours:
        yield Finding(
            "webhook-missing",
            Severity.MEDIUM,
            "ValidatingWebhookConfiguration",
            None,
            "(none)",
            "no graceguard webhook sees pods/eviction, so cluster-autoscaler, Karpenter, kubectl "
            "drain and node-group drains evict protected pods without notice or their grace.",
            "install the chart with --set webhook.enabled=true.",
        )
        return
    for w in ours:
        name = f"{w.configuration}/{w.name}"
        if w.failure_policy == "Ignore":
            yield Finding(
                "webhook-fails-open",
                Severity.HIGH,
                "ValidatingWebhookConfiguration",
                None,
                name,
                "its failurePolicy is Ignore, so whenever the webhook is down or slow every "
                "eviction goes through unchecked.",
                "set webhook.failurePolicy=Fail (the chart's default) and keep its 2 replicas "
                "and their PodDisruptionBudget.",
            )
        elif w.ready_endpoints == 0:
            yield Finding(
                "webhook-fails-open",
                Severity.HIGH,
                "ValidatingWebhookConfiguration",
                None,
                name,
                f"its Service {w.service} has no ready endpoint and its failurePolicy is Fail, so "
                "every eviction it covers is refused and node drains stall.",
                "bring the webhook's pods back (kubectl -n graceguard-system get pods) or remove "
                "the configuration.",
            )
