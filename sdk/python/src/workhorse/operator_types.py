"""The answers of the operator reads that go beyond single jobs' snapshots: checkpoints, signals
and waits of a job, queue activity, operator changes, health and retention. Field names follow
the SQL columns (docs/protocol.md); JSON reports (health, retention) keep the server's keys."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypedDict

from .types import JsonValue

#: The answer of ``admin.health()``: ``status`` (``ok``, ``warn``, ``critical``), ``reasons``,
#: ``queues``, ``workers``, ``retention``, ``partitions``, ``checkedAt``, as ``health_v1`` reports
#: it (docs/operations.md lists each reason and what to do about it).
HealthReport = dict[str, JsonValue]
#: The answer of ``admin.retention_status()``: the policy and how far retention got.
RetentionStatus = dict[str, JsonValue]
#: The answer of ``admin.run_retention()``: what one pass removed, or ``{"skipped": true}``.
RetentionRun = dict[str, JsonValue]


class ThresholdPair(TypedDict, total=False):
    """The value at which a health reason turns ``warn``, and ``critical``; None: never."""

    warn: float | None
    critical: float | None


class HealthThresholds(TypedDict, total=False):
    """Thresholds of ``admin.health()`` (each left out keeps its default, docs/operations.md)."""

    oldestReadyMs: ThresholdPair
    expiredLeases: ThresholdPair
    failedLastHour: ThresholdPair
    retentionLagMs: ThresholdPair
    readyWithoutWorkers: ThresholdPair
    maintenanceStaleMs: ThresholdPair


class RetentionPolicy(TypedDict, total=False):
    """Settings of ``admin.set_retention()``; those left out keep their values."""

    enabled: bool
    jobEventDays: int
    attemptHistoryDays: int
    finishedJobMs: int


@dataclass(frozen=True)
class CheckpointEntry:
    """A checkpoint a job saved (``ctx.checkpoint``)."""

    name: str
    value: JsonValue
    attempt: int
    worker_id: str
    created_at: datetime


@dataclass(frozen=True)
class QueueActivity:
    """Jobs of a queue that finished in one time bucket, by terminal state."""

    queue: str
    bucket: datetime
    succeeded: int
    failed: int
    canceled: int


@dataclass(frozen=True)
class JobSignal:
    """A signal sent to a job: ``buffered`` until a wait for its name consumes it, then ``consumed``."""

    id: str
    name: str
    payload: JsonValue
    status: Literal["buffered", "consumed"]
    #: The wait that consumed it: its number among the job's waits for this name.
    wait_seq: int | None
    sent_at: datetime


@dataclass(frozen=True)
class JobWait:
    """A wait a job's handler reached: a signal wait or a human wait, open or answered."""

    kind: Literal["signal", "human"]
    name: str
    seq: int
    status: Literal["open", "delivered", "decided", "timed_out"]
    timeout_at: datetime | None
    attempt: int
    created_at: datetime
    resolved_at: datetime | None
    signal_id: str | None
    context: JsonValue
    choices: list[str] | None
    decision: JsonValue
    actor: str | None
    reason: str | None


@dataclass(frozen=True)
class OperatorChange:
    """A change of a setting kept in place (queue pause and resume, queue policy, drain request,
    retention policy), with who made it: the caller-chosen actor and the session's login role."""

    id: str
    at: datetime
    kind: str
    subject: str | None
    actor: str | None
    reason: str | None
    login_role: str
    detail: JsonValue


@dataclass(frozen=True)
class JobDuration:
    """The latest attempt's start and run time, and the wait before the first start (ms)."""

    started_at: datetime | None
    run_ms: int | None
    wait_ms: int | None


@dataclass(frozen=True)
class Percentiles:
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class TimingStats:
    """Run and wait time percentiles of a queue's or job type's closed attempts (a sample)."""

    name: str
    attempts: int
    run: Percentiles
    #: None when no first attempt of the sample has a wait.
    wait: Percentiles | None
    #: The window held more attempts than the sample read.
    sampled: bool


@dataclass(frozen=True)
class ErrorGroup:
    """Failures of one error name and message, with the queues they came from."""

    name: str
    message: str
    failures: int
    queues: list[str]
    first_seen: datetime
    last_seen: datetime
