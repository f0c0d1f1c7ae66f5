"""moto's server over HTTP, for the tiers that test graceguard's AWS parts (SQS, EC2, Auto Scaling,
EventBridge, EKS) without an AWS account.

``running_moto()`` starts ``python -m moto.server`` (the interpreter running the tests, so the
pinned moto) on a free loopback port in its own process, waits until it answers, and stops it on
exit. ``MotoServer.env()`` is what a process needs to reach it with boto3: the endpoint
(``AWS_ENDPOINT_URL``, which boto3 honours for every service), a region and dummy credentials.
``reset()`` empties every service between tests (``/moto-api/reset``).

moto has no Auto Scaling lifecycle flow (an instance never enters ``Terminating:Wait``, no
notification reaches SQS, heartbeats and completions are not checked against a pending action):
tests that need it post AWS's documented messages themselves and record the calls; see each
test's docstring.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import localports

REGION = "us-east-1"
ACCESS_KEY = "testing"
START_TIMEOUT = 30.0


class MotoStartError(Exception):
    """moto's server would not start; the message has its output."""


@dataclasses.dataclass(frozen=True, slots=True)
class MotoServer:
    endpoint: str
    region: str = REGION
    pid: int = 0
    """The server's process (``0``: not started here)."""

    def env(self) -> dict[str, str]:
        """Environment for a process (or boto3 in this one) that talks to this server only."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": ACCESS_KEY,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def reset(self) -> None:
        """Forget every resource in every service (between tests)."""
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(req, timeout=10) as resp:
            resp.read()


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_moto() -> Iterator[MotoServer]:
    port = localports.free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryFile() as output:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "false"},
        )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not _answers(endpoint):
                if proc.poll() is not None or time.monotonic() > deadline:
                    output.seek(0)
                    text = output.read().decode(errors="replace")[-2000:]
                    raise MotoStartError(f"moto's server did not start on {endpoint}: {text}")
                time.sleep(0.1)
            yield MotoServer(endpoint=endpoint, pid=proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
