"""``Queue``: puts jobs into PostgreSQL, in the caller's transaction when given one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from psycopg_pool import ConnectionPool

from . import _calls as calls
from ._sync import Connection, SyncExecutor
from .types import EnqueueOptions, EnqueueRequest


class Queue:
    """Puts jobs into PostgreSQL. Pass your open transaction's connection as ``conn`` and the
    job commits or rolls back with your own writes; without it a pooled connection runs the
    insert and commits it. Input is validated before anything is sent: a bad argument raises
    ``WorkhorseValidationError`` naming the field, and nothing is written.

    Example::

        pool = ConnectionPool(DATABASE_URL)
        queue = Queue(pool)
        with pool.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO orders (id) VALUES (%s)", (order_id,))
            queue.enqueue("order.fulfill", {"orderId": order_id}, conn=conn)
    """

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._executor = SyncExecutor(pool)

    @property
    def pool(self) -> ConnectionPool[Any]:
        return self._executor.pool

    def enqueue(self, type: str, payload: Any, *, conn: Connection | None = None, **options: Unpack[EnqueueOptions]) -> str:
        """Enqueues one job and returns its id. Options (``queue``, ``priority``, ``run_at``,
        ``max_attempts``, ``retry_policy``, ``tags``, ``deadline``, ``execution_timeout_ms``,
        ``idempotency_key``, ``idempotency_scope``, ``idempotency_ttl_ms``) left out take the protocol's
        defaults (queue ``default``, priority 0, 25 attempts, exponential backoff, run now).
        With ``idempotency_key`` an exact repeat, while the key lives, returns the first job's
        id and writes nothing; a different request under the same key raises
        ``IdempotencyConflictError``."""
        return self._executor.run(calls.enqueue(type, payload, options), conn)[0]

    def enqueue_many(self, requests: Sequence[EnqueueRequest], *, conn: Connection | None = None) -> list[str]:
        """Enqueues up to 1000 jobs in one statement, all or nothing, and returns their ids in
        input order. Each request is a dict with ``type``, ``payload`` and any keyword option of
        ``enqueue``."""
        call = calls.enqueue_many(requests)
        return [] if call is None else self._executor.run(call, conn)
