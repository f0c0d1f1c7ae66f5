"""The reconciler: (cluster snapshot, open disruption requests, policy, now) -> actions.

Pure and deterministic: no I/O, no clock (``now`` is an argument), no memory between calls. Whatever
graceguard must remember (notices posted, projected annotations, the blocked-since clock) it writes
onto the pods through its actions and reads back from the next snapshot, so a restarted or failed-
over controller carries on where the last one stopped. ``.importlinter`` enforces the purity.
"""
