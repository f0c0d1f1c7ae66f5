"""The ``graceguard`` entry point: one typer app, one module per command.

Every error is one line on stderr and exit code 2: the commands' own (``files.fail``) and click's
usage errors alike (an unknown option, a missing argument, a value of the wrong type), which click
would print as a usage box over several lines."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import typer
import typer.core

# typer 0.29 carries its own copy of click; its exceptions are only there (typer is pinned).
from typer._click import exceptions as click_errors

from graceguard.cli import (
    agent,
    audit,
    controller,
    drain,
    explain,
    files,
    helptext,
    history,
    plan,
    simulate,
    uninstall_cleanup,
    webhook,
)


class _OneLineErrors(typer.core.TyperGroup):
    """The command group, with click's usage errors folded into one line and help that reads as
    kubectl's (``helptext``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        helptext.kubectl_style(self)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except click_errors.NoArgsIsHelpError as err:
            err.show()  # no arguments at all: the help, as asked for by no_args_is_help
            sys.exit(err.exit_code)
        except click_errors.UsageError as err:
            where = err.ctx.command_path if err.ctx is not None else "graceguard"
            message = files.one_line(err.format_message())
            typer.echo(f"graceguard: {message} (see {where} --help)", err=True)
            sys.exit(2)
        except click_errors.ClickException as err:
            err.show()
            sys.exit(err.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=_OneLineErrors,
    name="graceguard",
    help=(
        "graceguard decides when each long-running pod may be disrupted, tells the pod and the "
        "humans ahead of time, holds the node where the source allows it, and records every "
        "termination."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help, as kubectl's (helptext)
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
app.command("agent")(agent.agent)
app.command("uninstall-cleanup")(uninstall_cleanup.uninstall_cleanup)
app.add_typer(audit.app, name="audit")

if __name__ == "__main__":
    app()
