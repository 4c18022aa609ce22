"""The Python side of the benchmark's Python systems (test/bench/systems/workhorse-python.js),
driven over stdin/stdout with one JSON object per line.

  worker:   python bench_process.py worker URL CONCURRENCY API [PROFILE_FILE]
            API is "async" (AsyncWorker, coroutine no-op handler) or "sync" (Worker, plain
            no-op handler in threads). Prints {"event": "started"}, then {"handled": n} (the
            count so far) at the first job and every 50 ms while jobs run; on a "stop" line it
            drains, prints {"event": "stopped"} and exits. With PROFILE_FILE, pyinstrument
            profiles the whole run and writes its text report there.
  producer: python bench_process.py producer URL POOL_MAX
            Reads {"from": i, "to": j} lines, enqueues payloads {"i": i..j-1} as one
            enqueue_many batch, prints {"ok": true}; "stop" ends it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from psycopg_pool import AsyncConnectionPool

from workhorse import Queue, Worker
from workhorse.aio import AsyncQueue, AsyncWorker


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


async def stdin_lines() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


class Counter:
    def __init__(self) -> None:
        self.handled = 0
        self.reported = 0

    def job(self) -> None:
        self.handled += 1
        if self.handled == 1:
            self.report()

    def report(self) -> None:
        if self.handled != self.reported:
            self.reported = self.handled
            emit({"handled": self.handled})


async def worker_main(url: str, concurrency: int, api: str) -> None:
    counter = Counter()
    async with AsyncConnectionPool(url, min_size=1, max_size=10) as pool:
        if api == "async":
            worker: Any = AsyncWorker(AsyncQueue(pool), concurrency=concurrency)

            async def noop_async(payload: Any, ctx: Any) -> None:
                counter.job()

            worker.handle("noop", noop_async)
            running = asyncio.create_task(worker.run())
            await worker.started()
        else:
            from psycopg_pool import ConnectionPool

            sync_pool = ConnectionPool(url, min_size=1, max_size=2)
            worker = Worker(Queue(sync_pool), concurrency=concurrency)

            def noop(payload: Any, ctx: Any) -> None:
                counter.job()

            worker.handle("noop", noop)
            await asyncio.to_thread(worker.start)
        emit({"event": "started"})
        reader = await stdin_lines()

        async def report() -> None:
            while True:
                await asyncio.sleep(0.05)
                counter.report()

        reporter = asyncio.create_task(report())
        await reader.readline()
        reporter.cancel()
        counter.report()
        if api == "async":
            await worker.stop()
            await running
        else:
            await asyncio.to_thread(worker.stop)
            sync_pool.close()
    emit({"event": "stopped"})


async def producer_main(url: str, pool_max: int) -> None:
    async with AsyncConnectionPool(url, min_size=1, max_size=pool_max) as pool:
        queue = AsyncQueue(pool)
        reader = await stdin_lines()
        emit({"event": "started"})
        while True:
            line = await reader.readline()
            if not line or line.strip() == b"stop":
                break
            span = json.loads(line)
            await queue.enqueue_many([{"type": "noop", "payload": {"i": i}} for i in range(span["from"], span["to"])])
            emit({"ok": True})


def main() -> None:
    mode, url = sys.argv[1], sys.argv[2]
    if mode == "worker":
        profile = sys.argv[5] if len(sys.argv) > 5 else None
        run = lambda: asyncio.run(worker_main(url, int(sys.argv[3]), sys.argv[4]))  # noqa: E731
        if profile:
            from pyinstrument import Profiler

            with Profiler(interval=0.0005, async_mode="disabled") as profiler:
                run()
            with open(profile, "w", encoding="utf-8") as file:
                file.write(profiler.output_text(unicode=True, color=False, show_all=False))
        else:
            run()
    else:
        asyncio.run(producer_main(url, int(sys.argv[3])))


if __name__ == "__main__":
    main()
