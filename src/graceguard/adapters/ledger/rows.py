"""Records to rows and back: each field of a ledger record (``domain.termination`` and
``domain.ledger``) is stored in the column of its own name (``schema``), so the mapping is the
records' fields, written nowhere else. Only what a column cannot hold as it is is converted: a
tuple of log lines (a JSON list), an action's kind (its text) and captured logs (two columns)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa

from graceguard.domain import ledger, termination

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

R = TypeVar("R", bound="DataclassInstance")


def _row(record: DataclassInstance, /, **converted: Any) -> dict[str, Any]:
    """The row: each field in its column; ``converted`` replaces fields (or adds columns)."""
    row = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
    row.update(converted)
    return row


def _record(record_type: type[R], row: sa.RowMapping, /, **converted: Any) -> R:
    """The record: each field from its column, but those given in ``converted``."""
    fields = (f.name for f in dataclasses.fields(record_type) if f.name not in converted)
    return record_type(**{name: row[name] for name in fields}, **converted)


def _lines(value: Sequence[Any] | None) -> tuple[str, ...]:
    return tuple(str(x) for x in (value or ()))


def termination_row(rec: termination.TerminationRecord) -> dict[str, Any]:
    return _row(rec, log_lines=list(rec.log_lines))


def termination_of(row: sa.RowMapping) -> termination.TerminationRecord:
    return _record(
        termination.TerminationRecord,
        row,
        premature=bool(row["premature"]),
        forced=bool(row["forced"]),
        log_lines=_lines(row["log_lines"]),
    )


def action_row(action: ledger.ActionRecord) -> dict[str, Any]:
    row = _row(action, kind=str(action.kind))
    del row["logs"]
    return row | {"log_lines": list(action.logs.lines), "log_status": action.logs.status}


def action_of(row: sa.RowMapping) -> ledger.ActionRecord:
    return _record(
        ledger.ActionRecord,
        row,
        kind=ledger.ActionKind(row["kind"]),
        logs=termination.CapturedLogs(_lines(row["log_lines"]), row["log_status"]),
    )


def denial_row(rec: ledger.DenialRecord) -> dict[str, Any]:
    return _row(rec)


def denial_of(row: sa.RowMapping) -> ledger.DenialRecord:
    return _record(ledger.DenialRecord, row)
