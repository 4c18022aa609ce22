from __future__ import annotations

from typing import Any

from psycopg_pool import ConnectionPool

from workhorse import Admin, Queue, Worker


def test_enqueue_and_run(pool: ConnectionPool[Any]) -> None:
    queue = Queue(pool)
    admin = Admin(pool)
    job_id = queue.enqueue("echo", {"n": 1})
    worker = Worker(queue, poll_ms=50, tick_ms=100)
    worker.handle("echo", lambda payload, ctx: {"got": payload["n"], "attempt": ctx.attempt})
    worker.start()
    try:
        import time

        for _ in range(200):
            job = admin.get_job(job_id)
            if job and job.state == "succeeded":
                break
            time.sleep(0.05)
    finally:
        worker.stop()
    job = admin.get_job(job_id)
    assert job is not None and job.state == "succeeded" and job.result == {"got": 1, "attempt": 1}
