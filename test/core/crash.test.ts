/**
 * kill -9: a worker process dies right after a checkpointed stage. Another worker process
 * recovers the job once the lease has really run out, replays the checkpoint instead of running
 * the stage again, and finishes the job.
 */
import { join } from 'node:path';
import { CREATE_SIDE_EFFECTS_SQL, sideEffects } from '../fixtures/side-effects';
import { FixtureProcesses, waitForLine, type FixtureProcess } from '../support/fixture-process';
import { useTestDatabase } from '../support/test-database';

const FIXTURE = join(__dirname, '..', 'fixtures', 'crash-worker.ts');

const { db, pool, queue, admin } = useTestDatabase({ beforeDrop: () => children.killAll() });

const children = new FixtureProcesses();

beforeAll(async () => {
  await pool.query(CREATE_SIDE_EFFECTS_SQL);
});

function startChild(workerId: string, mode: 'hang' | 'finish'): FixtureProcess {
  return children.start(FIXTURE, { CRASH_DATABASE_URL: db.url, CRASH_WORKER_ID: workerId, CRASH_MODE: mode });
}

describe('a worker process killed with SIGKILL', () => {
  it('loses nothing: the job is recovered after its lease expires and finishes elsewhere, each stage ran once', async () => {
    const jobId = await queue.enqueue('order.fulfill', { orderId: 'o-1' }, { maxAttempts: 3 });

    const first = startChild('crash-worker-1', 'hang');
    const firstPid = first.process.pid;
    expect(firstPid).toBeDefined();
    expect(await waitForLine(first, 'CHECKPOINTED ', 60000)).toBe(`CHECKPOINTED ${jobId}`);
    first.process.kill('SIGKILL');
    await first.exited;
    expect(first.process.signalCode).toBe('SIGKILL');

    // The dead worker still holds the lease on paper.
    expect(await admin.getJob(jobId)).toMatchObject({ state: 'active', workerId: 'crash-worker-1', currentAttempt: 1 });

    const second = startChild('crash-worker-2', 'finish');
    const secondPid = second.process.pid;
    // Nothing forces the expiry: the 2 s lease runs out and the second worker's tick recovers it.
    expect(await waitForLine(second, 'SUCCEEDED ', 60000)).toBe(`SUCCEEDED ${jobId}`);
    second.process.kill('SIGTERM');
    await second.exited;
    expect(second.process.exitCode).toBe(0);

    expect(await sideEffects(pool, jobId)).toEqual([
      { stage: 'charge', pid: firstPid },
      { stage: 'ship', pid: secondPid },
    ]);

    const job = await admin.getJob(jobId);
    expect(job).toMatchObject({
      state: 'succeeded',
      currentAttempt: 2,
      // The charge id is the one the killed process stored: replayed, not recomputed.
      result: { chargeId: `ch-o-1-${firstPid}`, shipmentId: `sh-${secondPid}`, attempt: 2 },
    });

    const attempts = await pool.query(
      'SELECT attempt, outcome, worker_id FROM workhorse.attempt_history WHERE job_id = $1 ORDER BY id',
      [jobId],
    );
    expect(attempts.rows).toEqual([
      { attempt: 1, outcome: 'expired', worker_id: 'crash-worker-1' },
      { attempt: 2, outcome: 'succeeded', worker_id: 'crash-worker-2' },
    ]);

    const timeline = (await admin.getJobTimeline(jobId, { limit: 100 })).items.filter((e) => e.source === 'event');
    const kinds = timeline.map((e) => e.kind);
    expect(kinds).toContain('lease_expired');
    const expiredAt = kinds.indexOf('lease_expired');
    const claims = timeline.filter((e) => e.kind === 'claimed');
    expect(claims.map((e) => e.workerId)).toEqual(['crash-worker-1', 'crash-worker-2']);
    // The second claim came after the recovery, not instead of it.
    expect(timeline.indexOf(claims[1])).toBeGreaterThan(expiredAt);
    expect(timeline[expiredAt]).toMatchObject({ attempt: 1, workerId: 'crash-worker-1' });

    const checkpoints = await pool.query<{ name: string; worker_id: string; attempt: number }>(
      'SELECT name, worker_id, attempt FROM workhorse.read_checkpoints_v1($1) ORDER BY name',
      [jobId],
    );
    expect(checkpoints.rows).toEqual([
      { name: 'charge', worker_id: 'crash-worker-1', attempt: 1 },
      { name: 'ship', worker_id: 'crash-worker-2', attempt: 2 },
    ]);
  }, 180_000);
});
