"""``graceguard uninstall-cleanup``: take back what graceguard put on pods and nodes
(``adapters.kube.cleanup``), once no controller leads; the chart runs it as a post-delete hook.
Prints one line saying what it took back."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Annotated

import typer

from graceguard.adapters.kube import cleanup
from graceguard.adapters.kube import client as kube_client
from graceguard.cli import files, options


def uninstall_cleanup(
    *,
    lease_namespace: Annotated[
        str, typer.Option(envvar="POD_NAMESPACE", help="The controller Lease's namespace.")
    ] = "graceguard-system",
    lease_name: Annotated[str, typer.Option(help="The controller Lease's name.")] = (
        "graceguard-controller"
    ),
    wait: Annotated[
        int,
        typer.Option(
            help="Seconds to wait for the controller to let go of its Lease before cleaning up."
        ),
    ] = 60,
    kubeconfig: Annotated[pathlib.Path | None, typer.Option(help="A kubeconfig file.")] = None,
) -> None:
    """Take back graceguard's annotations, notices, node holds, shutdown taints and cordons.

    Run after graceguard's controller is gone (the chart's post-delete hook does): removes the
    safe-to-evict / do-not-disrupt annotations graceguard projected (a user's own stay), the
    eviction-at / eviction-reason annotations, scale-down-disabled where graceguard held a node,
    the node agent's graceguard.io/shutdown taint, and the cordons graceguard made (marked
    graceguard.io/cordoned-for; a cordon made by a person or another tool stays). The CRDs stay.

    Example: graceguard uninstall-cleanup --lease-namespace graceguard-system
    """
    try:
        options.check_dns_label("--lease-namespace", lease_namespace)
        options.check_dns_subdomain("--lease-name", lease_name)
        options.check_range("--wait", wait, low=0, high=3600)
        done = asyncio.run(_run(lease_namespace, lease_name, wait, kubeconfig))
    except (files.InputError, kube_client.KubeError) as err:
        raise files.fail(str(err)) from None
    typer.echo(
        f"took back graceguard's annotations from {done.pods} pod(s), its hold from "
        f"{done.nodes_released} node(s), its shutdown taint from {done.nodes_untainted} node(s), "
        f"its cordon from {done.nodes_uncordoned} node(s)"
    )


async def _run(
    namespace: str, name: str, wait: int, kubeconfig: pathlib.Path | None
) -> cleanup.Retracted:
    client = kube_client.connect(kubeconfig)
    try:
        with kube_client.api_errors():
            gone = await cleanup.controller_gone(
                client, namespace=namespace, name=name, timeout=wait
            )
            if not gone:
                raise kube_client.KubeError(
                    f"a controller still holds Lease {namespace}/{name} after {wait}s: "
                    "stop it first (nothing was changed)"
                )
            return await cleanup.retract(client)
    finally:
        await client.close()
