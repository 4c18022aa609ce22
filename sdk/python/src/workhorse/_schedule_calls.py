"""The schedule calls (sync, list, pause, resume, trigger, history) as ``Call`` values. Every
rule is the server's: ``sync_schedules_v1`` checks each definition (its cron expression and time
zone included) before writing anything, and plans; this side checks only what JSON cannot carry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from . import _protocol as p
from ._calls import Call, _check_actor
from .types import ScheduleHistoryEntry, ScheduleInfo, SyncedSchedule
from .validation import check_param_int, check_param_text, fail, to_json_text


def sync_schedules(namespace: object, definitions: object, actor: object) -> Call[list[SyncedSchedule]]:
    check_param_text(namespace, "namespace")
    _check_actor(actor, None)
    if not isinstance(definitions, Sequence) or isinstance(definitions, (str, bytes)):
        fail("definitions", "must be a list of schedule definitions (dicts with at least key, type and cron)")
    for i, definition in enumerate(definitions):
        if not isinstance(definition, Mapping):
            fail(f"definitions[{i}]", "must be a dict with at least key, type and cron")
    wire = to_json_text(list(definitions), "definitions")
    return Call(
        p.SYNC_SCHEDULES_SQL,
        (namespace, wire, actor),
        lambda rows: [SyncedSchedule(r[0], r[1], int(r[2])) for r in rows],
    )


def list_schedules(namespace: object) -> Call[list[ScheduleInfo]]:
    if namespace is not None:
        check_param_text(namespace, "namespace")
    return Call(p.LIST_SCHEDULES_SQL, (namespace,), lambda rows: [p.to_schedule_info(r) for r in rows])


def set_schedule_paused(paused: bool, namespace: object, key: object, actor: object, reason: object) -> Call[bool]:
    check_param_text(namespace, "namespace")
    check_param_text(key, "key")
    _check_actor(actor, reason)
    sql = p.PAUSE_SCHEDULE_SQL if paused else p.RESUME_SCHEDULE_SQL
    return Call(sql, (namespace, key, actor, reason), lambda rows: bool(p.first_value(rows)))


def trigger_schedule(namespace: object, key: object, actor: object, reason: object) -> Call[str]:
    check_param_text(namespace, "namespace")
    check_param_text(key, "key")
    _check_actor(actor, reason)
    return Call(p.TRIGGER_SCHEDULE_SQL, (namespace, key, actor, reason), lambda rows: str(p.first_value(rows)))


def schedule_history(namespace: object, key: object, limit: object) -> Call[list[ScheduleHistoryEntry]]:
    check_param_text(namespace, "namespace")
    check_param_text(key, "key")
    n = check_param_int(limit, "limit")
    return Call(p.SCHEDULE_HISTORY_SQL, (namespace, key, n), lambda rows: [p.to_schedule_history_entry(r) for r in rows])
