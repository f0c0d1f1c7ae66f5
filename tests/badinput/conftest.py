"""Fixtures every bad-input table may use: a port something else listens on."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def busy() -> Iterator[int]:
    """A port something else listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])
