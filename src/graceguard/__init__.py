"""graceguard: the disruption control plane for long-running Kubernetes pods.

Packages, from the core outwards (the import-linter contracts in ``.importlinter`` keep the
layers and the purity):

- ``domain``     pure values and rules of disruption. No I/O, no clock.
- ``engine``     the pure decisions: the reconciler, the admission decision, protection projection
                 and the audit's checks: (what was read, policy, now) -> actions or answers.
- ``manifests``  Kubernetes-shaped documents (dicts) -> domain values. Pure.
- ``controller`` the controller's service layer: the reconcile round and loop, carrying out the
                 engine's actions through ports.
- ``webhook``    the eviction webhook's service layer: reviews in, answers and reports out.
- ``agent``      the node agent's service layer: its node's OS shutdown held and drained.
- ``sim``        the discrete-event simulator: simulated cluster and actors around the real engine
                 and service layers.
- ``adapters``   the I/O edge: Kubernetes, AWS, logind over D-Bus, instance metadata, the ledger
                 (SQL), HTTP servers and clients, certificates. The only package that imports a
                 client library.
- ``processes``  one composition root per process (controller, webhook, agent) and their shared
                 supervisor: real adapters wired into a service.
- ``cli``        the typer commands: parse options, read files, print; they call ``processes``.
"""

__version__ = "0.1.0"
