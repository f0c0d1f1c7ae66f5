"""The annotation names graceguard reads and writes, its own and the ones users already use."""

from __future__ import annotations

PREFIX = "graceguard.io/"

# Inputs (set by users or applications).
PROTECT = "graceguard.io/protect"
MIN_RUNTIME = "graceguard.io/min-runtime"
BUSY = "graceguard.io/busy"
NOTICE = "graceguard.io/notice"
MIN_AVAILABLE = "graceguard.io/min-available"
MAX_RUNTIME = "graceguard.io/max-runtime"
"""A pod's maximum running time (ACS's task instances): evicted at its start + this, with notice
(``domain.deadlines.from_max_runtime``)."""

# Equivalents other tools already define.
CA_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
CA_ON_COMPLETION = "on-completion"
"""``safe-to-evict``'s third value (cluster-autoscaler 1.36): never evicted, waited for until it
completes; read as protection until completion."""
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
ACS_ENSURE_RUNNING = "alibabacloud.com/ensure-running-duration"

# On pods a ReplicaSet owns: the ReplicaSet controller deletes the pods of lower cost first when
# it scales in (an int32; absent means 0).
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

# On nodes: cluster-autoscaler leaves a node with this annotation alone (never scales it down).
CA_SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"

# Outputs (written by graceguard).
EVICTION_AT = "graceguard.io/eviction-at"
EVICTION_REASON = "graceguard.io/eviction-reason"
PROJECTED = "graceguard.io/projected"
"""Comma-separated names of the annotations graceguard added while projecting protection, so that
exactly those are removed afterwards and a user's own value is never touched."""
HELD_FOR = "graceguard.io/held-for"
"""On a node: the Disruption for which graceguard set ``scale-down-disabled`` on it, so that an
autoscaler does not delete the node while graceguard drains it (a pod in its own long grace
period looks gone to the autoscaler); removed, with exactly that annotation, when it is done."""
CORDONED_FOR = "graceguard.io/cordoned-for"
"""On a node: the Disruption for which graceguard cordoned it, written in the same patch as
``spec.unschedulable: true`` and only when the node was schedulable, so that the uninstall cleanup
uncordons exactly graceguard's cordons (``domain.node_cordon``), and so does a taken-over drain
that ends without emptying the node (``engine.takeovers``)."""
BLOCKED_SINCE = "graceguard.io/blocked-since"
"""When a planned eviction was first refused by a budget: the start of the ``pdbMaxWait`` clock."""
DRAINED_BY = "graceguard.io/drained-by"
"""On a ``Disruption``: the node agent that took its node's drain over when no controller had
begun it (``disruption.drainer``)."""
DELETION_COST_AT = "graceguard.io/deletion-cost-at"
"""When graceguard last set ``pod-deletion-cost`` on the pod: its writes of the cost are bounded
from it (``engine.deletion_cost.LOWER_AFTER``)."""
SURGE_AT = "graceguard.io/surge-at"
"""On a pod: when graceguard started a surge for it (a rollout of its Deployment) before taking
away its last Ready replica; the surge is bounded from it (``engine.surge``)."""
SURGE_OUTCOME = "graceguard.io/surge-outcome"
"""On a pod: why no surge stands before its eviction any more (``timed-out``, ``not-possible``),
written with the event that says so; the budgets decide as without a surge from then on."""
RESTARTED_AT = "graceguard.io/restarted-at"
"""On a Deployment's pod template: the surge graceguard started (the template change is the
rollout, as ``kubectl rollout restart``'s ``kubectl.kubernetes.io/restartedAt`` is)."""

# What projection adds, and the value it adds.
PROJECTION: tuple[tuple[str, str], ...] = (
    (CA_SAFE_TO_EVICT, "false"),
    (KARPENTER_DO_NOT_DISRUPT, "true"),
)

PROTECTION_INPUTS = frozenset(
    {
        PROTECT,
        MIN_RUNTIME,
        BUSY,
        NOTICE,
        CA_SAFE_TO_EVICT,
        KARPENTER_DO_NOT_DISRUPT,
        ACS_ENSURE_RUNNING,
        MAX_RUNTIME,
    }
)
"""Every pod annotation that changes a pod's protection, notice or maximum running time."""

WATCHED = PROTECTION_INPUTS | {PROJECTED}
"""The annotations that make a pod worth a look when projecting protection."""
