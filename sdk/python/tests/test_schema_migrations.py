"""install_schema, schema_status and ``python -m workhorse schema``: a fresh install, the upgrade
from the baseline release (schema version 4, the ``sql/`` of commit a46ad78), refusals that change
nothing, concurrent migrators, and the package installed from its wheel alone."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from workhorse import (
    MIN_SCHEMA_VERSION,
    SCHEMA_VERSION,
    Admin,
    MigrationResult,
    Queue,
    SchemaMigrationError,
    SchemaVersionMismatchError,
    install_schema,
    schema_status,
    verify_schema,
)
from workhorse._cli import main as cli
from workhorse._schema_files import load_schema_files
from workhorse._sql_statements import split_statements

from .conftest import fresh_database

REPO = Path(__file__).resolve().parents[3]
PACKAGE_SQL = Path(__file__).resolve().parents[1] / "src" / "workhorse" / "sql"
BASELINE_COMMIT = "a46ad78"
IN_CI = os.environ.get("CI") == "true"
#: The steps this package ships, (version, name), as the log lists them after an upgrade from the baseline.


def in_checkout(what: str) -> None:
    """Skips outside the repository's checkout (an unpacked sdist), never in CI."""
    if not (REPO / ".git").exists() and not IN_CI:
        pytest.skip(f"{what} needs the repository's checkout")


def tree(root: Path) -> dict[str, bytes]:
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*.sql"))}


@pytest.fixture(scope="session")
def baseline_sql(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The baseline release's sql/ (schema version 4), written from git history."""
    in_checkout("the baseline schema")
    names = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", f"{BASELINE_COMMIT}:sql"], check=True, capture_output=True, text=True).stdout.split()
    folder = tmp_path_factory.mktemp("baseline-sql")
    for name in names:
        text = subprocess.run(["git", "-C", str(REPO), "show", f"{BASELINE_COMMIT}:sql/{name}"], check=True, capture_output=True).stdout
        (folder / name).write_bytes(text)
    assert len(names) > 10 and "010_tables.sql" in names
    return folder


def install_baseline(url: str, sql: Path) -> None:
    """As the baseline's installSchema did: every file in one transaction, then version 4."""
    with psycopg.connect(url) as conn:
        for file in sorted(sql.glob("*.sql")):
            conn.execute(file.read_bytes())
        conn.execute("INSERT INTO workhorse.schema_version (version) VALUES (4)")


@pytest.fixture
def baseline_db_url(server_url: str, baseline_sql: Path) -> Iterator[str]:
    with fresh_database(server_url) as url:
        install_baseline(url, baseline_sql)
        yield url


def rows(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql.encode()).fetchall()


def installed(url: str) -> int:
    return int(rows(url, "SELECT version FROM workhorse.schema_version")[0][0])


def migration_log(url: str) -> list[tuple[Any, ...]]:
    return rows(url, "SELECT version, name, applied_by::text FROM workhorse.schema_migration ORDER BY version")


def enqueue_through_sql(url: str, type: str, payload: Any) -> str:
    """Queues a job with the protocol's SQL, as a release of any schema version since the baseline can."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT job_id FROM workhorse.enqueue_many_v1(%s::jsonb)", (json.dumps([{"type": type, "payload": payload}]),)).fetchone()
    assert row is not None
    return str(row[0])


def set_newer(url: str, *, oldest_client: int | None = None) -> int:
    """What the next release's migration leaves: SCHEMA_VERSION + 1, still serving this release,
    or (with ``oldest_client``) no longer serving releases before that version."""
    newer = SCHEMA_VERSION + 1
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE workhorse.schema_version SET version = %s", (newer,))
        if oldest_client is not None:
            conn.execute(
                f"CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN {oldest_client:d}; END $$".encode()
            )
    return newer


def migrate(url: str, **options: Any) -> MigrationResult:
    with psycopg.connect(url) as conn:
        return install_schema(conn, **options)


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(list(args), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


# The catalog a migrated database must share with a fresh one (issue 29: tables, columns,
# indexes, constraints, functions and their definitions, grants, owners).
CATALOG = [
    "SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner), c.relacl::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'workhorse' ORDER BY 1",
    "SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_schema = 'workhorse' ORDER BY 1, 2",
    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'workhorse' ORDER BY 1",
    "SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'workhorse'::regnamespace ORDER BY 1, 2",
    "SELECT p.oid::regprocedure::text, pg_get_functiondef(p.oid), p.proacl::text FROM pg_proc p WHERE p.pronamespace = 'workhorse'::regnamespace ORDER BY 1",
]


def catalog(url: str) -> list[list[tuple[Any, ...]]]:
    return [rows(url, query) for query in CATALOG]


def test_the_package_ships_the_repository_sql_byte_for_byte() -> None:
    if not (REPO / "sql").is_dir():
        in_checkout("comparing the shipped SQL with sql/")
    assert tree(PACKAGE_SQL) == tree(REPO / "sql"), "run `node scripts/copy-sdk-sql.js` after changing sql/"


def test_the_schema_version_is_the_highest_step_the_package_ships() -> None:
    files = load_schema_files()
    assert SCHEMA_VERSION == files.target == files.steps[-1].version
    assert [step.version for step in files.steps] == list(range(5, SCHEMA_VERSION + 1))
    assert 4 <= MIN_SCHEMA_VERSION <= SCHEMA_VERSION


def test_a_fresh_install_records_one_install_row_and_a_second_run_does_nothing(empty_db_url: str) -> None:
    with psycopg.connect(empty_db_url) as conn:
        assert schema_status(conn).situation == "not-installed"
        assert install_schema(conn) == MigrationResult(created=True, from_version=None, to_version=SCHEMA_VERSION, applied=())
        assert not conn.autocommit
    assert installed(empty_db_url) == SCHEMA_VERSION
    assert migration_log(empty_db_url) == [(SCHEMA_VERSION, "install", "postgres")]
    assert migrate(empty_db_url) == MigrationResult(created=False, from_version=SCHEMA_VERSION, to_version=SCHEMA_VERSION, applied=())
    assert migration_log(empty_db_url) == [(SCHEMA_VERSION, "install", "postgres")]


def test_an_upgrade_from_the_baseline_keeps_the_jobs_logs_each_step_and_ends_in_the_fresh_catalog(
    baseline_db_url: str, empty_db_url: str, server_url: str
) -> None:
    from psycopg_pool import ConnectionPool

    # A job the baseline's producers queued (through its SQL: this release's clients need version
    # MIN_SCHEMA_VERSION) survives the upgrade.
    job_id = enqueue_through_sql(baseline_db_url, "report.build", {"n": 1})
    with psycopg.connect(baseline_db_url) as conn:
        status = schema_status(conn)
        pending = [(s.version, s.name) for s in status.pending]
        assert (status.installed, status.situation, [v for v, _ in pending]) == (4, "older", list(range(5, SCHEMA_VERSION + 1)))
        assert pending[0] == (5, "migration_log")
        assert install_schema(conn) == MigrationResult(created=False, from_version=4, to_version=SCHEMA_VERSION, applied=tuple(range(5, SCHEMA_VERSION + 1)))
        assert schema_status(conn).situation == "up-to-date"
    assert installed(baseline_db_url) == SCHEMA_VERSION
    assert [row[:2] for row in migration_log(baseline_db_url)] == pending
    with ConnectionPool(baseline_db_url, min_size=1, max_size=2) as pool:
        job = Admin(pool).get_job(job_id)
        assert job is not None and job.state == "ready" and job.payload == {"n": 1}
    migrate(empty_db_url)
    assert catalog(baseline_db_url) == catalog(empty_db_url)


def test_a_newer_database_that_still_serves_this_release_is_used_as_it_is_never_downgraded(db_url: str) -> None:
    newer = set_newer(db_url)
    before = catalog(db_url), migration_log(db_url)
    with psycopg.connect(db_url) as conn:
        verify_schema(conn)
        status = schema_status(conn)
    assert (status.installed, status.situation, status.oldest_client, status.compatible, status.pending) == (newer, "newer", 4, True, ())
    assert migrate(db_url) == MigrationResult(created=False, from_version=newer, to_version=newer, applied=())
    assert installed(db_url) == newer
    assert (catalog(db_url), migration_log(db_url)) == before


def test_a_newer_database_that_no_longer_serves_this_release_is_refused_and_left_unchanged(db_url: str) -> None:
    newer = set_newer(db_url, oldest_client=SCHEMA_VERSION + 1)
    before = catalog(db_url), migration_log(db_url)
    refusal = rf"version {newer}, newer than this package \(version {SCHEMA_VERSION}\), and it no longer serves this release: upgrade the package"
    with pytest.raises(SchemaVersionMismatchError, match=refusal) as refused:
        migrate(db_url)
    assert (refused.value.installed, refused.value.expected, refused.value.minimum) == (newer, SCHEMA_VERSION, MIN_SCHEMA_VERSION)
    with psycopg.connect(db_url) as conn:
        with pytest.raises(SchemaVersionMismatchError, match=refusal):
            verify_schema(conn)
        status = schema_status(conn)
    assert (status.installed, status.oldest_client, status.compatible) == (newer, newer, False)
    assert installed(db_url) == newer
    assert (catalog(db_url), migration_log(db_url)) == before
    code, out, err = run_cli("schema", "migrate", "--database-url", db_url)
    assert (code, out) == (1, "") and "no longer serves this release: upgrade the package" in err and err.startswith("workhorse: ") and err.count("\n") == 1
    code, out, _ = run_cli("schema", "status", "--json", "--database-url", db_url)
    document = json.loads(out)
    assert code == 3 and (document["status"], document["oldestClient"], document["compatible"]) == ("newer", newer, False)
    assert (catalog(db_url), migration_log(db_url)) == before


def test_a_schema_older_than_the_baseline_is_refused(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE workhorse.schema_version SET version = 3")
    with pytest.raises(SchemaMigrationError, match="older than version 4, the first one that can be migrated"):
        migrate(db_url)
    assert installed(db_url) == 3


def test_a_connection_inside_a_transaction_is_refused(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("SELECT 1")
        with pytest.raises(SchemaMigrationError, match="outside any transaction"):
            install_schema(conn)


def test_concurrent_migrators_apply_each_step_once(baseline_db_url: str) -> None:
    results = run_at_once(baseline_db_url, 4)
    # Each step by exactly one migrator (with several steps, migrators may take turns over them).
    assert sorted(v for result in results for v in result.applied) == list(range(5, SCHEMA_VERSION + 1))
    assert [row[0] for row in migration_log(baseline_db_url)] == list(range(5, SCHEMA_VERSION + 1))
    assert installed(baseline_db_url) == SCHEMA_VERSION


def test_concurrent_fresh_installs_install_once(empty_db_url: str) -> None:
    results = run_at_once(empty_db_url, 4)
    assert sorted(result.created for result in results) == [False, False, False, True]
    assert all(result.to_version == SCHEMA_VERSION and result.applied == () for result in results)
    assert migration_log(empty_db_url) == [(SCHEMA_VERSION, "install", "postgres")]


def run_at_once(url: str, count: int, **options: Any) -> list[MigrationResult]:
    """Runs install_schema in `count` threads, each on its own connection, started together."""
    connections = [psycopg.connect(url) for _ in range(count)]
    start = threading.Barrier(count)
    results: list[MigrationResult] = []
    errors: list[BaseException] = []

    def run(conn: psycopg.Connection[Any]) -> None:
        try:
            start.wait()
            results.append(install_schema(conn, **options))
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(conn,)) for conn in connections]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        for conn in connections:
            conn.close()
    assert errors == [] and len(results) == count
    return results


def step_folder(tmp_path: Path, steps: dict[str, str]) -> Path:
    """The package's SQL plus extra steps, for testing what the shipped steps do not show."""
    folder = tmp_path / "sql"
    shutil.copytree(PACKAGE_SQL, folder)
    for name, text in steps.items():
        (folder / "migrations" / name).write_text(text, encoding="utf-8")
    return folder


def test_a_no_transaction_step_runs_its_statements_outside_a_transaction(db_url: str, tmp_path: Path) -> None:
    version = SCHEMA_VERSION + 1
    folder = step_folder(
        tmp_path,
        {
            f"{version:04d}_job_type_index.sql": "-- workhorse:no-transaction\n"
            "-- An index built without blocking writes; resumable: an INVALID one from an interrupted run is dropped first.\n"
            "DROP INDEX CONCURRENTLY IF EXISTS workhorse.job_type_test_idx;\n"
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_type_test_idx ON workhorse.job (type) WHERE type <> ';';\n"
        },
    )
    assert migrate(db_url, sql_dir=folder).applied == (version,)
    assert rows(db_url, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'workhorse.job_type_test_idx'::regclass") == [(True,)]
    assert [row[:2] for row in migration_log(db_url)][-1] == (version, "job_type_index")
    assert installed(db_url) == version


def probe_steps(tmp_path: Path) -> Path:
    """Two steps after the package's: a table (created twice it would fail) and a no-transaction
    step with CREATE INDEX CONCURRENTLY (which fails inside a transaction)."""
    return step_folder(
        tmp_path,
        {
            f"{SCHEMA_VERSION + 1:04d}_probe.sql": "CREATE TABLE workhorse.migration_probe (id integer PRIMARY KEY);\n"
            f"INSERT INTO workhorse.migration_probe VALUES ({SCHEMA_VERSION + 1});\n",
            f"{SCHEMA_VERSION + 2:04d}_probe_index.sql": "-- workhorse:no-transaction\n"
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS migration_probe_id ON workhorse.migration_probe (id);\n",
        },
    )


def test_concurrent_migrators_on_the_baseline_apply_every_step_once_the_no_transaction_one_too(baseline_db_url: str, tmp_path: Path) -> None:
    target = SCHEMA_VERSION + 2
    results = run_at_once(baseline_db_url, 5, sql_dir=probe_steps(tmp_path))
    # A migrator whose connection came late may find some or all steps done: it starts from there.
    assert all(r.to_version == target and not r.created and r.from_version is not None and r.from_version >= 4 for r in results)
    applied = sorted(version for r in results for version in r.applied)
    assert applied == list(range(5, target + 1))
    log = migration_log(baseline_db_url)
    assert [row[0] for row in log] == list(range(5, target + 1)) and log[-1][1] == "probe_index"
    assert rows(baseline_db_url, "SELECT id FROM workhorse.migration_probe") == [(SCHEMA_VERSION + 1,)]
    assert rows(baseline_db_url, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'workhorse.migration_probe_id'::regclass") == [(True,)]
    assert installed(baseline_db_url) == target


def test_a_no_transaction_step_interrupted_half_way_is_resumed_by_the_next_run(db_url: str, tmp_path: Path) -> None:
    version = SCHEMA_VERSION + 1
    folder = step_folder(
        tmp_path,
        {
            f"{version:04d}_concurrent.sql": "-- workhorse:no-transaction\n"
            "CREATE INDEX CONCURRENTLY IF NOT EXISTS job_created_probe ON workhorse.job (created_at);\n"
            "SELECT * FROM workhorse.appears_later;\n"
        },
    )
    with pytest.raises(SchemaMigrationError, match="may have been applied; the step is resumable, and the database stays at") as failed:
        migrate(db_url, sql_dir=folder)
    assert failed.value.version == version
    assert rows(db_url, "SELECT to_regclass('workhorse.job_created_probe') IS NOT NULL") == [(True,)]
    assert installed(db_url) == SCHEMA_VERSION and len(migration_log(db_url)) == 1
    with psycopg.connect(db_url) as conn:
        conn.execute("CREATE TABLE workhorse.appears_later (id integer)")
    # Resumed under concurrency: three migrators, one of them applies it.
    results = run_at_once(db_url, 3, sql_dir=folder)
    assert sorted(r.applied for r in results) == [(), (), (version,)]
    assert installed(db_url) == version and migration_log(db_url)[-1][:2] == (version, "concurrent")


def test_a_waiting_migrator_blocks_neither_readers_nor_a_concurrent_index_build(db_url: str, tmp_path: Path) -> None:
    """While a migrator waits for the migration lock it holds no lock request and no snapshot:
    an application reader answers, and CREATE INDEX CONCURRENTLY (what the holder's
    no-transaction step runs, and which waits for every older snapshot) completes."""
    version = SCHEMA_VERSION + 1
    folder = step_folder(tmp_path, {f"{version:04d}_waits.sql": "CREATE TABLE workhorse.waited (id int);\n"})
    with psycopg.connect(db_url) as holder, psycopg.connect(db_url, autocommit=True) as reader:
        # The simple protocol, so the holder keeps the row lock but no snapshot (as a migrator's does).
        psycopg.ClientCursor(holder).execute("SELECT version FROM workhorse.schema_version FOR UPDATE")
        outcome: list[Any] = []

        def run() -> None:
            try:
                outcome.append(migrate(db_url, sql_dir=folder))
            except BaseException as error:  # reported in the test's thread
                outcome.append(error)

        thread = threading.Thread(target=run)
        thread.start()
        try:
            thread.join(0.5)
            assert outcome == [], "the migrator did not wait"
            assert reader.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone() == (0,)
            reader.execute("SET statement_timeout = '10s'")
            assert reader.execute("SELECT count(*) FROM workhorse.job").fetchone() is not None
            reader.execute("CREATE INDEX CONCURRENTLY job_waiting_probe ON workhorse.job (created_at)")
            reader.execute("DROP INDEX CONCURRENTLY workhorse.job_waiting_probe")
        finally:
            holder.rollback()
            thread.join(20)
    assert len(outcome) == 1 and isinstance(outcome[0], MigrationResult) and outcome[0].applied == (version,)


def test_a_failing_step_changes_nothing(db_url: str, tmp_path: Path) -> None:
    version = SCHEMA_VERSION + 1
    folder = step_folder(tmp_path, {f"{version:04d}_broken.sql": "CREATE TABLE workhorse.half_done (id int);\nSELECT 1 / 0;\n"})
    with pytest.raises(SchemaMigrationError, match=f"Migration step {version:04d}_broken.sql .* failed: division by zero. Nothing of this step was applied") as failed:
        migrate(db_url, sql_dir=folder)
    assert failed.value.version == version and isinstance(failed.value.__cause__, psycopg.errors.DivisionByZero)
    assert installed(db_url) == SCHEMA_VERSION
    assert rows(db_url, "SELECT to_regclass('workhorse.half_done') IS NULL") == [(True,)]
    assert [row[0] for row in migration_log(db_url)] == [SCHEMA_VERSION]


def test_the_clients_accept_the_range_and_say_what_to_do_outside_it(db_url: str) -> None:
    from psycopg_pool import ConnectionPool

    for version, advice in ((MIN_SCHEMA_VERSION, None), (MIN_SCHEMA_VERSION - 1, "python -m workhorse schema migrate"), (SCHEMA_VERSION + 1, None)):
        with psycopg.connect(db_url) as conn:
            conn.execute("UPDATE workhorse.schema_version SET version = %s", (version,))
        with ConnectionPool(db_url, min_size=1, max_size=2) as pool:
            if advice is None:
                assert Queue(pool).enqueue("a", 1)
                continue
            with pytest.raises(SchemaVersionMismatchError, match=f"is version {version}, older than this package") as refused:
                Queue(pool).enqueue("a", 1)
            assert advice in str(refused.value)


def every_client_start(url: str) -> list[tuple[str, BaseException | None]]:
    """What each client's first call does on ``url``: a sync queue and admin, a sync worker,
    async queues on Psycopg and asyncpg, and an async worker (None: it worked)."""
    import asyncio

    import asyncpg
    from psycopg_pool import AsyncConnectionPool, ConnectionPool

    from workhorse import Worker
    from workhorse.aio import AsyncAdmin, AsyncQueue, AsyncWorker

    def attempt(name: str, action: Any) -> tuple[str, BaseException | None]:
        try:
            action()
        except SchemaVersionMismatchError as error:
            return name, error
        return name, None

    outcomes = []
    with ConnectionPool(url, min_size=1, max_size=4) as pool:
        outcomes.append(attempt("queue", lambda: Queue(pool).enqueue("a", 1)))
        outcomes.append(attempt("admin", lambda: Admin(pool).list_queues()))

        def run_worker() -> None:
            worker = Worker(Queue(pool), poll_ms=50, tick_ms=100)
            worker.start()
            worker.stop()

        outcomes.append(attempt("worker", run_worker))

    async def run_async() -> list[tuple[str, BaseException | None]]:
        found: list[tuple[str, BaseException | None]] = []
        async with AsyncConnectionPool(url, min_size=1, max_size=4) as apool:
            for name, action in (("async queue", lambda: AsyncQueue(apool).enqueue("a", 1)), ("async admin", lambda: AsyncAdmin(apool).list_queues())):
                try:
                    await action()
                    found.append((name, None))
                except SchemaVersionMismatchError as error:
                    found.append((name, error))
            worker = AsyncWorker(AsyncQueue(apool), poll_ms=50, tick_ms=100)
            task = asyncio.create_task(worker.run())
            started = asyncio.create_task(worker.started())
            await asyncio.wait({task, started}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                started.cancel()
                failure = task.exception()
                if failure is not None and not isinstance(failure, SchemaVersionMismatchError):
                    raise failure
                found.append(("async worker", failure))
            else:
                found.append(("async worker", None))
                await worker.stop()
                await task
        apg = await asyncpg.create_pool(url, min_size=1, max_size=4)
        try:
            try:
                await AsyncQueue(apg).enqueue("a", 1)
                found.append(("asyncpg queue", None))
            except SchemaVersionMismatchError as error:
                found.append(("asyncpg queue", error))
        finally:
            await apg.close()
        return found

    outcomes.extend(asyncio.run(run_async()))
    return outcomes


def test_every_client_works_with_a_newer_schema_that_still_serves_this_release_and_refuses_one_that_does_not(db_url: str) -> None:
    newer = set_newer(db_url)
    assert all(error is None for _, error in every_client_start(db_url)), every_client_start(db_url)
    set_newer(db_url, oldest_client=newer)
    outcomes = every_client_start(db_url)
    assert [name for name, _ in outcomes] == ["queue", "admin", "worker", "async queue", "async admin", "async worker", "asyncpg queue"]
    for name, error in outcomes:
        assert isinstance(error, SchemaVersionMismatchError), name
        assert (error.installed, error.expected) == (newer, SCHEMA_VERSION), name
        assert "and it no longer serves this release: upgrade the package" in str(error), name
    assert installed(db_url) == newer


def test_the_cli_reports_status_and_migrates_as_the_typescript_cli_does(empty_db_url: str, baseline_db_url: str) -> None:
    code, out, _ = run_cli("schema", "status", "--json", "--database-url", empty_db_url)
    assert (code, json.loads(out)) == (
        3,
        {
            "installed": None,
            "expected": SCHEMA_VERSION,
            "minimum": MIN_SCHEMA_VERSION,
            "upToDate": False,
            "oldestClient": None,
            "compatible": False,
            "status": "not-installed",
            "pending": [],
            "workers": [],
        },
    )
    code, out, _ = run_cli("schema", "migrate", "--json", "--database-url", empty_db_url)
    assert (code, json.loads(out)) == (0, migrate_document(created=True, from_version=None, applied=[]))
    assert run_cli("schema", "status", "--database-url", empty_db_url) == (
        0,
        f"Installed: version {SCHEMA_VERSION}. This package: version {SCHEMA_VERSION}. Up to date.\nLive workers: none.\n",
        "",
    )
    assert run_cli("schema", "migrate", "--database-url", empty_db_url)[:2] == (
        0,
        f"The workhorse schema is already installed (version {SCHEMA_VERSION}, the version this package ships). Nothing to do.\n",
    )

    code, out, _ = run_cli("schema", "status", "--json", "--database-url", baseline_db_url)
    assert code == 3 and json.loads(out) == {
        "installed": 4,
        "expected": SCHEMA_VERSION,
        "minimum": MIN_SCHEMA_VERSION,
        "upToDate": False,
        # The baseline has no oldest_client_v1() (schema version 6 on).
        "oldestClient": None,
        "compatible": 4 >= MIN_SCHEMA_VERSION,
        "status": "older",
        "pending": [{"version": s.version, "name": s.name, "transactional": s.transactional} for s in load_schema_files().steps],
        "workers": [],
    }
    code, out, _ = run_cli("schema", "status", "--database-url", baseline_db_url)
    n = len(load_schema_files().steps)
    assert code == 3 and out == (
        f"Installed: version 4. This package: version {SCHEMA_VERSION}. Out of date.\n"
        f"The database holds an older workhorse schema: {n} migration step{'' if n == 1 else 's'} to apply.\n"
        + "".join(f"  {s.version:04d} {s.name} (one transaction)\n" for s in load_schema_files().steps)
        + "Run `python -m workhorse schema migrate` as the schema's owner; queued jobs, schedules and history are kept.\n"
        + (
            f"This package's workers and producers also work with version 4 meanwhile (they accept {MIN_SCHEMA_VERSION} to {SCHEMA_VERSION}).\n"
            if 4 >= MIN_SCHEMA_VERSION
            else f"Until then this package's workers refuse to start (they accept versions {MIN_SCHEMA_VERSION} to {SCHEMA_VERSION}).\n"
        )
        + "Live workers: none.\n"
    )
    code, out, _ = run_cli("schema", "migrate", "--json", "--database-url", baseline_db_url)
    assert (code, json.loads(out)) == (0, migrate_document(created=False, from_version=4, applied=list(range(5, SCHEMA_VERSION + 1))))


def migrate_document(*, created: bool, from_version: int | None, applied: list[int]) -> dict[str, Any]:
    """`schema migrate --json`, as the TypeScript CLI writes it."""
    return {
        "installed": SCHEMA_VERSION,
        "expected": SCHEMA_VERSION,
        "upToDate": True,
        "changed": created or bool(applied),
        "created": created,
        "from": from_version,
        "to": SCHEMA_VERSION,
        "applied": applied,
    }



def test_the_cli_reports_a_newer_schema_by_whether_it_still_serves_this_release(db_url: str) -> None:
    newer = set_newer(db_url)
    head = (
        f"Installed: version {newer}. This package: version {SCHEMA_VERSION}. Out of date.\n"
        "The database holds a newer workhorse schema than this package ships: a service there probably runs a newer\n"
    )
    code, out, _ = run_cli("schema", "status", "--json", "--database-url", db_url)
    document = json.loads(out)
    assert (code, document["status"], document["upToDate"], document["oldestClient"], document["compatible"], document["pending"]) == (
        3, "newer", False, 4, True, [],
    )
    assert run_cli("schema", "status", "--database-url", db_url) == (
        3,
        head + "nestjs-workhorse. It still serves this release, whose workers and producers keep working with it; upgrade\n"
        f"this package to the release that ships schema version {newer} when you can. A schema is never downgraded.\n"
        "Live workers: none.\n",
        "",
    )
    assert run_cli("schema", "migrate", "--database-url", db_url) == (
        0,
        f"The workhorse schema is version {newer}, newer than this package's {SCHEMA_VERSION}, and still serves this release. "
        "Nothing to do: a schema is never downgraded.\n",
        "",
    )
    code, out, _ = run_cli("schema", "migrate", "--json", "--database-url", db_url)
    assert (code, json.loads(out)) == (
        0,
        {"installed": newer, "expected": SCHEMA_VERSION, "upToDate": False, "changed": False, "created": False, "from": newer, "to": newer, "applied": []},
    )
    assert installed(db_url) == newer

    set_newer(db_url, oldest_client=newer)
    assert run_cli("schema", "status", "--database-url", db_url) == (
        3,
        head + "nestjs-workhorse, and it no longer serves this release.\n"
        f"Upgrade this package to the release that ships schema version {newer}; a schema is never downgraded.\n"
        "Live workers: none.\n",
        "",
    )


@pytest.fixture
def producer_url(db_url: str) -> Iterator[str]:
    """A login role with the producer capability's grants (not the operator's), as a URL on the test database."""
    import secrets
    from urllib.parse import urlsplit, urlunsplit

    role, password = f"wh_py_p_{secrets.token_hex(4)}", secrets.token_hex(12)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'".encode())
        conn.execute(f"GRANT USAGE ON SCHEMA workhorse TO {role}".encode())
        conn.execute(f"GRANT SELECT ON TABLE workhorse.schema_version TO {role}".encode())
        for (function,) in conn.execute(
            "SELECT p.oid::regprocedure::text FROM pg_catalog.pg_proc p JOIN workhorse.protocol_function f ON f.name = p.proname "
            "WHERE p.pronamespace = 'workhorse'::regnamespace AND f.capabilities && ARRAY['producer']"
        ).fetchall():
            conn.execute(f"GRANT EXECUTE ON FUNCTION {function} TO {role}".encode())
    parts = urlsplit(db_url)
    yield urlunsplit(parts._replace(netloc=f"{role}:{password}@{parts.hostname}:{parts.port}"))
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"DROP OWNED BY {role}".encode())
        conn.execute(f"DROP ROLE {role}".encode())


def test_the_cli_says_when_this_role_may_not_list_the_live_workers(producer_url: str) -> None:
    assert run_cli("schema", "status", "--database-url", producer_url) == (
        0,
        f"Installed: version {SCHEMA_VERSION}. This package: version {SCHEMA_VERSION}. Up to date.\n"
        "Live workers: not visible to this role (listing them needs the operator capability).\n",
        "",
    )
    code, out, _ = run_cli("schema", "status", "--json", "--database-url", producer_url)
    document = json.loads(out)
    assert (code, document["workers"], document["oldestClient"], document["compatible"]) == (0, None, 4, True)


def test_the_cli_lists_worker_versions_in_numeric_order(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        for index, version in enumerate(("0.10.0", "0.9.0", "0.10.0", "0.9.1")):
            conn.execute(
                "INSERT INTO workhorse.worker_registry (worker_id, host, pid, queues, concurrency, in_flight, version, started_at, last_seen_at, period_ms) "
                "VALUES (%s, 'h', 1, ARRAY['q'], 1, 0, %s, now(), now(), 60000)",
                (f"w{index}", version),
            )
    code, out, _ = run_cli("schema", "status", "--database-url", db_url)
    assert (code, out.splitlines()[-1]) == (0, "Live workers: 1 on 0.9.0, 1 on 0.9.1, 2 on 0.10.0.")
    code, out, _ = run_cli("schema", "status", "--json", "--database-url", db_url)
    assert json.loads(out)["workers"] == [{"version": "0.9.0", "count": 1}, {"version": "0.9.1", "count": 1}, {"version": "0.10.0", "count": 2}]


def test_the_cli_counts_live_workers_by_version(db_url: str) -> None:
    from psycopg_pool import ConnectionPool

    from workhorse import Worker

    with ConnectionPool(db_url, min_size=1, max_size=4) as pool:
        worker = Worker(Queue(pool), poll_ms=50, tick_ms=100)
        worker.start()
        try:
            code, out, _ = run_cli("schema", "status", "--json", "--database-url", db_url)
        finally:
            worker.stop()
    workers = json.loads(out)["workers"]
    assert code == 0 and len(workers) == 1 and workers[0]["count"] == 1 and workers[0]["version"].startswith("python/")


def test_the_cli_needs_a_database() -> None:
    code, out, err = run_cli("schema", "status")
    assert (code, out) == (2, "") and "set DATABASE_URL or pass --database-url" in err


def test_statements_split_at_semicolons_outside_quotes_bodies_and_comments() -> None:
    script = (
        "-- a; comment\nCREATE INDEX CONCURRENTLY a ON t (x);\n"
        "/* a /* nested; */ block; */ SELECT 'it''s; quoted', \"semi;colon\" FROM t;\n"
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$;\n"
        "SELECT E'\\'; still quoted', $$;$$;  -- trailing\n;;"
    )
    assert split_statements(script) == [
        "-- a; comment\nCREATE INDEX CONCURRENTLY a ON t (x)",
        "/* a /* nested; */ block; */ SELECT 'it''s; quoted', \"semi;colon\" FROM t",
        "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$",
        "SELECT E'\\'; still quoted', $$;$$",
    ]


@pytest.mark.timeout(600)
def test_the_wheel_alone_installs_and_migrates_the_schema(empty_db_url: str, tmp_path: Path) -> None:
    # Built from a copy, so the build writes nothing into the checkout.
    source = tmp_path / "source"
    shutil.copytree(Path(__file__).resolve().parents[1], source, ignore=shutil.ignore_patterns(".venv", "build", "*.egg-info", "__pycache__", ".mypy_cache"))
    wheels = tmp_path / "wheels"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)], check=True)
    (wheel,) = wheels.glob("workhorse-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = {name.removeprefix("workhorse/sql/") for name in archive.namelist() if name.startswith("workhorse/sql/")}
    assert shipped == set(tree(PACKAGE_SQL)) and "migrations/0005_migration_log.sql" in shipped

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    constraints = Path(__file__).resolve().parents[1] / "requirements-test.txt"
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(constraints), str(wheel)], check=True)
    elsewhere = tmp_path / "app"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "DATABASE_URL")}
    env["DATABASE_URL"] = empty_db_url
    where = subprocess.run([python, "-c", "import workhorse; print(workhorse.__file__)"], cwd=elsewhere, env=env, check=True, capture_output=True, text=True)
    assert where.stdout.startswith(str(venv))
    migrated = subprocess.run([python, "-m", "workhorse", "schema", "migrate", "--json"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert (migrated.returncode, migrated.stderr) == (0, "")
    assert json.loads(migrated.stdout) == migrate_document(created=True, from_version=None, applied=[])
    status = subprocess.run([python, "-m", "workhorse", "schema", "status"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert status.returncode == 0 and "Up to date." in status.stdout
    assert installed(empty_db_url) == SCHEMA_VERSION
