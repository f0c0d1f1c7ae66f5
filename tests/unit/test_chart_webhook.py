"""The Helm chart with the eviction webhook, as rendered by ``make chart-check``:
``out/chart-webhook.yaml`` (helm generates the certificate) and
``out/chart-webhook-certmanager.yaml`` (cert-manager issues it; failurePolicy Ignore, an extra
excluded namespace and trusted user). The default rendering has no webhook (test_chart_render)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import typer.core
import typer.main
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from graceguard.adapters import webhook_server
from graceguard.cli.main import app

from .test_chart_render import NAMESPACE, one, permissions, rendered

NAME = "graceguard-webhook"
CONTROLLER = f"system:serviceaccount:{NAMESPACE}:graceguard"

WEBHOOK_PERMISSIONS: dict[tuple[str, str], set[str]] = {
    ("", "pods"): {"get", "list", "watch"},
    ("", "events"): {"create"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("apps", "deployments"): {"list", "watch"},
    ("apps", "statefulsets"): {"list", "watch"},
    ("apps", "replicasets"): {"list", "watch"},
    ("graceguard.io", "disruptionpolicies"): {"list", "watch"},
    ("", "nodes"): {"get", "list", "watch"},  # a cordon the cache has not seen yet
    ("", "namespaces"): {"list", "watch"},  # protect[].namespaceSelector
    ("graceguard.io", "disruptions"): {"list", "watch", "create"},
}


@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    return rendered("chart-webhook.yaml")


@pytest.fixture(scope="module")
def cm_docs() -> list[dict[str, Any]]:
    return rendered("chart-webhook-certmanager.yaml")


def hook(docs: list[dict[str, Any]]) -> dict[str, Any]:
    config = one(docs, "ValidatingWebhookConfiguration", NAME)
    (only,) = config["webhooks"]
    return dict(only)


def webhook_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (only,) = one(docs, "Deployment", NAME)["spec"]["template"]["spec"]["containers"]
    return dict(only)


def parsed_args(container: dict[str, Any]) -> dict[str, Any]:
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    name, *args = container["args"]
    assert name == "webhook"
    with group.commands[name].make_context(name, list(args)) as ctx:
        return dict(ctx.params)


# ---- the ValidatingWebhookConfiguration ----


def test_the_webhook_reviews_evictions_only(docs: list[dict[str, Any]]) -> None:
    h = hook(docs)
    assert h["name"] == "evictions.graceguard.io"
    assert h["rules"] == [
        {
            "operations": ["CREATE"],
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["pods/eviction"],
            "scope": "Namespaced",
        }
    ]
    assert h["admissionReviewVersions"] == ["v1"]
    assert h["sideEffects"] == "NoneOnDryRun"  # events and ledger records, never for a dry run
    assert h["matchPolicy"] == "Equivalent"


def test_registered_open_armed_closed_by_a_serving_replica_with_a_short_timeout(
    docs: list[dict[str, Any]],
) -> None:
    """Registered with Ignore, so an install whose webhook pods never run blocks no eviction; the
    webhook sets the chart's Fail on its own configuration once it serves (tests/e2e)."""
    h = hook(docs)
    assert h["failurePolicy"] == "Ignore"
    params = parsed_args(webhook_container(docs))
    assert params["failure_policy"] == "Fail"
    assert params["arm_configuration"] == NAME
    assert 1 <= h["timeoutSeconds"] <= 5


def test_kube_system_and_graceguards_own_namespace_are_never_reviewed(
    docs: list[dict[str, Any]],
) -> None:
    expressions = hook(docs)["namespaceSelector"]["matchExpressions"]
    assert {
        "key": "kubernetes.io/metadata.name",
        "operator": "NotIn",
        "values": ["kube-system", NAMESPACE],
    } in expressions
    assert {"key": "graceguard.io/webhook", "operator": "NotIn", "values": ["disabled"]} in (
        expressions
    )
    # The objectSelector sees the Eviction's labels, which any evictor writes: no opt-out there.
    assert hook(docs)["objectSelector"] == {}


def test_the_apiserver_reaches_the_webhook_through_its_service(docs: list[dict[str, Any]]) -> None:
    service_ref = hook(docs)["clientConfig"]["service"]
    assert service_ref == {
        "name": NAME,
        "namespace": NAMESPACE,
        "path": webhook_server.PATH,
        "port": 443,
    }
    service = one(docs, "Service", NAME)
    (https,) = [p for p in service["spec"]["ports"] if p["port"] == 443]
    container = webhook_container(docs)
    target = {p["name"]: p["containerPort"] for p in container["ports"]}[https["targetPort"]]
    assert parsed_args(container)["port"] == target == 8443
    pod_labels = one(docs, "Deployment", NAME)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert pod_labels["app.kubernetes.io/component"] == "webhook"


def test_the_ca_bundle_is_the_ca_that_signed_the_serving_certificate(
    docs: list[dict[str, Any]],
) -> None:
    secret = one(docs, "Secret", f"{NAME}-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert hook(docs)["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{NAME}.{NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)
    key = serialization.load_pem_private_key(data["tls.key"], password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert key.public_key().public_numbers() == cert.public_key().public_numbers()  # type: ignore[union-attr]
    # The pods serve exactly that Secret.
    pod = one(docs, "Deployment", NAME)["spec"]["template"]["spec"]
    (tls,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == secret["metadata"]["name"]
    args = parsed_args(webhook_container(docs))
    (mount,) = [m for m in webhook_container(docs)["volumeMounts"] if m["name"] == "tls"]
    assert str(args["tls_cert"]) == f"{mount['mountPath']}/tls.crt"
    assert str(args["tls_key"]) == f"{mount['mountPath']}/tls.key"


# ---- the webhook's pods ----


def test_two_replicas_with_their_own_budget(docs: list[dict[str, Any]]) -> None:
    deployment = one(docs, "Deployment", NAME)
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pdb = one(docs, "PodDisruptionBudget", NAME)
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    # The controller's budget does not select the webhook's pods, nor the reverse.
    controller = one(docs, "PodDisruptionBudget", "graceguard")
    assert controller["spec"]["selector"] != pdb["spec"]["selector"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    container = webhook_container(docs)
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_the_args_are_what_graceguard_webhook_accepts(docs: list[dict[str, Any]]) -> None:
    params = parsed_args(webhook_container(docs))
    assert params["trusted_user"] == [CONTROLLER]  # the controller's own evictions go through
    assert params["failure_policy"] == "Fail"
    assert (
        params["arm_configuration"]
        == one(docs, "ValidatingWebhookConfiguration")["metadata"]["name"]
    )
    assert params["ledger_url"] == "$(LEDGER_URL)"
    assert params["report_every"] == "10m"
    env = {e["name"]: e for e in webhook_container(docs)["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["LEDGER_URL"]["value"] == "sqlite:////var/lib/graceguard/ledger.db"


def test_the_trusted_user_is_the_controllers_service_account(docs: list[dict[str, Any]]) -> None:
    controller_pod = one(docs, "Deployment", "graceguard")["spec"]["template"]["spec"]
    account = controller_pod["serviceAccountName"]
    assert f"system:serviceaccount:{NAMESPACE}:{account}" == CONTROLLER
    webhook_pod = one(docs, "Deployment", NAME)["spec"]["template"]["spec"]
    assert webhook_pod["serviceAccountName"] == NAME != account


def test_the_webhook_may_only_read_post_events_and_open_takeovers(
    docs: list[dict[str, Any]],
) -> None:
    role = one(docs, "ClusterRole", NAME)
    found: dict[tuple[str, str], set[str]] = {}
    named: set[tuple[str, str, str, tuple[str, ...]]] = set()
    for group, resource, verb, names in permissions(role):
        if names:
            named.add((group, resource, verb, names))
            continue
        found.setdefault((group, resource), set()).add(verb)
    assert found == WEBHOOK_PERMISSIONS
    # its own configuration only, to arm it
    assert named == {
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations", verb, (NAME,))
        for verb in ("get", "patch")
    }
    binding = one(docs, "ClusterRoleBinding", NAME)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}]
    assert binding["roleRef"]["name"] == NAME


# ---- cert-manager, Ignore, extra exclusions ----


def test_cert_manager_issues_the_certificate_and_injects_the_ca(
    cm_docs: list[dict[str, Any]],
) -> None:
    assert not [d for d in cm_docs if d["kind"] == "Secret"]
    certificate = one(cm_docs, "Certificate", NAME)
    issuer = one(cm_docs, "Issuer", f"{NAME}-selfsigned")
    assert certificate["spec"]["issuerRef"] == {
        "kind": "Issuer",
        "name": issuer["metadata"]["name"],
    }
    assert f"{NAME}.{NAMESPACE}.svc" in certificate["spec"]["dnsNames"]
    config = one(cm_docs, "ValidatingWebhookConfiguration", NAME)
    assert config["metadata"]["annotations"] == {
        "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{NAME}"
    }
    assert "caBundle" not in hook(cm_docs)["clientConfig"]
    pod = one(cm_docs, "Deployment", NAME)["spec"]["template"]["spec"]
    (tls,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert tls["secret"]["secretName"] == certificate["spec"]["secretName"]


def test_failure_policy_exclusions_and_trusted_users_from_values(
    cm_docs: list[dict[str, Any]],
) -> None:
    h = hook(cm_docs)
    assert h["failurePolicy"] == "Ignore"
    params = parsed_args(webhook_container(cm_docs))
    assert params["failure_policy"] == "Ignore"
    assert params["trusted_user"] == [CONTROLLER, "system:serviceaccount:ops:drainer"]
    (names,) = [
        e
        for e in h["namespaceSelector"]["matchExpressions"]
        if e["key"] == "kubernetes.io/metadata.name"
    ]
    assert names["values"] == ["kube-system", NAMESPACE, "monitoring"]
