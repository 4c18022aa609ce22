"""workhorse: the Python SDK of nestjs-workhorse, a durable job queue inside PostgreSQL.

A thin client of the SQL protocol (``workhorse.*_v1`` functions): every guarantee (fencing,
leases, retries, idempotency, limits) is enforced by PostgreSQL, so Python, TypeScript and Go
services share one queue. Sync classes here (Psycopg 3); asyncio ones in ``workhorse.aio``.
"""

from .admin import Admin
from .context import AbortSignal, AsyncHandlerContext, HandlerContext
from .errors import (
    ExecutionTimeoutError,
    IdempotencyConflictError,
    InvalidCursorError,
    JobCanceledError,
    JobSleeping,
    LeaseLostError,
    NonRetryableError,
    RetryAfterError,
    SchemaNotInstalledError,
    SchemaVersionMismatchError,
    WorkerShutdownError,
    WorkerStateError,
    WorkhorseError,
    WorkhorseValidationError,
)
from .queue import Queue
from .schema import SCHEMA_VERSION, install_schema, verify_schema
from .types import (
    JOB_STATES,
    CancelResult,
    DeadLetterFilter,
    EnqueueOptions,
    EnqueueRequest,
    ErrorEnvelope,
    JobSnapshot,
    JobState,
    JsonValue,
    Page,
    QueueInfo,
    RedriveResult,
    RetryPolicy,
    TimelineEntry,
    WorkerOptions,
)
from .worker import Worker

__all__ = [
    "JOB_STATES",
    "SCHEMA_VERSION",
    "AbortSignal",
    "Admin",
    "AsyncHandlerContext",
    "CancelResult",
    "DeadLetterFilter",
    "EnqueueOptions",
    "EnqueueRequest",
    "ErrorEnvelope",
    "ExecutionTimeoutError",
    "HandlerContext",
    "IdempotencyConflictError",
    "InvalidCursorError",
    "JobCanceledError",
    "JobSleeping",
    "JobSnapshot",
    "JobState",
    "JsonValue",
    "LeaseLostError",
    "NonRetryableError",
    "Page",
    "Queue",
    "QueueInfo",
    "RedriveResult",
    "RetryAfterError",
    "RetryPolicy",
    "SchemaNotInstalledError",
    "SchemaVersionMismatchError",
    "TimelineEntry",
    "Worker",
    "WorkerOptions",
    "WorkerShutdownError",
    "WorkerStateError",
    "WorkhorseError",
    "WorkhorseValidationError",
    "install_schema",
    "verify_schema",
]
