"""The shapes the SDK hands out and takes: job snapshots, timeline entries, pages, options."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, Literal, TypedDict, TypeVar, Union

#: A JSON value as PostgreSQL's ``jsonb`` stores it and gives back.
JsonValue = Union[None, bool, int, float, str, list["JsonValue"], dict[str, "JsonValue"]]

#: The seven states of a job: four live ones, three terminal.
JobState = Literal["blocked", "scheduled", "ready", "active", "succeeded", "failed", "canceled"]
JOB_STATES: tuple[JobState, ...] = ("blocked", "scheduled", "ready", "active", "succeeded", "failed", "canceled")

#: What ``Admin.cancel`` answers.
CancelResult = Literal["canceled", "cancel_requested", "already_terminal", "not_found"]


class RetryPolicy(TypedDict, total=False):
    """Backoff between attempts, in the protocol's own (wire) keys:
    ``{"kind": "exponential", "initialMs"?, "multiplier"?, "maxMs"?, "jitter"?}`` or
    ``{"kind": "fixed", "delayMs"?}``."""

    kind: Literal["exponential", "fixed"]
    initialMs: int
    multiplier: float
    maxMs: int
    jitter: bool
    delayMs: int


class ErrorEnvelope(TypedDict, total=False):
    """The error stored for a failed attempt or job: ``name`` and ``message`` always, ``stack``
    when the handler's language had one (a Python traceback here)."""

    name: str
    message: str
    stack: str


#: What a job enqueued with ``depends_on`` does when a prerequisite did not succeed: end
#: ``failed``, end ``canceled`` (error ``DependencyFailed`` / ``DependencyCanceled``), or run.
DependencyPolicy = Literal["fail", "cancel", "run"]


class JobOptions(TypedDict, total=False):
    """The keyword options every job takes (each optional; the protocol's defaults apply)."""

    queue: str
    priority: int
    run_at: datetime
    max_attempts: int
    retry_policy: RetryPolicy
    tags: Sequence[str]
    deadline: datetime
    execution_timeout_ms: int
    idempotency_key: str
    idempotency_scope: str
    idempotency_ttl_ms: int


class _DedupeRequired(TypedDict):
    key: str
    window_ms: int
    mode: Literal["throttle", "debounce"]


class DedupeOptions(_DedupeRequired, total=False):
    """A deduplication window (the ``dedupe`` option; docs/deduplication.md): enqueues of one
    queue, type, mode and ``key`` (1 to 512 characters) share a job. ``throttle``: the first
    enqueue makes the job and opens a window of ``window_ms`` (100 ms to 30 days); an enqueue
    inside it writes nothing and answers that job. ``debounce``: the job runs once ``window_ms``
    has passed; while it has not started, a later enqueue replaces its ``payload``, its run time
    (``runAt``: now + window) or ``both`` (``replace``, default both)."""

    replace: Literal["payload", "runAt", "both"]


#: What an enqueue did (``Queue.enqueue_deduped``): wrote a job, found an idempotent enqueue's
#: job for an exact repeat, or answered a dedupe key's job.
EnqueueOutcome = Literal["created", "duplicate", "throttled", "debounced"]


@dataclass(frozen=True)
class EnqueueResult:
    """``Queue.enqueue_deduped``'s answer: the job and what the enqueue did."""

    job_id: str
    outcome: EnqueueOutcome


class OtherEnqueueOptions(JobOptions, total=False):
    """The keyword options of ``enqueue_deduped`` besides ``dedupe``: those of every job, and its
    prerequisites (``depends_on``, ``on_dependency_failed``, ``on_dependency_canceled``: see
    docs/orchestration.md)."""

    #: Prerequisites: job ids (in ``enqueue_many`` also indexes of earlier requests of the batch).
    depends_on: Sequence[str | int]
    #: The job's concurrency key (a tenant, a customer; 1 to 256 characters): a queue policy
    #: ``per_key`` limits how many jobs of one key are active at once (docs/flow-control.md).
    concurrency_key: str
    on_dependency_failed: DependencyPolicy
    on_dependency_canceled: DependencyPolicy


class EnqueueOptions(OtherEnqueueOptions, total=False):
    """The keyword options of ``enqueue``: those of every job, its prerequisites (see
    ``OtherEnqueueOptions``) and a deduplication window (``dedupe``)."""

    dedupe: DedupeOptions


class EnqueueRequest(EnqueueOptions, total=False):
    """One job of a batch given to ``enqueue_many``: ``type`` and ``payload`` are required, the
    rest are the keyword options of ``enqueue``."""

    type: str
    payload: JsonValue


class DeadLetterFilter(TypedDict, total=False):
    """Which dead letters ``list_dead_letters`` and ``redrive_many`` take."""

    queue: str
    type: str
    #: The ``name`` of the final error, e.g. ``PaymentDeclined``.
    error_name: str
    finished_after: datetime
    finished_before: datetime


class WorkerOptions(TypedDict, total=False):
    """Keyword options of ``Worker`` and ``AsyncWorker``, with their defaults: ``queues``
    (``["default"]``), ``concurrency`` (10), ``lease_ms`` (30000), ``heartbeat_ms`` (a third of
    the lease), ``poll_ms`` (1000, jittered, backing off to 5x while idle), ``tick_ms`` (1000),
    ``shutdown_timeout_ms`` (25000), ``listen`` (True), ``worker_id`` (``host:pid:random``),
    ``unknown_type_delay_ms`` (5000), ``on_error`` (called with what failed and the error)."""

    queues: Sequence[str]
    concurrency: int
    lease_ms: int
    heartbeat_ms: int
    poll_ms: int
    tick_ms: int
    shutdown_timeout_ms: int
    listen: bool
    worker_id: str
    unknown_type_delay_ms: int
    on_error: Callable[[str, BaseException], None]


@dataclass(frozen=True)
class JobSnapshot:
    """What ``Admin.get_job`` and ``Admin.list_jobs`` report about one job."""

    id: str
    queue: str
    type: str
    payload: JsonValue
    priority: int
    state: JobState
    #: Attempts started so far (0 before the first claim).
    current_attempt: int
    max_attempts: int
    #: The job's own retry policy; None when none was given at enqueue.
    retry_policy: RetryPolicy | None
    tags: list[str]
    deadline: datetime | None
    execution_timeout_ms: int | None
    run_at: datetime
    created_at: datetime
    finished_at: datetime | None
    #: The handler's result, for succeeded jobs.
    result: JsonValue
    #: The terminal error, or the last attempt's error while the job waits for a retry.
    error: ErrorEnvelope | None
    worker_id: str | None
    lease_expires_at: datetime | None
    cancel_requested_at: datetime | None
    progress: JsonValue
    redriven_from: str | None
    redriven_to: list[str]
    #: The ``concurrency_key`` it was enqueued with (``Admin.get_job``; None in listings and for
    #: a job without one).
    concurrency_key: str | None


@dataclass(frozen=True)
class TimelineEntry:
    """One entry of a job's history: a lifecycle event or a closed attempt."""

    id: int
    at: datetime
    source: Literal["event", "attempt"]
    #: Event kind (``enqueued``, ``claimed``, ...) or attempt outcome (``failed``, ``expired``, ...).
    kind: str
    attempt: int | None
    worker_id: str | None
    fence_token: int | None
    data: dict[str, JsonValue] | None
    #: The login role of the session that wrote an event (PostgreSQL's ``session_user``), next to
    #: the caller-chosen ``data["actor"]`` of a human decision or an operator change; None for
    #: attempts and for events written before the schema recorded it.
    login_role: str | None = None


T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """A page of results and the cursor of the next page (None on the last page)."""

    items: list[T]
    next_cursor: str | None


class RateLimit(TypedDict):
    """At most ``limit`` claims of a queue's jobs in any window of ``intervalMs`` milliseconds."""

    limit: int
    intervalMs: int


class PerKeyLimit(TypedDict):
    """At most ``concurrency`` active jobs per concurrency key of a queue."""

    concurrency: int


class QueuePolicy(TypedDict, total=False):
    """A queue's flow control (``Admin.set_queue_policy``), by its wire names; a limit left out
    or None is not applied."""

    concurrency: int | None
    rateLimit: RateLimit | None
    perKey: PerKeyLimit | None


@dataclass(frozen=True)
class QueueInfo:
    """A queue's pause state and its live jobs."""

    queue: str
    paused: bool
    changed_at: datetime | None
    #: Who last paused or resumed it: the caller-chosen actor, and the login role (``session_user``)
    #: of the session that did it (None for a change made before the schema recorded it).
    changed_by: str | None
    login_role: str | None
    reason: str | None
    ready: int
    scheduled: int
    active: int
    blocked: int


@dataclass(frozen=True)
class RedriveResult:
    """One dead letter of a ``redrive_many`` call; ``new_job_id`` is None in a dry run."""

    source_job_id: str
    new_job_id: str | None


# ---- orchestration (docs/orchestration.md) ---------------------------------------------------

#: What ``Queue.send_signal`` did.
SendSignalStatus = Literal["delivered", "buffered", "duplicate", "not_found", "finished"]
#: What ``Queue.complete_human_wait`` did.
CompleteHumanWaitStatus = Literal["completed", "duplicate", "already_decided", "timed_out", "not_waiting", "not_found", "finished"]


class ChildJobSpec(JobOptions, total=False):
    """One child job of ``ctx.run_children``: ``type`` and ``payload`` are required; the rest are
    the keyword options of every job (a child has no prerequisites)."""

    type: str
    payload: JsonValue


@dataclass(frozen=True)
class DependencyOutcome:
    """One prerequisite as ``ctx.dependencies()`` gives it: its state, and its result (once
    ``succeeded``) or error envelope (once ``failed`` or ``canceled``)."""

    job_id: str
    state: JobState
    result: JsonValue
    error: ErrorEnvelope | None


@dataclass(frozen=True)
class ChildOutcome:
    """One child job as ``ctx.run_children`` gives it back once every child has ended."""

    job_id: str
    state: Literal["succeeded", "failed", "canceled"]
    result: JsonValue
    error: ErrorEnvelope | None


@dataclass(frozen=True)
class HumanDecision:
    """A recorded human decision, as ``ctx.wait_for_human`` returns it."""

    decision: JsonValue
    actor: str
    reason: str | None
    decided_at: datetime


@dataclass(frozen=True)
class HumanWait:
    """An open human wait, as ``Admin.list_human_waits`` lists it."""

    job_id: str
    queue: str
    type: str
    name: str
    context: JsonValue
    choices: list[str] | None
    timeout_at: datetime | None
    attempt: int
    created_at: datetime


@dataclass(frozen=True)
class JobLink:
    """A job related to another one, with its state now."""

    id: str
    state: JobState


@dataclass(frozen=True)
class ChildLink(JobLink):
    """A child job, with the key of the ``run_child(ren)`` call that started it."""

    key: str


@dataclass(frozen=True)
class JobDetails(JobSnapshot):
    """What ``Admin.get_job`` reports: the snapshot and the job's lineage."""

    #: The prerequisites given in ``depends_on``, in that order.
    dependencies: list[JobLink]
    #: While ``blocked``: the prerequisites or children that have not ended yet.
    waiting_on: list[JobLink]
    #: The job that started this one with ``ctx.run_child(ren)``, if any.
    parent_id: str | None
    #: The jobs this one started with ``ctx.run_child(ren)``, in the order they were started.
    children: list[ChildLink]


# ---- live workers (sql/095_workers.sql) --------------------------------------------------------

#: Where a registered worker stands: claiming (``running``); asked to drain and still finishing
#: jobs (``draining``); asked to drain and holding none, safe to stop (``drained``); or silent for
#: three of its report periods (``gone``: its jobs come back when their leases expire).
WorkerStatus = Literal["running", "draining", "drained", "gone"]
#: What ``Admin.drain_worker`` did.
DrainResult = Literal["requested", "already_requested", "not_found"]


@dataclass(frozen=True)
class WorkerInfo:
    """A worker in the registry of live workers (``Admin.list_workers``), of any language."""

    worker_id: str
    status: WorkerStatus
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    #: Jobs it held at its last report.
    in_flight: int
    #: Its version: a TypeScript worker's package version, ``python/<version>`` for this SDK.
    version: str
    started_at: datetime
    last_seen_at: datetime
    drain_requested_at: datetime | None
    #: Who asked for the drain: the caller-chosen actor, and the login role (``session_user``) of
    #: the session that asked (None for a request made before the schema recorded it).
    drain_requested_by: str | None
    drain_login_role: str | None
    drain_reason: str | None


#: A schedule's state: ``active``, ``paused`` by an operator, or ``disabled`` (a sync no longer lists it).
ScheduleState = Literal["active", "paused", "disabled"]


@dataclass(frozen=True)
class SyncedSchedule:
    """What ``Queue.sync_schedules`` did to one key: ``created``, ``updated``, ``unchanged``,
    ``enabled`` or ``disabled``, and its revision now."""

    key: str
    change: str
    revision: int


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule as ``Admin.list_schedules`` gives it: its normalized definition (type, cron,
    timezone, payload, options, catchUp, catchUpLimit, overlap, missedAfterMs), its state, and
    its next and last runs (the server plans every schedule)."""

    namespace: str
    key: str
    definition: dict[str, JsonValue]
    state: ScheduleState
    revision: int
    created_at: datetime
    updated_at: datetime
    paused_at: datetime | None
    paused_by: str | None
    pause_reason: str | None
    next_run_at: datetime | None
    last_run_at: datetime | None
    last_job_id: str | None
    last_job_state: JobState | None
    planned_through: datetime
    last_error: str | None
    last_error_at: datetime | None


@dataclass(frozen=True)
class ScheduleHistoryEntry:
    """A change of a schedule (a new revision, with the definition from then on) or a trigger."""

    revision: int
    at: datetime
    change: str
    definition: dict[str, JsonValue] | None
    #: Who made the change: the caller-chosen actor, and the login role (``session_user``) of the
    #: session that made it (None for a change made before the schema recorded it).
    actor: str | None
    login_role: str | None
    reason: str | None
    job_id: str | None
