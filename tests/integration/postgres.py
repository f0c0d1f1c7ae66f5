"""A throwaway PostgreSQL server for the integration tier, from the machine's own binaries.

Finds ``initdb``/``pg_ctl``/``postgres`` (``$GRACEGUARD_PG_BINDIR``, then ``PATH``, then Debian's
``/usr/lib/postgresql/<version>/bin``), ``initdb``s a temporary directory with trust
authentication, and starts the server on a free loopback port with its socket in that directory.
PostgreSQL refuses to run as root, so as root every command runs as the ``postgres`` user (or
``nobody``) through ``runuser``, and the directory is handed to that user. Durability is turned
off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the data lives for one test session.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence

import localports

BINARIES = ("initdb", "pg_ctl", "postgres")
SUPERUSER = "graceguard"


class PostgresStartError(Exception):
    """No PostgreSQL binaries, or the server would not start; the message says what to do."""


@dataclasses.dataclass(frozen=True, slots=True)
class PostgresServer:
    host: str
    port: int
    user: str

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://{self.user}@{self.host}:{self.port}/{database}"


def find_bindir() -> pathlib.Path | None:
    candidates: list[pathlib.Path] = []
    env = os.environ.get("GRACEGUARD_PG_BINDIR")
    if env:
        candidates.append(pathlib.Path(env))
    on_path = shutil.which("postgres")
    if on_path:
        candidates.append(pathlib.Path(on_path).resolve().parent)
    candidates += [
        pathlib.Path(p)
        for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    ]
    for c in candidates:
        if all((c / b).is_file() and os.access(c / b, os.X_OK) for b in BINARIES):
            return c
    return None


def _version(path: str) -> int:
    number = pathlib.Path(path).parent.name
    return int(number) if number.isdigit() else 0


def _run_as() -> tuple[list[str], pwd.struct_passwd | None]:
    """The command prefix that drops root, and the user it drops to."""
    if os.geteuid() != 0:
        return [], None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            user = pwd.getpwnam(name)
            runuser = shutil.which("runuser")
            if runuser:
                return [runuser, "-u", name, "--"], user
            setpriv = shutil.which("setpriv")
            if setpriv:
                return [
                    setpriv,
                    f"--reuid={user.pw_uid}",
                    f"--regid={user.pw_gid}",
                    "--clear-groups",
                ], user
    raise PostgresStartError("running as root and found no user to run PostgreSQL as")


def _check(cmd: Sequence[str], what: str, log: pathlib.Path | None = None) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        if log is not None and log.exists():
            tail += log.read_text(errors="replace").strip().splitlines()[-5:]
        raise PostgresStartError(f"{what} failed: " + " | ".join(tail))


@contextlib.contextmanager
def running_postgres() -> Iterator[PostgresServer]:
    bindir = find_bindir()
    if bindir is None:
        raise PostgresStartError(
            "PostgreSQL binaries (initdb, pg_ctl, postgres) not found on PATH or in "
            "/usr/lib/postgresql/*/bin: run `make integration`, which installs them "
            "(apt-get install -y postgresql), or set GRACEGUARD_PG_BINDIR"
        )
    prefix, user = _run_as()
    root = pathlib.Path(tempfile.mkdtemp(prefix="graceguard-pg-"))
    data = root / "data"
    log = root / "postgres.log"
    try:
        if user is not None:
            os.chown(root, user.pw_uid, user.pw_gid)
        _check(
            [
                *prefix,
                str(bindir / "initdb"),
                "-D",
                str(data),
                "-U",
                SUPERUSER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ],
            "initdb",
        )
        port = _start(prefix=prefix, bindir=bindir, data=data, root=root, log=log)
        try:
            yield PostgresServer("127.0.0.1", port, SUPERUSER)
        finally:
            subprocess.run(
                [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _start(
    *,
    prefix: list[str],
    bindir: pathlib.Path,
    data: pathlib.Path,
    root: pathlib.Path,
    log: pathlib.Path,
) -> int:
    last: PostgresStartError | None = None
    for _ in range(3):  # a free port may be taken between the probe and the bind
        port = localports.free_port()
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        )
        try:
            _check(
                [
                    *prefix,
                    str(bindir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(log),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "60",
                    "start",
                ],
                "pg_ctl start",
                log,
            )
        except PostgresStartError as err:
            last = err
            continue
        return port
    assert last is not None
    raise last
