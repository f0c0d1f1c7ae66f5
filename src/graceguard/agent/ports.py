"""Every port the node agent's service layer needs, as protocols typed with domain values.

``adapters.logind`` implements ``Logind`` over D-Bus, ``adapters.imds`` ``InstanceMetadata`` over
HTTP, ``adapters.kube.node_agent`` ``NodeCluster``, ``PolicyInForce`` and ``PodEvents`` on the
Kubernetes API, ``adapters.kube.controller_lease`` ``ControllerPresence``; tests fake them. Nothing
here does I/O.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from graceguard.domain import cluster, disruption, policy


class LogindUnavailable(Exception):  # noqa: N818 - a state of the machine, not a caller's error
    """logind cannot be reached: no system bus, no ``org.freedesktop.login1`` on it, or the call
    was refused. The message says which, on one line."""


class InhibitorLock(Protocol):
    """A logind inhibitor lock: held while its file descriptor is open."""

    @property
    def held(self) -> bool: ...

    def release(self) -> None:
        """Close the descriptor: logind lets the shutdown go on (idempotent)."""


class LogindSignal(enum.StrEnum):
    SHUTDOWN = "shutdown"
    """``PrepareForShutdown(true)``: a shutdown or reboot begins."""
    CANCELLED = "cancelled"
    """``PrepareForShutdown(false)``: it was called off."""
    LOGIND_LEFT = "logind-left"
    """``org.freedesktop.login1`` lost its owner (logind stopped or crashed): every inhibitor
    lock it held is gone with it."""
    LOGIND_BACK = "logind-back"
    """``org.freedesktop.login1`` has a new owner (logind restarted): it holds no lock of
    ours."""


class LogindConnection(Protocol):
    """One connection to logind on the system bus; unusable once the bus drops."""

    async def inhibit_delay_max(self) -> dt.timedelta:
        """``InhibitDelayMaxUSec``: how long logind waits for delay locks after it announces a
        shutdown."""

    async def preparing_for_shutdown(self) -> bool:
        """``PreparingForShutdown``: a shutdown is under way now (an agent started, or back on
        the bus, in the middle of one)."""

    async def inhibit(self, *, why: str) -> InhibitorLock:
        """``Inhibit("shutdown", "graceguard", why, "delay")``."""

    def signals(self) -> AsyncIterator[LogindSignal]:
        """What logind says, in order, until the bus drops (then the iteration ends)."""

    async def close(self) -> None: ...


class Logind(Protocol):
    async def connect(self) -> LogindConnection:
        """A new connection; ``LogindUnavailable`` when there is none to be had."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeState:
    """What the agent reads of its node before it holds it."""

    unschedulable: bool
    tainted: bool
    """It carries the agent's shutdown taint already."""


@dataclasses.dataclass(frozen=True, slots=True)
class NodeHold:
    """What the agent asks of its node around a shutdown, in its own words; how that is written
    on the node (the ``NoSchedule`` shutdown taint, ``spec.unschedulable``) is the Kubernetes
    adapter's."""

    keep_daemons_off: bool
    """Keep DaemonSet pods from coming back on it while it shuts down."""
    back_in_service: bool = False
    """Put it back in service (uncordoned); ``False``: its cordon is left as it is."""


SHUTTING_DOWN = NodeHold(keep_daemons_off=True)
"""The hold while the node shuts down."""
LET_GO = NodeHold(keep_daemons_off=False)
"""No hold, the cordon left as it is (the uninstall cleanup's)."""


@dataclasses.dataclass(frozen=True, slots=True)
class DisruptionState:
    """A ``Disruption`` as read now, for the agent's take-over."""

    phase: disruption.Phase
    version: str
    """``metadata.resourceVersion``: a take-over is written over this version only."""
    drained_by: str
    """The node agent that took its drain over; empty: none did."""


@dataclasses.dataclass(frozen=True, slots=True)
class DrainRound:
    """One round of the agent's own drain of its node."""

    next_wakeup: dt.datetime | None
    """When the engine asks to plan again (a notice, an eviction time); ``None``: on change."""
    open_requests: int
    """The node's Disruptions still open (not Done or Cancelled) when the round read them."""


class NodeDrain(Protocol):
    """The drain of the agent's own node, carried out by the agent when no controller began it:
    the engine's plan for that node and the controller's executor, over fresh reads of the node
    (``processes.agent`` wires it; ``engine.reconciler`` plans only a node the caller drains)."""

    async def round(self, *, now: dt.datetime) -> DrainRound:
        """Read the node, plan it and carry the plan out."""


class NodeCluster(Protocol):
    """The Kubernetes API, as far as one node's agent needs it."""

    async def open_disruption(self, request: disruption.DisruptionRequest) -> bool:
        """Create the Disruption; ``False`` when one of that name exists (joined)."""

    async def disruption_phase(self, request_id: str) -> disruption.Phase | None:
        """The phase its status reports (``Pending`` when none yet); ``None`` when it is gone."""

    async def disruption_state(self, request_id: str) -> DisruptionState | None:
        """Its phase, version and drainer now; ``None`` when it is gone."""

    async def take_over(self, *, request_id: str, drainer: str, read_version: str) -> bool:
        """Mark it drained by ``drainer`` (``graceguard.io/drained-by``), only over
        ``read_version``; ``False`` when it changed since (or is gone)."""

    async def cancel_disruption(self, *, request_id: str, at: dt.datetime, message: str) -> None:
        """Its status says ``Cancelled`` at ``at``, with ``message``."""

    async def pods_on_node(self, node: str) -> Sequence[cluster.Pod]:
        """The pods bound to ``node`` now."""

    async def node_state(self, node: str) -> NodeState: ...

    async def hold_node(self, *, node: str, hold: NodeHold) -> None:
        """Hold the node as ``hold`` says (replacing the agent's last hold of it)."""

    async def set_condition(self, *, node: str, status: bool, reason: str, message: str) -> None:
        """The node's ``GracefulShutdownHeld`` condition."""

    async def node_event(self, *, node: str, reason: str, message: str, warning: bool) -> None:
        """An Event on the node, reported by the agent."""


class ControllerPresence(Protocol):
    """Whether a graceguard controller leads (its Lease renewed lately), so that a drain one
    began is taken back by the agent when none does."""

    async def leads_now(self) -> bool:
        """Read now (a Lease that cannot be read counts as led)."""


class PolicyInForce(Protocol):
    async def policy_in_force(self) -> policy.Policy:
        """The ``DisruptionPolicy`` in force, found as the controller and ``graceguard plan``
        find it: the ``default`` object's spec when valid, else its ``status.inForce``, else the
        built-in defaults (also when there is no such object). Raises when it cannot be read."""


class PodEvents(Protocol):
    async def pod_event(self, *, pod: cluster.Pod, reason: str, message: str) -> None:
        """A ``Normal`` Event on the pod, reported by the agent."""


class NoticeKind(enum.StrEnum):
    SPOT_INTERRUPTION = "spot-interruption"
    """``spot/instance-action``: the instance is stopped or terminated at its ``time``."""
    REBALANCE = "rebalance-recommendation"
    """``events/recommendations/rebalance``: the instance is at elevated risk of interruption."""


@dataclasses.dataclass(frozen=True, slots=True)
class MetadataNotice:
    kind: NoticeKind
    at: dt.datetime
    """When the action happens (spot) or the recommendation was made (rebalance)."""
    detail: str
    """The notice's own words (``terminate``, ``stop``...), for the Disruption's reason."""


class MetadataError(Exception):
    """Instance metadata answered something unreadable or could not be reached; one line."""


class InstanceMetadata(Protocol):
    async def notices(self) -> Sequence[MetadataNotice]:
        """The interruption notices instance metadata shows now (none: an empty sequence);
        ``MetadataError`` when it cannot be read."""
