"""The shared conformance scenarios (sdk/conformance/scenarios), through this SDK's sync API
(plain handlers in the Worker's threads), its asyncio API on Psycopg, and on asyncpg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .conformance_runner import AsyncVariant, SyncVariant, run_scenario, scenario_files
from .support import split_violations

SCENARIOS = scenario_files()


def test_the_scenarios_are_there() -> None:
    assert len(SCENARIOS) >= 12


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_sync(path: Path, pool: ConnectionPool[Any], db_url: str) -> None:
    await run_scenario(path, SyncVariant(pool), db_url)
    assert split_violations(db_url) == []


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_async_psycopg(path: Path, apool: AsyncConnectionPool[Any], db_url: str) -> None:
    await run_scenario(path, AsyncVariant(apool), db_url)
    assert split_violations(db_url) == []


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_asyncpg(path: Path, asyncpg_pool: Any, db_url: str) -> None:
    await run_scenario(path, AsyncVariant(asyncpg_pool), db_url)
    assert split_violations(db_url) == []
