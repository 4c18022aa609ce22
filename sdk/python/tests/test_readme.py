"""The README's Python blocks run as written, each in its own process against a fresh database,
and print what their comments say."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .support import SRC

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)


TEST_FILES = re.findall(r"```py\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
IDS = ["schema", "sync", "asyncio", "typed-jobs", "django", "sqlalchemy", "orchestration", "tracing"]


def test_the_readme_has_its_schema_example_quickstarts_and_the_orchestration_and_tracing_examples() -> None:
    assert len(BLOCKS) == len(IDS)
    assert len(TEST_FILES) == 1


@pytest.mark.parametrize("code", BLOCKS, ids=IDS)
def test_a_readme_block_runs_and_prints_what_it_says(code: str, db_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DATABASE_URL": db_url, "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    promised = [m for m in re.findall(r"print\(.*\)  # (.*)", code)]
    assert result.stdout.splitlines() == promised


def test_the_readme_test_file_passes_with_the_pytest_plugins_fixtures(server_url: str, tmp_path: Path) -> None:
    (tmp_path / "test_example.py").write_text(TEST_FILES[0])
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "workhorse.pytest_plugin", "-p", "no:cacheprovider", "-q", "test_example.py"],
        cwd=tmp_path, env={**os.environ, "WORKHORSE_TEST_DATABASE_URL": server_url, "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    # The fixture dropped its database.
    import psycopg

    with psycopg.connect(server_url) as conn:
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE 'workhorse_test_%'").fetchone()
    assert left is not None and left[0] == 0
