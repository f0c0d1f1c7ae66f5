"""Connecting: a kubeconfig file (``--kubeconfig`` or ``$KUBECONFIG``), else in-cluster.

``KubeError`` is the one error the rest of graceguard sees from the Kubernetes client for a
kubeconfig it cannot load, an API server it cannot reach, or a request the API refused: a
one-line message, for the CLI to print. ``connect`` and ``api_errors`` translate into it.

``async_client`` is the one place graceguard's Kubernetes clients are built: each sends its
requests through ``retry_after.RetryAfterTransport`` (a transient refusal with ``Retry-After`` is
waited out within a bound), around httpx's transport with the kubeconfig's TLS settings, or
(``writers``: a client that never watches) around ``unary_transport``'s on aiohttp, a fraction of
the CPU per request.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Iterator
from typing import TypeAlias

import httpx2
import lightkube
import yaml
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError

from graceguard.adapters.kube import retry_after, unary_transport

FIELD_MANAGER = "graceguard"
KUBECONFIG_LIMIT = 3 * 1024 * 1024
"""The largest kubeconfig read (one with many clusters and their certificates is a few hundred
KiB); checked before parsing, so a wrong path (``/dev/zero``, a disk image) is refused at once."""


class KubeError(Exception):
    """The Kubernetes API cannot be used: the message says why, on one line."""


def load_config(kubeconfig: pathlib.Path | None = None) -> KubeConfig:
    path = kubeconfig or (
        pathlib.Path(os.environ["KUBECONFIG"]) if "KUBECONFIG" in os.environ else None
    )
    if path is not None:
        return _from_file(path)
    if pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists():
        return KubeConfig.from_service_account()
    return _from_file(pathlib.Path.home() / ".kube" / "config")


def _from_file(path: pathlib.Path) -> KubeConfig:
    """``KubeConfig.from_file`` with a bounded read, and every way the file can be wrong (not a
    file, too large, not UTF-8, not YAML, not a mapping, a field missing or of the wrong type)
    as ``lightkube.ConfigError`` naming the file."""
    path = path.expanduser()
    if not path.is_file():
        why = "not a regular file" if path.exists() else "no such file"
        raise lightkube.ConfigError(f"{path}: {why}")
    try:
        with path.open("rb") as f:
            data = f.read(KUBECONFIG_LIMIT + 1)
        if len(data) > KUBECONFIG_LIMIT:
            raise lightkube.ConfigError(f"{path}: larger than 3 MiB, the limit for a kubeconfig")
        doc = yaml.safe_load(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise lightkube.ConfigError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise lightkube.ConfigError(f"{path}: not valid YAML{where}") from None
    except RecursionError:
        raise lightkube.ConfigError(f"{path}: nested too deeply for a kubeconfig") from None
    if not isinstance(doc, dict):
        raise lightkube.ConfigError(f"{path}: expected a mapping (kind: Config)")
    try:
        return KubeConfig.from_dict(doc, fname=path)
    except KeyError as err:
        raise lightkube.ConfigError(f"{path}: missing field {err}") from None
    except (TypeError, AttributeError, ValueError) as err:
        raise lightkube.ConfigError(f"{path}: a field has the wrong form ({err})") from None


KEPT_OPEN = 20
"""Connections the writes' client keeps open at least (httpx's default for idle ones)."""


def async_client(
    kubeconfig: pathlib.Path | None = None, *, writers: int | None = None
) -> lightkube.AsyncClient:
    """``writers``: ``None`` for a client of watches and occasional requests (httpx's transport
    and its default pool). A number (the controller's ``--write-concurrency``) for a client of
    writes only, whose answers are read whole, never a watch: sent through ``unary_transport`` on
    ``max(KEPT_OPEN, writers)`` connections, all kept open between requests, so that a burst of
    writes reuses its connections instead of opening each again (a TLS handshake)."""
    config = load_config(kubeconfig).get()
    if config is None or config.user is None:
        raise lightkube.ConfigError("the current context names no user")
    # A transport given to httpx replaces the one it would build with lightkube's TLS settings,
    # so the inner transport is built with them here (lightkube's own function).
    verify = client_adapter.verify_cluster(config.cluster, config.user, config.abs_file)
    inner: httpx2.AsyncBaseTransport
    if writers is None:
        inner = httpx2.AsyncHTTPTransport(verify=verify)
    else:
        inner = unary_transport.UnaryTransport(verify=verify, connections=max(KEPT_OPEN, writers))
    transport = retry_after.RetryAfterTransport(inner)
    return lightkube.AsyncClient(config, field_manager=FIELD_MANAGER, transport=transport)


Client: TypeAlias = lightkube.AsyncClient
"""The client ``connect`` makes, for the wiring that hands it to the adapters (``processes/``
names it so without importing the client library)."""


def connect(kubeconfig: pathlib.Path | None = None, *, writers: int | None = None) -> Client:
    """``async_client``, with a kubeconfig that cannot be loaded as ``KubeError``."""
    try:
        return async_client(kubeconfig, writers=writers)
    except OSError as err:
        if err.filename is None:  # a certificate or key file the kubeconfig names (ssl says not)
            why = f"a file it names cannot be read: {err.strerror or err}"
            raise KubeError(f"cannot load a kubeconfig: {why}") from None
        raise KubeError(f"cannot load a kubeconfig: {err}") from None
    except (ValueError, KeyError, lightkube.ConfigError) as err:
        raise KubeError(f"cannot load a kubeconfig: {err}") from None


@contextlib.contextmanager
def api_errors() -> Iterator[None]:
    """Calls to the API inside: a refusal or a connection failure comes out as ``KubeError``."""
    try:
        yield
    except ApiError as err:
        raise KubeError(f"the API refused: {err.status.message}{_gave_up(err)}") from None
    except httpx2.HTTPStatusError as err:  # a paged list sent through the generic client
        answer = err.response
        refused = f"{answer.status_code} {answer.reason_phrase}"
        raise KubeError(f"the API refused: {refused}{_gave_up(err)}") from None
    except (httpx2.HTTPError, OSError) as err:
        raise KubeError(f"cannot reach the API server: {err}") from None


def _gave_up(err: httpx2.HTTPStatusError) -> str:
    """How long the refusal was waited out before giving up, when it was (``retry_after``)."""
    retried = err.response.headers.get(retry_after.GAVE_UP_HEADER) if err.response else None
    return f" (still refused after {retried}, honouring Retry-After)" if retried else ""
