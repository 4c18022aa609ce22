"""Installing, upgrading and checking the ``workhorse`` schema from Python, with the SQL this
package ships (the migration protocol of docs/upgrading.md, as every SDK implements it)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from . import _calls as calls
from ._schema_files import BASELINE_VERSION, SchemaFiles, SchemaStep, load_schema_files
from ._sql_statements import split_statements
from ._sync import verify_schema
from .errors import SchemaMigrationError, SchemaVersionMismatchError

SCHEMA_VERSION = calls.SCHEMA_VERSION
MIN_SCHEMA_VERSION = calls.MIN_SCHEMA_VERSION

# Serialises two *fresh* installs (the same key as lib/core/schema.ts and the Go SDK); no
# application role exists before the install grants one. Upgrades are serialised by the row lock
# on workhorse.schema_version instead, which needs UPDATE on that table: no application role has
# it, so none can take or hold that lock.
_INSTALL_LOCK_KEY = 7_362_515_001
# A migrator that finds the lock taken does not queue for it: it polls (SKIP LOCKED, then this
# pause, in seconds). A blocked SELECT ... FOR UPDATE would hold a snapshot, and CREATE INDEX
# CONCURRENTLY in the lock holder's no-transaction step waits for every older snapshot to end:
# the two would wait for each other forever.
_LOCK_POLL_SECONDS = 0.1
_LOCK_VERSION = "SELECT version FROM workhorse.schema_version FOR UPDATE SKIP LOCKED"
_LOG_STEP = "INSERT INTO workhorse.schema_migration (version, name) VALUES (%s, %s) ON CONFLICT (version) DO NOTHING"
# Read from pg_class with the statement's snapshot rather than through a name lookup: after
# waiting for the install lock, this session's catalog cache may still hold the "no such
# relation" it saw before another installer committed.
_SCHEMA_PRESENT = (
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'workhorse' AND c.relname = 'schema_version')"
)
_SCHEMA_OWNER = (
    "SELECT r.rolname, pg_has_role(current_user, n.nspowner, 'MEMBER') "
    "FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner WHERE n.nspname = 'workhorse'"
)

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
    #: ``workhorse.oldest_client_v1()`` (schema version 6 on): the oldest client release, by the
    #: schema version it ships, that the installed schema still serves. None when the schema is
    #: absent, older than version 6, or this role may not call it.
    oldest_client: int | None = None
    #: Whether this package's workers and producers work with the installed schema: a version
    #: from ``minimum`` to ``expected``, or a newer one that still serves this release
    #: (``oldest_client <= expected``).
    compatible: bool = False

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
    #: The version now installed: this package's, or a newer one that still serves this release
    #: (left as it is: a schema is never downgraded).
    to_version: int
    #: The steps this call applied, in order (a step another migrator applied first is not listed).
    applied: tuple[int, ...]


def install_schema(conn: psycopg.Connection[Any], *, sql_dir: str | Path | None = None) -> MigrationResult:
    """Installs the ``workhorse`` schema from the SQL inside this package if it is absent, or
    upgrades it step by step to ``SCHEMA_VERSION``; does nothing when it is up to date. Run it as
    the role that owns the schema. Each step commits with its bookkeeping in one transaction (a
    step marked ``-- workhorse:no-transaction`` runs its statements outside one and is
    idempotent, while a second connection, opened with ``conn``'s parameters and password,
    holds the migration lock), and concurrent migrators apply each step once: a migrator that
    finds the lock taken polls for it, holding no lock and no snapshot. A database newer than this
    package is never downgraded: one that still serves this release
    (``workhorse.oldest_client_v1()``) is left as it is (``from_version == to_version``, nothing
    applied), one that does not is refused with ``SchemaVersionMismatchError``, unchanged. ``conn`` must not be inside a transaction; its autocommit setting is restored.
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
        schema = _installed_schema(conn)
    installed = None if schema is None else schema.version
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
        oldest_client=None if schema is None else schema.oldest_client,
        compatible=calls.works_with(schema, source.target, MIN_SCHEMA_VERSION),
    )


def _installed_schema(conn: psycopg.Connection[Any]) -> calls.InstalledSchema | None:
    return calls.read_installed_schema(lambda statement, params: conn.execute(statement, params).fetchall())


def _migrate(conn: psycopg.Connection[Any], source: SchemaFiles) -> MigrationResult:
    target = source.target
    schema = _installed_schema(conn)
    if schema is None:
        created, schema = _install_fresh(conn, source)
        if created:
            return MigrationResult(created=True, from_version=None, to_version=target, applied=())
    installed = target if schema is None else schema.version
    if installed > target:
        # Never a downgrade. A newer schema that still serves this release is left as it is.
        if calls.works_with(schema, target, MIN_SCHEMA_VERSION):
            return MigrationResult(created=False, from_version=installed, to_version=installed, applied=())
        raise SchemaVersionMismatchError(installed, target, MIN_SCHEMA_VERSION)
    if installed == target:
        return MigrationResult(created=False, from_version=installed, to_version=target, applied=())
    if installed < BASELINE_VERSION:
        raise SchemaMigrationError(
            f"The workhorse schema in this database is version {installed}, older than version {BASELINE_VERSION}, the first "
            "one that can be migrated: no release ever installed it with an upgrade path. Nothing was changed."
        )
    steps = source.pending(installed)
    missing = [version for version in range(installed + 1, target + 1) if not any(step.version == version for step in steps)]
    if missing:
        raise SchemaMigrationError(
            f"Cannot migrate the workhorse schema from version {installed} to {target}: this package lacks the step file(s) "
            f"for version {', '.join(map(str, missing))} (sql/migrations/NNNN_*.sql). Reinstall the package; nothing was changed.",
            missing[0],
        )
    applied: list[int] = []
    for step in steps:
        if _apply(conn, step):
            applied.append(step.version)
    return MigrationResult(created=False, from_version=installed, to_version=target, applied=tuple(applied))


def _install_fresh(conn: psycopg.Connection[Any], source: SchemaFiles) -> tuple[bool, calls.InstalledSchema | None]:
    """Creates the schema unless it exists; says whether this call made it, and the version
    installed afterwards. One transaction under a transaction-level lock, so it also holds behind
    a transaction-pooling PgBouncer (a session lock could be taken on one server connection and
    the install run on another). Whether another installer got there first is read from pg_class
    (``_SCHEMA_PRESENT``); the version is read only after this transaction has ended."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_INSTALL_LOCK_KEY,))
        row = conn.execute(_SCHEMA_PRESENT).fetchone()
        present = bool(row and row[0])
        if not present:
            for text in source.full:
                conn.execute(text.encode("utf-8"))
            conn.execute("INSERT INTO workhorse.schema_version (version) VALUES (%s)", (source.target,))
            conn.execute(_LOG_STEP, (source.target, "install"))
    if not present:
        return True, None
    with conn.transaction():
        return False, _installed_schema(conn)


def _refused_role(step: SchemaStep, error: BaseException | str) -> SchemaMigrationError:
    return SchemaMigrationError(
        f"Cannot migrate the workhorse schema to version {step.version} as this role: {error}. Run the migration as the "
        "schema's owner (the role that installed it) or a superuser; application roles (producer, worker, operator) may not.",
        step.version,
    )


def _schema_owner(conn: psycopg.Connection[Any], step: SchemaStep) -> str:
    """The role that owns the schema, after checking that this session may act as it."""
    row = conn.execute(_SCHEMA_OWNER).fetchone()
    if row is None:
        raise SchemaMigrationError("the workhorse schema is gone: install it again", step.version)
    if not row[1]:
        raise _refused_role(step, f"the role {row[0]} owns the schema")
    return str(row[0])


def _lock_version(conn: psycopg.Connection[Any], step: SchemaStep) -> int:
    """Begins a transaction on ``conn`` (in autocommit mode) as the schema's owner, so what a step
    creates belongs to the owner as what the install created does, and takes the migration lock:
    the row of schema_version FOR UPDATE, which needs the UPDATE privilege no application role
    holds. While another migrator holds it, polls, holding nothing in between. Returns the
    version, with the transaction open: the caller commits or rolls back."""
    while True:
        conn.execute("BEGIN")
        try:
            owner = _schema_owner(conn, step)
            try:
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(owner)))
                # The simple query protocol (a client-side cursor): an extended-protocol portal
                # outlives its query inside a transaction block, and with it its snapshot, which
                # a concurrent index build would wait for.
                with psycopg.ClientCursor(conn) as cursor:
                    row = cursor.execute(_LOCK_VERSION).fetchone()
            except psycopg.errors.InsufficientPrivilege as error:
                raise _refused_role(step, error) from error
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if row is not None:
            return int(row[0])
        conn.execute("COMMIT")
        time.sleep(_LOCK_POLL_SECONDS)


def _step_failed(step: SchemaStep, before: int, error: psycopg.Error) -> SchemaMigrationError:
    if isinstance(error, psycopg.errors.InsufficientPrivilege):
        return _refused_role(step, error)
    kept = (
        "Nothing of this step was applied (it runs in one transaction)"
        if step.transactional
        else "The statements before the failing one may have been applied; the step is resumable"
    )
    return SchemaMigrationError(
        f"Migration step {step.file} (version {before} to {step.version}) failed: {error}. {kept}, and the database stays "
        f"at version {before}: fix the cause and migrate again.",
        step.version,
    )


def _apply(conn: psycopg.Connection[Any], step: SchemaStep) -> bool:
    """Applies one step unless another migrator has; says whether this call applied it."""
    if not step.transactional:
        return _apply_outside_transaction(conn, step)
    before = _lock_version(conn, step)
    try:
        if before >= step.version:
            return False
        try:
            conn.execute(step.sql.encode("utf-8"))
        except psycopg.Error as error:
            raise _step_failed(step, before, error) from error
        _record(conn, step)
        conn.execute("COMMIT")
        return True
    finally:
        if conn.info.transaction_status != TransactionStatus.IDLE:
            conn.execute("ROLLBACK")


def _sibling(conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
    """A second connection to the same server and database as ``conn``, as the same role: its
    connection parameters, with the password ``conn`` was given (``conn.info.dsn`` leaves it out)."""
    params: dict[str, Any] = dict(conn.info.get_parameters())
    password = conn.info.password
    if password:
        params["password"] = password
    return psycopg.Connection.connect(autocommit=True, **params)


def _apply_outside_transaction(conn: psycopg.Connection[Any], step: SchemaStep) -> bool:
    """A no-transaction step: a second connection (opened with ``conn``'s parameters) holds the
    migration lock while ``conn`` runs the statements one by one (as the schema's owner); then
    the holder records the step and commits. A run that dies half-way leaves the version where
    it was; the step's statements are written to be run again (IF NOT EXISTS, dropping an
    INVALID index first)."""
    with _sibling(conn) as holder:
        before = _lock_version(holder, step)
        try:
            if before >= step.version:
                return False
            owner = _schema_owner(conn, step)
            try:
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(owner)))
                for statement in split_statements(step.sql):
                    conn.execute(statement.encode("utf-8"))
            except psycopg.Error as error:
                raise _step_failed(step, before, error) from error
            finally:
                conn.execute("RESET ROLE")
            _record(holder, step)
            holder.execute("COMMIT")
            return True
        finally:
            if holder.info.transaction_status != TransactionStatus.IDLE:
                holder.execute("ROLLBACK")


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
