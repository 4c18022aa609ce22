"""``Queue``: puts jobs into PostgreSQL, in the caller's transaction when given one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, Unpack, overload

from psycopg_pool import ConnectionPool

from . import _calls as calls
from . import _operator_calls as ops
from . import _orchestration_calls as orchestration
from . import _schedule_calls as schedules
from ._job_tracing import start_send
from ._result_wait import wait_sync
from ._sync import Connection, SyncExecutor
from .jobs import JobDefinition, TypedJob, typed_job
from .types import (
    CompleteHumanWaitStatus,
    DedupeOptions,
    EnqueueOptions,
    EnqueueRequest,
    EnqueueResult,
    JobSnapshot,
    JsonValue,
    OtherEnqueueOptions,
    SendSignalStatus,
    SyncedSchedule,
)


P = TypeVar("P")
R = TypeVar("R")


class Queue:
    """Puts jobs into PostgreSQL. Pass your open transaction's connection as ``conn`` and the
    job commits or rolls back with your own writes; without it a pooled connection runs the
    insert and commits it. Input is validated before anything is sent: a bad argument raises
    ``WorkhorseValidationError`` naming the field, and nothing is written.

    Example::

        pool = ConnectionPool(DATABASE_URL)
        queue = Queue(pool)
        with pool.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO orders (id) VALUES (%s)", (order_id,))
            queue.enqueue("order.fulfill", {"orderId": order_id}, conn=conn)
    """

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._executor = SyncExecutor(pool)

    @property
    def pool(self) -> ConnectionPool[Any]:
        return self._executor.pool

    @overload
    def enqueue(self, type: str, payload: Any, *, conn: Connection | None = None, **options: Unpack[EnqueueOptions]) -> str: ...
    @overload
    def enqueue(
        self, type: JobDefinition[P, Any], payload: P, *, conn: Connection | None = None, **options: Unpack[EnqueueOptions]
    ) -> str: ...
    def enqueue(
        self, type: str | JobDefinition[Any, Any], payload: Any, *, conn: Connection | None = None, **options: Unpack[EnqueueOptions]
    ) -> str:
        """Enqueues one job and returns its id. Options (``queue``, ``priority``, ``run_at``,
        ``max_attempts``, ``retry_policy``, ``tags``, ``deadline``, ``execution_timeout_ms``,
        ``idempotency_key``, ``idempotency_scope``, ``idempotency_ttl_ms``, ``depends_on``,
        ``on_dependency_failed``, ``on_dependency_canceled``) left out take the protocol's
        defaults (queue ``default``, priority 0, 25 attempts, exponential backoff, run now).
        With ``depends_on`` (1 to 1000 job ids) the job starts ``blocked`` and runs once they
        have ended (see docs/orchestration.md); an id that names no job raises
        ``UnknownDependencyError``.
        With ``idempotency_key`` an exact repeat, while the key lives, returns the first job's
        id and writes nothing; a different request under the same key raises
        ``IdempotencyConflictError``. With ``dedupe`` (a throttle or debounce window) the key's
        job may be answered instead of a new one: ``enqueue_deduped`` says which. Given a
        ``JobDefinition`` (workhorse.jobs), the payload must be of its payload type, passes its
        validator before anything is written, and its queue and options apply under the call's
        own."""
        return self._send(calls.defined_request(type, payload, options), conn, calls.SINGLE)[0]

    def enqueue_deduped(
        self, type: str, payload: Any, *, dedupe: DedupeOptions, conn: Connection | None = None, **options: Unpack[OtherEnqueueOptions]
    ) -> EnqueueResult:
        """Enqueues one job with a deduplication window (``dedupe``: ``key``, ``window_ms``,
        ``mode`` ``"throttle"`` or ``"debounce"``, ``replace``; see docs/deduplication.md) and
        answers ``EnqueueResult(job_id, outcome)``: ``created`` (a new job), ``throttled`` (the
        window's first job, nothing written) or ``debounced`` (the waiting job took this payload
        and/or runs ``window_ms`` from now). Enforced in PostgreSQL across every process, in the
        caller's transaction as ``enqueue``; other options as for ``enqueue``."""
        request = calls.enqueue_request(type, payload, {**options, "dedupe": dedupe})
        with start_send(request) as send:
            results = self._executor.run(calls.enqueue_with_outcomes(request, calls.SINGLE), conn)
            send.sent([r.job_id for r in results])
        return results[0]

    def enqueue_many(self, requests: Sequence[EnqueueRequest], *, conn: Connection | None = None) -> list[str]:
        """Enqueues up to 1000 jobs in one statement, all or nothing, and returns their ids in
        input order. Each request is a dict with ``type``, ``payload`` and any keyword option of
        ``enqueue``; its ``depends_on`` may also name an earlier request of the batch by index."""
        wire = calls.enqueue_batch(requests)
        return self._send(wire, conn) if wire else []

    def _send(self, requests: list[dict[str, Any]], conn: Connection | None, field_prefix: str = "") -> list[str]:
        # Under an active OpenTelemetry span: a PRODUCER span, whose context the jobs store.
        with start_send(requests) as send:
            ids = self._executor.run(calls.enqueue(requests, field_prefix), conn)
            send.sent(ids)
        return ids

    def wait_for_result(self, job_id: str, *, timeout: float | None = None) -> Any:
        """Waits until the job ends, whichever process or language runs it, and returns its
        result. A job that ended ``failed`` raises ``JobFailedError`` (its stored error envelope
        in ``job_error``), one that ended ``canceled`` ``JobResultCanceledError``, an id this
        producer cannot read (unknown, or another login role's job) ``JobNotFoundError``. After
        ``timeout`` seconds it raises ``WaitForResultTimeoutError``; the job goes on. A job that
        has ended answers at once. Woken by the notification of the job's end, it reads again
        every 5 s as well (``results.pollMs``), so a lost notification only delays it. Holds
        one pooled connection while it waits.

        Example::

            job_id = queue.enqueue("invoice.render", {"invoiceId": "inv-1"})
            receipt = queue.wait_for_result(job_id, timeout=30)
        """
        return wait_sync(self._executor, job_id, timeout)

    def send_signal(
        self,
        job_id: str,
        name: str,
        payload: JsonValue = None,
        *,
        idempotency_key: str | None = None,
        conn: Connection | None = None,
    ) -> SendSignalStatus:
        """Sends the signal ``name`` (with an optional JSON payload, at most 1 MiB) to a job, in
        the caller's transaction when ``conn`` is given. Answers ``delivered`` (the job was parked
        on a wait for it and is now ``ready``), ``buffered`` (the job is live but not waiting for
        it yet: its next wait for ``name`` takes it), ``duplicate`` (sent before with this
        ``idempotency_key``), ``not_found`` or ``finished``; the last three write nothing."""
        return self._executor.run(orchestration.send_signal(job_id, name, payload, idempotency_key), conn)

    def complete_human_wait(
        self,
        job_id: str,
        name: str,
        decision: JsonValue,
        *,
        actor: str,
        reason: str | None = None,
        idempotency_key: str | None = None,
        conn: Connection | None = None,
    ) -> CompleteHumanWaitStatus:
        """Records the decision for a job's open human wait ``name`` (see
        ``ctx.wait_for_human``) and wakes the job. A decision that is not one of the wait's
        choices raises ``DecisionNotAllowedError`` and writes nothing. Answers ``completed``,
        ``duplicate`` (decided before with this key), ``already_decided``, ``timed_out`` (the
        wait's timeout passed by the database's clock, even before the job woke: nothing
        recorded), ``not_waiting`` (the job has not reached that wait yet), ``not_found`` or
        ``finished``."""
        call = orchestration.complete_human_wait(job_id, name, decision, actor, reason, idempotency_key)
        return self._executor.run(call, conn)

    def sync_schedules(
        self,
        namespace: str,
        definitions: Sequence[Mapping[str, Any]],
        *,
        actor: str | None = None,
        conn: Connection | None = None,
    ) -> list[SyncedSchedule]:
        """Makes ``definitions`` the desired state of ``namespace`` (docs/schedules.md): new keys
        are created, changed ones updated, keys no longer listed disabled, in one transaction
        under the namespace's lock (with ``conn``, in the caller's). Each definition is a dict
        with ``key``, ``type``, ``cron`` and optionally ``timezone``, ``payload``, ``options``,
        ``catchUp``, ``catchUpLimit``, ``overlap``, ``missedAfterMs``. The server checks every
        one (an invalid cron expression or unknown zone is a ``WorkhorseValidationError`` naming
        ``definitions[i].cron`` or ``.timezone``) before writing anything, and plans them."""
        return self._executor.run(schedules.sync_schedules(namespace, definitions, actor), conn)

    @overload
    def get_job(self, job_id: str, *, conn: Connection | None = None) -> JobSnapshot | None: ...
    @overload
    def get_job(self, job_id: str, definition: JobDefinition[P, R], *, conn: Connection | None = None) -> TypedJob[P, R] | None: ...
    def get_job(
        self, job_id: str, definition: JobDefinition[Any, Any] | None = None, *, conn: Connection | None = None
    ) -> JobSnapshot | TypedJob[Any, Any] | None:
        """The snapshot of a job this login role enqueued (``get_own_job_v1``: a producer-only
        role may call it), or None when no such job exists or another role enqueued it (a
        producer cannot learn whether other jobs exist). Operators read any job with
        ``Admin.get_job``. With ``definition``: a ``TypedJob`` whose payload is decoded by the
        definition's validator."""
        snapshot = self._executor.run(ops.get_own_job(job_id), conn)
        return snapshot if definition is None else typed_job(definition, snapshot)
