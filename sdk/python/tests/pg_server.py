"""A throw-away PostgreSQL server for the test session, unless WORKHORSE_TEST_DATABASE_URL
names one (a superuser URL). Started the way test/support/run-pg15.js starts Debian's
PostgreSQL 15: a cluster in a temporary directory on a free loopback port, run as the OS user
``postgres`` when we are root (PostgreSQL refuses to run as root), stopped and removed at the
end of the session."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PG_BIN = Path(os.environ.get("WORKHORSE_PG_BIN", "/usr/lib/postgresql/15/bin"))
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _as_server_user(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if IS_ROOT else args


def _run(args: list[str]) -> None:
    result = subprocess.run(_as_server_user(args), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}{result.stderr}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yields the superuser URL of a PostgreSQL server."""
    url = os.environ.get("WORKHORSE_TEST_DATABASE_URL")
    if url:
        yield url
        return
    if not (PG_BIN / "initdb").exists():
        raise RuntimeError(
            f"No PostgreSQL: set WORKHORSE_TEST_DATABASE_URL to a superuser URL, or install Debian's "
            f"postgresql-15 ({PG_BIN}/initdb is missing; WORKHORSE_PG_BIN names another bin folder)."
        )
    temp = Path(tempfile.mkdtemp(prefix="workhorse-py-pg-"))
    data = temp / "data"
    started = False
    try:
        if IS_ROOT:
            shutil.chown(temp, "postgres", "postgres")
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
        port = _free_port()
        options = f"-p {port} -k {temp} -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off"
        started = True
        _run([str(PG_BIN / "pg_ctl"), "start", "-D", str(data), "-l", str(temp / "server.log"), "-w", "-t", "60", "-o", options])
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            subprocess.run(_as_server_user([str(PG_BIN / "pg_ctl"), "stop", "-D", str(data), "-m", "immediate", "-w"]), capture_output=True)
        shutil.rmtree(temp, ignore_errors=True)
