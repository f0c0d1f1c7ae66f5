"""The actor kinds a scenario may name, with their settings and event fields, as data.

Each actor module (``sim/actors/``) documents the behaviour; this table is what ``scenario.py``
validates a scenario file against, so that reading a file needs no simulator code.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Iterable, Mapping

MINUTE = dt.timedelta(minutes=1)
HOUR = dt.timedelta(hours=1)


class SettingType(enum.Enum):
    DURATION = "duration"
    INTEGER = "integer"
    NAME = "name"
    FLAG = "flag"
    WORKLOAD = "workload"
    """``Kind/name`` of a workload the scenario runs (a Deployment or a ReplicaSet)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Setting:
    name: str
    type: SettingType
    default: dt.timedelta | int | str | bool | None
    """``None``: required."""
    help: str = ""
    minimum: dt.timedelta | None = None
    maximum: dt.timedelta | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Kind:
    name: str
    settings: tuple[Setting, ...]
    actions: tuple[str, ...] = ()
    """Event actions; the first is the default. Empty: events take no ``action``."""
    summary: str = ""
    imminent: bool = False
    """Its disruptions come with a hard deadline (graceguard cannot hold the node)."""
    not_built: str | None = None
    """The part of graceguard its "with graceguard" run relies on that is not built yet (that run
    then shows what is planned, not what the product does); ``None``: every part it relies on
    runs in a cluster today and is shown on the real control plane by the e2e tier."""
    scales: bool = False
    """Its events give a workload's new ``replicas``, not a ``node``."""


@dataclasses.dataclass(frozen=True, slots=True)
class Settings:
    """An actor's validated settings, read back typed."""

    values: Mapping[str, dt.timedelta | int | str | bool]

    def duration(self, name: str) -> dt.timedelta:
        value = self.values[name]
        assert isinstance(value, dt.timedelta)
        return value

    def integer(self, name: str) -> int:
        value = self.values[name]
        assert isinstance(value, int) and not isinstance(value, bool)
        return value

    def text(self, name: str) -> str:
        value = self.values[name]
        assert isinstance(value, str)
        return value

    def flag(self, name: str) -> bool:
        value = self.values[name]
        assert isinstance(value, bool)
        return value


D, INT, N, F = SettingType.DURATION, SettingType.INTEGER, SettingType.NAME, SettingType.FLAG
W = SettingType.WORKLOAD

SET_DESIRED = "set-desired"
HOOK_TIMEOUT = Setting(
    "heartbeatTimeout",
    D,
    HOUR,
    "graceguard's termination lifecycle hook (PutLifecycleHook allows 30s to 2h)",
    minimum=dt.timedelta(seconds=30),
    maximum=2 * HOUR,
)

KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "cluster-autoscaler",
            (
                Setting("scaleDownUnneededTime", D, 10 * MINUTE, "--scale-down-unneeded-time"),
                Setting("maxGracefulTerminationSec", INT, 600, "--max-graceful-termination-sec"),
            ),
            summary="an event marks its node unneeded from `at`",
        ),
        Kind(
            "asg",
            (
                Setting("group", N, None, "the node group (Auto Scaling group) it owns"),
                HOOK_TIMEOUT,
            ),
            ("scale-in", "az-rebalance", "instance-refresh", SET_DESIRED),
            summary="terminates instances: `node`, or `desired` for set-desired",
        ),
        Kind(
            "eks-nodegroup",
            (
                Setting("group", N, None, "the managed node group it owns"),
                Setting("drainTimeout", D, 15 * MINUTE, "how long EKS evicts before terminating"),
                HOOK_TIMEOUT,
            ),
            ("scale-in", SET_DESIRED),
            summary="scales the group in: `node`, or `desired` for set-desired",
        ),
        Kind(
            "spot",
            (),
            summary="an interruption notice for `node` at `at`; gone 2 minutes later",
            imminent=True,
        ),
        Kind(
            "node-shutdown",
            (
                Setting("shutdownGracePeriod", D, dt.timedelta(0), "kubelet; 0 = off (default)"),
                Setting("shutdownGracePeriodCriticalPods", D, dt.timedelta(0), "kubelet"),
                Setting("agentDelay", D, 10 * MINUTE, "graceguard's node agent delay lock"),
            ),
            summary="the OS of `node` shuts down at `at`",
            imminent=True,
        ),
        Kind(
            "upgrade",
            (
                Setting("maxGrace", D, HOUR, "grace periods honoured up to this long"),
                Setting("pdbTimeout", D, HOUR, "PDBs honoured up to this long"),
                Setting("surge", F, True, "a new node joins before the old one drains"),
            ),
            summary="the platform upgrades `node` at `at`",
            not_built="taking the platform's drain over (it hands graceguard the node)",
        ),
        Kind(
            "expiry",
            (
                Setting(
                    "notice",
                    D,
                    10 * MINUTE,
                    "how long before expiry the platform sets graceguard.io/expires-at on the node",
                ),
                Setting("maxGrace", D, dt.timedelta(seconds=30), "SIGTERM to instance stop"),
            ),
            summary="`node` expires at `at`, announced `notice` before",
            imminent=True,
            # Built: the node's graceguard.io/expires-at read as an imminent Disruption's deadline
            # (controller.deadlines, run by sim.deadlines); shown on the real control plane by
            # tests/e2e/test_node_expiry.py (notice, eviction with the whole grace before the
            # deadline, DeadlineExceeded ahead of it, protection not held past it).
        ),
        Kind(
            "workload-scale-in",
            (
                Setting(
                    "workload", W, None, "the Deployment or ReplicaSet it scales: Deployment/NAME"
                ),
                Setting("namespace", N, "default", "the workload's namespace"),
            ),
            summary="sets the workload's `replicas` at `at` (kubectl scale, an HPA, KEDA)",
            imminent=True,  # deleted at once: graceguard cannot hold it, only rank its pods
            scales=True,
            # Built: the controller keeps pod-deletion-cost on a ReplicaSet's pods in line with
            # their protection (engine.deletion_cost, through the projection the simulator runs
            # and the executor's write); shown on the real control plane by
            # tests/e2e/test_scale_in.py (kubectl scale 5 -> 3 on the real ReplicaSet controller
            # keeps the 3 busy workers; without graceguard a busy one is deleted).
        ),
    )
}


def not_built(actor_kinds: Iterable[str]) -> tuple[str, ...]:
    """The parts not built yet that a scenario with these actors relies on with graceguard."""
    found = (KINDS[k].not_built for k in actor_kinds if k in KINDS)
    return tuple(dict.fromkeys(part for part in found if part is not None))
