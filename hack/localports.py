"""Free TCP ports on 127.0.0.1 for the processes the tests, benches and the control plane start.

The kernel picks a free port for a socket bound to port 0; the socket is closed at once and the
port handed to a process that binds it later. Two such picks can return the same port (a bench
once got ``--health-port: 50217 is also --port``), so ``free_port`` never hands out a port it
handed out before in this process. A port taken by another process between the pick and the
bind is still possible; the caller's process then fails to start and says which port.

Standard library only: imported by ``controlplane`` when it runs as a script.
"""

from __future__ import annotations

import socket

_GIVEN: set[int] = set()
"""Ports ``free_port`` handed out in this process."""

_TRIES = 64


def free_port() -> int:
    """A port free on 127.0.0.1 now, not handed out before by this process."""
    for _ in range(_TRIES):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port
    raise OSError(f"no free port on 127.0.0.1 not handed out before, after {_TRIES} tries")
