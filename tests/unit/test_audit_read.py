"""The audit's readers of Kubernetes documents (adapters/kube/audit_read.py), pure functions:
flags in a Deployment's command and args, graceguard's controller queue, which webhooks see
evictions, preStop hooks, and ready endpoints."""

from __future__ import annotations

from typing import Any

import pytest

from graceguard.adapters.kube import audit_read
from graceguard.engine.audit import inputs


def deployment(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "d", "namespace": "ns"},
        "spec": {"template": {"spec": {"containers": list(containers)}}},
    }


@pytest.mark.parametrize(
    ("argv", "values"),
    [
        (["--max-graceful-termination-sec=120"], ["120"]),
        (["--max-graceful-termination-sec", "90", "--v=2"], ["90"]),
        (["--max-graceful-termination-sec"], []),  # no value follows
        (["--max-graceful-termination-seconds=5"], []),
    ],
)
def test_flag_values(argv: list[str], values: list[str]) -> None:
    assert audit_read.flag_values(argv, audit_read.CAP_FLAG) == values


def test_the_autoscalers_cap_in_either_form_and_the_default() -> None:
    spaced = deployment(
        {"image": "cluster-autoscaler:v1", "args": ["--max-graceful-termination-sec", "90"]}
    )
    found = audit_read.autoscaler(spaced)
    assert found is not None and not isinstance(found, inputs.Unreadable)
    assert (found.max_graceful_termination, found.source) == (90, "default")
    unset = deployment({"image": "x", "command": ["/cluster-autoscaler", "--v=4"]})
    found = audit_read.autoscaler(unset)
    assert found is not None and not isinstance(found, inputs.Unreadable)
    assert found.max_graceful_termination == 600
    assert audit_read.autoscaler(deployment({"image": "nginx"})) is None


def test_the_controllers_queue_from_its_deployment() -> None:
    chart = deployment(
        {
            "image": "ghcr.example/graceguard:0.1.0",
            "args": [
                "controller",
                "--aws-queue",
                "https://sqs.example/1/gg",
                "--aws-region",
                "eu-west-1",
            ],
        }
    )
    other = deployment({"image": "worker", "args": ["--aws-queue=https://sqs.example/1/other"]})
    module = deployment(
        {"image": "python", "command": ["graceguard", "controller", "--aws-queue=https://q/2/b"]}
    )
    assert audit_read.controller_flags([chart, other, module], audit_read.QUEUE_FLAG) == [
        "https://sqs.example/1/gg",
        "https://q/2/b",
    ]
    assert audit_read.controller_flags([chart, other], audit_read.REGION_FLAG) == ["eu-west-1"]


def test_webhooks_that_see_evictions() -> None:
    doc = {
        "metadata": {"name": "cfg"},
        "webhooks": [
            {"name": "a.graceguard.io", "rules": [{"operations": ["*"], "resources": ["*/*"]}]},
            {"name": "pods.example", "rules": [{"operations": ["CREATE"], "resources": ["pods"]}]},
            {
                "name": "b.example",
                "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://x"},
                "rules": [{"operations": ["CREATE"], "resources": ["pods/eviction"]}],
            },
        ],
    }
    found = audit_read.webhooks(doc)
    assert [(w.name, w.graceguard, w.failure_policy, w.service) for w in found] == [
        ("a.graceguard.io", True, "Fail", None),
        ("b.example", False, "Ignore", None),
    ]


def test_ready_endpoints() -> None:
    slices: list[dict[str, Any]] = [
        {"endpoints": [{"conditions": {"ready": True}}, {"conditions": {"ready": False}}]},
        {"endpoints": [{"conditions": {}}]},
        {},
    ]
    assert audit_read.ready_endpoints(slices) == 2


@pytest.mark.parametrize(
    ("command", "seconds"),
    [
        (["sleep", "15"], 15),
        (["/bin/sleep", "15s"], 15),
        (["sh", "-c", "sleep 20 && kill 1"], 20),
        (["/bin/bash", "-c", "exec sleep 7"], 7),
        (["sh", "-c", "echo bye; sleep 20"], None),  # not a first command of sleep
        (["sleep", "infinity"], None),
        (["sleep"], None),
        ("sleep 5", None),  # not a list
    ],
)
def test_prestop_exec_sleep(command: object, seconds: int | None) -> None:
    hook = audit_read.prestop(
        {"name": "c", "lifecycle": {"preStop": {"exec": {"command": command}}}}
    )
    assert hook is not None and hook.seconds == seconds
