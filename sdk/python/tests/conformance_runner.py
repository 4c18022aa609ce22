"""Runs one scenario of sdk/conformance (the format is defined in its README) through the public
API of this SDK: sync classes (Queue, Admin, Worker with plain handlers in threads) or asyncio
ones (AsyncQueue, AsyncAdmin, AsyncWorker with coroutine handlers, on Psycopg or asyncpg)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Protocol, cast

import psycopg

from workhorse import (
    Admin,
    DecisionNotAllowedError,
    EnqueueResult,
    IdempotencyConflictError,
    JobActionRefusedError,
    JobDetails,
    JobFailedError,
    JobNotFoundError,
    JobResultCanceledError,
    Page,
    Queue,
    TimelineEntry,
    UnknownDependencyError,
    WaitForResultTimeoutError,
    Worker,
    WorkhorseValidationError,
)
from workhorse.aio import AsyncAdmin, AsyncQueue, AsyncWorker
from .conformance_worker import SAVE_AS_OWNER_SQL, Report, SaveMeanwhile, async_handler, expand_text, meanwhile_saver, sync_handler, worker_options

SCENARIOS = Path(__file__).resolve().parents[2] / "conformance" / "scenarios"


def scenario_files() -> list[Path]:
    return sorted(SCENARIOS.glob("*.json"))


def _snake(name: str) -> str:
    return re.sub(r"[A-Z]", lambda m: "_" + m[0].lower(), name)


def _value(value: Any) -> Any:
    if isinstance(value, Mapping) and set(value) == {"inMs"}:
        return datetime.now(timezone.utc) + timedelta(milliseconds=value["inMs"])
    return value


def python_options(options: Mapping[str, Any], jobs: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Wire option names -> this SDK's keyword names (``maxAttempts`` -> ``max_attempts``); a
    ``dependsOn`` entry naming a scenario job is that job's id."""
    out = {_snake(k): _value(v) for k, v in options.items()}
    if isinstance(out.get("dedupe"), dict):
        out["dedupe"] = {_snake(k): v for k, v in out["dedupe"].items()}
    if isinstance(out.get("depends_on"), list):
        out["depends_on"] = [(jobs or {}).get(e, e) if isinstance(e, str) else e for e in out["depends_on"]]
    return out


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
    async def enqueue_deduped(self, type: str, payload: Any, options: dict[str, Any]) -> EnqueueResult: ...
    async def enqueue_many(self, requests: list[dict[str, Any]]) -> list[str]: ...
    async def get_job(self, job_id: str) -> JobDetails | None: ...
    async def timeline(self, job_id: str) -> list[TimelineEntry]: ...
    async def dead_letter_ids(self) -> set[str]: ...
    async def count_jobs(self, queue: str) -> int: ...
    async def cancel(self, job_id: str) -> str: ...
    async def wait_for_result(self, job_id: str, timeout: float) -> Any: ...
    async def admin_call(self, method: str, *args: Any, **kwargs: Any) -> Any: ...
    async def set_queue_policy(self, queue: str, policy: Any) -> dict[str, Any]: ...
    async def redrive(self, job_id: str, request_id: str) -> str: ...
    async def start_worker(self, scenario: Mapping[str, Any], report: Report, save: SaveMeanwhile) -> Any: ...

    def build_worker(self, options: dict[str, Any]) -> Any: ...
    async def stop_worker(self, worker: Any, shutdown_timeout_ms: int | None) -> None: ...
    async def send_signal(self, job_id: str, name: str, payload: Any, key: str | None) -> str: ...
    async def complete_human_wait(self, job_id: str, name: str, decision: Any, options: dict[str, Any]) -> str: ...
    async def human_waits(self, job_id: str) -> list[dict[str, Any]]: ...
    async def children(self, job_id: str) -> list[str]: ...
    async def page(self, spec: Mapping[str, Any], jobs: Mapping[str, str], limit: int, cursor: str | None) -> Page[Any]: ...
    async def operator_call(self, call: str, args: Mapping[str, Any]) -> None: ...


def _wait_of(wait: Any) -> dict[str, Any]:
    return {"name": wait.name, "context": wait.context, "choices": wait.choices}


def _listing_page(admin: Any, spec: Mapping[str, Any], jobs: Mapping[str, str], limit: int, cursor: str | None) -> Any:
    """One page of an ``expect_pages`` listing (filtered by ``queue`` or ``job``): the call's
    answer, or for the async admin its coroutine."""
    listing = spec["listing"]
    if listing == "jobs":
        return admin.list_jobs(queue=spec.get("queue"), limit=limit, cursor=cursor)
    if listing == "dead_letters":
        return admin.list_dead_letters(queue=spec.get("queue"), limit=limit, cursor=cursor)
    if listing == "timeline":
        return admin.get_job_timeline(jobs[spec["job"]], limit=limit, cursor=cursor)
    if listing == "human_waits":
        if "job" in spec:
            return admin.list_human_waits(job_id=jobs[spec["job"]], limit=limit, cursor=cursor)
        return admin.list_human_waits(queue=spec.get("queue"), limit=limit, cursor=cursor)
    raise AssertionError(f"unknown listing {listing!r}")


def _operator_call(queue: Any, admin: Any, call: str, args: Mapping[str, Any]) -> Any:
    """One ``operator_call`` (scenario 026 on) on a sync or async client: the call's result, or its
    coroutine. Arguments by wire name; an absent one is not given."""
    who = {"actor": args.get("actor"), "reason": args.get("reason")}
    filters = {"queue": args.get("queue"), "type": args.get("type")}
    if call == "pause_queue":
        return admin.pause_queue(args["queue"], **who)
    if call == "drain_worker":
        return admin.drain_worker(args["workerId"], **who)
    if call == "list_jobs":
        return admin.list_jobs(**filters)
    if call == "list_dead_letters":
        given = {**filters, "error_name": args.get("errorName")}
        return admin.list_dead_letters(**{k: v for k, v in given.items() if v is not None})
    if call == "list_human_waits":
        return admin.list_human_waits(**filters, name=args.get("name"))
    if call == "sync_schedules":
        return queue.sync_schedules(args["namespace"], args["definitions"])
    raise AssertionError(f"unknown operator call {call}")


class SyncVariant:
    def __init__(self, pool: Any) -> None:
        self.queue = Queue(pool)
        self.admin = Admin(pool)

    async def enqueue(self, type: str, payload: Any, options: dict[str, Any]) -> str:
        return await asyncio.to_thread(lambda: self.queue.enqueue(type, payload, **options))

    async def enqueue_deduped(self, type: str, payload: Any, options: dict[str, Any]) -> EnqueueResult:
        return await asyncio.to_thread(lambda: self.queue.enqueue_deduped(type, payload, **options))

    async def enqueue_many(self, requests: list[dict[str, Any]]) -> list[str]:
        return await asyncio.to_thread(self.queue.enqueue_many, requests)  # type: ignore[arg-type]

    async def get_job(self, job_id: str) -> JobDetails | None:
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

    async def wait_for_result(self, job_id: str, timeout: float) -> Any:
        return await asyncio.to_thread(lambda: self.queue.wait_for_result(job_id, timeout=timeout))

    async def admin_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(lambda: getattr(self.admin, method)(*args, **kwargs))

    async def set_queue_policy(self, queue: str, policy: Any) -> dict[str, Any]:
        return await asyncio.to_thread(self.admin.set_queue_policy, queue, policy)

    async def redrive(self, job_id: str, request_id: str) -> str:
        return await asyncio.to_thread(lambda: self.admin.redrive(job_id, request_id=request_id))

    def build_worker(self, options: dict[str, Any]) -> Any:
        return Worker(self.queue, **options)

    async def start_worker(self, scenario: Mapping[str, Any], report: Report, save: SaveMeanwhile) -> Any:
        worker = Worker(self.queue, **worker_options(scenario))
        for job_type, steps in scenario["handlers"].items():
            worker.handle(job_type, sync_handler(steps, report, save))
        await asyncio.to_thread(worker.start)
        return worker

    async def stop_worker(self, worker: Any, shutdown_timeout_ms: int | None) -> None:
        await asyncio.to_thread(lambda: worker.stop(shutdown_timeout_ms=shutdown_timeout_ms))

    async def send_signal(self, job_id: str, name: str, payload: Any, key: str | None) -> str:
        return await asyncio.to_thread(lambda: self.queue.send_signal(job_id, name, payload, idempotency_key=key))

    async def operator_call(self, call: str, args: Mapping[str, Any]) -> None:
        await asyncio.to_thread(lambda: _operator_call(self.queue, self.admin, call, args))

    async def complete_human_wait(self, job_id: str, name: str, decision: Any, options: dict[str, Any]) -> str:
        return await asyncio.to_thread(lambda: self.queue.complete_human_wait(job_id, name, decision, **options))

    async def human_waits(self, job_id: str) -> list[dict[str, Any]]:
        def read() -> list[dict[str, Any]]:
            waits, cursor = [], None
            while True:
                page = self.admin.list_human_waits(job_id=job_id, limit=1, cursor=cursor)
                waits += [_wait_of(w) for w in page.items]
                if page.next_cursor is None:
                    return waits
                cursor = page.next_cursor

        return await asyncio.to_thread(read)

    async def children(self, job_id: str) -> list[str]:
        def read() -> list[str]:
            ids, cursor = [], None
            while True:
                page = self.admin.list_jobs(parent_id=job_id, limit=2, cursor=cursor)
                ids += [j.id for j in page.items]
                if page.next_cursor is None:
                    return ids
                cursor = page.next_cursor

        return await asyncio.to_thread(read)

    async def page(self, spec: Mapping[str, Any], jobs: Mapping[str, str], limit: int, cursor: str | None) -> Page[Any]:
        return cast(Page[Any], await asyncio.to_thread(_listing_page, self.admin, spec, jobs, limit, cursor))


class AsyncVariant:
    def __init__(self, pool: Any) -> None:
        self.queue = AsyncQueue(pool)
        self.admin = AsyncAdmin(pool)

    async def enqueue(self, type: str, payload: Any, options: dict[str, Any]) -> str:
        return await self.queue.enqueue(type, payload, **options)

    async def enqueue_deduped(self, type: str, payload: Any, options: dict[str, Any]) -> EnqueueResult:
        return await self.queue.enqueue_deduped(type, payload, **options)

    async def enqueue_many(self, requests: list[dict[str, Any]]) -> list[str]:
        return await self.queue.enqueue_many(requests)  # type: ignore[arg-type]

    async def get_job(self, job_id: str) -> JobDetails | None:
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

    async def wait_for_result(self, job_id: str, timeout: float) -> Any:
        return await self.queue.wait_for_result(job_id, timeout=timeout)

    async def admin_call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await getattr(self.admin, method)(*args, **kwargs)

    async def set_queue_policy(self, queue: str, policy: Any) -> dict[str, Any]:
        return await self.admin.set_queue_policy(queue, policy)

    async def redrive(self, job_id: str, request_id: str) -> str:
        return await self.admin.redrive(job_id, request_id=request_id)

    def build_worker(self, options: dict[str, Any]) -> Any:
        return AsyncWorker(self.queue, **options)

    async def start_worker(self, scenario: Mapping[str, Any], report: Report, save: SaveMeanwhile) -> Any:
        worker = AsyncWorker(self.queue, **worker_options(scenario))
        for job_type, steps in scenario["handlers"].items():
            worker.handle(job_type, async_handler(steps, report, save))
        task = asyncio.create_task(worker.run())
        await worker.started()
        return worker, task

    async def stop_worker(self, worker: Any, shutdown_timeout_ms: int | None) -> None:
        running, task = worker
        await running.stop(shutdown_timeout_ms=shutdown_timeout_ms)
        await task

    async def send_signal(self, job_id: str, name: str, payload: Any, key: str | None) -> str:
        return await self.queue.send_signal(job_id, name, payload, idempotency_key=key)

    async def operator_call(self, call: str, args: Mapping[str, Any]) -> None:
        await _operator_call(self.queue, self.admin, call, args)

    async def complete_human_wait(self, job_id: str, name: str, decision: Any, options: dict[str, Any]) -> str:
        return await self.queue.complete_human_wait(job_id, name, decision, **options)

    async def human_waits(self, job_id: str) -> list[dict[str, Any]]:
        waits: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await self.admin.list_human_waits(job_id=job_id, limit=1, cursor=cursor)
            waits += [_wait_of(w) for w in page.items]
            if page.next_cursor is None:
                return waits
            cursor = page.next_cursor

    async def children(self, job_id: str) -> list[str]:
        ids: list[str] = []
        cursor = None
        while True:
            page = await self.admin.list_jobs(parent_id=job_id, limit=2, cursor=cursor)
            ids += [j.id for j in page.items]
            if page.next_cursor is None:
                return ids
            cursor = page.next_cursor

    async def page(self, spec: Mapping[str, Any], jobs: Mapping[str, str], limit: int, cursor: str | None) -> Page[Any]:
        return cast(Page[Any], await _listing_page(self.admin, spec, jobs, limit, cursor))


async def _wait_for_result(variant: Variant, job_id: str, action: Mapping[str, Any]) -> None:
    """``wait_for_result``: the answer or the typed error ``expect`` names."""
    expect = action["expect"]
    try:
        got = await variant.wait_for_result(job_id, action.get("timeoutMs", 20000) / 1000)
    except JobFailedError as error:
        assert "failed" in expect, f"the wait failed: {error!r}"
        assert {k: error.job_error.get(k) for k in expect["failed"]} == expect["failed"]
        return
    except JobResultCanceledError as error:
        assert "canceled" in expect, f"the wait failed: {error!r}"
        assert {k: error.job_error.get(k) for k in expect["canceled"]} == expect["canceled"]
        return
    except WaitForResultTimeoutError:
        assert expect.get("timeout") is True, "the wait timed out"
        return
    except JobNotFoundError:
        assert expect.get("notFound") is True, "the wait found no job"
        return
    assert "result" in expect, f"the wait answered {got!r}"
    assert got == expect["result"]


async def _until(check: Any, timeout_ms: int, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout_ms} ms waiting for {what}")
        await asyncio.sleep(0.05)


#: The kinds of ``expectError`` and the typed errors they stand for.
_ERROR_KINDS: dict[str, type[WorkhorseValidationError]] = {
    "validation": WorkhorseValidationError,
    "idempotency_conflict": IdempotencyConflictError,
    "unknown_dependency": UnknownDependencyError,
    "decision_not_allowed": DecisionNotAllowedError,
}


def _expect_action_refused(error: BaseException, expected: Mapping[str, Any]) -> None:
    """``expectError`` of kind ``action_refused``: an operator action refused for the job's state."""
    if expected["kind"] != "action_refused":
        assert isinstance(error, WorkhorseValidationError), f"unexpected error {error!r}"
        return
    assert isinstance(error, JobActionRefusedError), f"expected JobActionRefusedError, got {error!r}"
    assert error.state == expected["state"], f"state {error.state!r} != {expected['state']!r}"


def _expect_error(error: BaseException, expected: Mapping[str, Any], jobs: Mapping[str, str]) -> None:
    kind = expected["kind"]
    wanted = _ERROR_KINDS[kind]
    assert isinstance(error, wanted), f"expected {wanted.__name__}, got {error!r}"
    for other in _ERROR_KINDS.values():
        if other is not wanted and other is not WorkhorseValidationError:
            assert not isinstance(error, other), f"expected {wanted.__name__}, got {error!r}"
    assert error.field == expected["field"], f"field {error.field!r} != {expected['field']!r}"
    if isinstance(error, IdempotencyConflictError):
        if "fields" in expected:
            assert error.fields == expected["fields"]
        if "existingJob" in expected:
            assert error.existing_job_id == jobs[expected["existingJob"]]


_SNAPSHOT_KEYS = {
    "state", "currentAttempt", "maxAttempts", "priority", "queue", "type", "executionTimeoutMs", "payload", "result",
    "progress", "tags", "retryPolicy", "concurrencyKey",
}  # fmt: skip


def _expect_job(job: JobDetails, expected: Mapping[str, Any], jobs: Mapping[str, str]) -> None:
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
        elif key == "dependencies":
            got_links = [(link.id, link.state) for link in job.dependencies]
            assert got_links == [(jobs[w["job"]], w["state"]) for w in want], f"dependencies: {job.dependencies!r}"
        elif key == "children":
            got_children = [(c.id, c.state, c.key) for c in job.children]
            assert got_children == [(jobs[w["job"]], w["state"], w["key"]) for w in want], f"children: {job.children!r}"
        elif key == "waitingOn":
            assert [link.id for link in job.waiting_on] == [jobs[w] for w in want], f"waitingOn: {job.waiting_on!r}"
        elif key == "parent":
            assert job.parent_id == (None if want is None else jobs[want]), f"parent: {job.parent_id!r}"
        else:
            raise AssertionError(f"unknown expect_job key {key!r}")


async def run_scenario(path: Path, variant: Variant, db_url: str) -> None:
    scenario = expand_text(json.loads(path.read_text(encoding="utf-8")))
    jobs: dict[str, str] = {}
    workers: dict[str, Any] = {}
    report = Recorder()
    try:
        for number, action in enumerate(scenario["actions"]):
            try:
                await _act(action, scenario, variant, jobs, workers, report, db_url)
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
    db_url: str,
) -> None:
    do = action["do"]
    if do in ("enqueue", "enqueue_many"):
        try:
            if do == "enqueue" and "outcome" in action:
                # Through enqueue_deduped, whose outcome must be the one given.
                options = python_options(action.get("options", {}), jobs)
                result = await variant.enqueue_deduped(action["type"], action["payload"], options)
                assert result.outcome == action["outcome"], f"outcome {result.outcome}, expected {action['outcome']}"
                ids = [result.job_id]
                names: Sequence[str] = [action["job"]] if "job" in action else []
            elif do == "enqueue":
                options = python_options(action.get("options", {}), jobs)
                ids = [await variant.enqueue(action["type"], action["payload"], options)]
                names = [action["job"]] if "job" in action else []
            else:
                requests = [python_options(r, jobs) for r in action["requests"]]
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
    elif do == "check_worker_options":
        # Building a worker checks its options; it is never started.
        try:
            variant.build_worker({_snake(k): v for k, v in action["options"].items()})
        except WorkhorseValidationError as error:
            assert "expectError" in action, f"unexpected error {error!r}"
            _expect_error(error, action["expectError"], jobs)
            return
        assert "expectError" not in action, f"expected {action['expectError']}, the worker was built"
    elif do == "start_worker":
        workers[action["worker"]] = await variant.start_worker(scenario, report, meanwhile_saver(db_url))
    elif do in ("kill_worker", "stop_worker"):
        await variant.stop_worker(workers.pop(action["worker"]), 0 if do == "kill_worker" else None)
    elif do == "save_as_lost_owner":
        assert await asyncio.to_thread(_save_as_lost_owner, db_url, jobs[action["job"]], action) == action["expect"]
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
    elif do == "wait_for_result":
        await _wait_for_result(variant, jobs[action["job"]] if "job" in action else action["jobId"], action)
    elif do == "redrive":
        jobs[action["as"]] = await variant.redrive(jobs[action["job"]], action["requestId"])
    elif do == "set_queue_policy":
        try:
            policy = await variant.set_queue_policy(action["queue"], action["policy"])
        except WorkhorseValidationError as error:
            assert "expectError" in action, f"unexpected error {error!r}"
            _expect_error(error, action["expectError"], jobs)
            return
        assert "expectError" not in action, f"expected {action['expectError']}, the policy was set"
        for key, want in action.get("expect", {}).items():
            assert policy.get(key) == want, f"{key}: {policy.get(key)!r} != {want!r}"
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
    elif do == "send_signal":
        job_id = action.get("jobId") or jobs[action["job"]]
        got = await variant.send_signal(job_id, action["name"], action.get("payload"), action.get("idempotencyKey"))
        assert got == action["expect"], f"send_signal answered {got!r}"
    elif do == "complete_human_wait":
        given = {"actor": action["actor"], "reason": action.get("reason"), "idempotency_key": action.get("idempotencyKey")}
        try:
            got = await variant.complete_human_wait(jobs[action["job"]], action["name"], action["decision"], given)
        except WorkhorseValidationError as error:
            assert "expectError" in action, f"unexpected error {error!r}"
            _expect_error(error, action["expectError"], jobs)
            return
        assert "expectError" not in action, f"expected {action['expectError']}, got {got!r}"
        assert got == action["expect"], f"complete_human_wait answered {got!r}"
    elif do == "operator_call":
        try:
            await variant.operator_call(action["call"], action["args"])
        except WorkhorseValidationError as error:
            assert "expectError" in action, f"unexpected error {error!r}"
            _expect_error(error, action["expectError"], jobs)
            return
        assert "expectError" not in action, f"expected {action['expectError']}, {action['call']} succeeded"
    elif do == "expect_human_waits":
        waits = await variant.human_waits(jobs[action["job"]])
        assert waits == action["waits"], f"human waits {waits}"
    elif do == "name_children":
        ids = await variant.children(jobs[action["job"]])
        assert len(ids) == len(action["as"]), f"children {ids}"
        jobs.update(zip(action["as"], ids))
    elif do == "expect_pages":
        sizes: list[int] = []
        cursor: str | None = None
        while len(sizes) < 100:
            page = await variant.page(action, jobs, action["limit"], cursor)
            sizes.append(len(page.items))
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sizes == action["sizes"], f"page sizes {sizes}"
        for refused in action.get("refuses", []):
            foreign = refused if isinstance(refused, str) else (await variant.page(refused["cursorOf"], jobs, 1, None)).next_cursor
            assert isinstance(foreign, str), f"no cursor from {refused!r}"
            try:
                await variant.page(action, jobs, action["limit"], foreign)
            except WorkhorseValidationError as error:
                _expect_error(error, {"kind": "validation", "field": "cursor"}, jobs)
            else:
                raise AssertionError(f"cursor {foreign!r} was accepted")
    elif do in ("job_action", "bulk_action"):
        await _operator_action(action, variant, jobs)
    elif do == "expect_job_count":
        count = await variant.count_jobs(action["queue"])
        assert count == action["count"], f"job count {count}"
    else:
        raise AssertionError(f"unknown action {do!r}")


async def _operator_action(action: Mapping[str, Any], variant: Variant, jobs: Mapping[str, str]) -> None:
    """``job_action`` and ``bulk_action`` (README: operator actions on jobs)."""
    who = {k: action[k] for k in ("actor", "reason") if k in action}
    if action["do"] == "job_action":
        method = {"run_now": "run_now", "reschedule": "reschedule", "delete": "delete_job"}[action["action"]]
        if "runAt" in action:
            who["run_at"] = datetime.now(timezone.utc) + timedelta(milliseconds=action["runAt"]["inMs"])
        if "priority" in action:
            who["priority"] = action["priority"]
        call: Any = variant.admin_call(method, jobs[action["job"]], **who)
    else:
        method = {"cancel": "cancel_matching", "run_now": "run_now_matching", "delete": "delete_matching"}[action["action"]]
        given = dict(action.get("filter", {}))
        names = given.pop("jobs", None)
        filter_ = {_snake(k): v for k, v in given.items()}
        if names is not None:
            filter_["job_ids"] = [jobs[n] for n in names]
        options = {"dry_run": action.get("dryRun", False), **who, **({"limit": action["limit"]} if "limit" in action else {})}
        call = variant.admin_call(method, **options, **filter_)
    try:
        got = await call
    except (WorkhorseValidationError, JobActionRefusedError) as error:
        assert "expectError" in action, f"unexpected error {error!r}"
        _expect_action_refused(error, action["expectError"])
        if action["expectError"]["kind"] != "action_refused":
            _expect_error(error, action["expectError"], jobs)
        return
    assert "expectError" not in action, f"expected {action['expectError']}, got {got!r}"
    if action["do"] == "job_action":
        assert got == action["expect"], f"{action['action']} answered {got!r}"
        return
    want = action["expect"]
    for key in ("matched", "changed", "more", "busy", "outcomes", "skipped"):
        if key in want:
            assert getattr(got, key) == want[key], f"{key}: {getattr(got, key)!r} != {want[key]!r}"
    names_of = {v: k for k, v in jobs.items()}
    if "jobs" in want:
        assert sorted(names_of.get(i, i) for i in got.job_ids) == sorted(want["jobs"]), f"jobs {got.job_ids}"
    if "sample" in want:
        assert sorted(names_of.get(s.id, s.id) for s in got.sample) == sorted(want["sample"]), f"sample {got.sample}"


def _save_as_lost_owner(db_url: str, job_id: str, action: Mapping[str, Any]) -> str:
    """Once the job's lease has run out (no worker runs meanwhile, so the dead owner is still on
    its runtime row), saves as that owner; answers the status."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        deadline = time.monotonic() + 20
        while not conn.execute(
            "SELECT EXISTS (SELECT 1 FROM workhorse.job_runtime WHERE job_id = %s AND lease_expires_at <= clock_timestamp())", (job_id,)
        ).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, "the lease did not run out"
            time.sleep(0.05)
        row = conn.execute(SAVE_AS_OWNER_SQL, (action["name"], json.dumps(action["value"]), job_id)).fetchone()
    assert row is not None, "no runtime row"
    return str(row[0])
