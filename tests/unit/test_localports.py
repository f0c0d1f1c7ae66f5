"""hack/localports.py: a port handed out once is never handed out again by the same process."""

from __future__ import annotations

import socket
from typing import Any

import pytest

import localports


def test_ports_handed_out_are_distinct_and_bindable() -> None:
    ports = [localports.free_port() for _ in range(50)]
    assert len(set(ports)) == len(ports)
    with socket.socket() as s:
        s.bind(("127.0.0.1", ports[-1]))


class _Picks:
    """socket.socket stand-in whose bind(0) gets the ports given, in turn."""

    def __init__(self, ports: list[int]) -> None:
        self.ports = ports

    def __call__(self, *_: Any) -> _Picks:
        return self

    def __enter__(self) -> _Picks:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def bind(self, _: object) -> None:
        self.port = self.ports.pop(0)

    def getsockname(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)


def test_a_port_the_kernel_gives_twice_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localports, "_GIVEN", set())
    monkeypatch.setattr(socket, "socket", _Picks([50217, 50217, 50218]))
    assert localports.free_port() == 50217
    assert localports.free_port() == 50218


def test_no_new_port_is_an_error_not_a_repeat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(localports, "_GIVEN", {50217})
    monkeypatch.setattr(socket, "socket", _Picks([50217] * localports._TRIES))
    with pytest.raises(OSError, match="no free port"):
        localports.free_port()
