"""The client calls of orchestration as data (see ``_calls``): a job's lineage, a parent's
children, signals, human decisions and the open human waits. Built from what the caller gave:
names, keys, actors, reasons, limits and a decision's size are the SQL functions' to check
(P1001 naming the field); here only what PostgreSQL cannot take as given (see validation)."""

from __future__ import annotations

import json

from . import _protocol as p
from ._calls import Call, job_filter
from .types import (
    ChildLink,
    CompleteHumanWaitStatus,
    HumanWait,
    JobDetails,
    JobLink,
    JobSnapshot,
    Page,
    SendSignalStatus,
)
from .validation import check_job_id, check_param_int, check_param_text, to_json_text

_LIVE = ("blocked", "scheduled", "ready", "active")


def check_wait_name(name: object) -> str:
    return check_param_text(name, "name")


def _key(value: object) -> str | None:
    return None if value is None else check_param_text(value, "idempotencyKey")


def _to_details(row: p.Row) -> JobDetails:
    snapshot = p.to_snapshot(row)
    dependencies: list[JobLink] = []
    children: list[ChildLink] = []
    parent_id: str | None = None
    for link in json.loads(row[p.SNAPSHOT_SEQ + 1]):
        if link["relation"] == "dependency":
            dependencies.append(JobLink(link["id"], link["state"]))
        elif link["relation"] == "parent":
            parent_id = link["id"]
        else:
            children.append(ChildLink(link["id"], link["state"], link["key"]))
    waiting_on: list[JobLink] = []
    if snapshot.state == "blocked":
        waiting_on = [JobLink(x.id, x.state) for x in [*dependencies, *children] if x.state in _LIVE]
    fields = {f: getattr(snapshot, f) for f in JobSnapshot.__dataclass_fields__}
    fields["concurrency_key"] = row[p.SNAPSHOT_SEQ + 2]
    return JobDetails(**fields, dependencies=dependencies, waiting_on=waiting_on, parent_id=parent_id, children=children)


def get_job_details(job_id: object) -> Call[JobDetails | None]:
    return Call(p.GET_JOB_DETAILS_SQL, (check_job_id(job_id),), lambda rows: _to_details(rows[0]) if rows else None)


def list_children(
    parent_id: object, queue: object, type: object, states: object, limit: object, cursor: object
) -> Call[Page[JobSnapshot]]:
    """A parent's children in the order they were started (``Admin.list_jobs(parent_id=...)``)."""
    parent = check_job_id(parent_id, "parentId")
    q, t, s = job_filter(queue, type, states)
    n = check_param_int(limit, "limit")
    return Call(p.LIST_CHILDREN_SQL, (parent, q, t, s, n, p.check_cursor(cursor)), lambda rows: p.page_of(rows, p.to_snapshot))


def send_signal(job_id: object, name: object, payload: object, idempotency_key: object) -> Call[SendSignalStatus]:
    check_job_id(job_id)
    check_wait_name(name)
    text = None if payload is None else to_json_text(payload, "payload")
    return Call(p.SEND_SIGNAL_SQL, (job_id, name, text, _key(idempotency_key)), p.status_of)  # type: ignore[arg-type]


def complete_human_wait(
    job_id: object, name: object, decision: object, actor: object, reason: object, idempotency_key: object
) -> Call[CompleteHumanWaitStatus]:
    check_job_id(job_id)
    check_wait_name(name)
    text = to_json_text(decision, "decision")
    check_param_text(actor, "actor")
    if reason is not None:
        check_param_text(reason, "reason")
    params = (job_id, name, text, actor, reason, _key(idempotency_key))
    return Call(p.COMPLETE_HUMAN_WAIT_SQL, params, p.status_of)  # type: ignore[arg-type]


def list_human_waits(
    queue: object, type: object, name: object, job_id: object, limit: object, cursor: object
) -> Call[Page[HumanWait]]:
    q = None if queue is None else check_param_text(queue, "queue")
    t = None if type is None else check_param_text(type, "type")
    w = None if name is None else check_wait_name(name)
    j = None if job_id is None else check_job_id(job_id)
    n = check_param_int(limit, "limit")

    def item(r: p.Row) -> HumanWait:
        return HumanWait(r[1], r[2], r[3], r[4], p.parse_json(r[5]), p.parse_json(r[6]), r[7], r[8], r[9])

    return Call(p.LIST_HUMAN_WAITS_SQL, (q, t, w, j, n, p.check_cursor(cursor)), lambda rows: p.page_of(rows, item))
