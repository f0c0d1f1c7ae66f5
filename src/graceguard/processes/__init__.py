"""The processes graceguard runs; each module is one composition root that wires real adapters
into a service; ``cli/`` parses options and calls them.

- ``controller``: ``graceguard controller`` (informers, Lease, reconcile loop, executor, ledger).
- ``webhook``: ``graceguard webhook`` (admission state, the eviction webhook's HTTPS server).
- ``supervisor``: what both share: logging, a replica's identity, and running their tasks,
  probes and metrics until one fails, then shutting down in order.

Only here do services and adapters meet. No client library is imported here (``.importlinter``):
Kubernetes, the ledger and HTTP are reached through ``graceguard.adapters``.
"""
