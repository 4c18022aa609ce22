"""Runs one scenario of sdk/conformance (the format is defined in its README) through the public
API of this SDK: sync classes (Queue, Admin, Worker with plain handlers in threads) or asyncio
ones (AsyncQueue, AsyncAdmin, AsyncWorker with coroutine handlers, on Psycopg or asyncpg)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol

from workhorse import Admin, IdempotencyConflictError, JobSnapshot, Queue, TimelineEntry, Worker, WorkhorseValidationError
from workhorse.aio import AsyncAdmin, AsyncQueue, AsyncWorker
from workhorse.conformance_worker import Report, async_handler, sync_handler, worker_options

SCENARIOS = Path(__file__).resolve().parents[2] / "conformance" / "scenarios"


def scenario_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.json"))


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m[0].lower(), name)


def _value(value: Any) -> Any:
    if isinstance(value, Mapping) and set(value) == {"inMs"}:
        return datetime.now(timezone.utc) + timedelta(milliseconds=value["inMs"])
    return value


def python_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Wire option names -> this SDK's keyword names (``maxAttempts`` -> ``max_attempts``)."""
    return {_snake(k): _value(v) for k, v in options.items()}


class Recorder:
    """Effects and marks reported by handlers (from any thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.effects: Counter[tuple[str, str]] = Counter()
        self.marks: set[tuple[str, str]] = set()

    def __call__(self, event: str, job_id: str, name: str) -> None:
        with self._lock:
            if event == "effect":
                self.effects[(job_id, name)] += 1
            else:
                self.marks.add((job_id, name))


class Variant(Protocol):
    async def enqueue(self, type: str, payload: Any, options: dict[str, Any]) -> str: ...
    async def enqueue_many(self, requests: list[dict[str, Any]]) -> list[str]: ...
    async def get_job(self, job_id: str) -> JobSnapshot | None: ...
    async def timeline(self, job_id: str) -> list[TimelineEntry]: ...
    async def dead_letter_ids(self) -> set[str]: ...
    async def count_jobs(self, queue: str) -> int: ...
    async def cancel(self, job_id: str) -> str: ...
    async def redrive(self, job_id: str, request_id: str) -> str: ...
    async def start_worker(self, scenario: Mapping[str, Any], report: Report) -> Any: ...
    async def stop_worker(self, worker: Any, shutdown_timeout_ms: int | None) -> None: ...


class SyncVariant:
    def __init__(self, pool: Any) -> None:
        self.queue = Queue(pool)
        self.admin = Admin(pool)

    async def enqueue(self, type: str, payload: Any, options: dict[str, Any]) -> str:
        return await asyncio.to_thread(lambda: self.queue.enqueue(type, payload, **options))

    async def enqueue_many(self, requests: list[dict[str, Any]]) -> list[str]:
        return await asyncio.to_thread(self.queue.enqueue_many, requests)  # type: ignore[arg-type]

    async def get_job(self, job_id: str) -> JobSnapshot | None:
        return await asyncio.to_thread(self.admin.get_job, job_id)

    async def timeline(self, job_id: str) -> list[TimelineEntry]:
        def read() -> list[TimelineEntry]:
            entries, cursor = [], None
            while True:
                page = self.admin.get_job_timeline(job_id, limit=5, cursor=cursor)
                entries += page.items
                if page.next_cursor is None:
                    return entries
                cursor = page.next_cursor

        return await asyncio.to_thread(read)

    async def dead_letter_ids(self) -> set[str]:
        return {j.id for j in (await asyncio.to_thread(lambda: self.admin.list_dead_letters(limit=1000))).items}

    async def count_jobs(self, queue: str) -> int:
        return len((await asyncio.to_thread(lambda: self.admin.list_jobs(queue=queue, limit=1000))).items)

    async def cancel(self, job_id: str) -> str:
        return await asyncio.to_thread(self.admin.cancel, job_id)

    async def redrive(self, job_id: str, request_id: str) -> str:
        return await asyncio.to_thread(lambda: self.admin.redrive(job_id, request_id=request_id))

    async def start_worker(self, scenario: Mapping[str, Any], report: Report) -> Any:
        worker = Worker(self.queue, **worker_options(scenario))
        for job_type, steps in scenario["handlers"].items():
            worker.handle(job_type, sync_handler(steps, report))
        await asyncio.to_thread(worker.start)
        return worker

    async def stop_worker(self, worker: Any, shutdown_timeout_ms: int | None) -> None:
        await asyncio.to_thread(lambda: worker.stop(shutdown_timeout_ms=shutdown_timeout_ms))


class AsyncVariant:
    def __init__(self, pool: Any) -> None:
        self.queue = AsyncQueue(pool)
        self.admin = AsyncAdmin(pool)

    async def enqueue(self, type: str, payload: Any, options: dict[str, Any]) -> str:
        return await self.queue.enqueue(type, payload, **options)

    async def enqueue_many(self, requests: list[dict[str, Any]]) -> list[str]:
        return await self.queue.enqueue_many(requests)  # type: ignore[arg-type]

    async def get_job(self, job_id: str) -> JobSnapshot | None:
        return await self.admin.get_job(job_id)

    async def timeline(self, job_id: str) -> list[TimelineEntry]:
        entries: list[TimelineEntry] = []
        cursor = None
        while True:
            page = await self.admin.get_job_timeline(job_id, limit=5, cursor=cursor)
            entries += page.items
            if page.next_cursor is None:
                return entries
            cursor = page.next_cursor

    async def dead_letter_ids(self) -> set[str]:
        return {j.id for j in (await self.admin.list_dead_letters(limit=1000)).items}

    async def count_jobs(self, queue: str) -> int:
        return len((await self.admin.list_jobs(queue=queue, limit=1000)).items)

    async def cancel(self, job_id: str) -> str:
        return await self.admin.cancel(job_id)

    async def redrive(self, job_id: str, request_id: str) -> str:
        return await self.admin.redrive(job_id, request_id=request_id)

    async def start_worker(self, scenario: Mapping[str, Any], report: Report) -> Any:
        worker = AsyncWorker(self.queue, **worker_options(scenario))
        for job_type, steps in scenario["handlers"].items():
            worker.handle(job_type, async_handler(steps, report))
        task = asyncio.create_task(worker.run())
        await worker.started()
        return worker, task

    async def stop_worker(self, worker: Any, shutdown_timeout_ms: int | None) -> None:
        running, task = worker
        await running.stop(shutdown_timeout_ms=shutdown_timeout_ms)
        await task


async def _until(check: Any, timeout_ms: int, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout_ms} ms waiting for {what}")
        await asyncio.sleep(0.05)


def _expect_error(error: BaseException, expected: Mapping[str, Any], jobs: Mapping[str, str]) -> None:
    kind = expected["kind"]
    wanted = IdempotencyConflictError if kind == "idempotency_conflict" else WorkhorseValidationError
    assert isinstance(error, wanted), f"expected {wanted.__name__}, got {error!r}"
    assert error.field == expected["field"], f"field {error.field!r} != {expected['field']!r}"
    if kind == "idempotency_conflict":
        assert isinstance(error, IdempotencyConflictError)
        if "fields" in expected:
            assert error.fields == expected["fields"]
        if "existingJob" in expected:
            assert error.existing_job_id == jobs[expected["existingJob"]]
    else:
        assert not isinstance(error, IdempotencyConflictError)


_SNAPSHOT_KEYS = {
    "state", "currentAttempt", "maxAttempts", "priority", "queue", "type", "executionTimeoutMs", "payload", "result",
    "progress", "tags", "retryPolicy",
}  # fmt: skip


def _expect_job(job: JobSnapshot, expected: Mapping[str, Any], jobs: Mapping[str, str]) -> None:
    for key, want in expected.items():
        if key in ("do", "job"):
            continue
        if key in _SNAPSHOT_KEYS:
            got = getattr(job, _snake(key))
            assert got == want, f"{key}: {got!r} != {want!r}"
        elif key == "error":
            if want is None:
                assert job.error is None, f"error: {job.error!r} != None"
                continue
            assert job.error is not None, "error: None"
            for field in ("name", "message"):
                if field in want:
                    assert job.error.get(field) == want[field], f"error.{field}: {job.error.get(field)!r} != {want[field]!r}"
            if want.get("stack"):
                assert isinstance(job.error.get("stack"), str) and job.error["stack"], "error.stack missing"
        elif key == "hasDeadline":
            assert (job.deadline is not None) == want, f"deadline: {job.deadline!r}"
        elif key == "redrivenFrom":
            assert job.redriven_from == jobs[want], f"redrivenFrom: {job.redriven_from!r}"
        else:
            raise AssertionError(f"unknown expect_job key {key!r}")


async def run_scenario(path: Path, variant: Variant) -> None:
    scenario = json.loads(path.read_text(encoding="utf-8"))
    jobs: dict[str, str] = {}
    workers: dict[str, Any] = {}
    report = Recorder()
    try:
        for number, action in enumerate(scenario["actions"]):
            try:
                await _act(action, scenario, variant, jobs, workers, report)
            except AssertionError as error:
                raise AssertionError(f"{path.name} action {number} {json.dumps(action)[:200]}: {error}") from error
    finally:
        for worker in workers.values():
            await variant.stop_worker(worker, 0)


async def _act(
    action: Mapping[str, Any],
    scenario: Mapping[str, Any],
    variant: Variant,
    jobs: dict[str, str],
    workers: dict[str, Any],
    report: Recorder,
) -> None:
    do = action["do"]
    if do in ("enqueue", "enqueue_many"):
        try:
            if do == "enqueue":
                ids = [await variant.enqueue(action["type"], action["payload"], python_options(action.get("options", {})))]
                names: Sequence[str] = [action["job"]] if "job" in action else []
            else:
                requests = [python_options(r) for r in action["requests"]]
                ids = await variant.enqueue_many(requests)
                names = action.get("jobs", [])
        except (WorkhorseValidationError, IdempotencyConflictError) as error:
            assert "expectError" in action, f"unexpected error {error!r}"
            _expect_error(error, action["expectError"], jobs)
            return
        assert "expectError" not in action, f"expected {action['expectError']}, got ids {ids}"
        if "sameAs" in action:
            assert ids[0] == jobs[action["sameAs"]], f"{ids[0]} is not job {action['sameAs']}"
        jobs.update(zip(names, ids))
    elif do == "start_worker":
        workers[action["worker"]] = await variant.start_worker(scenario, report)
    elif do in ("kill_worker", "stop_worker"):
        await variant.stop_worker(workers.pop(action["worker"]), 0 if do == "kill_worker" else None)
    elif do == "await_mark":
        key = (jobs[action["job"]], action["name"])

        async def marked() -> bool:
            return key in report.marks

        await _until(marked, action.get("timeoutMs", 20000), f"mark {action['name']}")
    elif do == "await_state":
        states = action["state"] if isinstance(action["state"], list) else [action["state"]]

        async def reached() -> bool:
            job = await variant.get_job(jobs[action["job"]])
            return job is not None and job.state in states

        await _until(reached, action.get("timeoutMs", 20000), f"state {states}")
    elif do == "cancel":
        got = await variant.cancel(jobs[action["job"]])
        assert got == action["expect"], f"cancel answered {got!r}"
    elif do == "redrive":
        jobs[action["as"]] = await variant.redrive(jobs[action["job"]], action["requestId"])
    elif do == "expect_job":
        job = await variant.get_job(jobs[action["job"]])
        assert job is not None, "no such job"
        _expect_job(job, action, jobs)
    elif do == "expect_timeline":
        entries = [f"{e.source}:{e.kind}" for e in await variant.timeline(jobs[action["job"]])]
        assert entries == action["entries"], f"timeline {entries}"
    elif do == "expect_effects":
        job_id = jobs[action["job"]]
        effects = {name: n for (j, name), n in report.effects.items() if j == job_id}
        assert effects == action["counts"], f"effects {effects}"
    elif do == "expect_dead_letter":
        present = jobs[action["job"]] in await variant.dead_letter_ids()
        assert present == action["present"], f"dead letter present: {present}"
    elif do == "expect_job_count":
        count = await variant.count_jobs(action["queue"])
        assert count == action["count"], f"job count {count}"
    else:
        raise AssertionError(f"unknown action {do!r}")
