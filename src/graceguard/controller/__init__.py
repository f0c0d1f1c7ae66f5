"""The controller's service layer: it carries out the engine's decisions and keeps what they
need going, through ports. From the top (the layers ``.importlinter`` keeps inside it):

- ``loop``: waits for a change, a wake-up or leadership on the wall clock and runs ``rounds``,
  the reconcile round (the view's snapshot -> the engine -> the executor -> its writes seen back),
  which the simulator runs too, over its own ports (``sim/view.py``, ``sim/cluster.py``);
- ``recording``: the ledger, fed with graceguard's evictions (and the pod's last log lines,
  ``logs``) and every termination; ``aws_queue``: the AWS interruption queue's consumer, each
  message's effect decided in ``interruptions``, whose node ``early_cordon`` cordons and holds
  before the round comes; ``deadlines``: the deadlines nodes announce
  (Karpenter's NodeClaim expiry and termination timestamp, ``graceguard.io/expires-at``,
  ``MaintenancePlanned``) opened as imminent Disruptions;
- ``notify``: the policy's notify sinks; ``metrics``: what the rounds did, for Prometheus;
- ``executor``: the one interpreter of the engine's actions, its writes in flight ranked by
  ``write_gate``; ``window_memory``: which pod it
  evicted in which maintenance window, kept where a new leader reads it; ``holds``: the Auto
  Scaling holds kept alive and released;
- ``ports``: every protocol the above reach the outside through.

Which pod goes when is the engine's to decide; this package talks to nothing directly:
Kubernetes, AWS, the ledger, log sources and notify sinks are reached through ``ports``,
implemented in ``graceguard.adapters`` and wired together by the composition root
(``processes/controller.py``). No kopf, lightkube, boto3 or SQLAlchemy imports here
(``.importlinter``).
"""
