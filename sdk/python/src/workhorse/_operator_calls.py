"""The operator calls beyond single jobs' snapshots as ``Call`` values: a job's checkpoints,
signals and waits, queue activity, operator changes, health, retention, and a producer's read of
its own job. The server checks every range and key (typed errors naming the field); this side
checks only what the wire cannot carry as given."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

from . import _protocol as p
from ._calls import Call, _check_actor
from .operator_types import (
    CheckpointEntry,
    ErrorGroup,
    JobDuration,
    Percentiles,
    TimingStats,
    HealthReport,
    JobSignal,
    JobWait,
    OperatorChange,
    QueueActivity,
    RetentionRun,
    RetentionStatus,
)
from .types import JobSnapshot, Page
from .validation import check_datetime, check_int, check_job_id, check_text, fail, to_json_text


def get_own_job(job_id: object) -> Call[JobSnapshot | None]:
    check_job_id(job_id)
    return Call(p.GET_OWN_JOB_SQL, (job_id,), lambda rows: p.to_snapshot(rows[0]) if rows else None)


def read_checkpoints(job_id: object) -> Call[list[CheckpointEntry]]:
    check_job_id(job_id)
    return Call(
        p.READ_CHECKPOINTS_SQL,
        (job_id,),
        lambda rows: [CheckpointEntry(r[0], p.parse_json(r[1]), int(r[2]), r[3], r[4]) for r in rows],
    )


def queue_activity(since: object, bucket_seconds: object) -> Call[list[QueueActivity]]:
    at = check_datetime(since, "since")
    n = check_int(bucket_seconds, "bucketSeconds", 1, 86_400)
    return Call(
        p.QUEUE_ACTIVITY_SQL,
        (at, n),
        lambda rows: [QueueActivity(r[0], r[1], int(r[2]), int(r[3]), int(r[4])) for r in rows],
    )


def _limit(limit: object) -> int:
    return check_int(limit, "limit", 1, 1000)


def job_signals(job_id: object, limit: object) -> Call[list[JobSignal]]:
    check_job_id(job_id)
    return Call(
        p.JOB_SIGNALS_SQL,
        (job_id, _limit(limit)),
        lambda rows: [JobSignal(r[0], r[1], p.parse_json(r[2]), r[3], r[4], r[5]) for r in rows],
    )


def _to_wait(r: p.Row) -> JobWait:
    return JobWait(
        kind=r[0], name=r[1], seq=int(r[2]), status=r[3], timeout_at=r[4], attempt=int(r[5]), created_at=r[6],
        resolved_at=r[7], signal_id=r[8], context=p.parse_json(r[9]), choices=p.parse_json(r[10]),
        decision=p.parse_json(r[11]), actor=r[12], reason=r[13],
    )  # fmt: skip


def job_waits(job_id: object, limit: object) -> Call[list[JobWait]]:
    check_job_id(job_id)
    return Call(p.JOB_WAITS_SQL, (job_id, _limit(limit)), lambda rows: [_to_wait(r) for r in rows])


def operator_changes(kind: object, subject: object, limit: object, before_id: object) -> Call[list[OperatorChange]]:
    # The kinds are the server's (an unknown one is a WorkhorseValidationError naming ``kind``).
    if kind is not None:
        check_text(kind, "kind", 200, 1)
    if subject is not None:
        check_text(subject, "subject", 1000, 1)
    before = None
    if before_id is not None:
        if not isinstance(before_id, str) or not before_id.isdigit():
            fail("beforeId", "must be the id of an operator change (digits)")
        before = int(before_id)
    return Call(
        p.OPERATOR_CHANGES_SQL,
        (kind, subject, _limit(limit), before),
        lambda rows: [OperatorChange(r[0], r[1], r[2], r[3], r[4], r[5], r[6], p.parse_json(r[7])) for r in rows],
    )


def _json_object(rows: Sequence[p.Row]) -> dict[str, Any]:
    return cast(dict[str, Any], p.parse_json(p.first_value(rows)))


def health(thresholds: object) -> Call[HealthReport]:
    # Every threshold's key and level are checked by health_v1 (``thresholds.<key>.<level>``).
    if not isinstance(thresholds, Mapping):
        fail("thresholds", "must be a dict of threshold pairs")
    return Call(p.HEALTH_SQL, (to_json_text(dict(thresholds), "thresholds"),), _json_object)


def retention_status() -> Call[RetentionStatus]:
    return Call(p.RETENTION_STATUS_SQL, (), _json_object)


def run_retention(budget: object) -> Call[RetentionRun]:
    return Call(p.RETENTION_RUN_SQL, (check_int(budget, "budget", 1, 1_000_000),), _json_object)


def set_retention(policy: object, actor: object) -> Call[None]:
    # The settings and their ranges are checked by set_retention_v1, naming the setting.
    if not isinstance(policy, Mapping):
        fail("policy", "must be a dict of retention settings")
    _check_actor(actor, None)
    return Call(p.SET_RETENTION_SQL, (json.dumps(dict(policy)), actor), lambda rows: None)


def find_jobs(tag: object, payload: object, error: object, limit: object, cursor: object, scan_limit: object) -> Call[Page[JobSnapshot]]:
    # At least one criterion, the ranges and the cursor's shape are find_jobs_v1's to check.
    if payload is not None and not isinstance(payload, Mapping):
        fail("payload", "must be a JSON object, such as {\"orderId\": 42}")
    params = (
        tag, None if payload is None else to_json_text(dict(payload), "payload"), error,
        check_int(limit, "limit", 1, 1000), p.check_cursor(cursor), check_int(scan_limit, "scanLimit", 1, 1_000_000),
    )  # fmt: skip
    return Call(p.FIND_JOBS_SQL, params, lambda rows: p.page_of(rows, p.to_snapshot))


def job_durations(job_ids: object) -> Call[dict[str, JobDuration]]:
    if not isinstance(job_ids, (list, tuple)) or len(job_ids) > 1000:
        fail("jobIds", "must be a list of at most 1000 job ids")
    for i, job_id in enumerate(job_ids):
        check_job_id(job_id, f"jobIds[{i}]")
    return Call(
        p.JOB_DURATIONS_SQL,
        (list(job_ids),),
        lambda rows: {r[0]: JobDuration(r[1], _num(r[2]), _num(r[3])) for r in rows},
    )


def _num(value: Any) -> int | None:
    return None if value is None else int(value)


def _timing(r: p.Row) -> TimingStats:
    wait = None if r[5] is None else Percentiles(float(r[5]), float(r[6]), float(r[7]))
    return TimingStats(r[0], int(r[1]), Percentiles(float(r[2]), float(r[3]), float(r[4])), wait, bool(r[8]))


def job_timings(since: object, group: object, sample: object) -> Call[list[TimingStats]]:
    # The window (at most 7 days) and the group's names are job_timings_v1's to check.
    at = check_datetime(since, "since")
    check_text(group, "group", 20, 1)
    return Call(p.JOB_TIMINGS_SQL, (at, group, check_int(sample, "sample", 1, 100_000)), lambda rows: [_timing(r) for r in rows])


def error_groups(since: object, limit: object) -> Call[list[ErrorGroup]]:
    at = check_datetime(since, "since")
    return Call(
        p.ERROR_GROUPS_SQL,
        (at, check_int(limit, "limit", 1, 200)),
        lambda rows: [ErrorGroup(r[0], r[1], int(r[2]), list(r[3]), r[4], r[5]) for r in rows],
    )
