"""The operator actions on jobs as calls (see ``_calls``): run now, reschedule, delete, and
cancel / run now / delete over a filter with a dry run. The rules (which states an action
applies to, the filter, the bounds) are the SQL functions' (sql/063_job_actions.sql); this
module only puts the caller's values on the wire, refusing what JSON cannot carry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, TypedDict

from . import _protocol as p
from ._calls import Call
from .validation import check_datetime, check_job_id, fail

RunNowResult = Literal["ready", "already_ready", "not_found"]
RescheduleResult = Literal["rescheduled", "not_found"]
DeleteJobResult = Literal["deleted", "not_found"]
BulkAction = Literal["cancel", "run_now", "delete"]


class JobActionFilter(TypedDict, total=False):
    """Which jobs a bulk action applies to; every key given must match. ``finished_after`` /
    ``finished_before`` only for ``delete_matching``; ``job_ids`` (1 to 1000) is a selection."""

    queue: str
    type: str
    states: list[str]
    tag: str
    created_after: datetime
    created_before: datetime
    finished_after: datetime
    finished_before: datetime
    job_ids: list[str]


@dataclass(frozen=True)
class BulkActionSample:
    """A job a dry run would change."""

    id: str
    queue: str
    type: str
    state: str
    created_at: datetime


@dataclass(frozen=True)
class BulkActionResult:
    """What a bulk action did or (``dry_run``) would do; see ``Admin.cancel_matching``. A call
    changes at most ``limit`` jobs, oldest first: call again while ``more``."""

    action: BulkAction
    dry_run: bool
    #: Dry run: the jobs it would change (counting stops at 100,000: ``capped``); otherwise the
    #: jobs this call took up.
    matched: int
    capped: bool
    changed: int
    job_ids: list[str]
    #: Each changed job's answer, counted (``canceled``, ``cancel_requested``, ``ready``, ``deleted``).
    outcomes: dict[str, int]
    #: Jobs the filter matches that the action leaves alone, by state (``active``, ...).
    skipped: dict[str, int]
    #: Jobs a worker was writing just then, or that changed state since they were listed.
    busy: int
    more: bool
    sample: list[BulkActionSample] = field(default_factory=list)


_WIRE = {
    "queue": "queue", "type": "type", "states": "states", "tag": "tag", "created_after": "createdAfter",
    "created_before": "createdBefore", "finished_after": "finishedAfter", "finished_before": "finishedBefore",
    "job_ids": "jobIds",
}


def _filter_json(given: Mapping[str, Any]) -> str:
    wire: dict[str, Any] = {}
    for key, value in given.items():
        name = _WIRE.get(key)
        if name is None:
            fail(f"filter.{key}", f"is not a job filter ({', '.join(_WIRE)})")
        if isinstance(value, datetime):
            value = check_datetime(value, f"filter.{name}").isoformat()
        elif isinstance(value, (list, tuple)):
            value = list(value)
        wire[name] = value
    return json.dumps(wire)


def _result(rows: Any) -> BulkActionResult:
    r = json.loads(rows[0][0])
    return BulkActionResult(
        action=r["action"], dry_run=r["dryRun"], matched=r["matched"], capped=r["capped"], changed=r["changed"],
        job_ids=list(r["jobIds"]), outcomes=dict(r["outcomes"]), skipped=dict(r["skipped"]), busy=r["busy"],
        more=r["more"],
        sample=[BulkActionSample(s["id"], s["queue"], s["type"], s["state"], datetime.fromisoformat(s["createdAt"]))
                for s in r["sample"]],
    )


def run_now(job_id: object, actor: object, reason: object) -> Call[RunNowResult]:
    check_job_id(job_id)
    return Call(p.RUN_NOW_SQL, (job_id, actor, reason), p.status_of)  # type: ignore[arg-type]


def reschedule(job_id: object, run_at: object, priority: object, actor: object, reason: object) -> Call[RescheduleResult]:
    check_job_id(job_id)
    if run_at is not None:
        check_datetime(run_at, "runAt")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        fail("priority", "must be an integer from 0 to 100")
    return Call(p.RESCHEDULE_SQL, (job_id, run_at, priority, actor, reason), p.status_of)  # type: ignore[arg-type]


def delete_job(job_id: object, actor: object, reason: object) -> Call[DeleteJobResult]:
    check_job_id(job_id)
    return Call(p.DELETE_JOB_SQL, (job_id, actor, reason), p.status_of)  # type: ignore[arg-type]


def bulk(action: BulkAction, given: Mapping[str, Any], dry_run: object, actor: object, reason: object, limit: object) -> Call[BulkActionResult]:
    if not isinstance(dry_run, bool):
        fail("dryRun", "must be True or False")
    if isinstance(limit, bool) or not isinstance(limit, int):
        fail("limit", "must be an integer from 1 to 1000")
    sql = {"cancel": p.CANCEL_MATCHING_SQL, "run_now": p.RUN_NOW_MATCHING_SQL, "delete": p.DELETE_MATCHING_SQL}[action]
    return Call(sql, (_filter_json(given), dry_run, actor, reason, limit), _result)
