"""The termination ledger on SQL: SQLite by default, PostgreSQL by URL for several replicas.

``schema`` holds the tables, ``rows`` maps records to rows and back (each field in the column of
its name), ``urls`` reads ledger URLs, ``store.Ledger`` is the one async API
(``record``, ``query``, ``claim``, ``actions_for``, ``evictions_for``, ``record_denial``,
``denials``), ``denials.LazyLedger`` the webhook's ledger for refusals, opened on first use.
Records are the values of ``graceguard.domain.termination`` and ``graceguard.domain.ledger``.
Only this package imports SQLAlchemy and the database drivers.
"""

from graceguard.adapters.ledger.denials import LazyLedger
from graceguard.adapters.ledger.store import Ledger
from graceguard.adapters.ledger.urls import DEFAULT_URL, ENV, LedgerError, default_url

__all__ = ["DEFAULT_URL", "ENV", "LazyLedger", "Ledger", "LedgerError", "default_url"]
