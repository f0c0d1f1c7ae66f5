"""``graceguard audit`` and ``graceguard audit aws``: the misconfigurations behind the field's
stories, read from the live cluster (and AWS), one finding per object and check: the risk in one
sentence, the fix in one sentence. Reads through ``adapters.kube.audit_read`` and
``adapters.aws.audit_read``; the checks are ``engine.audit``'s; this module prints.

Exit codes: 0 nothing found (information aside), 1 findings, 2 an error (one line on stderr).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import pathlib
from collections.abc import Sequence
from typing import Annotated

import rich.console
import rich.table
import typer

from graceguard.adapters.aws import audit_read as aws_read
from graceguard.adapters.kube import audit_read as kube_read
from graceguard.adapters.kube import client as kube_client
from graceguard.cli import files
from graceguard.engine.audit import aws as aws_checks
from graceguard.engine.audit import cluster as cluster_checks
from graceguard.engine.audit import findings, kubelet


def _catalogue(scopes: Sequence[str]) -> str:
    lines = [f"{c.id} ({c.scope}): {c.looks_for}." for c in findings.CHECKS if c.scope in scopes]
    return "\n\n".join(lines)


AUDIT_HELP = (
    "Audit the live cluster for the misconfigurations that lose long-running pods: each finding "
    "names the object, the risk and the fix. Exit 0: nothing found (info aside); 1: findings; "
    "2: an error.\n\nChecks:\n\n"
    + _catalogue(("cluster", "kubelet"))
    + "\n\nExample: graceguard audit -o json; graceguard audit aws --aws-queue URL"
)
AWS_HELP = (
    "Audit the Auto Scaling groups behind the cluster's nodes (found from each node's "
    "spec.providerID, aws:///ZONE/i-...). Region, credentials and endpoint come from the usual "
    "AWS settings (AWS_REGION, AWS_PROFILE, AWS_ENDPOINT_URL...). The controller's queue is "
    "--aws-queue, else the --aws-queue of the graceguard controller Deployments in the "
    "cluster.\n\nChecks:\n\n" + _catalogue(("aws",)) + "\n\nExample: graceguard audit aws -o json"
)

app = typer.Typer(
    name="audit",
    help=AUDIT_HELP,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help, as kubectl's (cli/helptext)
)

Output = Annotated[str, typer.Option("--output", "-o", help="table or json.")]
Kubeconfig = Annotated[pathlib.Path | None, typer.Option(help="A kubeconfig file.")]


def _check_output(output: str) -> None:
    if output not in ("table", "json"):
        raise files.fail(f"--output: expected table or json, got {output!r}")


@app.callback(invoke_without_command=True)
def audit(
    ctx: typer.Context,
    *,
    output: Output = "table",
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Only this namespace's pods and budgets (the cluster-wide and node checks are "
            "skipped).",
        ),
    ] = None,
    kubelets: Annotated[
        bool,
        typer.Option(
            "--kubelets/--no-kubelets",
            help="Read each node's kubelet /configz through the API server (nodes/proxy).",
        ),
    ] = True,
    kubeconfig: Kubeconfig = None,
) -> None:
    if ctx.invoked_subcommand is not None:
        return
    _check_output(output)
    try:
        found, _deployments = asyncio.run(
            kube_read.read_cluster(kubeconfig=kubeconfig, namespace=namespace, kubelets=kubelets)
        )
    except kube_client.KubeError as err:
        raise files.fail(str(err)) from None
    now = dt.datetime.now(dt.UTC)
    report(
        [*cluster_checks.check_cluster(found, now=now), *kubelet.check_nodes(found)],
        output=output,
        title="graceguard audit" + (f" (namespace {namespace})" if namespace else ""),
    )


@app.command("aws", help=AWS_HELP)
def audit_aws(
    *,
    output: Output = "table",
    aws_queue: Annotated[
        list[str] | None,
        typer.Option(
            "--aws-queue",
            help="The SQS queue URL graceguard's controller reads (repeatable); default: the "
            "controller Deployments' --aws-queue.",
        ),
    ] = None,
    aws_endpoint: Annotated[
        str | None, typer.Option(help="An AWS endpoint URL (tests, local emulators).")
    ] = None,
    region: Annotated[
        str | None,
        typer.Option(
            help="The AWS region (else AWS_REGION or the profile's, else the controller "
            "Deployment's --aws-region)."
        ),
    ] = None,
    kubeconfig: Kubeconfig = None,
) -> None:
    _check_output(output)
    if aws_endpoint is not None and not aws_endpoint.startswith(("http://", "https://")):
        raise files.fail(f"--aws-endpoint: expected an http(s) URL, got {aws_endpoint!r}")
    for url in aws_queue or ():
        if not url.startswith(("http://", "https://")):
            raise files.fail(f"--aws-queue: expected an SQS queue URL, got {url!r}")
    try:
        found, deployments = asyncio.run(
            kube_read.read_cluster(kubeconfig=kubeconfig, namespace=None, kubelets=False)
        )
    except kube_client.KubeError as err:
        raise files.fail(str(err)) from None
    queues = list(aws_queue or kube_read.controller_flags(deployments, kube_read.QUEUE_FLAG))
    regions = kube_read.controller_flags(deployments, kube_read.REGION_FLAG)
    providers = {n.node.name: n.provider_id for n in found.nodes if n.provider_id}
    try:
        read = aws_read.read_aws(
            providers=providers,
            queue_urls=queues,
            endpoint=aws_endpoint,
            region=region,
            fallback_region=regions[0] if regions else None,
        )
    except aws_read.AwsError as err:
        raise files.fail(str(err)) from None
    inputs = aws_checks.AwsInputs(
        groups=read.groups,
        queues=read.queue_arns,
        routed=read.routed,
        pods=tuple(p.pod for p in found.pods),
        policy=found.policy,
    )
    report(
        aws_checks.check_aws(inputs, now=dt.datetime.now(dt.UTC)),
        output=output,
        title=f"graceguard audit aws ({len(read.groups)} Auto Scaling groups, "
        f"{len(providers)} nodes with a provider ID)",
    )


def report(found: list[findings.Finding], *, output: str, title: str) -> None:
    """Print ``found`` and exit 1 when any finding is more than information."""
    rows = findings.ordered(found)
    if output == "json":
        typer.echo(json.dumps({"findings": [f.to_json() for f in rows]}, indent=2))
    elif not rows:
        typer.echo(f"{title}: nothing found.")
    else:
        table = rich.table.Table(title=title, show_lines=True)
        for column in ("severity", "check", "object", "risk", "fix"):
            table.add_column(column, overflow="fold")
        for f in rows:
            table.add_row(f.severity.value, f.check, f.object, f.risk, f.fix)
        rich.console.Console().print(table)
    if findings.counts(rows):
        raise typer.Exit(code=1)
