"""``python -m workhorse schema migrate|status``: the schema commands of the TypeScript CLI
(docs/cli.md), with the SQL this package ships, so a Python-only deployment needs neither Node
nor a checkout. The same reports (naming this command), ``--json`` documents and exit codes as
``workhorse schema``; ``status`` also counts the registry's live workers by version."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

import psycopg

from . import _calls as calls
from ._schema_files import BASELINE_VERSION
from ._sync import _value
from ._worker_cli import add_worker_command, run_worker
from .errors import WorkhorseError
from .schema import SCHEMA_VERSION, MigrationResult, SchemaStatus, install_schema, schema_status

#: The exit codes of ``workhorse`` (lib/cli/cli.errors.ts EXIT).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
#: ``schema status`` only: the check worked, and the schema is absent, older or newer.
EXIT_SCHEMA_NOT_READY = 3

_CONNECT_TIMEOUT_S = 10
_MIGRATE = "python -m workhorse schema migrate"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m workhorse", description="The workhorse schema (install, upgrade, check its version), and workers."
    )
    commands = parser.add_subparsers(dest="group", required=True, metavar="{schema,worker}")
    add_worker_command(commands)
    schema = commands.add_parser("schema", help="install or upgrade the workhorse schema, or check its version")
    actions = schema.add_subparsers(dest="command", required=True, metavar="{migrate,status}")
    for name, summary in (
        ("migrate", "install the schema if it is absent, or apply the pending steps; a newer database is refused unchanged"),
        ("status", "compare the database's schema version with this package's; exits 0 when up to date, 3 otherwise"),
    ):
        command = actions.add_parser(name, help=summary, description=summary)
        command.add_argument("--database-url", metavar="URL", help="the database (default: $DATABASE_URL)")
        command.add_argument("--json", action="store_true", help="print one JSON document")
    return parser


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None, env: Mapping[str, str] | None = None) -> int:
    """Runs the command line and returns its exit code; every failure is one line on stderr."""
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit:  # argparse has printed the usage or the help
        return exit.code if isinstance(exit.code, int) else EXIT_USAGE
    if args.group == "worker":
        return run_worker(args, err)
    url = args.database_url or (os.environ if env is None else env).get("DATABASE_URL")
    if not url:
        err.write("workhorse: no database given: set DATABASE_URL or pass --database-url postgres://user:password@host:5432/db.\n")
        return EXIT_USAGE
    try:
        with psycopg.connect(url, connect_timeout=_CONNECT_TIMEOUT_S, application_name="workhorse-cli", autocommit=True) as conn:
            if args.command == "status":
                status = schema_status(conn)
                workers = _worker_versions(conn, status)
                if args.json:
                    out.write(_json({**_status_document(status), "workers": workers}))
                else:
                    out.write(f"{_describe_status(status)}\n{_describe_workers(workers)}\n")
                return EXIT_OK if status.up_to_date else EXIT_SCHEMA_NOT_READY
            result = install_schema(conn)
            out.write(_json(_migration_document(result)) if args.json else _describe_migration(result) + "\n")
            return EXIT_OK
    except WorkhorseError as error:
        err.write(f"workhorse: {_one_line(str(error))}\n")
    except psycopg.OperationalError as error:
        err.write(f"workhorse: cannot connect to PostgreSQL or lost the connection: {_one_line(str(error))}\n")
    except psycopg.Error as error:
        err.write(f"workhorse: PostgreSQL reported an error: {_one_line(str(error))}\n")
    return EXIT_FAILURE


def _worker_versions(conn: psycopg.Connection[Any], status: SchemaStatus) -> list[dict[str, Any]] | None:
    """The registry's live workers (not gone) counted by the version they run, in version order
    (0.9.0 before 0.10.0); none when the schema is absent, None when this role may not list them
    (listing needs the operator capability)."""
    if status.installed is None:
        return []
    try:
        workers = _value(conn, calls.worker_versions(_value(conn, calls.has_list_workers_v2())))
    except psycopg.errors.InsufficientPrivilege:
        return None
    counts = Counter(version for state, version in workers if state != "gone")
    return [{"version": version, "count": counts[version]} for version in sorted(counts, key=_version_order)]


def _version_order(version: str) -> tuple[Any, ...]:
    """Orders versions as the TypeScript CLI does (a numeric collation): runs of digits compare
    as numbers, so 0.9.0 comes before 0.10.0."""
    parts = re.split(r"(\d+)", version)
    return tuple(int(part) if index % 2 else part for index, part in enumerate(parts))


def _status_document(status: SchemaStatus) -> dict[str, Any]:
    return {
        "installed": status.installed,
        "expected": status.expected,
        "minimum": status.minimum,
        "upToDate": status.up_to_date,
        "oldestClient": status.oldest_client,
        "compatible": status.compatible,
        "status": status.situation,
        "pending": [{"version": step.version, "name": step.name, "transactional": step.transactional} for step in status.pending],
    }


def _describe_status(status: SchemaStatus) -> str:
    if status.installed is None:
        return f"No workhorse schema in this database. Run `{_MIGRATE}`."
    head = f"Installed: version {status.installed}. This package: version {status.expected}."
    if status.situation == "up-to-date":
        return f"{head} Up to date."
    if status.situation == "newer":
        newer = f"{head} Out of date.\nThe database holds a newer workhorse schema than this package ships: a service there probably runs a newer\n"
        if status.compatible:
            return (
                f"{newer}nestjs-workhorse. It still serves this release, whose workers and producers keep working with it; upgrade\n"
                f"this package to the release that ships schema version {status.installed} when you can. A schema is never downgraded."
            )
        return (
            f"{newer}nestjs-workhorse, and it no longer serves this release.\n"
            f"Upgrade this package to the release that ships schema version {status.installed}; a schema is never downgraded."
        )
    if not status.pending:
        return (
            f"{head} Out of date.\n"
            f"The database holds a workhorse schema older than version {BASELINE_VERSION}, the first one that can be migrated;\n"
            "this package cannot upgrade it."
        )
    count = len(status.pending)
    steps = "".join(
        f"  {step.version:04d} {step.name} ({'one transaction' if step.transactional else 'no transaction, resumable'})\n"
        for step in status.pending
    )
    meanwhile = (
        f"This package's workers and producers also work with version {status.installed} meanwhile (they accept {status.minimum} to {status.expected})."
        if status.installed >= status.minimum
        else f"Until then this package's workers refuse to start (they accept versions {status.minimum} to {status.expected})."
    )
    return (
        f"{head} Out of date.\n"
        f"The database holds an older workhorse schema: {count} migration step{'' if count == 1 else 's'} to apply.\n"
        f"{steps}Run `{_MIGRATE}` as the schema's owner; queued jobs, schedules and history are kept.\n{meanwhile}"
    )


def _describe_workers(workers: Sequence[Mapping[str, Any]] | None) -> str:
    if workers is None:
        return "Live workers: not visible to this role (listing them needs the operator capability)."
    if not workers:
        return "Live workers: none."
    return "Live workers: " + ", ".join(f"{w['count']} on {w['version']}" for w in workers) + "."


def _migration_document(result: MigrationResult) -> dict[str, Any]:
    return {
        "installed": result.to_version,
        "expected": SCHEMA_VERSION,
        "upToDate": result.to_version == SCHEMA_VERSION,
        "changed": result.created or bool(result.applied),
        "created": result.created,
        "from": result.from_version,
        "to": result.to_version,
        "applied": list(result.applied),
    }


def _describe_migration(result: MigrationResult) -> str:
    if result.created:
        return f"Installed the workhorse schema, version {result.to_version}."
    if result.applied:
        count = len(result.applied)
        steps = ", ".join(str(version) for version in result.applied)
        return (
            f"Migrated the workhorse schema from version {result.from_version} to {result.to_version} "
            f"(applied step{'' if count == 1 else 's'} {steps}). Queued jobs, schedules and history are kept."
        )
    if result.to_version == SCHEMA_VERSION:
        return f"The workhorse schema is already installed (version {result.to_version}, the version this package ships). Nothing to do."
    return (
        f"The workhorse schema is version {result.to_version}, newer than this package's {SCHEMA_VERSION}, and still serves "
        "this release. Nothing to do: a schema is never downgraded."
    )


def _json(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2) + "\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())
