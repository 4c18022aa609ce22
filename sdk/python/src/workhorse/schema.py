"""Installing, upgrading and checking the ``workhorse`` schema from Python, with the SQL this
package ships (the migration protocol of docs/upgrading.md, as every SDK implements it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg.pq import TransactionStatus

from . import _calls as calls
from ._schema_files import BASELINE_VERSION, SchemaFiles, SchemaStep, load_schema_files
from ._sql_statements import split_statements
from ._sync import verify_schema
from .errors import SchemaMigrationError, SchemaVersionMismatchError

SCHEMA_VERSION = calls.SCHEMA_VERSION
MIN_SCHEMA_VERSION = calls.MIN_SCHEMA_VERSION

# Serialises two *fresh* installs (the same key as lib/core/schema.ts and the Go SDK). Upgrades
# are serialised by the row lock on workhorse.schema_version instead, which needs UPDATE on that
# table: no application role has it, so none can take or hold that lock.
_INSTALL_LOCK_KEY = 7_362_515_001
_LOCK_VERSION = "SELECT version FROM workhorse.schema_version FOR UPDATE"
_LOG_STEP = "INSERT INTO workhorse.schema_migration (version, name) VALUES (%s, %s)"

SchemaSituation = Literal["up-to-date", "not-installed", "older", "newer"]


@dataclass(frozen=True)
class PendingStep:
    """A migration step the database has not had yet."""

    version: int
    name: str
    #: False for a step marked ``-- workhorse:no-transaction``, which runs statement by statement.
    transactional: bool


@dataclass(frozen=True)
class SchemaStatus:
    """What :func:`schema_status` reads: the installed version against this package's."""

    #: The version in the database, None when the schema is absent.
    installed: int | None
    #: The version this package installs and migrates to (``SCHEMA_VERSION``).
    expected: int
    #: The oldest version this package's clients still work with (``MIN_SCHEMA_VERSION``).
    minimum: int
    situation: SchemaSituation
    #: The steps ``install_schema`` would apply, in order (none for an absent or newer schema).
    pending: tuple[PendingStep, ...] = field(default=())

    @property
    def up_to_date(self) -> bool:
        return self.situation == "up-to-date"


@dataclass(frozen=True)
class MigrationResult:
    """What :func:`install_schema` did."""

    #: True when this call installed the schema into a database that had none.
    created: bool
    #: The version before the call, None when the schema was absent.
    from_version: int | None
    #: The version now installed (this package's).
    to_version: int
    #: The steps this call applied, in order (a step another migrator applied first is not listed).
    applied: tuple[int, ...]


def install_schema(conn: psycopg.Connection[Any], *, sql_dir: str | Path | None = None) -> MigrationResult:
    """Installs the ``workhorse`` schema from the SQL inside this package if it is absent, or
    upgrades it step by step to ``SCHEMA_VERSION``; does nothing when it is up to date. Run it as
    the role that owns the schema. Each step commits with its bookkeeping in one transaction (a
    step marked ``-- workhorse:no-transaction`` runs its statements outside one and is
    idempotent), and concurrent migrators apply each step once. A database newer than this
    package is refused with ``SchemaVersionMismatchError`` and left unchanged (never
    downgraded). ``conn`` must not be inside a transaction; its autocommit setting is restored.
    ``sql_dir`` is for tests: a folder laid out like the package's ``sql/``.

    Example::

        with psycopg.connect(DATABASE_URL) as conn:
            result = install_schema(conn)
            print(result.applied)
    """
    source = load_schema_files(sql_dir)
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise SchemaMigrationError("install_schema needs a connection outside any transaction: commit or roll back first")
    autocommit = conn.autocommit
    conn.autocommit = True
    try:
        return _migrate(conn, source)
    finally:
        conn.autocommit = autocommit


def schema_status(conn: psycopg.Connection[Any], *, sql_dir: str | Path | None = None) -> SchemaStatus:
    """Reads the installed schema version and lists the steps ``install_schema`` would apply;
    never writes.

    Example::

        status = schema_status(conn)
        if not status.up_to_date:
            print(status.situation, [step.version for step in status.pending])
    """
    source = load_schema_files(sql_dir)
    # In a transaction block of its own (a savepoint inside the caller's), so an idle connection
    # is left idle, ready for install_schema.
    with conn.transaction():
        installed = _installed_version(conn)
    situation: SchemaSituation
    pending: tuple[SchemaStep, ...] = ()
    if installed is None:
        situation = "not-installed"
    elif installed == source.target:
        situation = "up-to-date"
    elif installed > source.target:
        situation = "newer"
    else:
        situation = "older"
        # Older than the baseline: no step leads from there (install_schema refuses it).
        pending = source.pending(installed) if installed >= BASELINE_VERSION else ()
    return SchemaStatus(
        installed=installed,
        expected=source.target,
        minimum=MIN_SCHEMA_VERSION,
        situation=situation,
        pending=tuple(PendingStep(step.version, step.name, step.transactional) for step in pending),
    )


def _installed_version(conn: psycopg.Connection[Any]) -> int | None:
    present = conn.execute(calls.schema_present().sql).fetchone()
    if present is None or not present[0]:
        return None
    row = conn.execute(calls.schema_version().sql).fetchone()
    return None if row is None else int(row[0])


def _migrate(conn: psycopg.Connection[Any], source: SchemaFiles) -> MigrationResult:
    target = source.target
    installed = _installed_version(conn)
    if installed is None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INSTALL_LOCK_KEY,))
            installed = _installed_version(conn)
            if installed is None:
                for text in source.full:
                    conn.execute(text.encode("utf-8"))
                conn.execute("INSERT INTO workhorse.schema_version (version) VALUES (%s)", (target,))
                conn.execute(_LOG_STEP, (target, "install"))
                return MigrationResult(created=True, from_version=None, to_version=target, applied=())
    if installed > target:
        raise SchemaVersionMismatchError(installed, target, MIN_SCHEMA_VERSION)
    if installed < BASELINE_VERSION:
        raise SchemaMigrationError(
            f"The workhorse schema in this database is version {installed}, older than version {BASELINE_VERSION}, the first "
            "one that can be migrated: no release ever installed it with an upgrade path. Nothing was changed."
        )
    applied: list[int] = []
    for step in source.pending(installed):
        try:
            if _apply(conn, step):
                applied.append(step.version)
        except psycopg.errors.InsufficientPrivilege as error:
            raise SchemaMigrationError(
                f"Cannot migrate the workhorse schema to version {step.version} as this role: {error}. Run the migration as "
                "the schema's owner (the role that installed it) or a superuser; application roles (producer, worker, "
                "operator) may not.",
                step.version,
            ) from error
        except psycopg.Error as error:
            kept = (
                "Nothing of this step was applied (it runs in one transaction)"
                if step.transactional
                else "The statements before the failing one may have been applied; the step is resumable"
            )
            raise SchemaMigrationError(
                f"Migration step {step.file} (version {step.version - 1} to {step.version}) failed: {error}. {kept}, and the "
                f"database stays at version {step.version - 1}: fix the cause and migrate again.",
                step.version,
            ) from error
    return MigrationResult(created=False, from_version=installed, to_version=target, applied=tuple(applied))


def _locked_version(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute(_LOCK_VERSION).fetchone()
    if row is None:
        raise SchemaMigrationError("workhorse.schema_version has no row: the schema is damaged", None)
    return int(row[0])


def _apply(conn: psycopg.Connection[Any], step: SchemaStep) -> bool:
    """Applies one step unless another migrator has; says whether this call applied it."""
    if step.transactional:
        with conn.transaction():
            if _locked_version(conn) >= step.version:
                return False
            conn.execute(step.sql.encode("utf-8"))
            _record(conn, step)
            return True
    # A no-transaction step: checked under the row lock, run outside it (so two migrators may
    # both run its idempotent statements), and recorded by whichever of them bumps the version.
    with conn.transaction():
        if _locked_version(conn) >= step.version:
            return False
    for statement in split_statements(step.sql):
        conn.execute(statement.encode("utf-8"))
    with conn.transaction():
        if _locked_version(conn) >= step.version:
            return False
        _record(conn, step)
        return True


def _record(conn: psycopg.Connection[Any], step: SchemaStep) -> None:
    conn.execute("UPDATE workhorse.schema_version SET version = %s", (step.version,))
    conn.execute(_LOG_STEP, (step.version, step.name))


__all__ = [
    "MIN_SCHEMA_VERSION",
    "SCHEMA_VERSION",
    "MigrationResult",
    "PendingStep",
    "SchemaSituation",
    "SchemaStatus",
    "install_schema",
    "schema_status",
    "verify_schema",
]
