"""Shared by the commands that read a live cluster (``plan``, ``drain``): connect, list once,
and turn connection problems into one clear line (exit 2)."""

from __future__ import annotations

import pathlib

import httpx2
import lightkube
from lightkube.core.exceptions import ApiError

from graceguard.adapters.kube import client as kube_client
from graceguard.adapters.kube import view
from graceguard.cli import files


def connect(kubeconfig: pathlib.Path | None) -> lightkube.AsyncClient:
    try:
        return kube_client.async_client(kubeconfig)
    except (OSError, ValueError, KeyError, lightkube.ConfigError) as err:
        raise files.InputError(f"cannot load a kubeconfig: {err}") from None


async def load_view(client: lightkube.AsyncClient) -> view.ClusterView:
    cluster_view = view.ClusterView(client)
    try:
        await cluster_view.load_once()
    except ApiError as err:
        raise files.InputError(f"the API refused: {err.status.message}") from None
    except (httpx2.HTTPError, OSError) as err:
        raise files.InputError(f"cannot reach the API server: {err}") from None
    return cluster_view


def api_problem(err: Exception) -> files.InputError:
    if isinstance(err, ApiError):
        return files.InputError(f"the API refused: {err.status.message}")
    return files.InputError(f"cannot reach the API server: {err}")


API_ERRORS: tuple[type[Exception], ...] = (ApiError, httpx2.HTTPError, OSError)
