"""The termination ledger on SQL: SQLite by default, PostgreSQL by URL for several replicas.

``schema`` holds the tables, ``rows`` maps records to rows and back (each field in the column of
its name), ``urls`` reads ledger URLs, ``database`` keeps the engine and its transactions.
``store.Ledger`` opens a ledger (its schema made or checked) and holds its parts by job, each the
port its callers use: ``terminations.Terminations`` (``record``, ``query``),
``actions.Actions`` (``claim``, ``for_pod``, ``evictions_for``) and ``denials.Denials``
(``record_denial``, ``query``). ``lazy.LazyLedger`` is the webhook's ledger for refusals, opened on
first use.
Records are the values of ``graceguard.domain.termination`` and ``graceguard.domain.ledger``.
Only this package imports SQLAlchemy and the database drivers.
"""

from graceguard.adapters.ledger.lazy import LazyLedger
from graceguard.adapters.ledger.store import Ledger
from graceguard.adapters.ledger.urls import DEFAULT_URL, ENV, LedgerError, default_url

__all__ = ["DEFAULT_URL", "ENV", "LazyLedger", "Ledger", "LedgerError", "default_url"]
