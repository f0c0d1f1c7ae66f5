"""``graceguard controller``: its command line (options, environment variables, help), checked,
then ``processes.controller.run``, the composition root. No wiring and no client library here;
a ledger or kubeconfig that cannot be used ends with one line and exit 2."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

import typer

from graceguard.adapters import ledger as ledger_store
from graceguard.adapters.aws import clients as aws_clients
from graceguard.cli import files, options, process_command
from graceguard.controller import executor
from graceguard.domain import durations
from graceguard.engine import takeovers
from graceguard.processes import aws as aws_process
from graceguard.processes import controller as controller_process
from graceguard.processes import supervisor

LOG_LINES_MAX = 10_000
"""Log lines kept per evicted pod (each is stored in the ledger)."""


def controller(
    *,
    kubeconfig: process_command.Kubeconfig = None,
    lease_namespace: Annotated[
        str,
        typer.Option(envvar="POD_NAMESPACE", help="Namespace of the leader-election Lease."),
    ] = "graceguard-system",
    lease_name: Annotated[str, typer.Option(help="Name of the leader-election Lease.")] = (
        "graceguard-controller"
    ),
    identity: Annotated[
        str | None,
        typer.Option(
            envvar="POD_NAME", help="This replica's name in the Lease; default: host-pid."
        ),
    ] = None,
    ledger_url: Annotated[
        str | None,
        typer.Option(
            "--ledger",
            envvar="GRACEGUARD_LEDGER",
            help="Where terminations are recorded: sqlite+aiosqlite:///PATH or "
            "postgresql+asyncpg://... (several replicas need PostgreSQL). "
            "Default: sqlite+aiosqlite:///graceguard-ledger.db.",
        ),
    ] = None,
    log_lines: Annotated[
        int, typer.Option(help="Log lines saved from each pod before graceguard evicts it.")
    ] = 200,
    metrics_port: process_command.MetricsPort = 8080,
    health_port: process_command.HealthPort = 8081,
    probe_host: process_command.ProbeHost = "0.0.0.0",  # probes must be reachable from the kubelet
    aws_queue: Annotated[
        str | None,
        typer.Option(
            envvar="GRACEGUARD_AWS_QUEUE",
            help="URL of the SQS queue that Auto Scaling lifecycle hooks and EventBridge rules "
            "(spot, rebalance, state change, AWS Health) send to; the leader consumes it, holds "
            "terminating instances and drains their nodes. Region and credentials: the usual "
            "AWS settings (IRSA in EKS).",
        ),
    ] = None,
    aws_endpoint: Annotated[
        str | None,
        typer.Option(help="AWS endpoint URL for SQS and Auto Scaling (tests, private endpoints)."),
    ] = None,
    aws_region: Annotated[
        str | None, typer.Option(help="AWS region; default: the usual AWS settings.")
    ] = None,
    aws_visibility_timeout: Annotated[
        int,
        typer.Option(
            min=10,
            max=43200,
            help="Seconds a received queue message stays hidden; a held instance's message is "
            "extended before that and deleted once its node is drained. After a failover the "
            "next leader receives it again within this time (the hold itself never waits: "
            "it lives in the Disruption).",
        ),
    ] = 300,
    window_evictions: Annotated[
        str | None,
        typer.Option(
            help="ConfigMap (in the Lease's namespace) where the pods evicted in a maintenance "
            "window are kept, so a new leader does not evict a pod recreated under the same "
            "name again in that window. Default: kept in this process only.",
        ),
    ] = None,
    notify_outbox: Annotated[
        str | None,
        typer.Option(
            help="ConfigMap (in the Lease's namespace) where notices for the notify sinks wait "
            "until sent, so a new leader sends what the last one did not. Default: kept in "
            "this process only.",
        ),
    ] = None,
    evictor_quiet: Annotated[
        str,
        typer.Option(
            help="How long the evictor of a drain graceguard took over (kubectl drain, "
            "cluster-autoscaler) may ask for no eviction before that drain, held by "
            "PodDisruptionBudgets only, ends and the node is released (at least 30s).",
        ),
    ] = "5m",
    write_concurrency: Annotated[
        int,
        typer.Option(
            help="Writes to the Kubernetes API in flight at once while rounds are carried out "
            "(nodes' cordons and holds, then pods' notices, Events and evictions; a round beside "
            "another, for a disruption opened meanwhile, shares them; each node's "
            "and each pod's own writes stay in order). The default is the fewest at which the "
            "API server answered a mass drain's writes as fast as at any higher concurrency in "
            "graceguard's benches (bench/ceiling.py): more in flight do not answer sooner, and "
            "they make each pod's first eviction wait behind more writes. Lower it to spare a "
            "small API server.",
        ),
    ] = executor.CONCURRENCY,
    verbose: process_command.Verbose = False,
) -> None:
    """Run the graceguard controller: notices, protection projection, guarded drains.

    It carries out every Disruption (kubectl get gdis) and reports its progress in its status.
    Two replicas may run; the one holding the Lease acts, the other keeps its caches warm and
    takes over within about 12 s, from the Disruption objects. Open a drain with
    `graceguard drain NODE`.
    """
    supervisor.setup_logging(verbose=verbose)
    try:
        aws = _checked(
            lease_namespace=lease_namespace,
            lease_name=lease_name,
            state_maps={"--window-evictions": window_evictions, "--notify-outbox": notify_outbox},
            identity=identity,
            log_lines=log_lines,
            ports={"--metrics-port": metrics_port, "--health-port": health_port},
            probe_host=probe_host,
            aws=(aws_queue, aws_endpoint, aws_region, aws_visibility_timeout),
            write_concurrency=write_concurrency,
        )
    except files.InputError as err:
        raise files.fail(str(err)) from None
    quiet = _evictor_quiet(evictor_quiet)
    url = ledger_url or ledger_store.DEFAULT_URL
    ledger_option = options.named("ledger_url", "--ledger", ledger_store.ENV)
    process_command.run_process(
        controller_process.run(
            kubeconfig=kubeconfig,
            ledger_url=url,
            log_lines=log_lines,
            lease_namespace=lease_namespace,
            lease_name=lease_name,
            identity=identity or supervisor.default_identity(),
            metrics_port=metrics_port,
            health_port=health_port,
            probe_host=probe_host,
            aws=aws,
            window_evictions=window_evictions,
            notify_outbox=notify_outbox,
            evictor_quiet=quiet,
            write_concurrency=write_concurrency,
        ),
        problems={
            ledger_store.LedgerError: lambda err: options.ledger_problem(
                str(err), url=url, option=ledger_option
            ),
            aws_clients.AwsConfigError: lambda err: f"--aws-queue: {err}",
        },
    )


def _checked(
    *,
    lease_namespace: str,
    lease_name: str,
    state_maps: dict[str, str | None],
    identity: str | None,
    log_lines: int,
    ports: dict[str, int],
    probe_host: str,
    aws: tuple[str | None, str | None, str | None, int],
    write_concurrency: int,
) -> aws_process.AwsOptions | None:
    """The options checked, in the order they are told (``InputError`` naming the first bad
    one): those that name Kubernetes objects, the identity, the log lines, the ports, the AWS
    options (``_aws_options``), where the endpoints listen. The AWS options, if any."""
    ns_option = options.named("lease_namespace", "--lease-namespace", "POD_NAMESPACE")
    options.check_dns_label(ns_option, lease_namespace)
    options.check_dns_subdomain("--lease-name", lease_name)
    for flag, name in state_maps.items():
        if name is not None:
            options.check_dns_subdomain(flag, name)
    options.check_identity(options.named("identity", "--identity", "POD_NAME"), identity)
    options.check_range("--log-lines", log_lines, low=0, high=LOG_LINES_MAX)
    options.check_range(
        "--write-concurrency", write_concurrency, low=1, high=executor.MAX_CONCURRENCY
    )
    options.check_distinct(ports)
    checked_aws = _aws_options(*aws)
    options.check_listen("--probe-host", probe_host, ports)
    return checked_aws


def _evictor_quiet(text: str) -> dt.timedelta:
    """``--evictor-quiet`` as a period of at least ``MIN_EVICTOR_QUIET`` (else one line, exit 2):
    shorter, an evictor still retrying could look gone between two sightings."""
    try:
        quiet = durations.parse_duration(text)
    except durations.DurationError as err:
        raise files.fail(f"--evictor-quiet: {err}") from None
    if quiet < takeovers.MIN_EVICTOR_QUIET:
        raise files.fail(
            f"--evictor-quiet: at least {durations.format_duration(takeovers.MIN_EVICTOR_QUIET)} "
            f"(the webhook tells the evictor's retries every 10s at most), got {text}"
        )
    return quiet


def _aws_options(
    queue: str | None, endpoint: str | None, region: str | None, visibility: int
) -> aws_process.AwsOptions | None:
    """The AWS options checked (``InputError``): URLs where URLs go, endpoint and region only
    with a queue."""
    if queue is None:
        if endpoint is not None or region is not None:
            raise files.InputError("--aws-endpoint and --aws-region need --aws-queue")
        return None
    if not queue.startswith(("https://", "http://")):
        raise files.InputError(
            f"--aws-queue: expected an SQS queue URL (https://...), got {queue!r}"
        )
    if endpoint is not None and not endpoint.startswith(("https://", "http://")):
        raise files.InputError(f"--aws-endpoint: expected a URL, got {endpoint!r}")
    return aws_process.AwsOptions(
        queue_url=queue, endpoint=endpoint, region=region, visibility_seconds=visibility
    )
