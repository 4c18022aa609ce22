"""Every public call of TypeScript's ``Queue`` and ``Admin`` (lib/core/queue.ts, admin.ts,
admin-calls.ts) has a Python counterpart of the same name in snake case, in the sync and the
asyncio class, but for the exceptions declared here with their reason. A TypeScript call added
without one fails this test."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from workhorse import Admin, Queue
from workhorse.aio import AsyncAdmin, AsyncQueue

ROOT = Path(__file__).resolve().parents[3]

#: TypeScript calls Python does not offer (yet), each with why.
EXCEPTIONS: dict[str, str] = {}

#: Names that differ on purpose (TypeScript name: Python name).
RENAMED: dict[str, str] = {}


def _typescript_calls(*files: str) -> list[str]:
    names: list[str] = []
    for file in files:
        text = (ROOT / "lib/core" / file).read_text()
        names += re.findall(r"^  async (\w+)\s*[<(]", text, re.MULTILINE)
    return names


def _snake(name: str) -> str:
    return RENAMED.get(name, re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower())


def _missing(kind: str, ts: list[str], *classes: type) -> list[str]:
    missing = []
    for name in ts:
        if f"{kind}.{name}" in EXCEPTIONS:
            continue
        for cls in classes:
            if not callable(getattr(cls, _snake(name), None)):
                missing.append(f"{kind}.{name} -> {cls.__name__}.{_snake(name)}")
    return missing


def test_every_typescript_queue_and_admin_call_has_a_python_counterpart() -> None:
    queue_calls = _typescript_calls("queue.ts")
    admin_calls = _typescript_calls("admin.ts", "admin-calls.ts")
    assert "enqueueMany" in queue_calls and "health" in admin_calls and "listWorkers" in admin_calls
    missing = _missing("Queue", queue_calls, Queue, AsyncQueue) + _missing("Admin", admin_calls, Admin, AsyncAdmin)
    assert missing == []
    # A declared exception that is no longer one goes: TypeScript dropped the call, or Python has it now.
    stale = [
        key for key in EXCEPTIONS
        if key.split(".")[1] not in (queue_calls if key.startswith("Queue.") else admin_calls)
        or callable(getattr(Queue if key.startswith("Queue.") else Admin, _snake(key.split(".")[1]), None))
    ]  # fmt: skip
    assert stale == []


def test_the_async_classes_are_coroutines_of_the_same_calls() -> None:
    for sync, aio in ((Queue, AsyncQueue), (Admin, AsyncAdmin)):
        public = [n for n, f in inspect.getmembers(sync, inspect.isfunction) if not n.startswith("_")]
        assert [n for n in public if not inspect.iscoroutinefunction(getattr(aio, n, None))] == []


def test_the_schema_messages_give_the_same_advice_as_typescript_and_go() -> None:
    from workhorse import SchemaNotInstalledError, SchemaVersionMismatchError

    sources = {
        "TypeScript": (ROOT / "lib/core/errors.ts").read_text(),
        "Go": (ROOT / "sdk/go/errors.go").read_text(),
    }
    python = {
        "absent": str(SchemaNotInstalledError(16)),
        "older": str(SchemaVersionMismatchError(3, 16, 14)),
        "newer": str(SchemaVersionMismatchError(99, 16, 14)),
    }
    # What to do, in every SDK's words: the command (or the SDK's own call), who runs it, what is kept.
    advice = {
        "absent": ["schema migrate", "once, then start again"],
        "older": ["schema migrate", "schema's owner, then start again", "queued jobs, schedules and history are kept"],
        "newer": ["upgrade the package to a release that works with it", "never downgraded"],
    }
    for case, phrases in advice.items():
        for phrase in phrases:
            assert phrase in python[case].lower(), (case, phrase)
            for sdk, text in sources.items():
                assert phrase in text.lower(), (sdk, case, phrase)
    assert "python -m workhorse schema migrate" in python["older"] and "npx workhorse schema migrate" in python["older"]
