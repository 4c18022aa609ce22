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


def test_the_readme_has_its_schema_example_quickstarts_and_the_orchestration_and_tracing_examples() -> None:
    assert len(BLOCKS) == 5


@pytest.mark.parametrize("code", BLOCKS, ids=["schema", "sync", "asyncio", "orchestration", "tracing"])
def test_a_readme_block_runs_and_prints_what_it_says(code: str, db_url: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "DATABASE_URL": db_url, "PYTHONPATH": str(SRC)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    promised = [m for m in re.findall(r"print\(.*\)  # (.*)", code)]
    assert result.stdout.splitlines() == promised
