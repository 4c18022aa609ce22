"""Input checks shared by every client class. They check what JSON cannot carry and what this
SDK's API shape needs; every range and name rule of a request is the SQL functions' (P1001 naming
the field by its wire name, before anything is written). The numbers come from limits.json."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any, NoReturn

from ._limits import DATES, ENQUEUE, RETRY_POLICY
from .errors import WorkhorseValidationError
from .types import ChildOutcome, DependencyOutcome, HumanDecision, JsonValue, RetryPolicy

NAME_LENGTH: int = ENQUEUE["nameLength"]["max"]
BATCH_SIZE: int = ENQUEUE["batchSize"]["max"]
JSON_BYTES: int = ENQUEUE["jsonBytes"]["max"]
JSON_DEPTH: int = ENQUEUE["jsonDepth"]["max"]
DELAY_MS: int = RETRY_POLICY["delayMs"]["max"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]*")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")

#: Keyword options of ``enqueue`` -> their wire names in ``enqueue_many_v1``.
ENQUEUE_OPTIONS: dict[str, str] = {
    "queue": "queue",
    "priority": "priority",
    "run_at": "runAt",
    "max_attempts": "maxAttempts",
    "retry_policy": "retryPolicy",
    "tags": "tags",
    "deadline": "deadline",
    "execution_timeout_ms": "executionTimeoutMs",
    "idempotency_key": "idempotencyKey",
    "idempotency_scope": "idempotencyScope",
    "idempotency_ttl_ms": "idempotencyTtlMs",
    "depends_on": "dependsOn",
    "on_dependency_failed": "onDependencyFailed",
    "on_dependency_canceled": "onDependencyCanceled",
    "dedupe": "dedupe",
    "concurrency_key": "concurrencyKey",
}
#: The fields of ``dedupe`` by their Python names (others go as given; the SQL names them).
_DEDUPE_FIELDS = {"window_ms": "windowMs"}


def fail(field: str, message: str) -> NoReturn:
    raise WorkhorseValidationError(field, message)


def check_name(value: object, field: str) -> str:
    if not isinstance(value, str):
        fail(field, "must be a string")
    if len(value) > NAME_LENGTH or not _NAME.fullmatch(value):
        fail(field, "must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -")
    return value


def check_int(value: object, field: str, minimum: int, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        fail(field, f"must be an integer from {minimum} to {maximum}")
    return value


def check_whole_number(value: object, field: str, bounds: Mapping[str, int]) -> int:
    """A whole number a protocol function takes as an integer parameter; its range is the
    function's to check (the message names it, from limits.json, as the function's does)."""
    if isinstance(value, bool) or not isinstance(value, int):
        fail(field, f"must be an integer from {bounds['min']} to {bounds['max']} (one year)")
    return value


def check_text(value: object, field: str, maximum: int, minimum: int = 0) -> str:
    if not isinstance(value, str) or not minimum <= len(value) <= maximum:
        fail(field, f"must be a string of {minimum} to {maximum} characters")
    _check_string(value, field)
    return value


def check_param_text(value: object, field: str) -> str:
    """A string for a text parameter of a protocol function (a name, an actor, a reason, a key):
    only what PostgreSQL cannot store as given is refused here; its length and form are the
    function's to check (P1001 naming the field)."""
    if not isinstance(value, str):
        fail(field, "must be a string")
    _check_string(value, field)
    return value


def check_param_int(value: object, field: str) -> int:
    """An int for an integer parameter of a protocol function (a limit): a whole number that fits
    the parameter's 32 bits; its range is the function's to check."""
    if isinstance(value, bool) or not isinstance(value, int):
        fail(field, "must be an integer")
    if abs(value) > 2_147_483_647:
        fail(field, "must be an integer (this one is beyond a 32-bit integer)")
    return value


def check_job_id(value: object, field: str = "jobId") -> str:
    if not isinstance(value, str) or not _UUID.fullmatch(value):
        fail(field, "must be a job id (a UUID string)")
    return value


def check_datetime(value: object, field: str) -> datetime:
    """A timezone-aware datetime (a naive one has no defined instant)."""
    if not isinstance(value, datetime):
        fail(field, "must be a datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        fail(field, "must be a timezone-aware datetime (datetime.now(timezone.utc), not datetime.now())")
    # (PostgreSQL cannot read a year past 9999 as ISO text, so the range stays here, from
    # limits.json; the SQL functions check it again.)
    low, high = DATES["minYear"], DATES["maxYear"]
    if not low <= value.astimezone(timezone.utc).year <= high:
        fail(field, f"must be a time between the years {low} and {high}")
    return value


def _check_string(value: str, field: str) -> None:
    # PostgreSQL's jsonb stores no NUL character, and text is UTF-8: no lone surrogates.
    if "\x00" in value:
        fail(field, "contains the character \\u0000, which PostgreSQL cannot store in JSON")
    if _LONE_SURROGATE.search(value):
        fail(field, "contains an unpaired surrogate, which is not valid Unicode text")


#: What the SDK hands a handler as objects (``ctx.wait_for_human``, ``ctx.run_children``,
#: ``ctx.dependencies``): stored as their JSON form (see :func:`handed_out_json`), so a handler
#: can return or checkpoint them as they are. A checkpoint of one replays as that JSON (a dict).
_HANDED_OUT = (HumanDecision, ChildOutcome, DependencyOutcome)


def handed_out_json(value: object) -> dict[str, Any]:
    """The JSON form of a value the SDK handed a handler, with the keys the TypeScript SDK uses
    (``decidedAt`` an ISO 8601 string in UTC, to the millisecond); ``TypeError`` for anything else."""
    if isinstance(value, HumanDecision):
        at = value.decided_at.astimezone(timezone.utc)
        stamp = at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"
        return {"decision": value.decision, "actor": value.actor, "reason": value.reason, "decidedAt": stamp}
    if isinstance(value, (ChildOutcome, DependencyOutcome)):
        return {"jobId": value.job_id, "state": value.state, "result": value.result, "error": value.error}
    raise TypeError(f"{type(value).__name__} is not JSON")


def _check_json(value: object, field: str, depth: int, ancestors: set[int]) -> None:
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, _HANDED_OUT):
        _check_json(handed_out_json(value), field, depth, ancestors)
        return
    if isinstance(value, str):
        _check_string(value, field)
        return
    if isinstance(value, int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            fail(field, f"{value} is not a JSON number (NaN and infinities cannot be stored)")
        return
    if not isinstance(value, (dict, list, tuple)):
        hint = " (pass value.isoformat())" if isinstance(value, datetime) else ""
        fail(field, f"is a {type(value).__name__}, not a dict, list or JSON primitive{hint}")
    if depth >= JSON_DEPTH:
        fail(field, f"nests deeper than {JSON_DEPTH} levels")
    if id(value) in ancestors:
        fail(field, "refers back to itself (a cycle), which is not JSON")
    ancestors.add(id(value))
    if isinstance(value, dict):
        for key, child in value.items():
            if not isinstance(key, str):
                fail(f"{field} key {key!r}", "is not a string (JSON object keys are strings)")
            _check_string(key, f"{field} key {json.dumps(key)}")
            _check_json(child, f"{field}.{key}", depth + 1, ancestors)
    else:
        for i, child in enumerate(value):
            _check_json(child, f"{field}[{i}]", depth + 1, ancestors)
    ancestors.discard(id(value))


def check_json(value: object, field: str) -> None:
    """Checks that a value is JSON that PostgreSQL stores and gives back unchanged (its size is
    the SQL function's to check)."""
    _check_json(value, field, 0, set())


def to_json_text(value: object, field: str, limit: int = JSON_BYTES) -> str:
    """Checks that a value is JSON that PostgreSQL stores and gives back unchanged, at most
    ``limit`` bytes as compact text, and returns that text."""
    _check_json(value, field, 0, set())
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=handed_out_json)
    if len(text.encode("utf-8")) > limit:
        label = "1 MiB" if limit == JSON_BYTES else f"{limit // 1024} KiB"
        fail(field, f"is larger than the {label} limit ({limit} bytes of JSON)")
    return text


def check_retry_policy(value: object, field: str) -> RetryPolicy:
    """A handler's retry policy, checked when it is given (against limits.json); an enqueue's
    policy is checked by the SQL function alone."""
    if not isinstance(value, Mapping):
        fail(field, 'must be a dict such as {"kind": "exponential"} or {"kind": "fixed", "delayMs": 5000}')
    kind = value.get("kind")
    if kind == "fixed":
        allowed: tuple[str, ...] = ("kind", "delayMs")
    elif kind == "exponential":
        allowed = ("kind", "initialMs", "multiplier", "maxMs", "jitter")
    else:
        fail(f"{field}.kind", 'must be "exponential" or "fixed"')
    for key in value:
        if key not in allowed:
            fail(f"{field}.{key}", f"is not an option of a {kind} retry policy ({', '.join(allowed)})")
    delay, factor, default = RETRY_POLICY["delayMs"], RETRY_POLICY["multiplier"], RETRY_POLICY["default"]
    for key in ("delayMs", "initialMs", "maxMs"):
        if key in value:
            check_int(value[key], f"{field}.{key}", delay["min"], delay["max"])
    multiplier = value.get("multiplier")
    if multiplier is not None and (
        isinstance(multiplier, bool)
        or not isinstance(multiplier, (int, float))
        or not factor["min"] <= multiplier <= factor["max"]
    ):
        fail(f"{field}.multiplier", f"must be a number from {factor['min']} to {factor['max']}")
    if "jitter" in value and not isinstance(value["jitter"], bool):
        fail(f"{field}.jitter", "must be True or False")
    if kind == "exponential" and value.get("maxMs", default["maxMs"]) < value.get("initialMs", default["initialMs"]):
        fail(f"{field}.maxMs", "must not be smaller than initialMs")
    policy: RetryPolicy = dict(value)  # type: ignore[assignment]
    return policy


def _iso(value: datetime) -> str:
    return value.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def to_wire_request(type: object, payload: object, options: Mapping[str, Any], path: str = "") -> dict[str, Any]:
    """One enqueue call (keyword options by their Python names) as the request ``enqueue_many_v1``
    receives. Checked here: the option names, datetimes (made ISO 8601 text in UTC) and what JSON
    cannot carry; the values' ranges and rules are the SQL function's. ``path`` prefixes field
    names of batch members (``requests[3].``)."""
    check_json(type, f"{path}type")
    check_json(payload, f"{path}payload")
    wire: dict[str, Any] = {"type": type, "payload": payload}
    for key, value in options.items():
        name = ENQUEUE_OPTIONS.get(key)
        if name is None:
            fail(f"{path}{key}", f"is not an enqueue option ({', '.join(ENQUEUE_OPTIONS)})")
        if value is None:
            continue
        f = f"{path}{name}"
        if name in ("runAt", "deadline"):
            wire[name] = _iso(check_datetime(value, f))
        elif name == "dedupe" and isinstance(value, Mapping):
            check_json(dict(value), f)
            wire[name] = {_DEDUPE_FIELDS.get(k, k): v for k, v in value.items()}
        else:
            check_json(value, f)
            wire[name] = list(value) if isinstance(value, tuple) else value
    return wire


def to_wire_batch(requests: object) -> list[dict[str, Any]]:
    """Validates the requests of ``enqueue_many`` (each an ``EnqueueRequest`` dict)."""
    if not isinstance(requests, (list, tuple)):
        fail("requests", "must be a list")
    wire = []
    for i, request in enumerate(requests):
        if not isinstance(request, Mapping) or "type" not in request or "payload" not in request:
            fail(f"requests[{i}]", "must be a dict with type and payload")
        options = {k: v for k, v in request.items() if k not in ("type", "payload")}
        wire.append(to_wire_request(request["type"], request["payload"], options, f"requests[{i}]."))
    return wire


def to_wire_children(children: object) -> list[dict[str, Any]]:
    """Validates the child jobs of ``ctx.run_children`` (each a ``ChildJobSpec`` dict: ``type``,
    ``payload`` and any keyword option of ``enqueue`` but the dependency ones)."""
    if not isinstance(children, (list, tuple)) or not 1 <= len(children) <= BATCH_SIZE:
        fail("children", f"must be a list of 1 to {BATCH_SIZE} child job specs")
    wire = []
    for i, spec in enumerate(children):
        path = f"children[{i}]."
        if not isinstance(spec, Mapping) or "type" not in spec or "payload" not in spec:
            fail(f"children[{i}]", "must be a dict with type and payload")
        # (Dependency options are refused by run_children_v1, naming children[i].dependsOn.)
        options = {k: v for k, v in spec.items() if k not in ("type", "payload")}
        wire.append(to_wire_request(spec["type"], spec["payload"], options, path))
    return wire


def renamed_request_error(error: WorkhorseValidationError, prefix: str) -> WorkhorseValidationError:
    """A validation error of ``enqueue_many_v1`` (which names a request's fields ``requests[i].``)
    under the names the caller gave: ``prefix`` ``""`` for one job (``priority``), ``"children"``
    for a child (``children[2].priority``). Typed kinds built on it are returned as they are."""
    match = re.match(r"requests\[(\d+)\]\.?", error.field)
    if type(error) is not WorkhorseValidationError or match is None:
        return error
    rest = error.field[match.end():]
    head = f"{prefix}[{match.group(1)}]" if prefix else ""
    field = (rest or "request") if not head else (f"{head}.{rest}" if rest else head)
    return WorkhorseValidationError(field, error.reason)
