"""The ``graceguard`` entry point: one typer app, one module per command."""

from __future__ import annotations

import typer

from graceguard.cli import controller, drain, explain, history, plan, simulate, webhook

app = typer.Typer(
    name="graceguard",
    help=(
        "graceguard decides when each long-running pod may be disrupted, tells the pod and the "
        "humans ahead of time, holds the node where the source allows it, and records every "
        "termination."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """Disruption control plane for long-running Kubernetes pods."""


app.command("explain")(explain.explain)
app.command("simulate")(simulate.simulate)
app.command("history")(history.history)
app.command("controller")(controller.controller)
app.command("drain")(drain.drain)
app.command("plan")(plan.plan)
app.command("webhook")(webhook.webhook)

if __name__ == "__main__":
    app()
