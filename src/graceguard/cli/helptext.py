"""How every command's help reads: as kubectl's (cobra's) does, in plain text.

typer prints a type after every parameter, ``<bool>`` after a flag included, and a required
argument as ``{node}`` in the usage line. Here, once typer has built the click commands:

- a flag (``--wait``, ``--help``) has no value name;
- an option with a value shows the value's kind, lowercase as cobra prints it (``string``,
  ``int``, ``float``, ``strings`` for a repeatable one, the choices as ``table|json``), or the
  metavar the command gives it (``RFC3339``, ``P.yaml``);
- an argument is its name in capitals (``NODE``, ``POD.yaml``), in the usage line and in the
  argument list, without a type.

Only presentation: no parsing, validation or I/O changes here.
"""

from __future__ import annotations

import enum
import pathlib
import typing

import typer.core

# typer 0.29 carries its own copy of click (see cli/main.py); typer is pinned.
from typer._click import core as click_core


class _Argument(typer.core.TyperArgument):
    """An argument shown by its name alone: ``NODE``, ``[NODE]`` when optional."""

    def display_type_rich(self, ctx: click_core.Context) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
        return name if self.nargs == 1 or self.metavar else f"{name}..."


_SCALARS: dict[object, str] = {bool: "bool", int: "int", float: "float"}


def _kind(annotation: object) -> str:
    """The value's kind as cobra names it, from the parameter's annotation."""
    if typing.get_origin(annotation) in (list, tuple, set, frozenset):
        (item, *_) = typing.get_args(annotation) or (str,)
        return f"{_kind(item)}s"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "|".join(str(member.value) for member in annotation)
    if isinstance(annotation, type) and issubclass(annotation, pathlib.PurePath):
        return "file"
    return _SCALARS.get(annotation, "string")


def kubectl_style(command: click_core.Command) -> None:
    """Give ``command`` and every command under it the help described in the module docstring."""
    for param in command.params:
        if isinstance(param, typer.core.TyperArgument):
            if param.metavar is None and param.name is not None:
                param.metavar = param.name.upper()
            # typer builds its own argument class; the subclass changes only how it is shown.
            param.__class__ = _Argument
        elif isinstance(param, typer.core.TyperOption) and param.metavar is None:
            if param.is_flag:
                param.metavar = ""
            else:
                param.metavar = _kind(param.type_descriptor.annotation)
    if isinstance(command, typer.core.TyperGroup):
        for sub in command.commands.values():
            kubectl_style(sub)
