"""graceguard: the disruption control plane for long-running Kubernetes pods.

Packages, from the core outwards (the import-linter contracts in ``.importlinter`` keep the
layers and the purity):

- ``domain``     pure values and rules of disruption. No I/O, no clock.
- ``engine``     the reconciler and the admission decision: (snapshot, requests, policy, now) ->
                 actions. Pure.
- ``manifests``  Kubernetes-shaped documents (dicts) -> domain values. Pure.
- ``controller`` the controller's service layer: carries out the engine's actions through ports.
- ``webhook``    the eviction webhook's service layer: reviews in, answers and reports out.
- ``sim``        the discrete-event simulator: simulated cluster and actors around the real engine.
- ``adapters``   the I/O edge: Kubernetes, the ledger (SQL), HTTP servers, certificates. The only
                 package that imports a client library.
- ``processes``  one composition root per process (controller, webhook) and their shared
                 supervisor: real adapters wired into a service.
- ``cli``        the typer commands: parse options, read files, print; they call ``processes``.
"""

__version__ = "0.1.0"
