"""The schema version this SDK speaks, and installing or checking it from Python."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg

from . import _calls as calls
from ._sync import verify_schema

SCHEMA_VERSION = calls.SCHEMA_VERSION

# The same key as every other installer of the schema (lib/core/schema.ts), so installers take turns.
_INSTALL_LOCK_KEY = 7_362_515_001


def install_schema(conn: psycopg.Connection[Any], sql_dir: str | Path) -> None:
    """Installs the ``workhorse`` schema from the protocol's ``.sql`` files (the repository's
    ``sql/`` folder, or ``node_modules/nestjs-workhorse/sql``) if it is absent, in one
    transaction. Does nothing when this version is installed; refuses another version with
    ``SchemaVersionMismatchError`` without touching anything.

    Example::

        with psycopg.connect(DATABASE_URL) as conn:
            install_schema(conn, "node_modules/nestjs-workhorse/sql")
    """
    files = sorted(Path(sql_dir).glob("*.sql"))
    if not files:
        raise FileNotFoundError(f"no .sql files in {sql_dir}")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INSTALL_LOCK_KEY,))
        present = conn.execute(calls.schema_present().sql).fetchone()
        if present is not None and present[0]:
            verify_schema(conn)
            return
        for file in files:
            conn.execute(file.read_text(encoding="utf-8").encode("utf-8"))
        conn.execute("INSERT INTO workhorse.schema_version (version) VALUES (%s)", (SCHEMA_VERSION,))


__all__ = ["SCHEMA_VERSION", "install_schema", "verify_schema"]
