"""Typed jobs: a ``JobDefinition[P, R]`` binds a job type to its payload type ``P`` and result
type ``R`` (and its queue, default options and an optional validator), so that ``enqueue``,
the worker's registration and ``get_job`` through it are checked by ``mypy --strict``: a wrong
payload, or a handler of the wrong signature, does not type-check.

The validator runs at enqueue, before anything is written (a refusal is a
``WorkhorseValidationError`` naming ``payload``), and again on the worker, before the handler
runs: a payload that does not decode or validate there fails the job at once, without retries
(``PayloadDecodeError``, with the validator's details). A validator is a pydantic model class
(used through ``model_validate`` and ``model_dump(mode="json")`` when pydantic is installed) or
any callable that takes the JSON payload and returns the handler's value (raising on a bad one).

Example::

    class Email(TypedDict):
        to: str

    SEND_EMAIL = JobDefinition[Email, None]("email.send", queue="mail")

    queue.enqueue(SEND_EMAIL, {"to": "a@example.com"})   # {"to": 1} does not type-check

    @worker.job(SEND_EMAIL)
    def send(payload: Email, ctx: HandlerContext) -> None:
        mailer.send(payload["to"])
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, Unpack, cast

from .errors import NonRetryableError, WorkhorseValidationError
from .types import EnqueueOptions, EnqueueRequest, JobOptions, JobSnapshot
from .validation import check_name, fail

P = TypeVar("P")
R = TypeVar("R")


class PayloadDecodeError(NonRetryableError):
    """A claimed job's payload does not decode or validate into its definition's payload type:
    the job fails at once (the same payload would fail every attempt), with the details."""


def _pydantic_model(validator: object) -> Any:
    """``validator`` when it is a pydantic model class (it has ``model_validate``), else None."""
    if isinstance(validator, builtins.type) and callable(getattr(validator, "model_validate", None)):
        return validator
    return None


@dataclass(frozen=True)
class JobDefinition(Generic[P, R]):
    """A job type bound to its payload type ``P`` and result type ``R``; see the module's docs."""

    type: str
    #: The queue of its jobs (under an enqueue's own ``queue``); None: the protocol's ``default``.
    queue: str | None = None
    #: Enqueue options of every job of this type, under the call's own.
    options: JobOptions = field(default_factory=lambda: JobOptions())
    #: A pydantic model class, or a callable from the JSON payload to ``P`` that raises on a bad one.
    validator: builtins.type[P] | Callable[[Any], P] | None = None

    def __post_init__(self) -> None:
        check_name(self.type, "type")
        if self.queue is not None:
            check_name(self.queue, "queue")
        if not isinstance(self.options, Mapping):
            fail("options", "must be a dict of enqueue options")
        if self.validator is not None and not callable(self.validator):
            fail("validator", "must be a pydantic model class or a callable")

    def enqueue_options(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """The options of one enqueue: the definition's, under the call's own."""
        merged: dict[str, Any] = dict(self.options)
        if self.queue is not None:
            merged.setdefault("queue", self.queue)
        merged.update(given)
        return merged

    def request(self, payload: P, **options: Unpack[EnqueueOptions]) -> EnqueueRequest:
        """One job of this type for ``enqueue_many``: the payload validated (before anything is
        written), the definition's queue and options under the call's own."""
        merged = self.enqueue_options(options)
        return cast(EnqueueRequest, {**merged, "type": self.type, "payload": self.to_wire(payload)})

    def to_wire(self, payload: object) -> object:
        """The payload as stored, validated (raises ``WorkhorseValidationError`` naming ``payload``)."""
        model = _pydantic_model(self.validator)
        if model is not None:
            try:
                value = payload if isinstance(payload, model) else model.model_validate(payload)
            except Exception as error:
                raise WorkhorseValidationError("payload", f"does not validate as {model.__name__}: {error}") from error
            return value.model_dump(mode="json")
        if self.validator is not None:
            try:
                cast(Callable[[Any], P], self.validator)(payload)
            except Exception as error:
                raise WorkhorseValidationError("payload", f"is refused by the validator of {self.type!r}: {error}") from error
        return payload

    def decode(self, job_id: str, payload: object) -> P:
        """A stored payload as the handler's ``P`` (raises ``PayloadDecodeError``)."""
        if self.validator is None:
            return payload  # type: ignore[return-value]
        model = _pydantic_model(self.validator)
        try:
            value = model.model_validate(payload) if model is not None else cast(Callable[[Any], P], self.validator)(payload)
        except Exception as error:
            raise PayloadDecodeError(
                f"the payload of job {job_id} does not validate for {self.type!r}: {type(error).__name__}: {error}"
            ) from error
        return cast(P, value)


@dataclass(frozen=True)
class TypedJob(Generic[P, R]):
    """A job read through its definition: its snapshot, its payload as ``P`` and its result."""

    snapshot: JobSnapshot
    payload: P
    #: The handler's return value once the job succeeded (as stored: JSON), else None.
    result: R | None


def typed_job(definition: JobDefinition[P, R], snapshot: JobSnapshot | None) -> TypedJob[P, R] | None:
    if snapshot is None:
        return None
    if snapshot.type != definition.type:
        fail("jobId", f"names a job of type {snapshot.type!r}, not {definition.type!r}")
    return TypedJob(snapshot, definition.decode(snapshot.id, snapshot.payload), cast(R | None, snapshot.result))
