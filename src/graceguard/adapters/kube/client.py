"""Connecting: a kubeconfig file (``--kubeconfig`` or ``$KUBECONFIG``), else in-cluster.

``KubeError`` is the one error the rest of graceguard sees from the Kubernetes client for a
kubeconfig it cannot load, an API server it cannot reach, or a request the API refused: a
one-line message, for the CLI to print. ``connect`` and ``api_errors`` translate into it.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
from collections.abc import Iterator

import httpx2
import lightkube
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ApiError

FIELD_MANAGER = "graceguard"


class KubeError(Exception):
    """The Kubernetes API cannot be used: the message says why, on one line."""


def load_config(kubeconfig: pathlib.Path | None = None) -> KubeConfig:
    path = kubeconfig or (
        pathlib.Path(os.environ["KUBECONFIG"]) if "KUBECONFIG" in os.environ else None
    )
    if path is not None:
        return KubeConfig.from_file(path)
    if pathlib.Path("/var/run/secrets/kubernetes.io/serviceaccount/token").exists():
        return KubeConfig.from_service_account()
    return KubeConfig.from_file(pathlib.Path.home() / ".kube" / "config")


def async_client(kubeconfig: pathlib.Path | None = None) -> lightkube.AsyncClient:
    return lightkube.AsyncClient(load_config(kubeconfig), field_manager=FIELD_MANAGER)


def connect(kubeconfig: pathlib.Path | None = None) -> lightkube.AsyncClient:
    """``async_client``, with a kubeconfig that cannot be loaded as ``KubeError``."""
    try:
        return async_client(kubeconfig)
    except (OSError, ValueError, KeyError, lightkube.ConfigError) as err:
        raise KubeError(f"cannot load a kubeconfig: {err}") from None


@contextlib.contextmanager
def api_errors() -> Iterator[None]:
    """Calls to the API inside: a refusal or a connection failure comes out as ``KubeError``."""
    try:
        yield
    except ApiError as err:
        raise KubeError(f"the API refused: {err.status.message}") from None
    except httpx2.HTTPStatusError as err:  # a paged list sent through the generic client
        answer = err.response
        raise KubeError(f"the API refused: {answer.status_code} {answer.reason_phrase}") from None
    except (httpx2.HTTPError, OSError) as err:
        raise KubeError(f"cannot reach the API server: {err}") from None
