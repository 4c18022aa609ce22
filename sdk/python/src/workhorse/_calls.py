"""Every client call as data: the statement, its parameters and how its rows become the
answer. Validation happens when a call is built, so a bad argument raises before anything is
sent. The sync and async clients (and both drivers) only execute calls, so each call's rules
are written once."""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from . import _protocol as p
from .errors import SchemaNotInstalledError, SchemaVersionMismatchError
from .types import JOB_STATES, CancelResult, DrainResult, EnqueueResult, JobSnapshot, Page, QueueInfo, RedriveResult, TimelineEntry, WorkerInfo
from .validation import check_datetime, check_job_id, check_param_int, check_param_text, fail, to_wire_batch, to_wire_request

#: The schema version this SDK installs and migrates to (``workhorse.schema_version``): the
#: highest step in its ``sql/migrations/``.
SCHEMA_VERSION = 20
#: The oldest schema version whose functions every call of this SDK still finds, so a database
#: not yet migrated keeps serving this release during a rolling deploy. (20: job reads carry the
#: concurrency key of step 20; ``Admin``'s operator actions on jobs call the functions of step
#: 19; waits for results and deduplicated enqueues those of steps 18 and 17.)
MIN_SCHEMA_VERSION = 20

R = TypeVar("R")


@dataclass(frozen=True)
class Call(Generic[R]):
    sql: str
    params: tuple[Any, ...]
    convert: Callable[[Sequence[p.Row]], R]
    #: An unknown dependency the database names under this prefix is the caller's without it.
    field_prefix: str = ""


@dataclass(frozen=True)
class InstalledSchema:
    """The installed schema, as far as a client must know it."""

    #: ``workhorse.schema_version.version``.
    version: int
    #: ``workhorse.oldest_client_v1()`` (schema version 6 on): the oldest client release, by the
    #: schema version it ships, whose calls this schema serves. None before version 6, or when
    #: this role may not call it.
    oldest_client: int | None


def works_with(installed: InstalledSchema | None, expected: int = SCHEMA_VERSION, minimum: int = MIN_SCHEMA_VERSION) -> bool:
    """Whether a package that ships ``expected`` and needs at least ``minimum`` works with
    ``installed``: not older than ``minimum``, and not newer than ``expected`` unless that schema
    still serves ``expected`` (its oldest client is at most ``expected``)."""
    if installed is None or installed.version < minimum:
        return False
    return installed.version <= expected or (installed.oldest_client is not None and installed.oldest_client <= expected)


def check_schema_version(installed: InstalledSchema | None) -> None:
    """Refuses a database whose schema this SDK does not work with (see :func:`works_with`),
    with what to do about it."""
    if installed is None:
        raise SchemaNotInstalledError(SCHEMA_VERSION)
    if not works_with(installed):
        raise SchemaVersionMismatchError(installed.version, SCHEMA_VERSION, MIN_SCHEMA_VERSION)


def _installed_schema() -> Generator[tuple[str, tuple[Any, ...]], Sequence[p.Row], InstalledSchema | None]:
    """Reads the installed schema as a short exchange: each statement's rows decide the next.
    None when the schema is absent (or its version row is missing). Driven by
    :func:`read_installed_schema` and :func:`aread_installed_schema`, so every client reads it
    the same way."""
    present = yield p.SCHEMA_PRESENT_SQL, ()
    if not present[0][0]:
        return None
    rows = yield p.SCHEMA_ROW_SQL, ()
    if not rows:
        return None
    version, callable_ = rows[0]
    oldest: int | None = None
    if callable_:
        answer = yield p.OLDEST_CLIENT_SQL, ()
        oldest = None if answer[0][0] is None else int(answer[0][0])
    return InstalledSchema(int(version), oldest)


def read_installed_schema(rows: Callable[[str, tuple[Any, ...]], Sequence[p.Row]]) -> InstalledSchema | None:
    """:func:`_installed_schema` over a blocking ``rows(sql, params)``."""
    exchange = _installed_schema()
    try:
        statement = next(exchange)
        while True:
            statement = exchange.send(rows(*statement))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def aread_installed_schema(rows: Callable[[str, tuple[Any, ...]], Awaitable[Sequence[p.Row]]]) -> InstalledSchema | None:
    """:func:`_installed_schema` over an awaitable ``rows(sql, params)``."""
    exchange = _installed_schema()
    try:
        statement = next(exchange)
        while True:
            statement = exchange.send(await rows(*statement))
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


# ---- Queue ------------------------------------------------------------------------------------


def _ids(rows: Sequence[p.Row]) -> list[str]:
    return [row[0] for row in rows]


#: An unknown dependency of a single enqueue is named as the caller gave it: `dependsOn[0]`, not
#: the batch's `requests[0].dependsOn[0]`.
SINGLE = "requests[0]."


def enqueue_request(type: object, payload: object, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One enqueue call, checked, as the one-request batch ``enqueue_many_v1`` receives."""
    return [to_wire_request(type, payload, options)]


def defined_request(job: object, payload: object, options: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One enqueue by type name or by ``JobDefinition`` (its validator run, its options under the call's)."""
    from .jobs import JobDefinition

    if isinstance(job, JobDefinition):
        return enqueue_request(job.type, job.to_wire(payload), job.enqueue_options(options))
    return enqueue_request(job, payload, options)


def enqueue_batch(requests: object) -> list[dict[str, Any]]:
    """The requests of ``enqueue_many``, checked (the wire requests ``enqueue_many_v1`` receives)."""
    return to_wire_batch(requests)


def enqueue(requests: list[dict[str, Any]], field_prefix: str = "") -> Call[list[str]]:
    """The enqueue statement of checked wire requests (which tracing may have given a ``traceContext``)."""
    return Call(p.ENQUEUE_SQL, (json.dumps(requests),), _ids, field_prefix)


def _results(rows: Sequence[p.Row]) -> list[EnqueueResult]:
    return [EnqueueResult(job_id=row[0], outcome=row[1]) for row in rows]


def enqueue_with_outcomes(requests: list[dict[str, Any]], field_prefix: str = "") -> Call[list[EnqueueResult]]:
    """As ``enqueue``, answering each job with what the enqueue did (``enqueue_many_v2``)."""
    return Call(p.ENQUEUE_OUTCOMES_SQL, (json.dumps(requests),), _results, field_prefix)


# ---- Admin ------------------------------------------------------------------------------------


def get_job_timeline(job_id: object, limit: object, cursor: object) -> Call[Page[TimelineEntry]]:
    check_job_id(job_id)
    n = check_param_int(limit, "limit")
    return Call(p.TIMELINE_SQL, (job_id, p.check_cursor(cursor), n), lambda rows: p.page_of(rows, p.to_timeline_entry))


def job_filter(queue: object, type: object, states: object) -> tuple[str | None, str | None, list[str] | None]:
    """The queue, type and states of a job listing, checked."""
    q = None if queue is None else check_param_text(queue, "queue")
    t = None if type is None else check_param_text(type, "type")
    s = None
    if states is not None:
        if not isinstance(states, (list, tuple)) or any(x not in JOB_STATES for x in states):
            fail("states", f"must be a list of {', '.join(JOB_STATES)}")
        s = list(states)
    return q, t, s


def list_jobs(queue: object, type: object, states: object, limit: object, cursor: object) -> Call[Page[JobSnapshot]]:
    q, t, s = job_filter(queue, type, states)
    n = check_param_int(limit, "limit")
    return Call(p.LIST_JOBS_SQL, (q, t, s, n, p.check_cursor(cursor)), lambda rows: p.page_of(rows, p.to_snapshot))


def cancel(job_id: object, reason: object) -> Call[CancelResult]:
    check_job_id(job_id)
    if reason is not None:
        check_param_text(reason, "reason")
    return Call(p.CANCEL_SQL, (job_id, reason), p.status_of)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CheckedFilter:
    queue: str | None
    type: str | None
    error_name: str | None
    finished_after: datetime | None
    finished_before: datetime | None


def dead_letter_filter(given: Mapping[str, Any]) -> CheckedFilter:
    keys = ("queue", "type", "error_name", "finished_after", "finished_before")
    for key in given:
        if key not in keys:
            fail(key, f"is not a dead-letter filter ({', '.join(keys)})")
    queue, type, error_name = given.get("queue"), given.get("type"), given.get("error_name")
    after, before = given.get("finished_after"), given.get("finished_before")
    return CheckedFilter(
        None if queue is None else check_param_text(queue, "queue"),
        None if type is None else check_param_text(type, "type"),
        None if error_name is None else check_param_text(error_name, "errorName"),
        None if after is None else check_datetime(after, "finishedAfter"),
        None if before is None else check_datetime(before, "finishedBefore"),
    )


def list_dead_letters(f: CheckedFilter, limit: object, cursor: object) -> Call[Page[JobSnapshot]]:
    n = check_param_int(limit, "limit")
    params = (f.queue, f.type, f.error_name, f.finished_after, f.finished_before, n, p.check_cursor(cursor))
    return Call(p.LIST_DEAD_LETTERS_SQL, params, lambda rows: p.page_of(rows, p.to_snapshot))


def _check_actor(actor: object, reason: object) -> None:
    # (Their bounds are the SQL functions': check_actor.)
    if actor is not None:
        check_param_text(actor, "actor")
    if reason is not None:
        check_param_text(reason, "reason")


def redrive(job_id: object, request_id: object, actor: object, reason: object) -> Call[str]:
    check_job_id(job_id)
    check_param_text(request_id, "requestId")
    _check_actor(actor, reason)
    return Call(p.REDRIVE_SQL, (job_id, request_id, actor, reason), p.status_of)


def redrive_many(
    f: CheckedFilter, request_id: object, dry_run: object, actor: object, reason: object, limit: object
) -> Call[list[RedriveResult]]:
    check_param_text(request_id, "requestId")
    _check_actor(actor, reason)
    if not isinstance(dry_run, bool):
        fail("dryRun", "must be True or False")
    n = check_param_int(limit, "limit")
    wire: dict[str, str] = {}
    for key, value in (("queue", f.queue), ("type", f.type), ("errorName", f.error_name)):
        if value is not None:
            wire[key] = value
    for key, at in (("finishedAfter", f.finished_after), ("finishedBefore", f.finished_before)):
        if at is not None:
            wire[key] = at.isoformat()
    return Call(
        p.REDRIVE_MANY_SQL,
        (json.dumps(wire), request_id, dry_run, actor, reason, n),
        lambda rows: [RedriveResult(r[0], r[1]) for r in rows],
    )


def set_paused(paused: bool, queue: object, actor: object, reason: object) -> Call[Any]:
    check_param_text(queue, "queue")
    _check_actor(actor, reason)
    return Call(p.PAUSE_SQL if paused else p.RESUME_SQL, (queue, actor, reason), p.first_value)


def set_queue_policy(queue: object, policy: object, actor: object, reason: object) -> Call[dict[str, Any]]:
    """``set_queue_policy_v1``, which checks the policy (fields, bounds, errors naming the field)
    and answers the policy now in force: ``{"queue", "concurrency", "rateLimit", "perKey"}``."""
    check_param_text(queue, "queue")
    _check_actor(actor, reason)
    return Call(p.SET_QUEUE_POLICY_SQL, (queue, json.dumps(_finite(policy)), actor, reason), lambda rows: json.loads(rows[0][0]))


def _finite(value: object) -> object:
    """``value`` with every number JSON cannot carry (nan, inf) as text, which the SQL function
    refuses by name instead of reading it as null (no limit)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def list_queues() -> Call[list[QueueInfo]]:
    return Call(p.LIST_QUEUES_SQL, (), lambda rows: [p.to_queue_info(r) for r in rows])


def list_workers() -> Call[list[WorkerInfo]]:
    return Call(p.LIST_WORKERS_SQL, (), lambda rows: [p.to_worker_info(r) for r in rows])


def has_list_workers_v2() -> Call[bool]:
    return Call(p.HAS_LIST_WORKERS_V2_SQL, (), lambda rows: bool(rows[0][0]))


def worker_versions(v2: bool) -> Call[list[tuple[str, str]]]:
    """Each registered worker's (status, version), through ``list_workers_v2`` or, on a schema
    without it, ``list_workers_v1``."""
    return Call(p.WORKER_VERSIONS_V2_SQL if v2 else p.WORKER_VERSIONS_V1_SQL, (), lambda rows: [(r[0], r[1]) for r in rows])


def drain_worker(worker_id: object, actor: object, reason: object) -> Call[DrainResult]:
    check_param_text(worker_id, "workerId")
    _check_actor(actor, reason)
    return Call(p.DRAIN_WORKER_SQL, (worker_id, actor, reason), p.status_of)  # type: ignore[arg-type]
