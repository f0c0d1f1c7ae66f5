"""The I/O edge: Kubernetes (``kube``: informers, the writer, the Lease, logs, drains, the node
agent's and the audit's reads), AWS (``aws``: SQS, Auto Scaling, the audit's reads), the ledger
(``ledger``: SQL), systemd-logind over D-Bus (``logind``), EC2 instance metadata (``imds``), the
notify sinks' HTTP client (``notify_http``), the HTTP servers (``probes``, ``webhook_server``) and
the development certificate (``selfsigned``).

The only package that imports the client libraries: lightkube and httpx2, boto3 and botocore,
dbus_fast, SQLAlchemy and its drivers, aiohttp's client. Adapters implement the ports of the
service layers (``graceguard.controller``, ``graceguard.webhook``, ``graceguard.agent``) and may
import them; those never import adapters. Wired into services by ``graceguard.processes``, used by
``graceguard.cli`` for one-shot commands; never imported by domain/, engine/, manifests/ or sim/
(``.importlinter``).
"""
