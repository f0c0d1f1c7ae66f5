"""The processes graceguard runs; each module is one composition root that wires real adapters
into a service; ``cli/`` parses options and calls them.

- ``controller``: ``graceguard controller`` (informers, Lease, reconcile loop, executor, ledger,
  notify sinks, and the AWS part when a queue is given).
- ``aws``: the controller's AWS part (the interruption queue's consumer, the Auto Scaling hold
  keeper, their boto3 thread pool).
- ``webhook``: ``graceguard webhook`` (admission state, the eviction webhook's HTTPS server).
- ``agent``: ``graceguard agent`` (logind over D-Bus, its node's Kubernetes objects, optionally
  instance metadata, around the node agent's service).
- ``supervisor``: what every one shares: logging, a replica's identity, and running their tasks,
  probes and metrics until one fails, then shutting down in order.

Only here do services and adapters meet. No client library is imported here (``.importlinter``):
Kubernetes, AWS, D-Bus, the ledger and HTTP are reached through ``graceguard.adapters``.
"""
