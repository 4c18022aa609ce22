"""Fixtures: one PostgreSQL server per session, a fresh database with the workhorse schema per
test, and pools on it (sync Psycopg, async Psycopg, asyncpg)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from workhorse import install_schema

from .pg_server import postgres_server


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def database_url(server: str, name: str) -> str:
    parts = urlsplit(server)
    return urlunsplit(parts._replace(path=f"/{name}"))


@contextmanager
def fresh_database(server: str) -> Iterator[str]:
    """An empty database (no workhorse schema), dropped afterwards."""
    name = f"wh_py_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield database_url(server, name)
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(server_url: str) -> Iterator[str]:
    """A fresh database with the schema installed (from the package's SQL), dropped after the test."""
    with fresh_database(server_url) as url:
        with psycopg.connect(url) as conn:
            install_schema(conn)
        yield url


@pytest.fixture
def empty_db_url(server_url: str) -> Iterator[str]:
    """A fresh database without the workhorse schema, dropped after the test."""
    with fresh_database(server_url) as url:
        yield url


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool[Any]]:
    with ConnectionPool(db_url, min_size=1, max_size=10) as p:
        yield p


@pytest.fixture
async def apool(db_url: str) -> AsyncIterator[AsyncConnectionPool[Any]]:
    async with AsyncConnectionPool(db_url, min_size=1, max_size=10) as p:
        yield p


@pytest.fixture
async def asyncpg_pool(db_url: str) -> AsyncIterator[Any]:
    import asyncpg

    p = await asyncpg.create_pool(db_url, min_size=1, max_size=10)
    try:
        yield p
    finally:
        await p.close()
