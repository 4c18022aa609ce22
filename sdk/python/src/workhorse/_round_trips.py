"""Claims and completes: one ``complete_and_claim_v1`` round trip at a time records the
completions that gathered since the last one and claims exactly the slots that will then be
free, in one statement and one commit; completions arriving meanwhile go in the next round
trip. Polling (jittered, backing off while idle) stays the source of truth; LISTEN and freed
slots only wake it sooner."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from . import _protocol as p
from ._drivers import Statements
from ._execution import Completion, Run
from ._outcome_recorder import OutcomeRecorder
from ._worker_options import EngineOptions
from .errors import WorkhorseError

#: The most jobs one round trip claims or completes (the limits of complete_and_claim_v1).
MAX_ROUND = 1000


class RoundTrips:
    def __init__(
        self,
        options: EngineOptions,
        statements: Statements,
        running: dict[str, Run],
        pending: list[Completion],
        wake: asyncio.Event,
        start: Callable[[p.Row], None],
        recorder: OutcomeRecorder,
        report: Callable[[str, BaseException], None],
    ) -> None:
        self._options = options
        self._statements = statements
        #: The jobs being run, by job id (the engine's).
        self._running = running
        #: Completions waiting for the next round trip (the executor appends them).
        self._pending = pending
        self._wake = wake
        #: Runs a claimed job (its row of the claim).
        self._start = start
        self._recorder = recorder
        self._report = report
        self._idle_rounds = 0
        #: Claims while True; completions are recorded either way.
        self.claiming = True
        #: Returns once nothing is pending and nothing is claimed any more.
        self.closing = False

    async def run(self) -> None:
        failures = 0
        o = self._options
        while True:
            self._wake.clear()
            take = 1 if self._pending and self._pending[0].alone else MAX_ROUND
            batch = self._pending[:take]
            del self._pending[: len(batch)]
            free = o.concurrency - len(self._running) + len(batch)
            want = min(MAX_ROUND, free) if self.claiming else 0
            if not batch and want <= 0:
                if self.closing:
                    return
                await self._wake.wait()
                continue
            items = "[" + ",".join(f'{{"jobId":"{c.run.job.job_id}","fence":{c.run.job.fence},"result":{c.result}}}' for c in batch) + "]"
            try:
                rows = await self._statements.rows(p.PUMP_SQL, (o.worker_id, items, o.queues, want, o.lease_ms))
            except Exception as error:
                if isinstance(error, WorkhorseError):
                    # The database refused a result itself: alone, that fails the attempt; in a
                    # batch, each completion is sent on its own so only the culprit is refused.
                    if len(batch) == 1:
                        self._recorder.failed(batch[0].run, error)
                    else:
                        for c in batch:
                            c.alone = True
                        self._pending[:0] = batch
                    continue
                # Unreachable database or a commit of unknown fate: completions are tried again
                # while their leases hold (a repeat of one that committed answers `succeeded`).
                self._report("complete" if batch else "claim", error)
                failures += 1
                owned = [c for c in batch if c.run.outcome not in ("lost", "abandoned")]
                for c in batch:
                    if c not in owned:
                        self._recorder.finish(c.run)
                self._pending[:0] = owned
                await self._sleep_or_wake(min(2.0, 0.05 * 2**failures) * (0.5 + random.random() / 2))
                continue
            failures = 0
            first = 0
            unsucceeded: dict[str, str] = {}
            while first < len(rows) and rows[first][1] != "claimed":
                unsucceeded[rows[first][0]] = rows[first][1]
                first += 1
            for c in batch:
                self._recorder.completed(c.run, unsucceeded.get(c.run.job.job_id, "succeeded"))
            claimed = rows[first:]
            for row in claimed:
                self._start(row)
            if want > 0 and len(claimed) < want:
                self._idle_rounds += 1
                if not self._pending:
                    await self._sleep_or_wake(self._poll_delay())
            elif want > 0:
                self._idle_rounds = 0

    def _poll_delay(self) -> float:
        base = self._options.poll_ms * min(5.0, 1 + self._idle_rounds / 4)
        return base * (0.8 + random.random() * 0.4) / 1000

    async def _sleep_or_wake(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._wake.wait(), seconds)
        except asyncio.TimeoutError:
            pass
