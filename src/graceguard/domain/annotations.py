"""The annotation names graceguard reads and writes, its own and the ones users already use."""

from __future__ import annotations

PREFIX = "graceguard.io/"

# Inputs (set by users or applications).
PROTECT = "graceguard.io/protect"
MIN_RUNTIME = "graceguard.io/min-runtime"
BUSY = "graceguard.io/busy"
NOTICE = "graceguard.io/notice"
MIN_AVAILABLE = "graceguard.io/min-available"

# Equivalents other tools already define.
CA_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
ACS_ENSURE_RUNNING = "alibabacloud.com/ensure-running-duration"

# Outputs (written by graceguard).
EVICTION_AT = "graceguard.io/eviction-at"
EVICTION_REASON = "graceguard.io/eviction-reason"
PROJECTED = "graceguard.io/projected"
"""Comma-separated names of the annotations graceguard added while projecting protection, so that
exactly those are removed afterwards and a user's own value is never touched."""
BLOCKED_SINCE = "graceguard.io/blocked-since"
"""When a planned eviction was first refused by a budget: the start of the ``pdbMaxWait`` clock."""

# A disruption request recorded on its node (``graceguard drain`` writes these; the controller
# reads them back after a restart, so the request survives it).
DISRUPTION = "graceguard.io/disruption"
"""The source of the disruption: ``drain``, ``upgrade``, ``asg-scale-in``..."""
DISRUPTION_CLASS = "graceguard.io/disruption-class"
DISRUPTION_REQUESTED_AT = "graceguard.io/disruption-requested-at"
DISRUPTION_DEADLINE = "graceguard.io/disruption-deadline"
DISRUPTION_DONE_AT = "graceguard.io/disruption-done-at"
"""Set by graceguard once the node is drained."""

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
    }
)
"""Every pod annotation that changes a pod's protection or notice."""

WATCHED = PROTECTION_INPUTS | {PROJECTED}
"""The annotations that make a pod worth a look when projecting protection."""
