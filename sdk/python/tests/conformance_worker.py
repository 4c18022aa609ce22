"""The conformance scenarios' handler scripts (sdk/conformance/README.md), and a worker
process that runs them: ``python -m tests.conformance_worker --database-url URL --scenario
FILE [--worker-id ID]`` from ``sdk/python`` with ``src`` on ``PYTHONPATH`` (a test tool: the
package does not ship it). It prints one JSON object per line: ``{"event": "ready"}`` once
claiming, ``{"event": "effect", "jobId", "name"}`` when a checkpoint operation runs,
``{"event": "mark", "jobId", "name"}`` at a mark, ``{"event": "stopped"}`` after a drain
(SIGTERM). A test in any language can start it, SIGKILL it, and count what it did."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from workhorse.context import AsyncHandlerContext, HandlerContext
from workhorse.errors import ChildJobFailedError, NonRetryableError, RetryAfterError, SignalTimeoutError
from workhorse.queue import Queue
from workhorse.types import ChildJobSpec, ChildOutcome, DependencyOutcome, HumanDecision
from workhorse.validation import ENQUEUE_OPTIONS
from workhorse.worker import Worker

#: Called with ("effect" | "mark", job id, name).
Report = Callable[[str, str, str], None]

#: Saves a value under a checkpoint name for a job as its current owner (a checkpoint step's
#: ``storedMeanwhile``, see sdk/conformance/README.md): (job id, name, value).
SaveMeanwhile = Callable[[str, str, Any], None]

#: The other save of ``storedMeanwhile``: the job's runtime row names its current owner.
SAVE_AS_OWNER_SQL = (
    "SELECT c.status FROM workhorse.job_runtime r, "
    "workhorse.save_checkpoint_v2(r.job_id, r.worker_id, r.fence_token, %s, %s::jsonb) c WHERE r.job_id = %s"
)


def meanwhile_saver(database_url: str) -> SaveMeanwhile:
    """Saves as the job's owner on a connection of its own (which must be allowed to read
    ``workhorse.job_runtime``: a test's owner connection)."""

    def save(job_id: str, name: str, value: Any) -> None:
        with psycopg.connect(database_url, autocommit=True) as conn:
            row = conn.execute(SAVE_AS_OWNER_SQL, (name, json.dumps(value), job_id)).fetchone()
        if row is None or row[0] != "saved":
            raise RuntimeError(f"the other save of {name!r} answered {row!r}")

    return save


def _no_saver(job_id: str, name: str, value: Any) -> None:
    raise RuntimeError("this worker was started without a way to save as the owner (storedMeanwhile)")

#: Scenario worker options (wire names) -> Worker keyword arguments, and the runners' defaults.
WORKER_OPTIONS = {"queues": "queues", "concurrency": "concurrency", "leaseMs": "lease_ms", "pollMs": "poll_ms", "tickMs": "tick_ms"}
WORKER_DEFAULTS: dict[str, Any] = {"concurrency": 4, "poll_ms": 100, "tick_ms": 100}


def worker_options(scenario: Mapping[str, Any]) -> dict[str, Any]:
    options = dict(WORKER_DEFAULTS)
    for key, value in scenario.get("worker", {}).items():
        options[WORKER_OPTIONS[key]] = value
    return options


def expand_text(value: Any) -> Any:
    """``{"$text": [part, ...]}`` anywhere in a scenario is the text of its parts joined, a part
    being a string or ``{"repeat": S, "times": n}`` (S written n times)."""
    if isinstance(value, list):
        return [expand_text(item) for item in value]
    if not isinstance(value, dict):
        return value
    parts = value.get("$text")
    if isinstance(parts, list) and len(value) == 1:
        return "".join(part if isinstance(part, str) else str(part["repeat"]) * int(part["times"]) for part in parts)
    return {key: expand_text(item) for key, item in value.items()}


def scripted_error(step: Mapping[str, Any]) -> Exception:
    """An exception whose envelope is ``{name, message}`` as the step says."""
    base: type[Exception] = Exception
    if step.get("retryable") is False:
        base = NonRetryableError
    attributes = {"retry_delay_ms": step["retryDelayMs"]} if "retryDelayMs" in step else {}
    error_type: type[Exception] = type(step["name"], (base,), attributes)
    return error_type(step["message"])


def _applies(step: Mapping[str, Any], attempt: int) -> bool:
    return "attempts" not in step or attempt in step["attempts"]


def sync_handler(
    steps: Sequence[Mapping[str, Any]], report: Report, save: SaveMeanwhile = _no_saver
) -> Callable[[Any, HandlerContext], Any]:
    """A plain handler running ``steps`` (for ``Worker``'s threads)."""

    def handle(payload: Any, ctx: HandlerContext) -> Any:
        checkpoints: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for step in steps:
            if not _applies(step, ctx.attempt):
                continue
            do = step["do"]
            if do == "checkpoint":
                checkpoints[step["name"]] = ctx.checkpoint(step["name"], _operation(step, ctx.job_id, report, save))
                values[step["name"]] = checkpoints[step["name"]]
                if "as" in step:
                    values[step["as"]] = checkpoints[step["name"]]
            elif do == "return":
                return step["value"]
            elif do == "return_checkpoints":
                return checkpoints
            elif do == "return_values":
                return values
            elif do == "dependencies":
                values[step["as"]] = _dependencies(ctx.dependencies())
            elif do == "run_child":
                try:
                    values[step["as"]] = ctx.run_child(step["key"], step["type"], step["payload"])
                except ChildJobFailedError as error:
                    values[step["as"]] = _child_failed(error)
            elif do == "run_children":
                values[step["as"]] = _outcomes(ctx.run_children(step["key"], _children(step)))
            elif do == "wait_signal":
                try:
                    values[step["as"]] = ctx.wait_for_signal(step["name"], timeout_ms=step.get("timeoutMs"))
                except SignalTimeoutError:
                    values[step["as"]] = _on_timeout(step)
            elif do == "wait_human":
                values[step["as"]] = _decision(ctx.wait_for_human(step["name"], **_human_options(step)))
            elif do == "throw":
                raise scripted_error(step)
            elif do == "progress":
                ctx.set_progress(step["value"])
            elif do == "sleep":
                ctx.sleep(step["name"], step["ms"])
            elif do == "mark":
                report("mark", ctx.job_id, step["name"])
            elif do == "pause":
                time.sleep(step["ms"] / 1000)
            elif do == "block":
                ctx.signal.wait()
                ctx.signal.raise_if_aborted()
            else:
                raise ValueError(f"unknown step {do!r}")
        return None

    return handle


def async_handler(
    steps: Sequence[Mapping[str, Any]], report: Report, save: SaveMeanwhile = _no_saver
) -> Callable[[Any, AsyncHandlerContext], Awaitable[Any]]:
    """A coroutine handler running ``steps`` (for ``AsyncWorker``)."""

    async def handle(payload: Any, ctx: AsyncHandlerContext) -> Any:
        checkpoints: dict[str, Any] = {}
        values: dict[str, Any] = {}
        for step in steps:
            if not _applies(step, ctx.attempt):
                continue
            do = step["do"]
            if do == "checkpoint":
                checkpoints[step["name"]] = await ctx.checkpoint(step["name"], _async_operation(step, ctx.job_id, report, save))
                values[step["name"]] = checkpoints[step["name"]]
                if "as" in step:
                    values[step["as"]] = checkpoints[step["name"]]
            elif do == "return":
                return step["value"]
            elif do == "return_checkpoints":
                return checkpoints
            elif do == "return_values":
                return values
            elif do == "dependencies":
                values[step["as"]] = _dependencies(await ctx.dependencies())
            elif do == "run_child":
                try:
                    values[step["as"]] = await ctx.run_child(step["key"], step["type"], step["payload"])
                except ChildJobFailedError as error:
                    values[step["as"]] = _child_failed(error)
            elif do == "run_children":
                values[step["as"]] = _outcomes(await ctx.run_children(step["key"], _children(step)))
            elif do == "wait_signal":
                try:
                    values[step["as"]] = await ctx.wait_for_signal(step["name"], timeout_ms=step.get("timeoutMs"))
                except SignalTimeoutError:
                    values[step["as"]] = _on_timeout(step)
            elif do == "wait_human":
                values[step["as"]] = _decision(await ctx.wait_for_human(step["name"], **_human_options(step)))
            elif do == "throw":
                raise scripted_error(step)
            elif do == "progress":
                await ctx.set_progress(step["value"])
            elif do == "sleep":
                await ctx.sleep(step["name"], step["ms"])
            elif do == "mark":
                report("mark", ctx.job_id, step["name"])
            elif do == "pause":
                await asyncio.sleep(step["ms"] / 1000)
            elif do == "block":
                await ctx.signal.wait_async()
                ctx.signal.raise_if_aborted()
            else:
                raise ValueError(f"unknown step {do!r}")
        return None

    return handle


# What the orchestration steps keep (sdk/conformance/README.md, "Orchestration steps").


def _dependencies(outcomes: Sequence[DependencyOutcome]) -> list[Any]:
    return [{"state": d.state, "result": d.result} for d in outcomes]


def _outcomes(outcomes: Sequence[ChildOutcome]) -> list[Any]:
    return [{"state": o.state, "result": o.result, "errorName": o.error["name"] if o.error else None} for o in outcomes]


def _child_failed(error: ChildJobFailedError) -> Any:
    return {"childFailed": error.child_state, "errorName": error.child_error.get("name")}


#: Wire names of enqueue options -> the SDK's keyword names (a child's "options").
_PYTHON_NAMES = {wire: name for name, wire in ENQUEUE_OPTIONS.items()}


def _children(step: Mapping[str, Any]) -> list[ChildJobSpec]:
    specs: list[ChildJobSpec] = []
    for c in step["children"]:
        spec: dict[str, Any] = {"type": c["type"], "payload": c["payload"]}
        spec.update({_PYTHON_NAMES[k]: v for k, v in c.get("options", {}).items()})
        specs.append(spec)  # type: ignore[arg-type]
    return specs


def _on_timeout(step: Mapping[str, Any]) -> Any:
    if "onTimeout" not in step:
        raise
    return step["onTimeout"]


def _human_options(step: Mapping[str, Any]) -> dict[str, Any]:
    return {"context": step.get("context"), "choices": step.get("choices"), "timeout_ms": step.get("timeoutMs")}


def _decision(decided: HumanDecision) -> Any:
    return {"decision": decided.decision, "actor": decided.actor, "reason": decided.reason}


def _operation(step: Mapping[str, Any], job_id: str, report: Report, save: SaveMeanwhile) -> Callable[[], Any]:
    def operation() -> Any:
        report("effect", job_id, step["name"])
        if "storedMeanwhile" in step:
            save(job_id, step["name"], step["storedMeanwhile"])
        return step["value"]

    return operation


def _async_operation(step: Mapping[str, Any], job_id: str, report: Report, save: SaveMeanwhile) -> Callable[[], Awaitable[Any]]:
    """``_operation`` as a coroutine, its other save in a thread (off the worker's event loop)."""

    async def operation() -> Any:
        report("effect", job_id, step["name"])
        if "storedMeanwhile" in step:
            await asyncio.to_thread(save, job_id, step["name"], step["storedMeanwhile"])
        return step["value"]

    return operation


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance_worker", description=__doc__)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--scenario", required=True, help="a scenario file of sdk/conformance/scenarios")
    parser.add_argument("--worker-id")
    args = parser.parse_args(argv)
    with open(args.scenario, encoding="utf-8") as file:
        scenario = expand_text(json.load(file))
    lock = threading.Lock()

    def emit(message: Mapping[str, Any]) -> None:
        with lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def report(event: str, job_id: str, name: str) -> None:
        emit({"event": event, "jobId": job_id, "name": name})

    with ConnectionPool(args.database_url, min_size=1, max_size=4) as pool:
        worker = Worker(Queue(pool), worker_id=args.worker_id, **worker_options(scenario))
        for job_type, steps in scenario["handlers"].items():
            worker.handle(job_type, sync_handler(steps, report, meanwhile_saver(args.database_url)))

        def announce() -> None:
            if worker.wait_started():
                emit({"event": "ready"})

        threading.Thread(target=announce, daemon=True).start()
        worker.run(handle_signals=True)
    emit({"event": "stopped"})


if __name__ == "__main__":
    main()
