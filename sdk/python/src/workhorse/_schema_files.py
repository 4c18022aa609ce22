"""The SQL this package ships (``workhorse/sql/``, a copy of the repository's ``sql/`` made by
``scripts/copy-sdk-sql.js``): the top-level files are the current full schema, run in name
order by a fresh install; ``migrations/NNNN_<slug>.sql`` is the step from version NNNN-1 to
NNNN (docs/upgrading.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

from .errors import SchemaMigrationError

#: Schema version 4 (the release before migrations existed) is the oldest a step starts from.
BASELINE_VERSION = 4
#: A step whose first line is this runs statement by statement outside a transaction.
NO_TRANSACTION_MARKER = "-- workhorse:no-transaction"

_STEP_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class SchemaStep:
    """One step of ``migrations/``: it takes the schema from ``version - 1`` to ``version``."""

    version: int
    #: The file's slug, as the migration log records it.
    name: str
    sql: str

    @property
    def file(self) -> str:
        return f"{self.version:04d}_{self.name}.sql"

    @property
    def transactional(self) -> bool:
        first_line = self.sql.split("\n", 1)[0].rstrip()
        return first_line != NO_TRANSACTION_MARKER


@dataclass(frozen=True)
class SchemaFiles:
    #: The full schema's files' texts, in name order.
    full: tuple[str, ...]
    #: The steps in version order, without gaps, from BASELINE_VERSION + 1 to ``target``.
    steps: tuple[SchemaStep, ...]

    @property
    def target(self) -> int:
        """The version the full schema installs and the last step reaches."""
        return self.steps[-1].version if self.steps else BASELINE_VERSION

    def pending(self, installed: int) -> tuple[SchemaStep, ...]:
        return tuple(step for step in self.steps if step.version > installed)


def load_schema_files(sql_dir: str | Path | None = None) -> SchemaFiles:
    """Reads the package's SQL, or a folder laid out the same way (for tests)."""
    root: Traversable = files("workhorse").joinpath("sql") if sql_dir is None else Path(sql_dir)
    if not root.is_dir():
        raise SchemaMigrationError(f"the workhorse package has no SQL folder at {root}: reinstall the package")
    full = tuple(entry.read_text(encoding="utf-8") for entry in sorted(root.iterdir(), key=lambda e: e.name) if entry.is_file() and entry.name.endswith(".sql"))
    if not full:
        raise SchemaMigrationError(f"no .sql files in {root}: reinstall the package")
    steps: list[SchemaStep] = []
    migrations = root.joinpath("migrations")
    if migrations.is_dir():
        for entry in sorted(migrations.iterdir(), key=lambda e: e.name):
            if not entry.name.endswith(".sql"):
                continue
            match = _STEP_NAME.match(entry.name)
            if match is None:
                raise SchemaMigrationError(f"migrations/{entry.name} is not named NNNN_<slug>.sql")
            steps.append(SchemaStep(int(match.group(1)), match.group(2), entry.read_text(encoding="utf-8")))
    for expected, step in enumerate(steps, start=BASELINE_VERSION + 1):
        if step.version != expected:
            raise SchemaMigrationError(f"the package's migration steps skip version {expected} (found {step.version} next): reinstall the package")
    return SchemaFiles(full, tuple(steps))
