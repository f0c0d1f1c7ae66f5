"""The pure decisions of graceguard, given what was read and ``now``:

- ``reconciler``: the controller's round: (cluster snapshot, open disruption requests, policy,
  now) -> actions (``actions``) and when to be called again; ``index`` is the snapshot indexed for
  it, ``node_memo`` the node plans kept from one round to the next (a round plans only the nodes
  whose plan can have changed), ``decision`` when one pod may go (shared with ``explain``,
  ``plan`` and the webhook), ``surge`` whether a Deployment's last Ready replica first waits for
  a new one (a rollout with its own surge).
- ``projection``: which pods are protected now, and the annotations other autoscalers obey
  projected onto them (and retracted); ``deletion_cost`` the ``pod-deletion-cost`` kept on a
  ReplicaSet's pods with it, so that a scale-in deletes the idle ones first; ``gangs`` how long
  a gang of pods holds its members (the last member's protection).
- ``admission``: the eviction webhook's answer to an eviction someone else asked for;
  ``admission_facts`` the cluster facts it reads (``FactsTally`` keeps them up to date as pods
  change, a memo); ``takeovers`` what a drain it took over may force (never past a budget its
  evictor would wait on) and when it ends because its evictor gave up.
- ``audit``: ``graceguard audit``'s checks over what was read from the cluster and AWS.

Pure and deterministic: no I/O, no clock (``now`` is an argument), no memory between calls but
memos that only skip work (the protection reader's reads, ``node_memo``'s kept node plans: a round
decides the same with or without them; ``admission_facts.FactsTally``'s counts, the facts a
fresh build makes). Whatever graceguard must remember (notices posted,
projected annotations, the blocked-since clock, when it set a deletion cost) it writes onto the
pods through its actions and reads back from the next snapshot, so a restarted or failed-over
controller carries on where the last one stopped.
``.importlinter`` enforces the purity.
"""
