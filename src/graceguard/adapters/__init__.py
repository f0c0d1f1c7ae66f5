"""The I/O edge: Kubernetes, AWS, logind, the ledger.

Imported by the CLI and by the entry points that wire the controller (its composition root), never
by domain/, engine/, manifests/ or sim/. Adapters implement the ports of
``graceguard.controller.ports`` and may import that module; the controller's services never import
adapters (``.importlinter`` enforces both directions).
"""
