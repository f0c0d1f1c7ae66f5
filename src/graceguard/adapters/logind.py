"""``agent.ports.Logind`` over D-Bus with dbus-fast: systemd-logind's inhibitor locks and its
``PrepareForShutdown`` signal on the system bus.

logind's bus name changing owner (``NameOwnerChanged``: logind stopped, crashed or restarted)
is a signal too: a new logind holds none of the old one's locks.

A lock is the file descriptor ``Inhibit`` returns (the bus passes it, so the connection
negotiates Unix fd passing): logind counts the lock as long as the descriptor is open anywhere,
so ``_Lock`` keeps it and closes it on ``release``. The system bus is the one
``DBUS_SYSTEM_BUS_ADDRESS`` names, else ``/run/dbus/system_bus_socket`` (the chart mounts the
host's). Every call has a timeout: a bus that stops answering is a dropped bus.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from collections.abc import AsyncIterator

from dbus_fast import BusType, Message, MessageType
from dbus_fast.aio import MessageBus
from dbus_fast.errors import DBusError

from graceguard.agent import ports

log = logging.getLogger(__name__)

BUS_NAME = "org.freedesktop.login1"
PATH = "/org/freedesktop/login1"
MANAGER = "org.freedesktop.login1.Manager"
BUS_INTERFACE = "org.freedesktop.DBus"
CALL_TIMEOUT = 10.0
WHO = "graceguard"


class _Lock:
    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


class _Connection:
    def __init__(self, bus: MessageBus) -> None:
        self._bus = bus
        self._signals: asyncio.Queue[ports.LogindSignal | None] = asyncio.Queue()
        bus.add_message_handler(self._on_message)
        asyncio.get_running_loop().create_task(self._watch_disconnect())

    def _on_message(self, msg: Message) -> None:
        if msg.message_type != MessageType.SIGNAL or not msg.body:
            return
        if msg.interface == MANAGER and msg.member == "PrepareForShutdown":
            active = bool(msg.body[0])
            self._signals.put_nowait(
                ports.LogindSignal.SHUTDOWN if active else ports.LogindSignal.CANCELLED
            )
        elif (
            msg.interface == BUS_INTERFACE
            and msg.member == "NameOwnerChanged"
            and msg.body[0] == BUS_NAME
            and len(msg.body) == 3
        ):
            # A new owner is a logind that knows none of our locks; none: it is gone.
            back = bool(msg.body[2])
            self._signals.put_nowait(
                ports.LogindSignal.LOGIND_BACK if back else ports.LogindSignal.LOGIND_LEFT
            )

    async def _watch_disconnect(self) -> None:
        try:
            await self._bus.wait_for_disconnect()  # type: ignore[no-untyped-call]
        except Exception as err:  # a dropped bus ends with the error that dropped it
            log.debug("system bus disconnected: %r", err)
        self._signals.put_nowait(None)

    async def _call(
        self,
        member: str,
        signature: str = "",
        body: list[object] | None = None,
        *,
        interface: str = MANAGER,
        destination: str = BUS_NAME,
        path: str = PATH,
    ) -> Message:
        msg = Message(
            destination=destination,
            path=path,
            interface=interface,
            member=member,
            signature=signature,
            body=body or [],
        )
        try:
            reply = await asyncio.wait_for(self._bus.call(msg), CALL_TIMEOUT)
        except TimeoutError:
            raise ports.LogindUnavailable(
                f"{member}: no answer within {CALL_TIMEOUT:.0f}s"
            ) from None
        except (DBusError, OSError, EOFError) as err:
            raise ports.LogindUnavailable(f"{member}: {err}") from None
        if reply is None:
            raise ports.LogindUnavailable(f"{member}: the bus dropped")
        if reply.message_type == MessageType.ERROR:
            detail = reply.body[0] if reply.body else ""
            for fd in reply.unix_fds:
                os.close(fd)
            raise ports.LogindUnavailable(f"{member}: {reply.error_name}: {detail}")
        return reply

    async def subscribe(self) -> None:
        rules = (
            f"type='signal',interface='{MANAGER}',member='PrepareForShutdown',path='{PATH}'",
            f"type='signal',sender='{BUS_INTERFACE}',interface='{BUS_INTERFACE}',"
            f"member='NameOwnerChanged',arg0='{BUS_NAME}'",
        )
        for rule in rules:
            await self._call(
                "AddMatch",
                "s",
                [rule],
                interface=BUS_INTERFACE,
                destination=BUS_INTERFACE,
                path="/org/freedesktop/DBus",
            )

    async def inhibit_delay_max(self) -> dt.timedelta:
        reply = await self._call(
            "Get",
            "ss",
            [MANAGER, "InhibitDelayMaxUSec"],
            interface="org.freedesktop.DBus.Properties",
        )
        value = reply.body[0].value if reply.body else None
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ports.LogindUnavailable(f"InhibitDelayMaxUSec: not a duration: {value!r}")
        return dt.timedelta(microseconds=value)

    async def preparing_for_shutdown(self) -> bool:
        reply = await self._call(
            "Get",
            "ss",
            [MANAGER, "PreparingForShutdown"],
            interface="org.freedesktop.DBus.Properties",
        )
        return bool(reply.body[0].value) if reply.body else False

    async def inhibit(self, *, why: str) -> ports.InhibitorLock:
        reply = await self._call("Inhibit", "ssss", ["shutdown", WHO, why, "delay"])
        fds = list(reply.unix_fds)
        if not fds:
            raise ports.LogindUnavailable(
                "Inhibit: logind passed no file descriptor (fd passing not negotiated)"
            )
        index = reply.body[0] if reply.body else 0
        keep = fds[index] if isinstance(index, int) and 0 <= index < len(fds) else fds[0]
        for fd in fds:
            if fd != keep:
                os.close(fd)
        return _Lock(keep)

    async def signals(self) -> AsyncIterator[ports.LogindSignal]:
        while True:
            signal = await self._signals.get()
            if signal is None:
                return
            yield signal

    async def close(self) -> None:
        if self._bus.connected:
            self._bus.disconnect()
        self._signals.put_nowait(None)


class DbusLogind:
    """Connects to the system bus (``address``, else the environment's or the default)."""

    def __init__(self, *, address: str | None = None) -> None:
        self._address = address

    async def connect(self) -> ports.LogindConnection:
        bus = MessageBus(bus_address=self._address, bus_type=BusType.SYSTEM, negotiate_unix_fd=True)
        try:
            await asyncio.wait_for(bus.connect(), CALL_TIMEOUT)
        except TimeoutError:
            bus.disconnect()
            raise ports.LogindUnavailable(
                f"the system bus did not answer within {CALL_TIMEOUT:.0f}s"
            ) from None
        except (OSError, EOFError, DBusError, ValueError) as err:
            where = (
                self._address
                or os.environ.get("DBUS_SYSTEM_BUS_ADDRESS")
                or ("unix:path=/run/dbus/system_bus_socket")
            )
            raise ports.LogindUnavailable(
                f"cannot connect to the system bus {where}: {err}"
            ) from None
        connection = _Connection(bus)
        try:
            await connection.subscribe()
            await connection.inhibit_delay_max()  # logind is there and answers
        except ports.LogindUnavailable as err:
            await connection.close()
            raise ports.LogindUnavailable(
                f"logind ({BUS_NAME}) is not on the system bus: {err}"
            ) from None
        return connection
