"""boto3 clients for the interruption queue and Auto Scaling, and running their blocking calls
off the event loop.

Region, credentials and endpoint come from the usual AWS settings (environment, shared config,
IRSA's web identity token), ``endpoint`` and ``region`` override them (moto in tests). botocore
retries throttling and 5xx answers itself (``standard`` mode: exponential backoff with jitter,
``MAX_ATTEMPTS`` attempts). Every call runs in one bounded thread pool (``AwsCalls``), so the
event loop never blocks and at most ``THREADS`` calls are in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable
from typing import Any, TypeVar

import boto3
import botocore.config
import botocore.exceptions

MAX_ATTEMPTS = 8
THREADS = 32
"""Calls in flight at once: the queue's long polls (``controller.aws_queue.RECEIVERS``, each
waiting up to 20 s) and, beside them, a burst of messages' lookups, heartbeats and completions."""
CONNECT_TIMEOUT = 5
READ_TIMEOUT = 30
"""Above SQS's 20 s long poll."""

_T = TypeVar("_T")


class AwsConfigError(Exception):
    """The AWS settings cannot make a client (no region); the message says what to set."""


def config() -> botocore.config.Config:
    return _default_config()


def _default_config() -> botocore.config.Config:
    return botocore.config.Config(
        retries={"mode": "standard", "max_attempts": MAX_ATTEMPTS},
        connect_timeout=CONNECT_TIMEOUT,
        read_timeout=READ_TIMEOUT,
        max_pool_connections=THREADS,
    )


class AwsCalls:
    """A boto3 session and the thread pool its calls run in."""

    def __init__(self, *, endpoint: str | None = None, region: str | None = None) -> None:
        self._session = boto3.session.Session(region_name=region)
        self._endpoint = endpoint
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=THREADS, thread_name_prefix="aws"
        )

    def client(self, service: str, *, config: botocore.config.Config | None = None) -> Any:
        """A client for ``service`` (``config``: other retries and timeouts than ``config()``'s);
        ``AwsConfigError`` when no region is set anywhere."""
        try:
            return self._session.client(  # type: ignore[call-overload]
                service, endpoint_url=self._endpoint, config=config or _default_config()
            )
        except botocore.exceptions.NoRegionError:
            raise AwsConfigError(
                "no AWS region: set --aws-region (chart: aws.region) or AWS_REGION"
            ) from None

    async def run(self, fn: Callable[..., _T], /, **kwargs: Any) -> _T:
        """``fn(**kwargs)`` in the pool."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, **kwargs))

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
