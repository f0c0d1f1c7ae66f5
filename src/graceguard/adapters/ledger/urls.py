"""Ledger URLs: which database, through which async driver, shown without its password.

``sqlite+aiosqlite:///PATH`` (the default, ``graceguard-ledger.db`` in the working directory) or
``postgresql+asyncpg://USER[:PASSWORD]@HOST[:PORT]/DB``. The plain forms ``sqlite:///PATH``,
``postgresql://...`` and ``postgres://...`` are read as the same with the async driver, because
that is how people write them.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

import sqlalchemy as sa
from sqlalchemy import exc

ENV = "GRACEGUARD_LEDGER"
DEFAULT_URL = "sqlite+aiosqlite:///graceguard-ledger.db"

_EXPECTED = "expected sqlite+aiosqlite:///PATH or postgresql+asyncpg://USER@HOST:PORT/DB"


class LedgerError(Exception):
    """The ledger cannot be opened, read or written; the message is one line and says why."""


@dataclasses.dataclass(frozen=True, slots=True)
class LedgerURL:
    url: sa.URL

    @property
    def dialect(self) -> str:
        return self.url.get_backend_name()

    @property
    def shown(self) -> str:
        """The URL with its password hidden, for messages."""
        return self.url.render_as_string(hide_password=True)

    @property
    def sqlite_path(self) -> pathlib.Path | None:
        """The SQLite file, ``None`` for PostgreSQL and for an in-memory SQLite database."""
        if self.dialect != "sqlite" or self.in_memory:
            return None
        return pathlib.Path(self.url.database or "")

    @property
    def in_memory(self) -> bool:
        return self.dialect == "sqlite" and self.url.database in (None, "", ":memory:")


def default_url() -> str:
    """``$GRACEGUARD_LEDGER``, else the SQLite file in the working directory."""
    return os.environ.get(ENV) or DEFAULT_URL


def parse(text: str) -> LedgerURL:
    """Read a ledger URL; raise ``LedgerError`` for anything but SQLite or PostgreSQL."""
    try:
        url = sa.make_url(text.strip())
    except exc.ArgumentError:
        raise LedgerError(f"not a database URL: {text!r} ({_EXPECTED})") from None
    except ValueError:  # a port that is not a number, an unclosed [ in the host
        raise LedgerError(
            f"not a database URL: {text!r} (cannot read its host and port; {_EXPECTED})"
        ) from None
    backend, _, driver = url.drivername.partition("+")
    if backend == "sqlite":
        if driver not in ("", "pysqlite", "aiosqlite"):
            raise LedgerError(f"{_shown(url)}: unsupported SQLite driver ({_EXPECTED})")
        return LedgerURL(url.set(drivername="sqlite+aiosqlite"))
    if backend in ("postgresql", "postgres"):
        if driver not in ("", "psycopg2", "psycopg", "asyncpg"):
            raise LedgerError(f"{_shown(url)}: unsupported PostgreSQL driver ({_EXPECTED})")
        return LedgerURL(url.set(drivername="postgresql+asyncpg"))
    raise LedgerError(f"{_shown(url)}: unsupported database {backend!r} ({_EXPECTED})")


def _shown(url: sa.URL) -> str:
    return url.render_as_string(hide_password=True)
