"""Worker processes really killed and really stopped: a SIGKILLed worker's job is recovered by
another process, which replays the checkpoint; SIGTERM drains; several processes share a queue
and every job runs and ends exactly once."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from workhorse import Admin, Queue

from .conformance_runner import SCENARIOS
from .support import WorkerProcess, split_violations, wait_for


@pytest.fixture
def processes() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for process in started:
        process.close()


def _state(admin: Admin, job_id: str) -> str | None:
    job = admin.get_job(job_id)
    return None if job is None else job.state


def test_a_sigkilled_worker_process_is_recovered_by_another_that_replays_the_checkpoint(
    pool: ConnectionPool[Any], db_url: str, processes: list[WorkerProcess]
) -> None:
    scenario = SCENARIOS / "009-checkpoint-then-crash.json"
    admin = Admin(pool)
    job_id = Queue(pool).enqueue("conformance.fulfill", {"order": 1})
    first = WorkerProcess(db_url, scenario, "py-first")
    processes.append(first)
    first.wait_ready()
    wait_for(lambda: first.saw("mark", jobId=job_id, name="charged"), 30, "the charge checkpoint")
    first.kill()
    job = admin.get_job(job_id)
    assert job is not None and job.state == "active" and job.worker_id == "py-first"

    second = WorkerProcess(db_url, scenario, "py-second")
    processes.append(second)
    second.wait_ready()
    wait_for(lambda: _state(admin, job_id) == "succeeded", 30, "the job to succeed")
    assert second.terminate() == 0
    assert second.saw("stopped")
    job = admin.get_job(job_id)
    assert job is not None and job.current_attempt == 2
    assert job.result == {"charge": {"chargeId": "ch_1"}, "label": {"labelId": "lb_1"}}
    effects = Counter((p.worker_id, e["name"]) for p in (first, second) for e in p.events if e["event"] == "effect")
    assert effects == {("py-first", "charge"): 1, ("py-second", "label"): 1}
    kinds = [f"{e.source}:{e.kind}:{e.worker_id}" for e in admin.get_job_timeline(job_id).items]
    assert "attempt:expired:py-first" in kinds and "attempt:succeeded:py-second" in kinds
    assert split_violations(db_url) == []


def test_sigterm_drains_the_running_handler_before_the_process_exits(
    pool: ConnectionPool[Any], db_url: str, processes: list[WorkerProcess]
) -> None:
    admin = Admin(pool)
    job_id = Queue(pool).enqueue("conformance.slow", {})
    worker = WorkerProcess(db_url, SCENARIOS / "013-drain-on-stop.json", "py-drain")
    processes.append(worker)
    worker.wait_ready()
    wait_for(lambda: worker.saw("mark", jobId=job_id, name="started"), 30, "the handler to start")
    assert worker.terminate() == 0
    job = admin.get_job(job_id)
    assert job is not None and job.state == "succeeded" and job.result == {"finished": True}


def test_three_worker_processes_share_a_queue_and_every_job_ends_exactly_once(
    pool: ConnectionPool[Any], db_url: str, processes: list[WorkerProcess], tmp_path: Path
) -> None:
    scenario = tmp_path / "shared.json"
    scenario.write_text(json.dumps({
        "name": "shared", "description": "", "worker": {"concurrency": 5},
        "handlers": {"conformance.unit": [{"do": "checkpoint", "name": "work", "value": 1}, {"do": "return_checkpoints"}]},
        "actions": [],
    }))  # fmt: skip
    workers = [WorkerProcess(db_url, scenario, f"py-{n}") for n in range(3)]
    processes.extend(workers)
    for worker in workers:
        worker.wait_ready()
    ids = Queue(pool).enqueue_many([{"type": "conformance.unit", "payload": {"i": i}} for i in range(150)])
    admin = Admin(pool)

    def done() -> bool:
        return len(admin.list_jobs(states=["succeeded"], limit=1000).items) == len(ids)

    wait_for(done, 60, "all jobs to succeed")
    assert [w.terminate() for w in workers] == [0, 0, 0]
    effects = Counter(e["jobId"] for w in workers for e in w.events if e["event"] == "effect")
    assert sorted(effects) == sorted(ids) and set(effects.values()) == {1}
    assert split_violations(db_url) == []


def test_a_job_parked_on_a_signal_outlives_its_sigkilled_worker_and_another_process_finishes_it(
    pool: ConnectionPool[Any], db_url: str, processes: list[WorkerProcess]
) -> None:
    scenario = SCENARIOS / "019-signal-after-crash.json"
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("conformance.ship", {})
    first = WorkerProcess(db_url, scenario, "py-parked")
    processes.append(first)
    first.wait_ready()
    wait_for(lambda: _state(admin, job_id) == "blocked", 30, "the job to park on its signal")
    first.kill()
    job = admin.get_job(job_id)
    assert job is not None and job.state == "blocked" and job.worker_id is None and job.current_attempt == 1

    assert queue.send_signal(job_id, "shipped", {"trackingId": "T-9"}) == "delivered"
    second = WorkerProcess(db_url, scenario, "py-resumer")
    processes.append(second)
    second.wait_ready()
    wait_for(lambda: _state(admin, job_id) == "succeeded", 30, "the job to resume")
    assert second.terminate() == 0
    job = admin.get_job(job_id)
    assert job is not None and job.current_attempt == 1
    assert job.result == {"reserve": "r1", "shipment": {"trackingId": "T-9"}}
    effects = Counter((p.worker_id, e["name"]) for p in (first, second) for e in p.events if e["event"] == "effect")
    assert effects == {("py-parked", "reserve"): 1}
    claims = [e.worker_id for e in admin.get_job_timeline(job_id).items if e.kind == "claimed"]
    assert claims == ["py-parked", "py-resumer"]
    assert split_violations(db_url) == []


def test_a_worker_sigkilled_after_its_wait_was_answered_leaves_the_answer_to_the_retry(
    pool: ConnectionPool[Any], db_url: str, processes: list[WorkerProcess], tmp_path: Path
) -> None:
    scenario = tmp_path / "answered.json"
    scenario.write_text(json.dumps({
        "name": "answered", "description": "", "worker": {"leaseMs": 2000},
        "handlers": {"conformance.ship": [
            {"do": "checkpoint", "name": "reserve", "value": "r1"},
            {"do": "wait_signal", "name": "shipped", "as": "shipment"},
            {"do": "mark", "name": "answered"},
            {"do": "block", "attempts": [1]},
            {"do": "return_values"},
        ]},
        "actions": [],
    }))  # fmt: skip
    queue, admin = Queue(pool), Admin(pool)
    job_id = queue.enqueue("conformance.ship", {}, retry_policy={"kind": "fixed", "delayMs": 0})
    first = WorkerProcess(db_url, scenario, "py-answered")
    processes.append(first)
    first.wait_ready()
    wait_for(lambda: _state(admin, job_id) == "blocked", 30, "the job to park on its signal")
    assert queue.send_signal(job_id, "shipped", {"trackingId": "T-5"}) == "delivered"
    wait_for(lambda: first.saw("mark", jobId=job_id, name="answered"), 30, "the replay to get the signal")
    first.kill()

    second = WorkerProcess(db_url, scenario, "py-retry")
    processes.append(second)
    second.wait_ready()
    wait_for(lambda: _state(admin, job_id) == "succeeded", 30, "the retry to finish the job")
    assert second.terminate() == 0
    job = admin.get_job(job_id)
    assert job is not None and job.current_attempt == 2
    assert job.result == {"reserve": "r1", "shipment": {"trackingId": "T-5"}}
    effects = Counter((p.worker_id, e["name"]) for p in (first, second) for e in p.events if e["event"] == "effect")
    assert effects == {("py-answered", "reserve"): 1}
    # One delivery; the retry's wait returned the stored answer without consuming another signal.
    timeline = [f"{e.kind}:{e.worker_id}" for e in admin.get_job_timeline(job_id).items if e.source == "event"]
    assert timeline == [
        "enqueued:None", "claimed:py-answered", "checkpoint_saved:py-answered", "waiting:py-answered",
        "signal_delivered:None", "claimed:py-answered", "lease_expired:py-answered", "claimed:py-retry", "succeeded:py-retry",
    ]  # fmt: skip
    assert split_violations(db_url) == []
