"""The async database drivers behind ``workhorse.aio`` and every worker: Psycopg 3's async API
(the default) and asyncpg (the ``asyncpg`` extra). A driver runs the SDK's calls (on the
caller's connection or a pooled one that commits), and gives a worker what it needs: a pool of
autocommit connections for its own statements, a dedicated connection for heartbeats, and a
LISTEN connection."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import psycopg
from psycopg_pool import AsyncConnectionPool

from . import _calls as calls
from ._protocol import LISTEN_STATEMENTS, NOTIFY_CHANNEL, Row
from .errors import from_db_error

R = TypeVar("R")


class Statements(Protocol):
    """Runs one statement in autocommit mode and returns its rows."""

    async def rows(self, sql: str, params: Sequence[Any]) -> Sequence[Row]: ...

    async def close(self) -> None: ...


class AsyncDriver(Protocol):
    async def run(self, call: calls.Call[R], conn: Any = None) -> R:
        """Runs a client call on ``conn`` (the caller's transaction) or a pooled connection."""
        ...

    async def worker_pool(self, size: int) -> Statements:
        """Autocommit connections for a worker's own statements (claims, completions, owner writes)."""
        ...

    async def dedicated(self) -> Statements:
        """One connection for one purpose (heartbeats), so busy handlers cannot starve it."""
        ...

    async def listen(self, on_payload: Callable[[str], None], on_ready: Callable[[], None], channel: str = NOTIFY_CHANNEL) -> None:
        """LISTENs on ``channel`` (the jobs channel unless told) and calls ``on_payload`` per
        notification; returns or raises when the connection ends (the caller reconnects), closes
        it when cancelled."""
        ...


def _raise_typed(error: BaseException, field_prefix: str = "") -> None:
    typed = from_db_error(error, field_prefix)
    if typed is not error:
        raise typed from error


# ---- Psycopg ------------------------------------------------------------------------------------


class _PsycopgStatements:
    def __init__(self, pool: AsyncConnectionPool[Any] | None, conn: psycopg.AsyncConnection[Any] | None) -> None:
        self._pool = pool
        self._conn = conn

    async def rows(self, sql: str, params: Sequence[Any]) -> Sequence[Row]:
        try:
            if self._conn is not None:
                return await _fetch(self._conn, sql, params)
            assert self._pool is not None
            async with self._pool.connection() as conn:
                return await _fetch(conn, sql, params)
        except psycopg.Error as error:
            _raise_typed(error)
            raise

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
        if self._conn is not None:
            await self._conn.close()


async def _fetch(conn: psycopg.AsyncConnection[Any], sql: str, params: Sequence[Any]) -> Sequence[Row]:
    async with psycopg.AsyncRawCursor(conn) as cursor:
        await cursor.execute(sql, params)
        return await cursor.fetchall() if cursor.description else []


class PsycopgDriver:
    """Psycopg 3 async. Client calls use the given pool (or the caller's connection); a worker
    opens its own autocommit connections with the pool's connection settings."""

    def __init__(self, conninfo: Any, kwargs: Any, pool: AsyncConnectionPool[Any] | None) -> None:
        # A pool's settings may be callables (psycopg_pool's dynamic configuration): resolved per connection.
        self._conninfo = conninfo
        self._kwargs = kwargs
        self._pool = pool
        self._verified = False

    async def run(self, call: calls.Call[R], conn: Any = None) -> R:
        try:
            if conn is not None:
                return await self._on(conn, call)
            if self._pool is None:
                raise RuntimeError("this driver has no pool for client calls")
            async with self._pool.connection() as pooled:
                return await self._on(pooled, call)
        except psycopg.Error as error:
            _raise_typed(error, call.field_prefix)
            raise

    async def _on(self, conn: psycopg.AsyncConnection[Any], call: calls.Call[R]) -> R:
        if not self._verified:
            calls.check_schema_version(await calls.aread_installed_schema(lambda sql, params: _fetch(conn, sql, params)))
            self._verified = True
        return call.convert(await _fetch(conn, call.sql, call.params))

    async def _settings(self) -> tuple[str, dict[str, Any]]:
        conninfo, kwargs = self._conninfo, self._kwargs
        if callable(conninfo):
            conninfo = conninfo()
        if callable(kwargs):
            kwargs = kwargs()
        if inspect.isawaitable(conninfo):
            conninfo = await conninfo
        if inspect.isawaitable(kwargs):
            kwargs = await kwargs
        own = {k: v for k, v in (kwargs or {}).items() if k not in ("autocommit", "cursor_factory")}
        return str(conninfo), {**own, "autocommit": True}

    async def worker_pool(self, size: int) -> Statements:
        conninfo, kwargs = await self._settings()
        pool: AsyncConnectionPool[Any] = AsyncConnectionPool(conninfo, kwargs=kwargs, min_size=1, max_size=size, open=False)
        await pool.open()
        return _PsycopgStatements(pool, None)

    async def _connect(self) -> psycopg.AsyncConnection[Any]:
        conninfo, kwargs = await self._settings()
        return await psycopg.AsyncConnection.connect(conninfo, **kwargs)

    async def dedicated(self) -> Statements:
        return _PsycopgStatements(None, await self._connect())

    async def listen(self, on_payload: Callable[[str], None], on_ready: Callable[[], None], channel: str = NOTIFY_CHANNEL) -> None:
        conn = await self._connect()
        try:
            await conn.execute(LISTEN_STATEMENTS[channel])
            on_ready()
            async for notify in conn.notifies():
                on_payload(notify.payload)
        finally:
            await conn.close()


# ---- asyncpg ------------------------------------------------------------------------------------


class _AsyncpgStatements:
    """On an asyncpg pool (``held`` is None) or on one connection held from it."""

    def __init__(self, pool: Any, held: Any = None) -> None:
        self._pool = pool
        self._held = held

    async def rows(self, sql: str, params: Sequence[Any]) -> Sequence[Row]:
        import asyncpg

        try:
            return await (self._held or self._pool).fetch(sql, *params)  # type: ignore[no-any-return]
        except asyncpg.PostgresError as error:
            _raise_typed(error)
            raise

    async def close(self) -> None:
        if self._held is not None:
            await self._pool.release(self._held)
            self._held = None


class AsyncpgDriver:
    """asyncpg: every call and the worker's statements run on the given ``asyncpg.Pool``
    (its connections are autocommit outside a transaction); the heartbeat and LISTEN
    connections are held from it for the worker's lifetime, so size the pool two above what
    the application needs."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._verified = False

    async def run(self, call: calls.Call[R], conn: Any = None) -> R:
        target = conn if conn is not None else self._pool
        if not self._verified:
            calls.check_schema_version(await calls.aread_installed_schema(_AsyncpgStatements(target).rows))
            self._verified = True
        import asyncpg

        try:
            rows = await target.fetch(call.sql, *call.params)
        except asyncpg.PostgresError as error:
            _raise_typed(error, call.field_prefix)
            raise
        return call.convert(rows)

    async def worker_pool(self, size: int) -> Statements:
        return _AsyncpgStatements(self._pool)

    async def dedicated(self) -> Statements:
        return _AsyncpgStatements(self._pool, await self._pool.acquire())

    async def listen(self, on_payload: Callable[[str], None], on_ready: Callable[[], None], channel: str = NOTIFY_CHANNEL) -> None:
        conn = await self._pool.acquire()
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_end(_: Any) -> None:
            if not ended.done():
                ended.set_result(None)

        def on_notify(_conn: Any, _pid: int, _channel: str, payload: str) -> None:
            on_payload(payload)

        try:
            conn.add_termination_listener(on_end)
            await conn.add_listener(channel, on_notify)
            on_ready()
            await ended
        finally:
            if not conn.is_closed():
                await asyncio.shield(conn.remove_listener(channel, on_notify))
            conn.remove_termination_listener(on_end)
            await asyncio.shield(self._pool.release(conn))


def driver_for(pool: Any) -> AsyncDriver:
    """The driver of an async pool: ``psycopg_pool.AsyncConnectionPool`` or ``asyncpg.Pool``."""
    if isinstance(pool, AsyncConnectionPool):
        return PsycopgDriver(pool.conninfo, pool.kwargs, pool)
    if type(pool).__module__.startswith("asyncpg"):
        return AsyncpgDriver(pool)
    raise TypeError("expected a psycopg_pool.AsyncConnectionPool or an asyncpg pool")
