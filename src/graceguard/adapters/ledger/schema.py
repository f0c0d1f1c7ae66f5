"""The ledger's tables, the same on SQLite and PostgreSQL.

``schema_version`` holds one row per applied version, so a later release can migrate forward and an
older one refuses a newer ledger instead of misreading it. Instants are stored in UTC: as
``timestamp with time zone`` on PostgreSQL, as naive UTC text on SQLite (``UTCDateTime`` converts
both ways and refuses naive datetimes).

Versions and migrations (applied by ``Ledger.open(url)`` with ``create=True``, in one transaction):

1. ``terminations``, ``actions``, ``disruptions`` (the controller). Nothing reads or writes
   ``disruptions`` any more; the table stays because it is part of versions 1 and 2: leaving it
   out would give two different schemas the same version number (removing it takes a version 3
   and its migration).
2. adds ``denials``: the evictions the webhook refused. A version-1 ledger is migrated forward
   when a version-2 graceguard opens it for writing: ``create_all`` makes the missing table and
   the row for version 2 is added; nothing existing changes, so every version-1 record reads as
   before. ``graceguard history`` (read-only) on a version-1 ledger finds no denials. A
   version-1 graceguard refuses a version-2 ledger ("upgrade graceguard"): the chart runs the
   controller and the webhook from one image, so they move together.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import sqlalchemy as sa

SCHEMA_VERSION = 2
"""The version this code writes and reads (it reads version 1 too)."""

metadata = sa.MetaData()


class UTCDateTime(sa.types.TypeDecorator[dt.datetime]):
    """An aware ``datetime`` in, an aware UTC ``datetime`` out, on every dialect."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: sa.Dialect) -> Any:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: the ledger stores aware instants only")
        utc = value.astimezone(dt.UTC)
        return utc.replace(tzinfo=None) if dialect.name == "sqlite" else utc

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> dt.datetime | None:
        if value is None:
            return None
        assert isinstance(value, dt.datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
"""SQLite autoincrements only an ``INTEGER PRIMARY KEY``."""

schema_version = sa.Table(
    "schema_version",
    metadata,
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("applied_at", UTCDateTime, nullable=False),
)

terminations = sa.Table(
    "terminations",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String, nullable=False),
    sa.Column("pod", sa.String, nullable=False),
    sa.Column("uid", sa.String, nullable=False),
    sa.Column("node", sa.String),
    sa.Column("initiator", sa.String, nullable=False),
    sa.Column("cause", sa.String, nullable=False),
    sa.Column("request_id", sa.String),
    sa.Column("requested_grace_seconds", sa.BigInteger),
    sa.Column("given_grace_seconds", sa.BigInteger),
    sa.Column("protected_until", UTCDateTime),
    sa.Column("started_at", UTCDateTime, nullable=False),
    sa.Column("recorded_at", UTCDateTime, nullable=False),
    sa.Column("premature", sa.Boolean, nullable=False),
    sa.Column("premature_reason", sa.Text, nullable=False),
    sa.Column("forced", sa.Boolean, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("log_lines", sa.JSON, nullable=False),
    sa.Column("log_status", sa.Text, nullable=False),
    sa.UniqueConstraint("uid", "started_at", name="uq_terminations_uid_started_at"),
    sa.Index("ix_terminations_namespace_pod", "namespace", "pod"),
    sa.Index("ix_terminations_started_at", "started_at"),
)

actions = sa.Table(
    "actions",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String, nullable=False),
    sa.Column("pod", sa.String, nullable=False),
    sa.Column("uid", sa.String, nullable=False),
    sa.Column("kind", sa.String, nullable=False),
    sa.Column("request_id", sa.String, nullable=False),
    sa.Column("source", sa.String, nullable=False),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("grace_seconds", sa.BigInteger),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("log_lines", sa.JSON, nullable=False),
    sa.Column("log_status", sa.Text, nullable=False),
    sa.UniqueConstraint("uid", "kind", "request_id", name="uq_actions_uid_kind_request"),
)

disruptions = sa.Table(  # part of versions 1 and 2; unused (see above)
    "disruptions",
    metadata,
    sa.Column("request_id", sa.String, primary_key=True),
    sa.Column("node", sa.String, nullable=False),
    sa.Column("source", sa.String, nullable=False),
    sa.Column("disruption_class", sa.String, nullable=False),
    sa.Column("opened_at", UTCDateTime, nullable=False),
    sa.Column("closed_at", UTCDateTime),
    sa.Column("outcome", sa.String),
    sa.Index("ix_disruptions_node", "node"),
)

denials = sa.Table(
    "denials",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("namespace", sa.String, nullable=False),
    sa.Column("pod", sa.String, nullable=False),
    sa.Column("uid", sa.String, nullable=False),
    sa.Column("node", sa.String),
    sa.Column("source", sa.String, nullable=False),
    sa.Column("requester", sa.String, nullable=False),
    sa.Column("rule", sa.String, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("until", UTCDateTime),
    sa.Column("at", UTCDateTime, nullable=False),
    sa.Column("period", UTCDateTime, nullable=False),
    sa.UniqueConstraint(
        "uid", "source", "rule", "period", name="uq_denials_uid_source_rule_period"
    ),
    sa.Index("ix_denials_namespace_pod", "namespace", "pod"),
)
"""Since version 2."""
