"""Pytest fixtures for tests against a fresh workhorse database. Enable them with
``pytest -p workhorse.pytest_plugin``, or ``pytest_plugins = ["workhorse.pytest_plugin"]`` in your
top-level ``conftest.py``. They need a PostgreSQL server where the test role may create
databases: ``WORKHORSE_TEST_DATABASE_URL`` (or ``DATABASE_URL``) names it.

* ``workhorse_database_url``: a new database with the schema installed, dropped after the test;
* ``workhorse_pool``: a ``psycopg_pool.ConnectionPool`` on it; ``workhorse_async_pool``: an
  ``AsyncConnectionPool``;
* ``workhorse_queue``, ``workhorse_admin``: a ``Queue`` and an ``Admin`` on ``workhorse_pool``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .admin import Admin
from .queue import Queue
from .schema import install_schema


def _server_url() -> str:
    url = os.environ.get("WORKHORSE_TEST_DATABASE_URL") or os.environ.get("DATABASE_URL")
    if not url:
        pytest.fail("workhorse fixtures: set WORKHORSE_TEST_DATABASE_URL to a PostgreSQL server where tests may create databases")
    return url


@pytest.fixture
def workhorse_database_url() -> Iterator[str]:
    """A fresh database with the workhorse schema, dropped (with its connections) after the test."""
    server = _server_url()
    name = f"workhorse_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    url = urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    try:
        with psycopg.connect(url) as conn:
            install_schema(conn)
        yield url
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


@pytest.fixture
def workhorse_pool(workhorse_database_url: str) -> Iterator[ConnectionPool[Any]]:
    with ConnectionPool(workhorse_database_url, min_size=1, max_size=10, open=True) as pool:
        yield pool


@pytest.fixture
async def workhorse_async_pool(workhorse_database_url: str) -> AsyncIterator[AsyncConnectionPool[Any]]:
    async with AsyncConnectionPool(workhorse_database_url, min_size=1, max_size=10, open=False) as pool:
        yield pool


@pytest.fixture
def workhorse_queue(workhorse_pool: ConnectionPool[Any]) -> Queue:
    return Queue(workhorse_pool)


@pytest.fixture
def workhorse_admin(workhorse_pool: ConnectionPool[Any]) -> Admin:
    return Admin(workhorse_pool)
