"""Connecting: a kubeconfig file (``--kubeconfig`` or ``$KUBECONFIG``), else in-cluster."""

from __future__ import annotations

import os
import pathlib

import lightkube
from lightkube.config.kubeconfig import KubeConfig

FIELD_MANAGER = "graceguard"


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
