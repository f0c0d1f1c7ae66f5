"""Checks of the option values the long-running commands and ``plan`` share, made before anything
connects: ports and the addresses they listen on, Kubernetes names, a replica's identity, a ledger
URL, and which option or environment variable a value came from (so the one line names it).

Each check raises ``files.InputError`` with the option's name first. Listening is tried on a
socket that is closed at once: a port in use or an address the machine does not have is one
line and exit 2 here, rather than a task failing with a traceback after start-up.
"""

from __future__ import annotations

import ipaddress
import math
import os
import pathlib
import re
import socket
from collections.abc import Mapping

# typer 0.29 carries its own copy of click (see cli/main.py); typer is pinned.
from typer._click import core as click_core
from typer._click import globals as click_globals

from graceguard.adapters.ledger import LedgerError, urls
from graceguard.cli import files
from graceguard.manifests import disruptions
from graceguard.manifests.errors import ManifestError

PORT_MIN, PORT_MAX = 1, 65535
IDENTITY_MAX = 128
"""An Event's ``reportingInstance`` takes at most 128 characters; the identity is written there."""
USERNAME_MAX = 512
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_HOST_NAME = re.compile(
    r"^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$"
)


def named(param: str, option: str, env: str) -> str:
    """How to name where the value of ``param`` came from: ``option``, or ``$env`` when the
    environment variable gave it."""
    ctx = click_globals.get_current_context(silent=True)
    if (
        ctx is not None
        and ctx.get_parameter_source(param) is click_core.ParameterSource.ENVIRONMENT
    ):
        return f"${env}"
    return option


def shown(text: str, limit: int = 80) -> str:
    """User input quoted in a message: cut, its line breaks and control characters escaped."""
    return repr(text[:limit])


def check_port(option: str, port: int) -> None:
    if not PORT_MIN <= port <= PORT_MAX:
        raise files.InputError(
            f"{option}: expected a port from {PORT_MIN} to {PORT_MAX}, got {port}"
        )


def check_distinct(ports: Mapping[str, int]) -> None:
    """Each port in range, no two alike."""
    seen: dict[int, str] = {}
    for option, port in ports.items():
        check_port(option, port)
        if port in seen:
            raise files.InputError(f"{option}: {port} is also {seen[port]}; give each its own port")
        seen[port] = option


def check_listen(host_option: str, host: str, ports: Mapping[str, int]) -> None:
    """``ports`` (option -> port) can be listened on at ``host`` now: ``host`` an address of this
    machine, no port in use (checked last, after every check that needs no socket)."""
    for option, port in ports.items():
        try:
            found = socket.getaddrinfo(
                host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except (socket.gaierror, UnicodeError) as err:
            why = err.strerror if isinstance(err, socket.gaierror) else str(err)
            raise files.InputError(
                f"{host_option}: cannot listen on {shown(host)}: {why}"
            ) from None
        for family, kind, proto, _name, address in found:
            with socket.socket(family, kind, proto) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    probe.bind(address)
                except OSError as err:
                    raise files.InputError(
                        f"{option}: cannot listen on {host or '*'}:{port}: {err.strerror}"
                    ) from None


def check_dns_label(option: str, value: str) -> None:
    """A Kubernetes namespace's form (RFC 1123 label)."""
    if len(value) > 63 or not _DNS_LABEL.fullmatch(value):
        raise files.InputError(
            f"{option}: {shown(value)} is not a Kubernetes name (at most 63 lower-case letters, "
            "digits and '-', starting and ending with a letter or digit)"
        )


def check_dns_subdomain(option: str, value: str) -> None:
    """A Kubernetes object name's form (a node's, a Lease's: RFC 1123 subdomain)."""
    if len(value) > 253 or not _DNS_SUBDOMAIN.fullmatch(value):
        raise files.InputError(
            f"{option}: {shown(value)} is not a Kubernetes name (at most 253 lower-case letters, "
            "digits, '-' and '.', starting and ending with a letter or digit)"
        )


def controller_lease_at(controller_lease: str | None) -> tuple[str, str] | None:
    """The controller's Lease as (namespace, name): ``--controller-lease`` in the process's own
    namespace ($POD_NAMESPACE), each checked (``files.InputError``); ``None`` without it."""
    if controller_lease is None:
        return None
    check_dns_subdomain("--controller-lease", controller_lease)
    lease_namespace = os.environ.get("POD_NAMESPACE", "")
    check_dns_label("$POD_NAMESPACE", lease_namespace)
    return (lease_namespace, controller_lease)


def check_text(option: str, value: str, *, limit: int) -> None:
    """Printable text on one line, not empty, at most ``limit`` characters."""
    if not value.strip():
        raise files.InputError(f"{option}: must not be empty")
    if not value.isprintable():
        raise files.InputError(f"{option}: {shown(value)} must be printable text on one line")
    if len(value) > limit:
        raise files.InputError(f"{option}: at most {limit} characters, got {len(value)}")


def check_source(option: str, source: str) -> None:
    """A disruption's source, shown in every notice, event and ledger record: one word, the form a
    Disruption's ``spec.source`` takes. The one check of ``drain``, ``plan`` and the others."""
    if not source.strip():
        raise files.InputError(f"{option}: must not be empty (it names who asks in every notice)")
    if not source.isprintable():
        raise files.InputError(f"{option}: {shown(source)} must be printable text on one line")
    try:
        disruptions.check_source(source)
    except ManifestError as err:
        raise files.InputError(f"{option}: {err.reason}") from None


def check_identity(option: str, value: str | None) -> None:
    """A replica's name (empty: the default, host-pid)."""
    if value:
        check_text(option, value, limit=IDENTITY_MAX)


def check_host_name(option: str, value: str) -> None:
    """A host name or IP address a certificate is made for."""
    check_text(option, value, limit=253)
    try:
        ipaddress.ip_address(value)
    except ValueError:
        if not _HOST_NAME.fullmatch(value):
            raise files.InputError(
                f"{option}: {shown(value)} is neither a host name nor an IP address"
            ) from None


def check_seconds(option: str, value: float, *, low: float, high: float) -> None:
    if not math.isfinite(value) or not low <= value <= high:
        raise files.InputError(
            f"{option}: expected seconds from {low:g} to {high:g}, got {value:g}"
        )


def check_range(option: str, value: int, *, low: int, high: int) -> None:
    if not low <= value <= high:
        raise files.InputError(f"{option}: expected {low} to {high}, got {value}")


def ledger_problem(message: str, *, url: str, option: str | None, name_option: bool = True) -> str:
    """A ledger error naming the option (or variable) the URL came from, if any: always when the
    URL itself cannot be read, else only with ``name_option`` (``history`` leaves it out: its
    errors name the file). A SQLite path the user gave relative (``sqlite+aiosqlite:///tmp/x.db``
    is ``tmp/x.db``, from the working directory) says so."""
    try:
        path = urls.parse(url).sqlite_path
    except LedgerError:
        return f"{option}: {message}" if option else message
    line = f"{option}: {message}" if option and name_option else message
    if path is not None and not path.is_absolute() and option is not None:
        line += (
            f" (a path relative to {pathlib.Path.cwd()}; for /{path} write "
            f"sqlite+aiosqlite:////{path}, with four slashes)"
        )
    return line


def check_ledger_url(url: str, *, option: str) -> None:
    """A ledger URL that can never be opened (not a URL, another database or driver, a SQLite file
    in a directory that does not exist), refused before start-up by a process that opens its
    ledger later (the webhook: a database down for a while must not stop it)."""
    try:
        path = urls.parse(url).sqlite_path
    except LedgerError as err:
        raise files.InputError(ledger_problem(str(err), url=url, option=option)) from None
    if path is not None and not path.parent.is_dir():
        why = f"{path}: directory {path.parent} does not exist"
        raise files.InputError(ledger_problem(why, url=url, option=option))
