"""A scenario document (parsed YAML) -> frozen values, or ``ScenarioError`` naming every field.

The shape (every field but ``nodes``, ``pods`` and ``actors`` optional)::

    name: eks-desired-size
    description: the story, in words
    start: 2026-11-20T22:00:00Z      # the simulated clock starts here
    horizon: 72h                     # the simulation stops here at the latest
    nodes:
      - {name: a1, group: workers, zone: us-east-1a, start: 0s, labels: {}}
    workloads:                       # only to set replicas or annotations; owners imply them
      - {kind: Deployment, name: web, replicas: 3, annotations: {}}
    pods:
      - name: job                    # with count: job-0, job-1, ...
        node: a1                     # or a list, used round-robin with count
        count: 3
        stagger: 10m                 # each next copy starts this much later
        start: 0s                    # offset from the scenario start
        work: 1h                     # null (default): a service that runs until stopped
        grace: 7200                  # terminationGracePeriodSeconds (default 30)
        priority: 0
        owner: Job/batch             # or {kind: Job, name: batch}; Deployment, StatefulSet,
                                     # ReplicaSet, Job, DaemonSet; none: a bare pod
        checkpoint: 1m               # can save its progress in this long after SIGTERM
        stop: 5s                     # a service's clean shutdown after SIGTERM, or "clients"
        uses: pgbouncer-0            # a pod it keeps a connection to
        annotations: {graceguard.io/min-runtime: 3h}
        labels: {app: job}
    pdbs:
      - {name: pgb, selector: {app: pgbouncer}, minAvailable: 1}
    actors:
      - type: asg                    # see kinds.py and sim/actors/ for each type
        group: workers
        events:
          - {at: 30m, action: az-rebalance, node: a1}
      - type: workload-scale-in      # its events set a workload's replicas, not a node
        workload: Deployment/worker
        events:
          - {at: 40m, replicas: 3}
    policy: {noticeLead: 10m}        # a DisruptionPolicy spec; defaults from DESIGN.md

Durations use the Go form (``90s``, ``1h30m``) and may not be negative. Unknown fields are
errors. The simulator reads no files: the CLI loads the YAML and passes the document here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import types
from collections.abc import Mapping

from graceguard.domain import durations, intorpercent, policy
from graceguard.domain.policy import FieldError
from graceguard.manifests import policies
from graceguard.sim import fields, kinds
from graceguard.sim.fields import Doc

DEFAULT_START = dt.datetime(2026, 11, 20, 0, 0, tzinfo=dt.UTC)
DEFAULT_HORIZON = dt.timedelta(hours=72)
MAX_HORIZON = dt.timedelta(days=30)
MAX_NODES = 500
MAX_PODS = 2000
MAX_EVENTS = 1000
SCALABLE_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")
REPLICASET_KINDS = ("Deployment", "ReplicaSet")
"""The workloads whose scale-in the ReplicaSet controller carries out."""
OWNER_KINDS = (*SCALABLE_KINDS, "Job", "DaemonSet")
EMPTY: Mapping[str, str] = types.MappingProxyType({})

_TOP = (
    "name",
    "description",
    "start",
    "horizon",
    "nodes",
    "workloads",
    "pods",
    "pdbs",
    "actors",
    "policy",
)
_NODE = ("name", "group", "zone", "start", "labels")
_WORKLOAD = ("kind", "name", "namespace", "replicas", "annotations")
_POD = (
    "name",
    "namespace",
    "node",
    "count",
    "stagger",
    "start",
    "work",
    "grace",
    "priority",
    "owner",
    "checkpoint",
    "stop",
    "uses",
    "annotations",
    "labels",
)
_PDB = ("name", "namespace", "selector", "minAvailable", "maxUnavailable")
_EVENT = ("at", "node", "action", "desired")
_SCALE_EVENT = ("at", "replicas")


class ScenarioError(ValueError):
    """A scenario that cannot be simulated; ``errors`` names every field at fault."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors
        self.field = errors[0].field
        self.reason = errors[0].reason


@dataclasses.dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    group: str
    zone: str
    start: dt.timedelta
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: EMPTY)


@dataclasses.dataclass(frozen=True, slots=True)
class Owner:
    kind: str
    name: str

    @property
    def scalable(self) -> bool:
        return self.kind in SCALABLE_KINDS


@dataclasses.dataclass(frozen=True, slots=True)
class PodSpec:
    name: str
    namespace: str
    node: str
    start: dt.timedelta
    work: dt.timedelta | None
    """``None``: a service, running until stopped."""
    grace: int
    priority: int = 0
    owner: Owner | None = None
    checkpoint: dt.timedelta | None = None
    stop: dt.timedelta = dt.timedelta(0)
    stop_for_clients: bool = False
    """On SIGTERM, wait for every pod that ``uses`` it to finish (PgBouncer 1.23+ SIGTERM)."""
    uses: str | None = None
    annotations: Mapping[str, str] = dataclasses.field(default_factory=lambda: EMPTY)
    labels: Mapping[str, str] = dataclasses.field(default_factory=lambda: EMPTY)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclasses.dataclass(frozen=True, slots=True)
class WorkloadSpec:
    kind: str
    name: str
    namespace: str
    replicas: int
    annotations: Mapping[str, str] = dataclasses.field(default_factory=lambda: EMPTY)


@dataclasses.dataclass(frozen=True, slots=True)
class PdbSpec:
    name: str
    namespace: str
    selector: Mapping[str, str]
    min_available: intorpercent.IntOrPercent | None = None
    max_unavailable: intorpercent.IntOrPercent | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class EventSpec:
    at: dt.timedelta
    node: str | None = None
    action: str = ""
    desired: int | None = None
    replicas: int | None = None
    """A scaling actor's event: the workload's new ``spec.replicas``."""


@dataclasses.dataclass(frozen=True, slots=True)
class ActorSpec:
    kind: str
    settings: kinds.Settings
    events: tuple[EventSpec, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    description: str
    start: dt.datetime
    horizon: dt.timedelta
    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodSpec, ...]
    workloads: tuple[WorkloadSpec, ...]
    pdbs: tuple[PdbSpec, ...]
    actors: tuple[ActorSpec, ...]
    policy: policy.Policy

    @property
    def voluntary(self) -> bool:
        """Every disruption in it is voluntary: graceguard can hold each one."""
        return not any(kinds.KINDS[a.kind].imminent for a in self.actors)


def read_scenario(doc: object, *, default_name: str = "scenario") -> Scenario:
    """Validate a parsed scenario document; raise ``ScenarioError`` listing every problem."""
    errors: list[FieldError] = []
    top = Doc.of(doc, "", errors, _TOP)
    if top is None:
        raise ScenarioError(errors)
    name = top.text("name", default=default_name) or default_name
    description = top.text("description", default="") or ""
    start = top.time("start", default=DEFAULT_START)
    horizon = top.duration("horizon", default=DEFAULT_HORIZON, allow_zero=False) or DEFAULT_HORIZON
    if horizon > MAX_HORIZON:
        top.fail("horizon", "must be at most 720h (30 days)")
        horizon = MAX_HORIZON

    nodes = _nodes(top)
    node_names = {n.name for n in nodes}
    pods = _pods(top, node_names)
    workloads = _workloads(top, pods)
    pdbs = _pdbs(top)
    actors = _actors(top, node_names, {n.group for n in nodes}, workloads)

    pol = policy.DEFAULT
    raw_policy = top.get("policy")
    if raw_policy is not None:
        if not isinstance(raw_policy, Mapping):
            top.fail(
                "policy",
                f"expected a DisruptionPolicy spec (a mapping), got {fields.describe(raw_policy)}",
            )
        else:
            pol = policies.policy_from_spec(raw_policy, errors=errors, name=name, prefix="policy")
    if errors:
        raise ScenarioError(errors)
    return Scenario(
        name=name,
        description=" ".join(description.split()),
        start=start,
        horizon=horizon,
        nodes=nodes,
        pods=pods,
        workloads=workloads,
        pdbs=pdbs,
        actors=actors,
        policy=pol,
    )


def _nodes(top: Doc) -> tuple[NodeSpec, ...]:
    found: list[NodeSpec] = []
    seen: set[str] = set()
    for path, item in top.items("nodes", required=True, limit=MAX_NODES):
        d = Doc.of(item, path, top.errors, _NODE)
        if d is None:
            continue
        name = d.name("name", required=True)
        group = d.name("group", default="default") or "default"
        zone = d.name("zone", default="zone-a") or "zone-a"
        start = d.duration("start", default=dt.timedelta(0)) or dt.timedelta(0)
        labels = d.strings("labels")
        if name is None:
            continue
        if name in seen:
            d.fail("name", f"duplicate node name {name!r}")
            continue
        seen.add(name)
        found.append(NodeSpec(name, group, zone, start, types.MappingProxyType(labels)))
    return tuple(found)


def _owner(d: Doc) -> Owner | None:
    raw = d.get("owner")
    if raw is None:
        return None
    kind: object
    name: object
    if isinstance(raw, str):
        kind, _, name = raw.partition("/")
    elif isinstance(raw, Mapping):
        od = Doc.of(raw, d.at("owner"), d.errors, ("kind", "name"))
        if od is None:
            return None
        kind, name = od.get("kind"), od.get("name")
    else:
        d.fail("owner", f'expected "Kind/name" or {{kind, name}}, got {fields.describe(raw)}')
        return None
    if kind not in OWNER_KINDS:
        d.fail("owner", f"kind must be one of {', '.join(OWNER_KINDS)}, got {kind!r}")
        return None
    if not isinstance(name, str) or not name or "/" in name:
        d.fail("owner", f"needs a name, as in {kind}/NAME")
        return None
    assert isinstance(kind, str)
    return Owner(kind, name)


def _pods(top: Doc, node_names: set[str]) -> tuple[PodSpec, ...]:  # noqa: C901, PLR0912 - one step per field read, each naming its field on error
    found: list[PodSpec] = []
    paths: list[str] = []
    uses: list[tuple[str, str, str]] = []  # (path, pod name, used name)
    seen: set[str] = set()
    for path, item in top.items("pods", required=True, limit=MAX_PODS):
        d = Doc.of(item, path, top.errors, _POD)
        if d is None:
            continue
        name = d.name("name", required=True)
        namespace = d.name("namespace", default="default") or "default"
        placement = _placement(d, node_names)
        count = d.integer("count", default=1, minimum=1, maximum=MAX_PODS)
        stagger = d.duration("stagger", default=dt.timedelta(0)) or dt.timedelta(0)
        start = d.duration("start", default=dt.timedelta(0)) or dt.timedelta(0)
        work = d.duration("work", default=None, allow_zero=False)
        grace = d.integer("grace", default=30, minimum=0, maximum=10 * 365 * 86400)
        priority = d.integer("priority", default=0, minimum=-(2**31), maximum=2**31 - 1)
        owner = _owner(d)
        checkpoint = d.duration("checkpoint", default=None)
        stop, for_clients = _stop(d)
        used = d.name("uses")
        annotations = d.strings("annotations")
        labels = d.strings("labels")
        if work is None and checkpoint is not None:
            d.fail("checkpoint", "only a pod with work can checkpoint it")
        if work is not None and (d.has("stop")):
            d.fail("stop", "only a service (no work) has a stop time; a job may checkpoint")
        if name is None or not placement:
            continue
        if len(found) + count > MAX_PODS:
            d.fail("count", f"the scenario may hold at most {MAX_PODS} pods")
            break
        last_start = start + stagger * (count - 1)
        if last_start > fields.MAX_DURATION:
            d.fail("stagger", "the last copy would start too late")
            continue
        for i in range(count):
            pod_name = name if count == 1 else f"{name}-{i}"
            if pod_name in seen:
                d.fail("name", f"duplicate pod name {pod_name!r}")
                continue
            seen.add(pod_name)
            found.append(
                PodSpec(
                    name=pod_name,
                    namespace=namespace,
                    node=placement[i % len(placement)],
                    start=start + stagger * i,
                    work=work,
                    grace=grace,
                    priority=priority,
                    owner=owner,
                    checkpoint=checkpoint,
                    stop=stop,
                    stop_for_clients=for_clients,
                    uses=used,
                    annotations=types.MappingProxyType(annotations),
                    labels=types.MappingProxyType(labels),
                )
            )
            paths.append(path)
            if used is not None:
                uses.append((path, pod_name, used))
    for path, pod_name, used in uses:
        if used not in seen:
            top.errors.append(FieldError(f"{path}.uses", f"no pod named {used!r}"))
        elif used == pod_name:
            top.errors.append(FieldError(f"{path}.uses", "a pod cannot use itself"))
    return tuple(found)


def _placement(d: Doc, node_names: set[str]) -> list[str]:
    raw = d.get("node")
    if raw is None:
        d.fail("node", "required: the node the pod runs on (or a list of nodes)")
        return []
    names = raw if isinstance(raw, list) else [raw]
    if not names:
        d.fail("node", "must not be an empty list")
        return []
    out: list[str] = []
    for value in names:
        if not isinstance(value, str) or value not in node_names:
            d.fail("node", f"no node named {value!r} in nodes")
            return []
        out.append(value)
    return out


def _stop(d: Doc) -> tuple[dt.timedelta, bool]:
    raw = d.get("stop")
    if raw is None:
        return dt.timedelta(0), False
    if raw == "clients":
        return dt.timedelta(0), True
    value = fields.parse_duration_value(raw)
    if isinstance(value, str):
        d.fail("stop", f'{value}; or "clients" to wait for the pods that use it')
        return dt.timedelta(0), False
    return value, False


def _workloads(top: Doc, pods: tuple[PodSpec, ...]) -> tuple[WorkloadSpec, ...]:
    declared: dict[tuple[str, str, str], WorkloadSpec] = {}
    for path, item in top.items("workloads", limit=MAX_PODS):
        d = Doc.of(item, path, top.errors, _WORKLOAD)
        if d is None:
            continue
        kind = d.text("kind", required=True)
        name = d.name("name", required=True)
        namespace = d.name("namespace", default="default") or "default"
        replicas = d.integer("replicas", default=-1, minimum=0, maximum=100_000)
        annotations = d.strings("annotations")
        if kind is not None and kind not in SCALABLE_KINDS:
            d.fail("kind", f"must be one of {', '.join(SCALABLE_KINDS)}, got {kind!r}")
            continue
        if kind is None or name is None:
            continue
        key = (kind, namespace, name)
        if key in declared:
            d.fail("name", f"duplicate workload {kind}/{name}")
            continue
        declared[key] = WorkloadSpec(
            kind, name, namespace, replicas, types.MappingProxyType(annotations)
        )
    counts: dict[tuple[str, str, str], int] = {}
    for pod in pods:
        if pod.owner is not None and pod.owner.scalable:
            key = (pod.owner.kind, pod.namespace, pod.owner.name)
            counts[key] = counts.get(key, 0) + 1
    out: list[WorkloadSpec] = []
    for key in sorted(set(declared) | set(counts)):
        spec = declared.get(key)
        replicas = counts.get(key, 0)
        if spec is None:
            out.append(WorkloadSpec(key[0], key[2], key[1], replicas))
        else:
            out.append(
                dataclasses.replace(
                    spec, replicas=spec.replicas if spec.replicas >= 0 else replicas
                )
            )
    return tuple(out)


def _pdbs(top: Doc) -> tuple[PdbSpec, ...]:
    out: list[PdbSpec] = []
    for path, item in top.items("pdbs", limit=MAX_PODS):
        d = Doc.of(item, path, top.errors, _PDB)
        if d is None:
            continue
        name = d.name("name", required=True)
        namespace = d.name("namespace", default="default") or "default"
        if not d.has("selector"):
            d.fail("selector", "required: matchLabels as a mapping, e.g. {app: pgbouncer}")
        selector = d.strings("selector")
        values: dict[str, intorpercent.IntOrPercent | None] = {}
        for key in ("minAvailable", "maxUnavailable"):
            raw = d.get(key)
            values[key] = None
            if raw is None:
                continue
            try:
                values[key] = intorpercent.parse_int_or_percent(raw)
            except intorpercent.IntOrPercentError as err:
                d.fail(key, str(err))
        if values["minAvailable"] is not None and values["maxUnavailable"] is not None:
            d.fail("maxUnavailable", "set minAvailable or maxUnavailable, not both")
        if name is None or not selector:
            continue
        out.append(
            PdbSpec(
                name,
                namespace,
                types.MappingProxyType(selector),
                values["minAvailable"],
                values["maxUnavailable"],
            )
        )
    return tuple(out)


def _actors(
    top: Doc, node_names: set[str], groups: set[str], workloads: tuple[WorkloadSpec, ...]
) -> tuple[ActorSpec, ...]:
    out: list[ActorSpec] = []
    for path, item in top.items("actors", required=True, limit=50):
        if not isinstance(item, Mapping):
            top.errors.append(FieldError(path, f"expected a mapping, got {fields.describe(item)}"))
            continue
        raw_kind = item.get("type")
        kind = kinds.KINDS.get(raw_kind) if isinstance(raw_kind, str) else None
        if kind is None:
            top.errors.append(
                FieldError(
                    f"{path}.type",
                    f"unknown actor {raw_kind!r}; known: {', '.join(sorted(kinds.KINDS))}",
                )
            )
            continue
        known = ("type", "events", *(s.name for s in kind.settings))
        d = Doc.of(item, path, top.errors, known)
        if d is None:
            continue
        settings = _settings(d, kind)
        group = settings.values.get("group")
        if group and group not in groups:
            d.fail("group", f"no node has group {settings.values['group']!r}")
        if kind.scales:
            events = _scale_events(d, _scaled_replicas(d, settings, workloads))
        else:
            events = _events(d, kind, node_names)
        out.append(ActorSpec(kind.name, settings, events))
    return tuple(out)


def _scaled_replicas(
    d: Doc, settings: kinds.Settings, workloads: tuple[WorkloadSpec, ...]
) -> int | None:
    """The replicas of the Deployment or ReplicaSet a scaling actor names (``None``: it names
    none of the scenario's, said in ``errors``)."""
    workload = settings.values.get("workload")
    if not workload:
        return None
    assert isinstance(workload, str)
    kind, _, name = workload.partition("/")
    namespace = settings.values.get("namespace") or "default"
    for w in workloads:
        if (w.kind, w.name, w.namespace) == (kind, name, namespace):
            return w.replicas
    d.fail(
        "workload",
        f"no {kind} named {name!r} in namespace {namespace!r}: give it pods owned by "
        f"{kind}/{name} (or list it under workloads)",
    )
    return None


def _settings(d: Doc, kind: kinds.Kind) -> kinds.Settings:
    values: dict[str, dt.timedelta | int | str | bool] = {}
    for s in kind.settings:
        required = s.default is None
        value: dt.timedelta | int | str | bool | None
        if s.type is kinds.SettingType.DURATION:
            assert isinstance(s.default, dt.timedelta)
            value = d.duration(s.name, default=s.default)
            if s.minimum is not None and value is not None and value < s.minimum:
                d.fail(s.name, f"must be at least {durations.format_duration(s.minimum)}")
                value = s.default
            if s.maximum is not None and value is not None and value > s.maximum:
                d.fail(s.name, f"must be at most {durations.format_duration(s.maximum)}")
                value = s.default
        elif s.type is kinds.SettingType.INTEGER:
            assert isinstance(s.default, int)
            value = d.integer(s.name, default=s.default, minimum=0, maximum=366 * 86400)
        elif s.type is kinds.SettingType.FLAG:
            assert isinstance(s.default, bool)
            value = d.flag(s.name, default=s.default)
        elif s.type is kinds.SettingType.WORKLOAD:
            value = _workload_setting(d, s.name, required=required)
        else:
            value = d.name(s.name, required=required, default=None)
        if value is None:
            value = "" if s.default is None else s.default
        values[s.name] = value
    return kinds.Settings(types.MappingProxyType(values))


def _workload_setting(d: Doc, key: str, *, required: bool) -> str | None:
    """``Kind/name`` of a Deployment or ReplicaSet."""
    raw = d.text(key, required=required)
    if raw is None:
        return None
    kind, _, name = raw.partition("/")
    if kind not in REPLICASET_KINDS:
        d.fail(key, f"expected Deployment/NAME or ReplicaSet/NAME, got {raw!r}")
        return None
    if not name or "/" in name or any(c.isspace() for c in name) or len(name) > 253:
        d.fail(key, f"needs a name, as in {kind}/NAME, got {raw!r}")
        return None
    return raw


def _events(d: Doc, kind: kinds.Kind, node_names: set[str]) -> tuple[EventSpec, ...]:
    out: list[EventSpec] = []
    for path, item in d.items("events", required=True, limit=MAX_EVENTS):
        known = _EVENT if kind.actions else ("at", "node")
        e = Doc.of(item, path, d.errors, known)
        if e is None:
            continue
        at = e.duration("at", default=None, required=True)
        action = kind.actions[0] if kind.actions else ""
        if kind.actions and e.has("action"):
            raw = e.get("action")
            if raw not in kind.actions:
                e.fail("action", f"expected one of {', '.join(kind.actions)}, got {raw!r}")
            else:
                assert isinstance(raw, str)
                action = raw
        desired: int | None = None
        node: str | None = None
        if action == kinds.SET_DESIRED:
            desired = e.integer("desired", default=0, minimum=0, maximum=MAX_NODES, required=True)
            if e.has("node"):
                e.fail("node", "set-desired picks the instances itself; give desired, not node")
        else:
            if e.has("desired"):
                e.fail("desired", f"only with action {kinds.SET_DESIRED}")
            node = e.name("node", required=True)
            if node is not None and node not in node_names:
                e.fail("node", f"no node named {node!r} in nodes")
                node = None
        if at is None or (node is None and desired is None):
            continue
        out.append(EventSpec(at, node, action, desired))
    return tuple(sorted(out, key=lambda ev: ev.at))


def _scale_events(d: Doc, replicas: int | None) -> tuple[EventSpec, ...]:
    """A scaling actor's events (``kind.scales``), in time order: each asks for fewer replicas
    than the one before it, the first for fewer than the workload's ``replicas``."""
    found: list[tuple[str, EventSpec]] = []
    for path, item in d.items("events", required=True, limit=MAX_EVENTS):
        e = Doc.of(item, path, d.errors, _SCALE_EVENT)
        if e is None:
            continue
        at = e.duration("at", default=None, required=True)
        wanted = e.integer("replicas", default=-1, minimum=0, maximum=100_000, required=True)
        if at is not None and wanted >= 0:
            found.append((path, EventSpec(at, replicas=wanted)))
    out: list[EventSpec] = []
    before = replicas
    for path, event in sorted(found, key=lambda pair: pair[1].at):
        assert event.replicas is not None
        if before is not None and event.replicas >= before:
            d.errors.append(
                FieldError(
                    f"{path}.replicas",
                    f"a scale-in needs fewer replicas than the {before} before it, "
                    f"got {event.replicas}",
                )
            )
            continue
        before = event.replicas
        out.append(event)
    return tuple(out)
