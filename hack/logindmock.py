"""A private D-Bus system bus with python-dbusmock's ``logind`` template on it, for the tiers that
test the node agent's logind lock (integration, e2e, bench) without touching the machine's logind.

``running_logind()`` starts ``dbus-daemon`` on a socket in a temporary directory (a config of
type ``system`` that lets anyone own and call anything: it is private to the test), then
Debian's ``python3-dbusmock`` under the SYSTEM interpreter (``/usr/bin/python3 -m dbusmock
--system --template logind``; the PyPI package would need ``dbus-python`` compiled against
libdbus). ``LogindMock.env()`` points a process's system bus at it
(``DBUS_SYSTEM_BUS_ADDRESS``).

What the template lacks, added through dbusmock's own mock interface
(``org.freedesktop.DBus.Mock``) by running this file as a script under the system interpreter:

- the ``InhibitDelayMaxUSec`` property (``AddProperty``): ``set_delay``;
- the ``PrepareForShutdown`` signal (``EmitSignal``): ``prepare_for_shutdown``; the template
  never emits it, real logind does when ``systemctl poweroff/reboot`` starts.

Its ``Inhibit`` passes a real file descriptor (a pipe) and drops the inhibitor from
``ListInhibitors`` when the holder closes it, which is what the tests observe.

``stop_bus()`` / ``start_bus()`` kill and restart the bus and the mock (a bus that drops and
comes back); ``stop_logind()`` leaves the bus without logind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator

SYSTEM_PYTHON = "/usr/bin/python3"
BUS_NAME = "org.freedesktop.login1"
PATH = "/org/freedesktop/login1"
MANAGER = "org.freedesktop.login1.Manager"
MOCK = "org.freedesktop.DBus.Mock"
START_TIMEOUT = 20.0

_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
    <allow eavesdrop="true"/>
  </policy>
</busconfig>
"""


class MockError(Exception):
    """The bus or the mock would not start, or a control call failed; the message says why."""


def available() -> str | None:
    """Why the mock cannot run here (``None``: it can)."""
    if shutil.which("dbus-daemon") is None:
        return "dbus-daemon is not installed (make dbusmock)"
    probe = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import dbusmock, dbus"], capture_output=True, check=False
    )
    if probe.returncode != 0:
        return "python3-dbusmock is not installed for /usr/bin/python3 (make dbusmock)"
    return None


@dataclasses.dataclass
class LogindMock:
    directory: pathlib.Path
    delay: float
    bus: subprocess.Popen[bytes] | None = None
    logind: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> pathlib.Path:
        return self.directory / "system_bus_socket"

    @property
    def address(self) -> str:
        return f"unix:path={self.socket}"

    def env(self) -> dict[str, str]:
        """Environment for a process whose system bus is this one."""
        return {"DBUS_SYSTEM_BUS_ADDRESS": self.address}

    # -- processes ---------------------------------------------------------------------------

    def start_bus(self, *, with_logind: bool = True) -> None:
        config = self.directory / "bus.conf"
        config.write_text(_CONFIG.format(socket=self.socket))
        self.socket.unlink(missing_ok=True)
        self.bus = subprocess.Popen(
            ["dbus-daemon", f"--config-file={config}", "--nofork", "--nopidfile"],
            stdout=subprocess.DEVNULL,
            stderr=open(self.directory / "bus.log", "ab"),  # noqa: SIM115 - the child owns it
        )
        _wait(self.socket.exists, "dbus-daemon's socket", self.bus)
        if with_logind:
            self.start_logind()

    def start_logind(self) -> None:
        log = open(self.directory / "logind.log", "ab")  # noqa: SIM115 - the child owns it
        self.logind = subprocess.Popen(
            [SYSTEM_PYTHON, "-m", "dbusmock", "--system", "--template", "logind"],
            env={**os.environ, **self.env()},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        _wait(self._has_logind, "dbusmock's logind on the bus", self.logind)
        self.set_delay(self.delay)

    def stop_logind(self) -> None:
        _stop(self.logind)
        self.logind = None

    def stop_bus(self) -> None:
        self.stop_logind()
        _stop(self.bus)
        self.bus = None

    def close(self) -> None:
        self.stop_bus()

    # -- control (through dbusmock's mock interface) ------------------------------------------

    def set_delay(self, seconds: float) -> None:
        """logind's ``InhibitDelayMaxUSec`` (``InhibitDelayMaxSec=`` in logind.conf)."""
        self.delay = seconds
        self._control("set_delay", int(seconds * 1_000_000))

    def prepare_for_shutdown(self, active: bool) -> None:
        """Emit ``PrepareForShutdown(active)``: ``True`` when a shutdown or reboot starts,
        ``False`` when it is cancelled."""
        self._control("emit", active)

    def set_preparing(self, active: bool) -> None:
        """logind's ``PreparingForShutdown`` property (true while a shutdown is under way)."""
        self._control("preparing", active)

    def inhibitors(self) -> list[tuple[str, str, str, str]]:
        """``ListInhibitors``: (what, who, why, mode) of each lock held now."""
        out = self._control("list")
        return [(a, b, c, d) for a, b, c, d in json.loads(out)]

    def _has_logind(self) -> bool:
        try:
            self._control("ping")
        except MockError:
            return False
        return True

    def _control(self, command: str, arg: object = None) -> str:
        result = subprocess.run(
            [SYSTEM_PYTHON, __file__, command, json.dumps(arg)],
            env={**os.environ, **self.env()},
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if result.returncode != 0:
            raise MockError(f"{command}: {result.stderr.strip()[-500:]}")
        return result.stdout


def _wait(ready: Callable[[], bool], what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ready():
            return
        if process.poll() is not None:
            raise MockError(f"{what}: the process exited with {process.returncode}")
        time.sleep(0.05)
    raise MockError(f"{what}: not ready after {START_TIMEOUT:.0f}s")


def _stop(process: subprocess.Popen[bytes] | None) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def running_logind(*, delay: float = 30.0, with_logind: bool = True) -> Iterator[LogindMock]:
    """A private system bus with dbusmock's logind (``InhibitDelayMaxUSec`` = ``delay``)."""
    why = available()
    if why is not None:
        raise MockError(why)
    with tempfile.TemporaryDirectory(prefix="gg-logind-") as tmp:
        mock = LogindMock(pathlib.Path(tmp), delay)
        try:
            mock.start_bus(with_logind=with_logind)
            yield mock
        finally:
            mock.close()


def _main(command: str, raw: str) -> None:  # pragma: no cover - runs under /usr/bin/python3
    """Control calls, run under the system interpreter with dbus-python."""
    import dbus  # type: ignore[import-not-found]  # noqa: PLC0415 - system interpreter only

    arg = json.loads(raw)
    bus = dbus.SystemBus()
    obj = bus.get_object(BUS_NAME, PATH)
    if command == "ping":
        obj.Introspect(dbus_interface="org.freedesktop.DBus.Introspectable")
    elif command == "set_delay":
        mock = dbus.Interface(obj, MOCK)
        props = dbus.Interface(obj, "org.freedesktop.DBus.Properties")
        try:
            props.Get(MANAGER, "InhibitDelayMaxUSec")
            mock.UpdateProperties(MANAGER, {"InhibitDelayMaxUSec": dbus.UInt64(arg)})
        except dbus.exceptions.DBusException:
            mock.AddProperty(MANAGER, "InhibitDelayMaxUSec", dbus.UInt64(arg))
    elif command == "preparing":
        dbus.Interface(obj, MOCK).UpdateProperties(
            MANAGER, {"PreparingForShutdown": dbus.Boolean(arg)}
        )
    elif command == "emit":
        dbus.Interface(obj, MOCK).EmitSignal(
            MANAGER, "PrepareForShutdown", "b", [dbus.Boolean(arg)]
        )
    elif command == "list":
        found = dbus.Interface(obj, MANAGER).ListInhibitors()
        print(json.dumps([[str(x) for x in item[:4]] for item in found]))
    else:
        raise SystemExit(f"unknown command {command}")


if __name__ == "__main__":  # pragma: no cover
    _main(sys.argv[1], sys.argv[2])
