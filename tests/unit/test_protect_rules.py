"""Protection by policy (``DisruptionPolicy.spec.protect``, ``domain.protect_rules``): the rules
read from the manifest (their errors naming the field), how a rule's protection joins the pod's
annotations, and the engine acting on it: projection onto an unannotated pod, the webhook's
refusal, the ``ProposedEviction`` message, ``explain`` and ``audit`` naming the rule. The schema's
verdict on the same rules is ``test_crd.py``; the real drain held by a rule is
``tests/e2e/test_protect_rules.py``."""

from __future__ import annotations

import datetime as dt
import json
import pathlib
from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from graceguard.cli import main as cli_main
from graceguard.domain import annotations as ann
from graceguard.domain import cluster, disruption, notices, policy, protect_rules, protection
from graceguard.engine import actions as act
from graceguard.engine import admission, projection, reconciler
from graceguard.engine.audit import cluster as audit_cluster
from graceguard.engine.audit import inputs
from graceguard.manifests import pods, policies

NOW = dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC)
HOUR = dt.timedelta(hours=1)
JOBS = {"name": "jobs", "ownerKind": "Job"}
BATCH = {"namespaces": ["batch"], "minRuntime": "2h"}


def read(*rules: Mapping[str, Any], **spec: Any) -> policy.Policy:
    return policies.policy_from_manifest(
        {
            "apiVersion": policies.API_VERSION,
            "kind": policies.KIND,
            "metadata": {"name": "default"},
            "spec": {**spec, "protect": [dict(r) for r in rules]},
        }
    )


def errors(*rules: object, **spec: Any) -> list[str]:
    try:
        policies.policy_from_manifest(
            {
                "apiVersion": policies.API_VERSION,
                "kind": policies.KIND,
                "metadata": {"name": "default"},
                "spec": {**spec, "protect": list(rules)},
            }
        )
    except policy.PolicyError as err:
        return [str(e) for e in err.errors]
    raise AssertionError("accepted")


def job_pod(
    namespace: str = "work",
    *,
    annotations: Mapping[str, str] | None = None,
    owner_kind: str | None = "Job",
    labels: Mapping[str, str] | None = None,
    start: dt.datetime = NOW - HOUR,
) -> cluster.Pod:
    return cluster.Pod(
        namespace=namespace,
        name="train-0",
        uid="u-train-0",
        node="n1",
        start_time=start,
        annotations=dict(annotations or {}),
        labels=dict(labels or {}),
        owner_kind=owner_kind,
    )


# ---- the manifest ----


def test_rules_are_read_with_their_labels() -> None:
    pol = read(JOBS, BATCH)
    jobs, batch = pol.protect
    assert (jobs.label, jobs.owner_kind, jobs.min_runtime, jobs.namespaces) == (
        "jobs",
        "Job",
        None,
        frozenset(),
    )
    assert (batch.label, batch.namespaces, batch.min_runtime) == (
        "protect[1]",
        frozenset({"batch"}),
        2 * HOUR,
    )
    assert policy.DEFAULT.protect == ()


@pytest.mark.parametrize(
    ("rules", "spec", "said"),
    [
        (
            [{}],
            {},
            "spec.protect[0]: choose pods by namespaces, namespaceSelector, selector or ownerKind",
        ),
        ([{"ownerKind": "Deployment"}], {}, "spec.protect[0].ownerKind: a Deployment's pods"),
        ([{"ownerKind": "CronJob"}], {}, "spec.protect[0].ownerKind: a CronJob's pods"),
        ([{"ownerKind": "job"}], {}, "spec.protect[0].ownerKind: expected a kind"),
        ([{"namespaces": []}], {}, "spec.protect[0].namespaces: expected a non-empty list"),
        ([{"namespaces": ["a_b"]}], {}, "spec.protect[0].namespaces[0]: expected a namespace"),
        ([JOBS, {**JOBS}], {}, "spec.protect[1].name: 'jobs' names two rules"),
        ([{**JOBS, "minRuntime": "3h"}], {"maxMinRuntime": "2h"}, "exceeds maxMinRuntime 2h0m0s"),
        ([{**JOBS, "minRuntime": "0s"}], {}, "spec.protect[0].minRuntime: must be positive"),
        ([{**JOBS, "until": "done"}], {}, "spec.protect[0].until: unknown field"),
        (
            [
                {
                    "selector": {
                        "matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]
                    }
                }
            ],
            {},
            "spec.protect[0].selector.matchExpressions[0].values: Exists takes no values",
        ),
        (["Job"], {}, "spec.protect[0]: expected a mapping"),
    ],
)
def test_a_bad_rule_is_refused_naming_its_field(
    rules: list[object], spec: dict[str, Any], said: str
) -> None:
    found = errors(*rules, **spec)
    assert any(said in e for e in found), found


def test_a_pods_controlling_owner_kind_is_read() -> None:
    doc = {
        "metadata": {
            "name": "train-0",
            "ownerReferences": [
                {"kind": "Workflow", "name": "w", "controller": False},
                {"kind": "Job", "name": "train", "controller": True},
            ],
        }
    }
    assert pods.pod_from_manifest(doc).owner_kind == "Job"
    assert pods.pod_from_manifest({"metadata": {"name": "bare"}}).owner_kind is None


# ---- how a rule joins the annotations ----


def protection_of(pod: cluster.Pod, pol: policy.Policy) -> protection.Protection:
    return projection.ProtectionReader.of(pol).read(pod, NOW)


def test_a_job_rule_protects_an_unannotated_job_pod_until_it_completes() -> None:
    prot = protection_of(job_pod(), read(JOBS))
    assert prot.protected_until == NOW - HOUR + policy.DEFAULT.max_protection
    reason = prot.binding_reason()
    assert reason is not None and reason.policy_rule == "jobs"
    assert reason.label == "policy rule jobs (until completion)"
    # Not a Job's pod, or finished: not protected by it.
    assert not protection_of(job_pod(owner_kind="ReplicaSet"), read(JOBS)).active(NOW)
    assert not protection_of(job_pod(owner_kind=None), read(JOBS)).active(NOW)


def test_a_namespace_rule_protects_for_its_min_runtime() -> None:
    pol = read(BATCH)
    prot = protection_of(job_pod("batch"), pol)
    assert prot.protected_until == NOW + HOUR  # started an hour ago, 2h minimum
    assert prot.binding_reason() is not None
    assert prot.binding_reason().label == "policy rule protect[0] (minRuntime 2h0m0s)"  # type: ignore[union-attr]
    assert not protection_of(job_pod("work"), pol).active(NOW)


def test_a_selector_chooses_by_labels() -> None:
    pol = read({"selector": {"matchLabels": {"team": "ml"}}, "minRuntime": "3h"})
    assert protection_of(job_pod(labels={"team": "ml"}), pol).active(NOW)
    assert not protection_of(job_pod(labels={"team": "web"}), pol).active(NOW)


def test_the_pods_own_annotation_wins_where_it_says_more() -> None:
    pol = read(BATCH)
    longer = protection_of(job_pod("batch", annotations={ann.MIN_RUNTIME: "5h"}), pol)
    assert longer.protected_until == NOW + 4 * HOUR
    assert longer.binding_reason().annotation == ann.MIN_RUNTIME  # type: ignore[union-attr]
    shorter = protection_of(job_pod("batch", annotations={ann.MIN_RUNTIME: "30m"}), pol)
    assert shorter.protected_until == NOW + HOUR  # the rule asks more: it counts


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (ann.PROTECT, "false"),
        (ann.CA_SAFE_TO_EVICT, "true"),
        (ann.KARPENTER_DO_NOT_DISRUPT, "false"),
    ],
)
def test_an_annotation_saying_false_lifts_every_rule(key: str, value: str) -> None:
    prot = protection_of(job_pod("batch", annotations={key: value}), read(JOBS, BATCH))
    assert not prot.active(NOW)
    lifted = [(r.rule, r.policy_rule) for r in prot.reasons]
    assert lifted == [
        (protection.Rule.EXEMPT, "jobs"),
        (protection.Rule.EXEMPT, "protect[1]"),
    ]


def test_idle_lifts_a_rules_until_completion_not_its_min_runtime() -> None:
    idle = {ann.BUSY: "false"}
    assert not protection_of(job_pod(annotations=idle), read(JOBS)).active(NOW)
    assert protection_of(job_pod("batch", annotations=idle), read(BATCH)).active(NOW)


def test_a_rules_min_runtime_is_bounded_by_the_policy() -> None:
    pol = policies.policy_from_spec({"protect": [BATCH]}, errors=[])
    lowered = policy.Policy(max_min_runtime=HOUR, protect=pol.protect)  # built, not read
    prot = protection_of(job_pod("batch", start=NOW), lowered)
    assert prot.protected_until == NOW + HOUR


# ---- the engine acting on it ----


def test_projection_protects_an_unannotated_pod_a_rule_chooses() -> None:
    pod = job_pod()
    result = projection.project([pod], projection.ProtectionReader.of(read(JOBS)), NOW)
    assert result.protected == 1
    (projected,) = [a for a in result.actions if isinstance(a, act.ProjectProtection)]
    assert dict(projected.add) == dict(ann.PROJECTION)
    # Without the rule nothing is projected onto it.
    bare = projection.project([pod], projection.ProtectionReader.of(policy.DEFAULT), NOW)
    assert (bare.protected, bare.actions) == (0, ())


def test_the_webhook_refuses_a_drain_naming_the_rule() -> None:
    verdict = admission.admit(pod=job_pod(), pol=read(JOBS), now=NOW, source=admission.EVICTION_API)
    assert not verdict.allowed and verdict.rule is admission.Rule.TAKEOVER
    assert "its protection until 2026-11-26T11:00:00Z by policy rule jobs" in verdict.reason
    no_takeover = read(JOBS, takeover=[])
    held = admission.admit(pod=job_pod(), pol=no_takeover, now=NOW, source="eviction-api")
    assert (held.allowed, held.rule) == (False, admission.Rule.PROTECTION)
    assert "protected by policy rule jobs (until completion)" in held.reason
    free = admission.admit(
        pod=job_pod(), pol=policy.Policy(takeover=()), now=NOW, source="eviction-api"
    )
    assert free.allowed  # the same pod without the rule: evicted at once


def test_the_proposed_eviction_names_the_rule() -> None:
    snap = cluster.Snapshot(nodes=(cluster.Node("n1"),), pods=(job_pod(),))
    req = disruption.DisruptionRequest(
        "r0", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    r = reconciler.reconcile(snapshot=snap, requests=[req], pol=read(JOBS), now=NOW)
    proposed = [
        a.notice
        for a in r.actions
        if isinstance(a, act.PostNotice) and a.notice.reason is notices.NoticeReason.PROPOSED
    ]
    assert [n.message for n in proposed] == [
        "The pod is nominated to be evicted at 2026-11-26T11:00:00Z, reason: drain; protected "
        "by policy rule jobs (until completion) until 2026-11-26T11:00:00Z"
    ]


def test_explain_names_the_rule(tmp_path: pathlib.Path) -> None:
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "train-0",
                    "namespace": "work",
                    "ownerReferences": [{"kind": "Job", "name": "train", "controller": True}],
                },
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Running", "startTime": "2026-11-25T11:00:00Z"},
            }
        )
    )
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": policies.API_VERSION,
                "kind": policies.KIND,
                "metadata": {"name": "default"},
                "spec": {"protect": [JOBS]},
            }
        )
    )
    out = CliRunner().invoke(
        cli_main.app,
        ["explain", str(pod_file), "--policy", str(policy_file), "--at", "2026-11-25T12:00:00Z"],
    )
    assert out.exit_code == 0, out.output
    found = json.loads(out.output)
    assert found["protectedUntil"] == "2026-11-26T11:00:00Z"
    assert found["reasons"] == [
        {
            "rule": "protect",
            "annotation": None,
            "value": "until completion",
            "until": "2026-11-26T11:00:00Z",
            "policyRule": "jobs",
        }
    ]
    assert "protected by policy rule jobs (until completion)" in found["blockedBy"][0]["message"]


def test_audit_names_the_rule_and_the_pods_it_protects() -> None:
    found = inputs.ClusterInputs(
        pods=(inputs.AuditPod(job_pod(), "Job"),),
        policy=read(JOBS, BATCH),
    )
    by_rule = [
        f for f in audit_cluster.check_cluster(found, now=NOW) if f.check == "protected-by-policy"
    ]
    assert [f.risk for f in by_rule] == [
        "policy rule jobs (until completion) protects 1 running pod(s): work/train-0; their "
        "drains wait for it.",
        "policy rule protect[1] (minRuntime 2h0m0s) protects no running pod.",
    ]


# ---- namespaceSelector: namespaces chosen by their labels ----

TEAM_BATCH = {"name": "batch-ns", "namespaceSelector": {"matchLabels": {"team": "batch"}}}
NAMESPACES = {"work": {"team": "batch", protect_rules.NAME_LABEL: "work"}, "web": {}}


def test_a_namespace_selector_is_read_and_refused_when_bad() -> None:
    (rule,) = read(TEAM_BATCH).protect
    assert rule.namespace_selector == cluster.LabelSelector(match_labels={"team": "batch"})
    bad = {"namespaceSelector": {"matchExpressions": [{"key": "team", "operator": "In"}]}}
    found = errors(bad)
    assert any("spec.protect[0].namespaceSelector.matchExpressions[0]" in e for e in found), found
    assert any("spec.protect[0].namespaceSelector" in e for e in errors({"namespaceSelector": 3}))


def test_a_namespace_selector_chooses_by_the_namespaces_labels() -> None:
    pol = read(TEAM_BATCH)
    reader = projection.ProtectionReader.of(pol)
    reader.see_namespaces(NAMESPACES)
    prot = reader.read(job_pod("work", owner_kind=None), NOW)
    reason = prot.binding_reason()
    assert reason is not None and reason.policy_rule == "batch-ns"
    assert not reader.read(job_pod("web"), NOW).active(NOW)  # no team label
    assert not reader.read(job_pod("other"), NOW).active(NOW)  # not read: its name label only
    by_name = read({"namespaceSelector": {"matchLabels": {protect_rules.NAME_LABEL: "other"}}})
    assert protection_of(job_pod("other"), by_name).active(NOW)


def test_a_namespace_labelled_later_is_projected_again() -> None:
    """The pod object does not change when its namespace gets the label: the reader forgets what
    it worked out from the old labels."""
    pod = job_pod("web", owner_kind=None)
    reader = projection.ProtectionReader.of(read(TEAM_BATCH))
    reader.see_namespaces(NAMESPACES)
    assert projection.project([pod], reader, NOW).protected == 0
    reader.see_namespaces({**NAMESPACES, "web": {"team": "batch"}})
    result = projection.project([pod], reader, NOW)
    assert result.protected == 1
    assert any(isinstance(a, act.ProjectProtection) for a in result.actions)


def test_the_reconciler_reads_the_snapshots_namespaces() -> None:
    pod = job_pod("work", owner_kind=None)
    req = disruption.DisruptionRequest(
        "r0", "n1", "drain", disruption.DisruptionClass.VOLUNTARY, NOW
    )
    nodes = (cluster.Node("n1"),)
    labelled = cluster.Snapshot(nodes=nodes, pods=(pod,), namespaces=NAMESPACES)
    r = reconciler.reconcile(snapshot=labelled, requests=[req], pol=read(TEAM_BATCH), now=NOW)
    (plan,) = r.plans
    assert plan.protected_until == NOW - HOUR + policy.DEFAULT.max_protection
    bare = cluster.Snapshot(nodes=nodes, pods=(pod,))
    r = reconciler.reconcile(snapshot=bare, requests=[req], pol=read(TEAM_BATCH), now=NOW)
    assert r.plans[0].protected_until is None


def test_explain_reads_the_namespace_and_names_the_rule(tmp_path: pathlib.Path) -> None:
    pod_file = tmp_path / "pod.yaml"
    pod_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "train-0", "namespace": "work"},
                "spec": {"nodeName": "n1"},
                "status": {"phase": "Running", "startTime": "2026-11-25T11:00:00Z"},
            }
        )
    )
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": policies.API_VERSION,
                "kind": policies.KIND,
                "metadata": {"name": "default"},
                "spec": {"protect": [TEAM_BATCH]},
            }
        )
    )
    ns_file = tmp_path / "ns.yaml"
    ns_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "work", "labels": {"team": "batch"}},
            }
        )
    )
    args = ["explain", str(pod_file), "--policy", str(policy_file), "--at", "2026-11-25T12:00:00Z"]
    out = CliRunner().invoke(cli_main.app, [*args, "--namespace", str(ns_file)])
    assert out.exit_code == 0, out.output
    (reason,) = json.loads(out.output)["reasons"]
    assert reason["policyRule"] == "batch-ns"
    without = CliRunner().invoke(cli_main.app, args)
    assert json.loads(without.output)["reasons"] == []
    wrong = tmp_path / "other.yaml"
    wrong.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: web}\n")
    refused = CliRunner().invoke(cli_main.app, [*args, "--namespace", str(wrong)])
    assert refused.exit_code != 0
    assert "metadata.name: the pod is in namespace 'work'" in refused.output
