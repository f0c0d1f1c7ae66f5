"""The service layer: carries out the engine's actions through small ports.

It decides nothing itself (the engine does) and talks to nothing directly: Kubernetes, the
ledger and log sources are reached through the protocols in ``ports``, implemented in
``graceguard.adapters`` and wired together by the composition root (``processes/controller.py``).
The simulator runs the same reconcile round (``rounds``: view, engine, executor) over its own
implementations of the ports (``sim/view.py``, ``sim/cluster.py``); the loop that waits for
changes on the wall clock (``loop``) is the controller's alone. No kopf, lightkube or SQLAlchemy
imports here (``.importlinter``).
"""
