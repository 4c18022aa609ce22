"""Every statement the SDK sends is a constant of ``workhorse._protocol`` (and the job row is
mapped there, once): no other module of the package holds SQL text. The schema migrator's own
install SQL (``schema.py``) is the exception. Reads each module's string literals with ``ast``,
so docstrings and comments that mention a statement do not count."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from .support import SRC

ALLOWED = {
    "_protocol.py": "the statements themselves",
    "schema.py": "the migrator installs and upgrades the schema itself",
    "pytest_plugin.py": "the test fixtures create and drop a database per test (no client call)",
}

_START = re.compile(
    r"^\s*((SELECT|INSERT|UPDATE|DELETE|WITH|SET|DO|GRANT|REVOKE|CREATE|ALTER|DROP)\s|"
    r"(LISTEN|UNLISTEN|NOTIFY)\s+\w*\s*;?\s*$|(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b[\w ]*;?\s*$)"
)
# A call of a versioned protocol function or a read of a table (``workhorse.install_schema(conn)``
# in a message is Python).
_CALL = re.compile(r"\bworkhorse\.[a-z_][a-z0-9_]*_v[0-9]+\s*\(|\b(FROM|JOIN)\s+workhorse\.")


def sql_literals(source: str) -> list[int]:
    """The lines of the string literals of ``source`` that read as SQL (docstrings aside)."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if _START.search(node.value) or _CALL.search(node.value):
                lines.append(node.lineno)
    return sorted(lines)


def test_sql_lives_in_protocol_only() -> None:
    package = Path(SRC) / "workhorse"
    outside = [
        f"{path.name}:{line}"
        for path in sorted(package.glob("*.py"))
        if path.name not in ALLOWED
        for line in sql_literals(path.read_text(encoding="utf-8"))
    ]
    assert outside == []


def test_sql_literals_are_recognised() -> None:
    source = '"""SELECT in a docstring."""\n# execute("BEGIN")\na = "SELECT 1"\nb = f"LISTEN {c}"\nd = "Select a queue"\ne = "x FROM workhorse.job_v1($1)"\n'
    assert sql_literals(source) == [3, 4, 6]
