"""The I/O edge: Kubernetes (``kube``: informers, the writer, the Lease, logs, drains), the ledger
(``ledger``: SQL), the HTTP servers (``probes``, ``webhook_server``) and the development
certificate (``selfsigned``).

The only package that imports the client libraries (lightkube and httpx2, SQLAlchemy and its
drivers; later boto3 and dbus_fast). Adapters implement the ports of the service layers
(``graceguard.controller``, ``graceguard.webhook``) and may import them; those never import
adapters. Wired into services by ``graceguard.processes``, used by ``graceguard.cli`` for one-shot
commands; never imported by domain/, engine/, manifests/ or sim/ (``.importlinter``).
"""
