"""Helpers shared by the tests: waiting for a condition, the split invariant, worker processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")
SRC = Path(__file__).resolve().parents[1] / "src"


def wait_for(probe: Callable[[], T | None], timeout: float, what: str) -> T:
    """Polls ``probe`` until it returns something truthy; fails naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def split_violations(url: str) -> list[str]:
    """Jobs without exactly one runtime or outcome row (the protocol's split invariant)."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            """SELECT j.id::text FROM workhorse.job j
               LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
               LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id
               WHERE (r.job_id IS NULL) = (o.job_id IS NULL)"""
        ).fetchall()
    return [r[0] for r in rows]


class WorkerProcess:
    """``python -m tests.conformance_worker`` as a child process, its output lines collected."""

    def __init__(self, url: str, scenario: Path, worker_id: str) -> None:
        self.worker_id = worker_id
        env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(SRC), str(SRC.parent)))}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.conformance_worker", "--database-url", url, "--scenario", str(scenario),
             "--worker-id", worker_id],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        self.events: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.events.append(json.loads(line))

    def saw(self, event: str, **fields: Any) -> bool:
        return any(e["event"] == event and all(e.get(k) == v for k, v in fields.items()) for e in list(self.events))

    def wait_ready(self) -> None:
        wait_for(lambda: self.saw("ready") or self.process.poll() is not None, 30, "the worker process to claim")
        assert self.process.poll() is None, self.stderr()

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self._reader.join(10)

    def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(60)
        self._reader.join(10)
        return code

    def stderr(self) -> str:
        return self.process.stderr.read() if self.process.stderr and self.process.poll() is not None else ""

    def close(self) -> None:
        if self.process.poll() is None:
            self.kill()
        for stream in (self.process.stdout, self.process.stderr):
            if stream:
                stream.close()


def grant_capability_sql(role: str, capability: str) -> bytes:
    """The statement that gives ``role`` what ``capability`` may call, as ``grantRole`` does
    (the functions ``workhorse.protocol_function`` lists for it)."""
    return _GRANT_CAPABILITY.replace("{role}", role).replace("{capability}", capability).encode()


_GRANT_CAPABILITY = """
DO $grant$
DECLARE v_function regprocedure;
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA workhorse TO %I', '{role}');
  EXECUTE format('GRANT SELECT ON TABLE workhorse.schema_version TO %I', '{role}');
  FOR v_function IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p JOIN workhorse.protocol_function f ON f.name = p.proname
    WHERE p.pronamespace = 'workhorse'::regnamespace AND f.capabilities && ARRAY['{capability}']
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_function, '{role}');
  END LOOP;
END
$grant$;
"""
