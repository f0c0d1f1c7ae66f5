"""graceguard: the disruption control plane for long-running Kubernetes pods.

Layers (enforced by the import-linter contracts in ``.importlinter``):

- ``domain``    pure values and rules. No I/O, no clock.
- ``engine``    the reconciler: (snapshot, requests, now) -> actions. Pure.
- ``manifests`` Kubernetes-shaped documents (dicts) <-> domain values. Pure.
- ``sim``       the discrete-event simulator that drives the engine.
- ``cli``       the typer entry points; the only place that reads files here.
"""

__version__ = "0.1.0"
