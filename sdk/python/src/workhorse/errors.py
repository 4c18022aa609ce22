"""Typed errors: every refusal of the SDK or of the SQL protocol (SQLSTATEs ``P1xxx``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

#: SQLSTATEs of the protocol's own refusals (docs/protocol.md).
SQLSTATE_VALIDATION = "P1001"
SQLSTATE_BATCH_TOO_LARGE = "P1003"
SQLSTATE_ISOLATION = "P1004"
SQLSTATE_IDEMPOTENCY_CONFLICT = "P1005"
SQLSTATE_UNKNOWN_DEPENDENCY = "P1020"
SQLSTATE_CHILD_JOB_CONFLICT = "P1021"
SQLSTATE_DECISION_NOT_ALLOWED = "P1030"
SQLSTATE_NOT_YOURS = "P1040"
SQLSTATE_JOB_ACTION_REFUSED = "P1050"
SQLSTATE_SCHEDULE_NOT_FOUND = "P1010"


class WorkhorseError(Exception):
    """Base of every error this SDK raises on purpose, so one ``except`` tells our refusals
    apart from driver and network failures.

    Example::

        try:
            queue.enqueue("", {})
        except WorkhorseError as error:
            print(error)
    """


class WorkhorseValidationError(WorkhorseError, ValueError):
    """Input that breaks a rule (shape, range, size, JSON-ness), raised before anything is
    written: by this SDK for what JSON cannot carry and its own API shape, by the SQL functions
    for every range and rule (SQLSTATE ``P1001``/``P1003``).

    ``field`` names the offending field as every SDK names it: the wire name, with a path for
    batch members and nested values (``priority``, ``requests[2].type``, ``payload.items[3]``).

    Example::

        try:
            queue.enqueue("report", {}, priority=101)
        except WorkhorseValidationError as error:
            assert error.field == "priority"
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.reason = message


class IdempotencyConflictError(WorkhorseValidationError):
    """An idempotency key was reused, while it lives, for a request that differs from the first
    one (SQLSTATE ``P1005``). The whole batch, and the caller's transaction, is rolled back.

    ``existing_job_id`` is the job the key stands for; ``fields`` lists the differing fields.
    """

    def __init__(self, field: str, message: str, existing_job_id: str, fields: list[str]) -> None:
        super().__init__(field, message)
        self.existing_job_id = existing_job_id
        self.fields = fields


class UnknownDependencyError(WorkhorseValidationError):
    """A ``depends_on`` entry names no job the enqueueing transaction can see (SQLSTATE
    ``P1020``); the whole batch is refused. ``field`` names the entry (``dependsOn[2]``,
    ``requests[1].dependsOn[0]``), ``job_id`` the id."""

    def __init__(self, field: str, message: str, job_id: str) -> None:
        super().__init__(field, message)
        self.job_id = job_id


class ChildJobConflictError(WorkhorseValidationError):
    """``ctx.run_child`` / ``ctx.run_children`` was called under a key that an earlier run of
    the handler used for other child jobs (SQLSTATE ``P1021``): a handler must ask for the same
    children under the same key on every run. ``child_ids``: the children the key stands for."""

    def __init__(self, field: str, message: str, child_ids: list[str]) -> None:
        super().__init__(field, message)
        self.child_ids = child_ids


class DecisionNotAllowedError(WorkhorseValidationError):
    """``complete_human_wait`` with a decision that is not one of the wait's ``choices``
    (SQLSTATE ``P1030``); nothing was written."""

    def __init__(self, message: str, choices: list[str]) -> None:
        super().__init__("decision", message)
        self.choices = choices


class JobActionRefusedError(WorkhorseError):
    """An operator action refused for the job's state (SQLSTATE ``P1050``): run now of a running
    or blocked job, a reschedule of one that started, a delete of a live job or of a finished one
    a live job still references (``state`` is then ``referenced``). Nothing was written.
    ``action`` is ``run_now``, ``reschedule`` or ``delete``."""

    def __init__(self, message: str, job_id: str, action: str, state: str) -> None:
        super().__init__(message)
        self.job_id = job_id
        self.action = action
        self.state = state


class NotYoursError(WorkhorseError):
    """The worker capability does not reach this (SQLSTATE ``P1040``): the dependencies of a job
    the caller does not hold under a live lease and fence, or a registry row it did not register.
    Nothing was read or written. ``field`` is ``jobId`` or ``workerId``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class IsolationError(WorkhorseError):
    """A claim ran inside a transaction above READ COMMITTED, where SKIP LOCKED is not safe
    (SQLSTATE ``P1004``); nothing was claimed. TypeScript and Go raise their ``IsolationError``."""


class ScheduleNotFoundError(WorkhorseValidationError):
    """Pause, resume, trigger or history of a schedule key its namespace does not have (SQLSTATE
    ``P1010``)."""

    def __init__(self, message: str) -> None:
        super().__init__("key", message)


class InvalidCursorError(WorkhorseValidationError):
    """A page cursor that this SDK did not hand out, or that was altered."""

    def __init__(self) -> None:
        super().__init__("cursor", "is not a cursor returned by this API")


class SchemaNotInstalledError(WorkhorseError):
    """The database holds no ``workhorse`` schema."""

    def __init__(self, expected: int) -> None:
        super().__init__(
            f"The workhorse schema is not installed in this database (this package needs version {expected}). "
            "Run `python -m workhorse schema migrate` (or `npx workhorse schema migrate`) or call "
            "workhorse.install_schema(conn) once, then start again."
        )
        self.expected = expected


class SchemaVersionMismatchError(WorkhorseError):
    """The database holds a schema this SDK does not work with: newer than the package and no
    longer serving this release (``workhorse.oldest_client_v1()`` above ``expected``;
    ``install_schema`` never downgrades), or older than the oldest version its calls still exist in (``install_schema`` migrates it).
    Nothing is changed."""

    def __init__(self, installed: int, expected: int, minimum: int | None = None) -> None:
        low = expected if minimum is None else minimum
        if installed > expected:
            message = (
                f"The workhorse schema in this database is version {installed}, newer than this package (version {expected}), "
                "and it no longer serves this release: upgrade the package to a release that works with it. A schema is never "
                "downgraded."
            )
        else:
            message = (
                f"The workhorse schema in this database is version {installed}, older than this package needs (version {low} "
                f"to {expected}): run `python -m workhorse schema migrate` (or `npx workhorse schema migrate`) or call "
                "workhorse.install_schema(conn) as the schema's owner, then start again. Queued jobs, schedules and history "
                "are kept."
            )
        super().__init__(message)
        self.installed = installed
        self.expected = expected
        self.minimum = low


class SchemaMigrationError(WorkhorseError):
    """An upgrade of the schema could not be made: the database is older than the first version
    that can be migrated, the package lacks a step, the role may not migrate, a step failed, or
    the connection is inside a transaction. ``version`` is the step it stopped at (None when
    none ran); the message says what was kept and what to do."""

    def __init__(self, message: str, version: int | None = None) -> None:
        super().__init__(message)
        self.version = version


class JobCanceledError(WorkhorseError):
    """The reason a handler's signal fires when an operator canceled its running job."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job {job_id} was canceled; stop work and return or raise.")
        self.job_id = job_id


class LeaseLostError(WorkhorseError):
    """The reason a handler's signal fires when this worker lost the job's lease (heartbeats
    failed for longer than the lease, or another worker took the job over). Nothing the handler
    does after this is recorded."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job {job_id}: this worker lost the lease; another worker may run the job.")
        self.job_id = job_id


class WorkerShutdownError(WorkhorseError):
    """The reason a handler's signal fires when the worker shut down before it finished. The job
    is not failed: its lease expires and another worker runs it again."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job {job_id}: the worker is shutting down; the job will run again elsewhere.")
        self.job_id = job_id


class ExecutionTimeoutError(WorkhorseError):
    """The reason a handler's signal fires when the attempt ran past ``execution_timeout_ms``."""

    def __init__(self, job_id: str, timeout_ms: int) -> None:
        super().__init__(f"Job {job_id}: the attempt ran longer than its execution timeout of {timeout_ms} ms.")
        self.job_id = job_id
        self.timeout_ms = timeout_ms


class WorkerStateError(WorkhorseError):
    """A worker was used the wrong way (a type registered twice, started twice, ...)."""


class JobSleeping(BaseException):
    """Raised out of ``ctx.sleep`` when the job went to sleep: the worker has let go of the job
    and the handler must let it through (it derives from ``BaseException`` so that a handler's
    ``except Exception`` does not swallow it). The handler runs again from the top when the job
    wakes."""

    def __init__(self, job_id: str, wake_at: Any) -> None:
        super().__init__(f"Job {job_id} sleeps until {wake_at}; the handler runs again then.")
        self.job_id = job_id
        self.wake_at = wake_at


class JobBlocked(BaseException):
    """Raised out of ``ctx.run_child`` / ``ctx.run_children`` when the job parked (``blocked``)
    until its children end: the worker has let go of the job and the handler must let it through
    (like ``JobSleeping``). The handler runs again from the top once every child has ended."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job {job_id} is blocked until its children end; the handler runs again then.")
        self.job_id = job_id


class JobWaiting(BaseException):
    """Raised out of ``ctx.wait_for_signal`` / ``ctx.wait_for_human`` when the job parked until
    the signal or the decision arrives (``blocked``, or ``scheduled`` until the wait's timeout):
    the worker has let go of the job and the handler must let it through. ``wait_for`` is
    ``"signal"`` or ``"human"``."""

    def __init__(self, job_id: str, wait_for: str, wait_name: str, timeout_at: datetime | None) -> None:
        what = f'signal "{wait_name}"' if wait_for == "signal" else f'a human decision "{wait_name}"'
        super().__init__(f"Job {job_id} waits for {what}; the handler runs again then.")
        self.job_id = job_id
        self.wait_for = wait_for
        self.wait_name = wait_name
        self.timeout_at = timeout_at


class ChildJobFailedError(WorkhorseError):
    """Raised by ``ctx.run_child`` when the child job ended ``failed`` or ``canceled``; carries
    the child's error envelope. A handler may catch it (to compensate) or let it fail the attempt."""

    def __init__(self, child_id: str, child_state: str, child_error: Mapping[str, Any]) -> None:
        super().__init__(f"Child job {child_id} ended {child_state}: {child_error.get('name')}: {child_error.get('message')}")
        self.child_id = child_id
        self.child_state = child_state
        self.child_error = dict(child_error)


class JobFailedError(WorkhorseError):
    """``wait_for_result`` for a job that ended ``failed`` (its attempts ran out, it failed for
    good, or its deadline passed): ``job_error`` is the job's stored error envelope."""

    state = "failed"

    def __init__(self, job_id: str, job_error: Mapping[str, Any]) -> None:
        super().__init__(f"Job {job_id} failed: {job_error.get('name')}: {job_error.get('message')}")
        self.job_id = job_id
        self.job_error = dict(job_error)


class JobResultCanceledError(JobCanceledError):
    """``wait_for_result`` for a job that ended ``canceled``; ``job_error`` is its stored
    envelope (name ``Canceled``, the reason as the message). A ``JobCanceledError``."""

    state = "canceled"

    def __init__(self, job_id: str, job_error: Mapping[str, Any]) -> None:
        super().__init__(job_id)
        self.args = (f"Job {job_id} was canceled: {job_error.get('message')}",)
        self.job_error = dict(job_error)


class WaitForResultTimeoutError(WorkhorseError, TimeoutError):
    """``wait_for_result`` gave up after its timeout; the job has not ended and keeps running."""

    def __init__(self, job_id: str, timeout: float) -> None:
        super().__init__(f"Job {job_id} did not end within {timeout} s; it keeps running.")
        self.job_id = job_id
        self.timeout = timeout


class JobNotFoundError(WorkhorseError):
    """``wait_for_result`` for an id this producer cannot read: no such job, or one another
    login role enqueued (nothing is revealed about it), or one retention deleted."""

    def __init__(self, job_id: str) -> None:
        super().__init__(f"Job {job_id} was not found (or was enqueued by another login role).")
        self.job_id = job_id


class SignalTimeoutError(WorkhorseError):
    """Raised by ``ctx.wait_for_signal`` when its timeout passed before a signal of that name
    arrived. The handler may catch it and go on (the wait stays timed out on every replay)."""

    def __init__(self, job_id: str, signal_name: str, timeout_at: datetime) -> None:
        super().__init__(f'Job {job_id}: no signal "{signal_name}" arrived by {timeout_at.isoformat()}.')
        self.job_id = job_id
        self.signal_name = signal_name
        self.timeout_at = timeout_at


class HumanWaitTimeoutError(WorkhorseError):
    """Raised by ``ctx.wait_for_human`` when its timeout passed before anyone decided. The
    handler may catch it and go on (the wait stays timed out on every replay)."""

    def __init__(self, job_id: str, wait_name: str, timeout_at: datetime) -> None:
        super().__init__(f'Job {job_id}: no decision on "{wait_name}" by {timeout_at.isoformat()}.')
        self.job_id = job_id
        self.wait_name = wait_name
        self.timeout_at = timeout_at


class NonRetryableError(Exception):
    """Raise it (or any exception with ``retryable = False``) from a handler to fail the job at
    once, whatever attempts remain.

    Example::

        if account is None:
            raise NonRetryableError(f"account {account_id} does not exist")
    """

    retryable = False


class RetryAfterError(Exception):
    """Raise it (or any exception with an integer ``retry_delay_ms``) from a handler to choose
    the delay before the next attempt instead of the retry policy's.

    Example::

        if response.status_code == 429:
            raise RetryAfterError("rate limited", retry_delay_ms=30_000)
    """

    def __init__(self, message: str, retry_delay_ms: int) -> None:
        super().__init__(message)
        self.retry_delay_ms = retry_delay_ms


_TYPED_CODES = (
    SQLSTATE_VALIDATION,
    SQLSTATE_ISOLATION,
    SQLSTATE_SCHEDULE_NOT_FOUND,
    SQLSTATE_BATCH_TOO_LARGE,
    SQLSTATE_IDEMPOTENCY_CONFLICT,
    SQLSTATE_UNKNOWN_DEPENDENCY,
    SQLSTATE_CHILD_JOB_CONFLICT,
    SQLSTATE_DECISION_NOT_ALLOWED,
    SQLSTATE_NOT_YOURS,
    SQLSTATE_JOB_ACTION_REFUSED,
)


def from_db_error(error: BaseException, field_prefix: str = "") -> BaseException:
    """Turns an error raised by a ``workhorse.*`` SQL function (through Psycopg or asyncpg) into
    the typed error; anything else is returned unchanged. An unknown dependency the database
    or a refused field the database names under ``field_prefix`` is the caller's without it (a
    single enqueue is a batch of one: ``priority``, as the caller gave it, not
    ``requests[0].priority``)."""
    code, column, message, detail = _fields(error)
    if code not in _TYPED_CODES:
        return error
    named = column or "request"
    stripped = named.removeprefix(field_prefix) or "request"
    field = stripped if field_prefix and code in (SQLSTATE_UNKNOWN_DEPENDENCY, SQLSTATE_VALIDATION) else named
    prefix = f"{named}: "
    text = message[len(prefix):] if message.startswith(prefix) else message
    # These refusals carry a JSON detail (docs/protocol.md); P1001 and P1003 carry none.
    plain = code in (SQLSTATE_VALIDATION, SQLSTATE_BATCH_TOO_LARGE)
    parsed: dict[str, Any] = json.loads(detail) if detail and not plain else {}
    if code == SQLSTATE_IDEMPOTENCY_CONFLICT:
        return IdempotencyConflictError(
            field, text, str(parsed.get("existingJobId", "")), [str(f) for f in parsed.get("fields", [])]
        )
    if code == SQLSTATE_UNKNOWN_DEPENDENCY:
        return UnknownDependencyError(field, f"no job has the id {parsed.get('jobId', '')}", str(parsed.get("jobId", "")))
    if code == SQLSTATE_CHILD_JOB_CONFLICT:
        return ChildJobConflictError(field, text, [str(i) for i in parsed.get("childIds", [])])
    if code == SQLSTATE_NOT_YOURS:
        return NotYoursError(field, text)
    if code == SQLSTATE_JOB_ACTION_REFUSED:
        job_id = str(parsed.get("jobId", ""))
        return JobActionRefusedError(f"job {job_id} {text}", job_id, str(parsed.get("action", "")), str(parsed.get("state", "")))
    if code == SQLSTATE_SCHEDULE_NOT_FOUND:
        return ScheduleNotFoundError(text)
    if code == SQLSTATE_ISOLATION:
        return IsolationError(text)
    if code == SQLSTATE_DECISION_NOT_ALLOWED:
        return DecisionNotAllowedError(text, [str(c) for c in parsed.get("choices", [])])
    if code == SQLSTATE_VALIDATION and field == "cursor":
        return InvalidCursorError()  # the database did not make this cursor (cursor_position)
    return WorkhorseValidationError(field, text)


def _fields(error: BaseException) -> tuple[str | None, str | None, str, str | None]:
    """SQLSTATE, column, primary message and detail, from a Psycopg or an asyncpg error."""
    diag = getattr(error, "diag", None)
    if diag is not None:  # psycopg.Error
        return (
            getattr(error, "sqlstate", None),
            diag.column_name,
            diag.message_primary or str(error),
            diag.message_detail,
        )
    return (  # asyncpg.PostgresError
        getattr(error, "sqlstate", None),
        getattr(error, "column_name", None),
        str(getattr(error, "message", None) or error),
        getattr(error, "detail", None),
    )
