"""The protocol's limits and defaults: ``limits.json``, package data copied from the repository's
``sdk/protocol/limits.json`` (the one source every SDK reads) by ``scripts/copy-sdk-sql.js``.
The SQL functions enforce the enqueue and handler limits; this SDK uses the values to default and
document its options and to check the worker options, which never reach the server."""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

#: The parsed file, as it is (tests compare it with the repository's source).
LIMITS: dict[str, Any] = json.loads(files("workhorse").joinpath("limits.json").read_text("utf-8"))

ENQUEUE: dict[str, Any] = LIMITS["enqueue"]
RETRY_POLICY: dict[str, Any] = LIMITS["retryPolicy"]
HANDLER: dict[str, Any] = LIMITS["handler"]
WORKER: dict[str, Any] = LIMITS["worker"]
DATES: dict[str, Any] = LIMITS["dates"]
RESULTS: dict[str, Any] = LIMITS["results"]


def heartbeat_not_below_lease(lease_ms: int) -> str:
    """The message every SDK gives for a heartbeat that is not below the lease (``heartbeatMs``)."""
    return (
        f"must be below leaseMs ({lease_ms}), or every lease lapses before it is renewed; "
        "a third of leaseMs is the default"
    )
