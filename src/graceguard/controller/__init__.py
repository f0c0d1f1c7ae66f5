"""The service layer: carries out the engine's actions through small ports.

It decides nothing itself (the engine does) and talks to nothing directly: Kubernetes, the
ledger and log sources are reached through the protocols in ``ports``, implemented in
``graceguard.adapters`` and wired together by the composition root (``processes/controller.py``).
The simulator runs the same executor over its own implementations of the ports
(``sim/cluster.py``). No kopf, lightkube or SQLAlchemy imports here (``.importlinter``).
"""
