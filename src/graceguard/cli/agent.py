"""``graceguard agent``: its command line (options, environment variables, help), checked, then
``processes.agent.run``, the composition root. No wiring and no client library here; a bad
option or a kubeconfig that cannot be used ends with one line and exit 2."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer

from graceguard.cli import files, options, process_command
from graceguard.domain import durations
from graceguard.processes import agent as agent_process
from graceguard.processes import supervisor


def agent(
    *,
    node: Annotated[
        str,
        typer.Option(
            envvar="NODE_NAME",
            help="The node this agent runs on (the chart sets it from spec.nodeName).",
        ),
    ],
    kubeconfig: process_command.Kubeconfig = None,
    bus_address: Annotated[
        str | None,
        typer.Option(
            envvar="DBUS_SYSTEM_BUS_ADDRESS",
            help="The system bus logind is on; default unix:path=/run/dbus/system_bus_socket "
            "(the chart mounts the host's socket there).",
        ),
    ] = None,
    imds: Annotated[
        bool,
        typer.Option(
            "--imds",
            help="Also watch EC2 instance metadata (IMDSv2): a spot interruption notice drains "
            "the node like a shutdown with its 2-minute deadline; a rebalance recommendation "
            "follows the policy's rebalance (notice, drain or ignore). For clusters without "
            "EventBridge.",
        ),
    ] = False,
    imds_endpoint: Annotated[
        str, typer.Option(help="Instance metadata's address (with --imds).")
    ] = "http://169.254.169.254",
    release_margin: Annotated[
        str,
        typer.Option(
            help="Plan the drain to end, and release logind's lock if pods are still stopping, "
            "this long before the shutdown's deadline (it is released at once when the node is "
            "empty).",
        ),
    ] = "2s",
    take_over_after: Annotated[
        str,
        typer.Option(
            help="When the OS shuts down and no controller has begun the node's drain this long "
            "after the agent opened its Disruption, the agent drains the node itself, with the "
            "same engine (never both: see the README's node agent section); at once when "
            "--controller-lease shows no controller leading. 'off': only a controller drains.",
        ),
    ] = "3s",
    controller_lease: Annotated[
        str | None,
        typer.Option(
            help="The controller's Lease in the agent's namespace ($POD_NAMESPACE; the chart sets "
            "both). When the controller that began a shutdown's drain stops leading (its Lease "
            "not renewed for its duration + 5s), the agent takes the drain back and finishes it "
            "itself. Without it, a drain a controller began is left to the controllers.",
        ),
    ] = None,
    identity: Annotated[
        str | None, typer.Option(envvar="POD_NAME", help="This agent's name in events.")
    ] = None,
    metrics_port: process_command.MetricsPort = 8090,
    health_port: process_command.HealthPort = 8091,
    probe_host: process_command.ProbeHost = "0.0.0.0",  # probes must be reachable from the kubelet
    verbose: process_command.Verbose = False,
) -> None:
    """Run the node agent: hold this node's OS shutdown and drain it in priority phases.

    It takes a systemd-logind delay inhibitor lock on shutdown over the system bus and reports
    it in the node condition GracefulShutdownHeld (and /metrics). When the OS shuts down or
    reboots (logind's PrepareForShutdown), it opens an imminent whole-node Disruption
    (kubectl get gdis) with the deadline logind allows (InhibitDelayMaxUSec) less
    --release-margin; the controller
    evicts regular pods first, critical and DaemonSet pods last, each with its own grace, or,
    when no controller has begun within --take-over-after (or, with --controller-lease, the
    one that began stops leading), the agent itself does. The
    lock is released when the node is empty, or at that deadline. A
    cancelled shutdown cancels the Disruption and puts the node back in service.

    logind holds a shutdown for at most InhibitDelayMaxSec= (logind.conf, 5s by default):
    the agent warns (event on the node, log, metric) when the pods need longer. Without
    logind it keeps running, says why in the condition and retries.
    """
    try:
        lease_at = options.controller_lease_at(controller_lease)
        margin, take_over = _checked(
            node=node,
            identity=identity,
            release_margin=release_margin,
            take_over_after=take_over_after,
            bus_address=bus_address,
            imds_endpoint=imds_endpoint if imds else None,
            ports={"--metrics-port": metrics_port, "--health-port": health_port},
            probe_host=probe_host,
        )
    except files.InputError as err:
        raise files.fail(str(err)) from None
    supervisor.setup_logging(verbose=verbose)
    process_command.run_process(
        agent_process.run(
            node=node,
            kubeconfig=kubeconfig,
            bus_address=bus_address,
            imds_endpoint=imds_endpoint if imds else None,
            margin=margin,
            take_over_after=take_over,
            controller_lease_at=lease_at,
            identity=identity or supervisor.default_identity(),
            metrics_port=metrics_port,
            health_port=health_port,
            probe_host=probe_host,
        )
    )


def _checked(
    *,
    node: str,
    identity: str | None,
    release_margin: str,
    take_over_after: str,
    bus_address: str | None,
    imds_endpoint: str | None,
    ports: dict[str, int],
    probe_host: str,
) -> tuple[dt.timedelta, dt.timedelta | None]:
    """The options checked, in the order they are told (``InputError`` naming the first bad
    one): the node's and the agent's names, the release margin and the take-over time (both
    returned), the bus address, instance metadata's address (when watched), the endpoints."""
    options.check_dns_subdomain(options.named("node", "--node", "NODE_NAME"), node)
    options.check_identity(options.named("identity", "--identity", "POD_NAME"), identity)
    margin = _margin(release_margin)
    take_over = _take_over_after(take_over_after)
    if bus_address is not None:
        _check_bus(
            options.named("bus_address", "--bus-address", "DBUS_SYSTEM_BUS_ADDRESS"), bus_address
        )
    if imds_endpoint is not None and not imds_endpoint.startswith(("http://", "https://")):
        raise files.InputError(
            f"--imds-endpoint: expected an http:// URL, got {options.shown(imds_endpoint)}"
        )
    options.check_distinct(ports)
    options.check_listen("--probe-host", probe_host, ports)
    return margin, take_over


MARGIN_MAX = dt.timedelta(minutes=10)
"""Longer than any logind delay worth having: a margin this long would release at once."""


def _margin(text: str) -> dt.timedelta:
    try:
        margin = durations.parse_duration(text)
    except durations.DurationError as err:
        raise files.InputError(f"--release-margin: {err}") from None
    if not dt.timedelta(0) <= margin <= MARGIN_MAX:
        raise files.InputError(
            f"--release-margin: expected 0s to {durations.format_duration(MARGIN_MAX)}, "
            f"got {options.shown(text)}"
        )
    return margin


TAKE_OVER_MAX = dt.timedelta(minutes=1)
"""A shutdown waits for a controller no longer than this: logind's delay is seconds to minutes."""


def _take_over_after(text: str) -> dt.timedelta | None:
    if text == "off":
        return None
    try:
        after = durations.parse_duration(text)
    except durations.DurationError as err:
        raise files.InputError(f"--take-over-after: {err} (or off)") from None
    if not dt.timedelta(0) <= after <= TAKE_OVER_MAX:
        raise files.InputError(
            f"--take-over-after: expected 0s to {durations.format_duration(TAKE_OVER_MAX)} or "
            f"off, got {options.shown(text)}"
        )
    return after


def _check_bus(option: str, address: str) -> None:
    """A D-Bus address: ``unix:path=...`` (the system bus socket) or another transport."""
    if not address.isprintable() or not address.startswith(("unix:", "tcp:")) or "=" not in address:
        raise files.InputError(
            f"{option}: expected a D-Bus address such as "
            f"unix:path=/run/dbus/system_bus_socket, got {options.shown(address)}"
        )
