"""How a simulated pod behaves: it works, and reacts to SIGTERM as its application would.

A pod with ``work`` runs until that much work is done and then leaves (Succeeded). On SIGTERM it
keeps working through its grace period and exits the moment its work is done; when the rest of the
work does not fit in the grace period and it can ``checkpoint``, it saves its progress (which its
replacement resumes from) and exits; otherwise it works on until the kubelet kills it at the end
of the grace period. A service (no ``work``) exits ``stop`` after SIGTERM, or, with ``stop:
clients``, once every pod using it has finished. Whatever is still running when its node goes is
killed with it.

A pod is *premature* when it ends before its work is done; the work it did is *lost* unless it
checkpointed it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum

from graceguard.domain import cluster
from graceguard.sim.scenario import PodSpec

ZERO = dt.timedelta(0)


class End(enum.StrEnum):
    COMPLETED = "completed"
    """Its work is done (Succeeded)."""
    STOPPED = "stopped"
    """A service that shut down cleanly after SIGTERM."""
    CHECKPOINTED = "checkpointed"
    """Saved its progress after SIGTERM and exited before its work was done."""
    KILLED = "killed"
    """SIGKILL at the end of its grace period, gone with its node, or its connection broke."""


@dataclasses.dataclass(eq=False, slots=True)
class SimNode:
    name: str
    group: str
    zone: str
    labels: dict[str, str]
    start: dt.datetime
    end: dt.datetime | None = None
    end_reason: str = ""
    ends_at: dt.datetime | None = None
    """When an actor has scheduled the instance to go (spot reclaim, power-off)."""
    ends_reason: str = ""
    cordoned: bool = False
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)

    def alive(self, now: dt.datetime) -> bool:
        return self.start <= now and self.end is None


@dataclasses.dataclass(eq=False, slots=True)
class SimPod:
    spec: PodSpec
    name: str
    created: dt.datetime
    """When it is created (its scenario start, or when its controller replaced a pod)."""
    want_node: str | None
    saved: dt.timedelta = ZERO
    """Progress it starts from (a checkpoint of the pod it replaces)."""
    generation: int = 0
    uses: str | None = None
    """The pod it holds a connection to (bound when it starts)."""
    node: str | None = None
    started: dt.datetime | None = None
    annotations: dict[str, str] = dataclasses.field(default_factory=dict)
    notice_stage: str | None = None
    first_notice: dt.datetime | None = None
    sigterm_at: dt.datetime | None = None
    grace_end: dt.datetime | None = None
    exit_at: dt.datetime | None = None
    exit_kind: End | None = None
    stopped_by: str = ""
    evicted: bool = False
    """Asked to stop through the Eviction API (budgets checked), by graceguard or an actor."""
    forced: bool = False
    """Removed without a budget-checked eviction: deleted past its budget, stopped by the kubelet
    or the instance going, with no eviction."""
    end: dt.datetime | None = None
    end_kind: End | None = None
    end_cause: str = ""
    replaced: bool = False
    kube: cluster.Pod | None = None
    """The API view of it, cached by ``api.ApiServer.kube_pod`` until it changes."""

    @property
    def namespace(self) -> str:
        return self.spec.namespace

    @property
    def key(self) -> str:
        return f"{self.spec.namespace}/{self.name}"

    @property
    def work(self) -> dt.timedelta | None:
        return self.spec.work

    @property
    def running(self) -> bool:
        return self.started is not None and self.end is None

    @property
    def terminating(self) -> bool:
        return self.sigterm_at is not None and self.end is None

    @property
    def daemon(self) -> bool:
        return self.spec.owner is not None and self.spec.owner.kind == "DaemonSet"

    def done(self, t: dt.datetime) -> dt.timedelta:
        """Work done by ``t``, counting the progress it started from."""
        if self.started is None or self.work is None:
            return ZERO
        if self.exit_kind is End.CHECKPOINTED and self.sigterm_at is not None:
            t = min(t, self.sigterm_at)  # it stopped working to save its progress
        return min(self.work, self.saved + max(ZERO, t - self.started))

    def completion(self) -> dt.datetime | None:
        """When its work is done, if nothing stops it."""
        if self.started is None or self.work is None:
            return None
        return self.started + (self.work - self.saved)

    @property
    def premature(self) -> bool:
        return self.work is not None and self.end is not None and self.end_kind is not End.COMPLETED

    def lost(self) -> dt.timedelta:
        """Work this pod did that nobody keeps: all of it when killed, none when checkpointed."""
        if self.end is None or self.end_kind is not End.KILLED or self.work is None:
            return ZERO
        return self.done(self.end) - self.saved

    def sigterm(self, now: dt.datetime, grace: int) -> None:
        """The kubelet sends SIGTERM with ``grace`` seconds before SIGKILL."""
        self.sigterm_at = now
        self.grace_end = now + dt.timedelta(seconds=grace)
        budget = dt.timedelta(seconds=grace)
        if self.work is not None:
            finish = self.completion()
            assert finish is not None
            if finish - now <= budget:
                self.exit_at, self.exit_kind = finish, End.COMPLETED
            elif self.spec.checkpoint is not None and self.spec.checkpoint <= budget:
                self.exit_at, self.exit_kind = now + self.spec.checkpoint, End.CHECKPOINTED
        elif not self.spec.stop_for_clients and self.spec.stop <= budget:
            self.exit_at, self.exit_kind = now + self.spec.stop, End.STOPPED
