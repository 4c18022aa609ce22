"""Runs calls on Psycopg's sync API: on the caller's connection (joining its transaction), or on
a pooled connection that commits when the call is done."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from . import _calls as calls
from ._protocol import Row
from .errors import from_db_error

R = TypeVar("R")

Connection = psycopg.Connection[Any]


class SyncExecutor:
    def __init__(self, pool: ConnectionPool[Any]) -> None:
        if not isinstance(pool, ConnectionPool):
            raise TypeError("expected a psycopg_pool.ConnectionPool (use workhorse.aio for async pools)")
        self.pool = pool
        self._verified = False

    def run(self, call: calls.Call[R], conn: Connection | None = None) -> R:
        try:
            if conn is not None:
                return self._on(conn, call)
            with self.pool.connection() as pooled:
                return self._on(pooled, call)
        except psycopg.Error as error:
            typed = from_db_error(error, call.field_prefix)
            if typed is error:
                raise
            raise typed from error

    def _on(self, conn: Connection, call: calls.Call[R]) -> R:
        if not self._verified:
            verify_schema(conn)
            self._verified = True
        with psycopg.RawCursor(conn) as cursor:
            cursor.execute(call.sql, call.params)
            rows = cursor.fetchall() if cursor.description else []
        return call.convert(rows)


def _value(conn: Connection, call: calls.Call[R]) -> R:
    with psycopg.RawCursor(conn) as cursor:
        cursor.execute(call.sql, call.params)
        return call.convert(cursor.fetchall())


def verify_schema(conn: Connection) -> None:
    """Raises ``SchemaNotInstalledError`` or ``SchemaVersionMismatchError`` unless the database
    holds a schema this SDK works with: ``MIN_SCHEMA_VERSION`` to ``SCHEMA_VERSION``, or a newer
    one that still serves this release (``workhorse.oldest_client_v1()`` at most
    ``SCHEMA_VERSION``)."""
    calls.check_schema_version(calls.read_installed_schema(lambda sql, params: _rows(conn, sql, params)))


def _rows(conn: Connection, sql: str, params: tuple[Any, ...]) -> Sequence[Row]:
    with psycopg.RawCursor(conn) as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()
