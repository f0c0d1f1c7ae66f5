"""Reading the cluster for ``graceguard audit``: every object the checks look at, listed once,
turned into ``engine.audit.inputs`` values (the checks themselves are pure, in
``engine.audit``).

``cluster_inputs`` does the turning (pure: documents in, values out) so that it is tested without
a cluster; ``read_cluster`` lists the documents. Pods are read with ``manifests.pods`` and their
protection later with graceguard's own reader; an object that cannot be read becomes an
``Unreadable`` value naming the field, never an error that stops the audit.

The kubelet's configuration comes from ``/api/v1/nodes/NAME/proxy/configz`` through the API
server (it needs ``nodes/proxy``); a node whose kubelet does not answer (kwok's nodes have none)
is reported as unknown.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import pathlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import httpx2
import lightkube
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from graceguard.adapters.kube import client, resources
from graceguard.domain import cluster, durations, policy
from graceguard.engine.audit import inputs
from graceguard.manifests import objects, pods, policies
from graceguard.manifests.errors import ManifestError

ValidatingWebhookConfiguration: Any = create_global_resource(
    "admissionregistration.k8s.io",
    "v1",
    "ValidatingWebhookConfiguration",
    "validatingwebhookconfigurations",
)
EndpointSlice: Any = create_namespaced_resource(
    "discovery.k8s.io", "v1", "EndpointSlice", "endpointslices"
)
AGENT_LABELS = {"app.kubernetes.io/name": "graceguard", "app.kubernetes.io/component": "agent"}
CAP_FLAG = "--max-graceful-termination-sec"
QUEUE_FLAG = "--aws-queue"
REGION_FLAG = "--aws-region"
KUBELET_TIMEOUT = 5.0
KUBELET_CONCURRENCY = 8
SERVICE_LABEL = "kubernetes.io/service-name"
_SLEEP = re.compile(r"^\s*(?:exec\s+)?sleep\s+(\d+)(?:s)?\s*(?:[;&|].*)?$")


# ---- pods ----


def _sleep_seconds(command: object) -> int | None:
    """``["sleep", "30"]`` or ``["/bin/sh", "-c", "sleep 30"]`` (a first command of sleep):
    the seconds it sleeps; ``None`` for any other command."""
    if not isinstance(command, list) or not all(isinstance(c, str) for c in command):
        return None
    if command and command[0].rsplit("/", 1)[-1] == "sleep" and len(command) == 2:
        text = f"sleep {command[1]}"
    elif len(command) == 3 and command[0].rsplit("/", 1)[-1] in ("sh", "bash", "ash", "dash"):
        text = command[2]
    else:
        return None
    found = _SLEEP.match(text)
    return int(found.group(1)) if found else None


def prestop(container: Mapping[str, Any]) -> inputs.PreStop | None:
    """The container's preStop hook, measured where the hook says how long it takes."""
    name = str(container.get("name", ""))
    lifecycle = pods.mapping(container.get("lifecycle"), f"containers[{name}].lifecycle")
    hook = lifecycle.get("preStop")
    if not isinstance(hook, Mapping):
        return None
    sleep = hook.get("sleep")
    if isinstance(sleep, Mapping):
        seconds = sleep.get("seconds")
        if isinstance(seconds, int) and not isinstance(seconds, bool):
            return inputs.PreStop(name, seconds, "sleep action")
    exec_ = hook.get("exec")
    if isinstance(exec_, Mapping):
        seconds_ = _sleep_seconds(exec_.get("command"))
        return inputs.PreStop(name, seconds_, "exec sleep" if seconds_ is not None else "exec")
    kind = next(iter(hook), "unknown")
    return inputs.PreStop(name, None, str(kind))


def audit_pod(raw: Mapping[str, Any]) -> inputs.AuditPod:
    """A Pod document -> its audit value (``ManifestError`` naming the field it cannot read)."""
    pod = pods.pod_from_manifest(raw)
    meta = pods.mapping(raw.get("metadata"), "metadata")
    spec = pods.mapping(raw.get("spec"), "spec")
    controller = None
    for owner in meta.get("ownerReferences") or ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            controller = str(owner.get("kind", ""))
    annotations = pods.mapping(meta.get("annotations"), "metadata.annotations")
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise ManifestError("spec.containers", "expected a list")
    hooks = tuple(h for c in containers if isinstance(c, Mapping) and (h := prestop(c)) is not None)
    restart = spec.get("restartPolicy", "Always")
    return inputs.AuditPod(
        pod=pod,
        controller_kind=controller,
        mirror="kubernetes.io/config.mirror" in annotations,
        restart_policy=restart if isinstance(restart, str) else "Always",
        prestops=hooks,
    )


# ---- the autoscaler and graceguard's controller, from Deployments ----


def _containers(raw: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = raw.get("spec") or {}
    template = spec.get("template") if isinstance(spec, Mapping) else None
    pod_spec = template.get("spec") if isinstance(template, Mapping) else None
    found = pod_spec.get("containers") if isinstance(pod_spec, Mapping) else None
    return [c for c in found or () if isinstance(c, Mapping)]


def _argv(container: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for field in ("command", "args"):
        value = container.get(field)
        if isinstance(value, list):
            out += [str(v) for v in value]
    return out


def flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value of ``flag`` in ``argv`` (``--flag=V`` or ``--flag V``)."""
    out = []
    for i, arg in enumerate(argv):
        if arg.startswith(f"{flag}="):
            out.append(arg.split("=", 1)[1])
        elif arg == flag and i + 1 < len(argv):
            out.append(argv[i + 1])
    return out


def _is_autoscaler(container: Mapping[str, Any]) -> bool:
    image = str(container.get("image", ""))
    argv = _argv(container)
    return "cluster-autoscaler" in image.rsplit("/", 1)[-1] or any(
        a.rsplit("/", 1)[-1] == "cluster-autoscaler" for a in argv[:1]
    )


def autoscaler(raw: Mapping[str, Any]) -> inputs.Autoscaler | inputs.Unreadable | None:
    """A cluster-autoscaler Deployment's cap on grace periods (``None``: not an autoscaler)."""
    meta = raw.get("metadata") or {}
    namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
    for container in _containers(raw):
        if not _is_autoscaler(container):
            continue
        values = flag_values(_argv(container), CAP_FLAG)
        cap = inputs.DEFAULT_MAX_GRACEFUL_TERMINATION
        if values:
            text = values[-1]
            if not text.isdigit():
                return inputs.Unreadable(
                    "Deployment", namespace, name, f"{CAP_FLAG}: not a number of seconds: {text!r}"
                )
            cap = int(text)
        spec = (raw.get("spec") or {}).get("template", {}).get("spec", {})
        account = spec.get("serviceAccountName") if isinstance(spec, Mapping) else None
        return inputs.Autoscaler(namespace, name, cap, str(account or "default"))
    return None


def controller_flags(deployments: Iterable[Mapping[str, Any]], flag: str) -> list[str]:
    """The values of ``flag`` (``--aws-queue``, ``--aws-region``) in graceguard controller
    Deployments (the chart's, or any whose container runs ``graceguard controller``)."""
    out: list[str] = []
    for raw in deployments:
        for container in _containers(raw):
            argv = _argv(container)
            image = str(container.get("image", ""))
            runs_graceguard = argv[:1] == ["controller"] or (
                "controller" in argv and "graceguard" in " ".join([*argv[:1], image])
            )
            if runs_graceguard:
                out += flag_values(argv, flag)
    return list(dict.fromkeys(out))


# ---- the eviction webhook ----


def _covers_eviction(rules: object) -> bool:
    for rule in rules if isinstance(rules, list) else ():
        if not isinstance(rule, Mapping):
            continue
        ops = rule.get("operations") or []
        res = rule.get("resources") or []
        if ("CREATE" in ops or "*" in ops) and any(
            r in ("pods/eviction", "*/eviction", "pods/*", "*/*") for r in res
        ):
            return True
    return False


def webhooks(raw: Mapping[str, Any]) -> list[inputs.Webhook]:
    """The webhooks of a ValidatingWebhookConfiguration that see ``CREATE pods/eviction``."""
    config = str((raw.get("metadata") or {}).get("name", ""))
    out = []
    for hook in raw.get("webhooks") or ():
        if not isinstance(hook, Mapping) or not _covers_eviction(hook.get("rules")):
            continue
        name = str(hook.get("name", ""))
        service = (hook.get("clientConfig") or {}).get("service")
        where = (
            f"{service.get('namespace')}/{service.get('name')}"
            if isinstance(service, Mapping)
            else None
        )
        out.append(
            inputs.Webhook(
                configuration=config,
                name=name,
                failure_policy=str(hook.get("failurePolicy") or "Fail"),
                graceguard=name.endswith(".graceguard.io"),
                service=where,
            )
        )
    return out


def ready_endpoints(slices: Iterable[Mapping[str, Any]]) -> int:
    count = 0
    for s in slices:
        for e in s.get("endpoints") or ():
            cond = (e.get("conditions") or {}) if isinstance(e, Mapping) else {}
            if cond.get("ready") is not False:
                count += 1
    return count


# ---- the kubelet ----


def _go_duration(config: Mapping[str, Any], field: str) -> dt.timedelta:
    raw = config.get(field, "0s")
    if not isinstance(raw, str):
        raise ManifestError(f"kubeletconfig.{field}", f"expected a duration, got {raw!r}")
    try:
        return durations.parse_duration(raw)
    except durations.DurationError as err:
        raise ManifestError(f"kubeletconfig.{field}", str(err)) from None


def kubelet_from_configz(doc: object) -> inputs.KubeletShutdown:
    """A kubelet's ``/configz`` answer (``{"kubeletconfig": {...}}``) -> its shutdown settings;
    ``ManifestError`` naming the field it cannot read."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("kubeletconfig"), Mapping):
        raise ManifestError("kubeletconfig", "missing: not a kubelet /configz answer")
    config = doc["kubeletconfig"]
    bands: list[tuple[int, dt.timedelta]] = []
    by_priority = config.get("shutdownGracePeriodByPodPriority") or []
    if not isinstance(by_priority, list):
        raise ManifestError("kubeletconfig.shutdownGracePeriodByPodPriority", "expected a list")
    for i, band in enumerate(by_priority):
        here = f"kubeletconfig.shutdownGracePeriodByPodPriority[{i}]"
        if not isinstance(band, Mapping):
            raise ManifestError(here, "expected a mapping")
        prio, seconds = band.get("priority", 0), band.get("shutdownGracePeriodSeconds", 0)
        if not isinstance(prio, int) or not isinstance(seconds, int) or seconds < 0:
            raise ManifestError(here, "expected integers priority and shutdownGracePeriodSeconds")
        bands.append((prio, dt.timedelta(seconds=seconds)))
    return inputs.KubeletShutdown(
        grace=_go_duration(config, "shutdownGracePeriod"),
        critical_grace=_go_duration(config, "shutdownGracePeriodCriticalPods"),
        by_priority=tuple(bands),
    )


# ---- all of it ----


def _name(raw: Mapping[str, Any]) -> tuple[str | None, str]:
    meta = raw.get("metadata") or {}
    ns = meta.get("namespace")
    return (str(ns) if ns else None), str(meta.get("name", ""))


def _pods(
    docs: Iterable[Mapping[str, Any]], unreadable: list[inputs.Unreadable]
) -> list[inputs.AuditPod]:
    out = []
    for raw in docs:
        try:
            out.append(audit_pod(raw))
        except ManifestError as err:
            ns, name = _name(raw)
            unreadable.append(inputs.Unreadable("Pod", ns, name, str(err)))
    return out


def _nodes(
    docs: Iterable[Mapping[str, Any]],
    configz: Mapping[str, object],
    unreadable: list[inputs.Unreadable],
) -> list[inputs.AuditNode]:
    out = []
    for raw in docs:
        try:
            node = objects.node_from_manifest(raw)
        except ManifestError as err:
            unreadable.append(inputs.Unreadable("Node", None, _name(raw)[1], str(err)))
            continue
        spec = raw.get("spec") or {}
        provider = spec.get("providerID") if isinstance(spec, Mapping) else None
        kubelet, problem = None, None
        found = configz.get(node.name)
        if isinstance(found, str):
            problem = found
        elif found is not None:
            try:
                kubelet = kubelet_from_configz(found)
            except ManifestError as err:
                problem = str(err)
        out.append(
            inputs.AuditNode(
                node=node,
                provider_id=provider if isinstance(provider, str) and provider else None,
                kubelet=kubelet,
                kubelet_problem=problem,
            )
        )
    return out


def _budgets(
    docs: Iterable[Mapping[str, Any]], unreadable: list[inputs.Unreadable]
) -> list[cluster.PodDisruptionBudget]:
    out = []
    for raw in docs:
        try:
            out.append(objects.budget_from_manifest(raw))
        except (ManifestError, TypeError, ValueError) as err:
            ns, name = _name(raw)
            unreadable.append(inputs.Unreadable("PodDisruptionBudget", ns, name, str(err)))
    return out


def _autoscalers(
    docs: Iterable[Mapping[str, Any]], unreadable: list[inputs.Unreadable]
) -> list[inputs.Autoscaler]:
    out = []
    for raw in docs:
        found = autoscaler(raw)
        if isinstance(found, inputs.Unreadable):
            unreadable.append(found)
        elif found is not None:
            out.append(found)
    return out


def policy_in_force(entries: Iterable[policy.PolicyEntry]) -> policy.Policy:
    """The ``default`` object's policy, or the one its status says was last accepted."""
    for e in entries:
        if e.name == policy.OBJECT_NAME:
            return policy.in_force(e)
    return policy.DEFAULT


def cluster_inputs(
    *,
    pod_docs: Iterable[Mapping[str, Any]],
    node_docs: Iterable[Mapping[str, Any]],
    budget_docs: Iterable[Mapping[str, Any]],
    deployment_docs: Iterable[Mapping[str, Any]],
    webhook_docs: Iterable[Mapping[str, Any]],
    policy_docs: Iterable[Mapping[str, Any]] | None,
    endpoints: Mapping[str, int] | None = None,
    configz: Mapping[str, object] | None = None,
    namespace: str | None = None,
) -> inputs.ClusterInputs:
    """The documents read -> the checks' inputs. ``endpoints``: ready endpoints per
    ``namespace/name`` Service; ``configz``: per node, its kubelet's /configz document or a
    string saying why it could not be read (a node missing from it was not asked)."""
    unreadable: list[inputs.Unreadable] = []
    audit_pods = _pods(pod_docs, unreadable)
    agents = frozenset(
        p.pod.node
        for p in audit_pods
        if p.pod.node is not None
        and p.pod.phase is cluster.PodPhase.RUNNING
        and all(p.pod.labels.get(k) == v for k, v in AGENT_LABELS.items())
    )
    hooks = [
        dataclasses.replace(
            w, ready_endpoints=(endpoints or {}).get(w.service) if w.service else None
        )
        for raw in webhook_docs
        for w in webhooks(raw)
    ]
    entries = None
    if policy_docs is not None:
        entries = tuple(policies.policy_entry(dict(d)) for d in policy_docs)
    return inputs.ClusterInputs(
        pods=tuple(audit_pods),
        nodes=tuple(_nodes(node_docs, configz or {}, unreadable)),
        budgets=tuple(_budgets(budget_docs, unreadable)),
        autoscalers=tuple(_autoscalers(deployment_docs, unreadable)),
        webhooks=tuple(hooks),
        policies=entries,
        policy=policy_in_force(entries or ()),
        agents=agents if namespace is None else None,
        unreadable=tuple(unreadable),
        namespace=namespace,
    )


async def _list(api: lightkube.AsyncClient, res: Any, **kw: Any) -> list[dict[str, Any]]:
    return [dict(o) async for o in api.list(res, **kw)]


async def _configz(api: lightkube.AsyncClient, node: str, gate: asyncio.Semaphore) -> object:
    """The kubelet's /configz for ``node``, or why it could not be read (one line)."""
    http: httpx2.AsyncClient = api._client._client  # lightkube's own connection to the API
    async with gate:
        try:
            answer = await http.get(f"/api/v1/nodes/{node}/proxy/configz", timeout=KUBELET_TIMEOUT)
        except (httpx2.HTTPError, OSError) as err:
            return f"GET /api/v1/nodes/{node}/proxy/configz: {type(err).__name__}"
    if answer.status_code != 200:
        text = " ".join(answer.text.split())[:200]
        return f"GET /api/v1/nodes/{node}/proxy/configz: {answer.status_code} {text}".rstrip()
    try:
        return json.loads(answer.text)
    except ValueError:
        return f"GET /api/v1/nodes/{node}/proxy/configz: not JSON"


async def read_cluster(
    *, kubeconfig: pathlib.Path | None, namespace: str | None, kubelets: bool = True
) -> tuple[inputs.ClusterInputs, list[dict[str, Any]]]:
    """Everything the cluster checks read, and the Deployments (for the controller's queue).
    ``KubeError`` (one line) when the API cannot be used."""
    api = client.connect(kubeconfig)
    where: dict[str, Any] = {"namespace": namespace or lightkube.ALL_NS}
    try:
        with client.api_errors():
            pod_docs = await _list(api, resources.Pod, **where)
            node_docs = await _list(api, resources.Node)
            budget_docs = await _list(api, resources.PodDisruptionBudget, **where)
            deployments = await _list(api, resources.Deployment, namespace=lightkube.ALL_NS)
            webhook_docs = await _list(api, ValidatingWebhookConfiguration)
            try:
                policy_docs: list[dict[str, Any]] | None = await _list(
                    api, resources.DisruptionPolicy
                )
            except (ApiError, httpx2.HTTPStatusError) as err:
                code = err.status.code if isinstance(err, ApiError) else err.response.status_code
                if code != 404:
                    raise
                policy_docs = None
            endpoints: dict[str, int] = {}
            for raw in webhook_docs:
                for hook in webhooks(raw):
                    if hook.service is None or hook.service in endpoints:
                        continue
                    ns, svc = hook.service.split("/", 1)
                    slices = await _list(
                        api, EndpointSlice, namespace=ns, labels={SERVICE_LABEL: svc}
                    )
                    endpoints[hook.service] = ready_endpoints(slices)
            configz: dict[str, object] = {}
            if kubelets and namespace is None:
                gate = asyncio.Semaphore(KUBELET_CONCURRENCY)
                names = [_name(n)[1] for n in node_docs]
                answers = await asyncio.gather(*(_configz(api, n, gate) for n in names))
                configz = dict(zip(names, answers, strict=True))
    finally:
        await api.close()
    found = cluster_inputs(
        pod_docs=pod_docs,
        node_docs=node_docs,
        budget_docs=budget_docs,
        deployment_docs=deployments,
        webhook_docs=webhook_docs,
        policy_docs=policy_docs,
        endpoints=endpoints,
        configz=configz,
        namespace=namespace,
    )
    return found, deployments
