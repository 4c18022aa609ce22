/**
 * Schedules under real processes: three worker processes tick against one 1-second schedule for
 * at least 15 seconds, and every occurrence is fired exactly once (one occurrence row, one job,
 * no second in between missed); a worker process SIGKILLed in the middle of a tick that fired an
 * occurrence (failpoint `after-schedule-fire`: the job is enqueued and the occurrence marked, not
 * yet committed) leaves nothing behind, and another worker fires that occurrence, once.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { Worker } from '../../lib/core';
import { decidedOccurrencesOf, scheduledJobsOf, type OccurrenceRow } from '../support/schedules';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const FIXTURE = join(__dirname, '..', 'fixtures', 'schedule-worker.ts');
const REGISTER = require.resolve('../support/ts-register.js');

interface Child {
  process: ChildProcessWithoutNullStreams;
  stdout: string;
  stderr: string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const { db, pool, queue } = useTestDatabase({
  afterEachTest: () => Promise.all(workers.splice(0).map((w) => w.stop())),
  beforeDrop: async () => {
    for (const child of children) {
      if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill('SIGKILL');
      await child.exit;
    }
  },
});
const children: Child[] = [];
const workers: Worker[] = [];

beforeAll(async () => {
  expect(process.env.WORKHORSE_FAILPOINTS).toBeUndefined();
});

function startWorkerProcess(workerId: string, queueName: string, type: string, env: Record<string, string> = {}): Child {
  const proc = spawn(process.execPath, ['-r', REGISTER, FIXTURE], {
    env: {
      ...process.env,
      SCHEDULE_DATABASE_URL: db.url,
      SCHEDULE_WORKER_ID: workerId,
      SCHEDULE_QUEUE: queueName,
      SCHEDULE_JOB_TYPE: type,
      SCHEDULE_TICK_MS: '200',
      ...env,
    },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const child: Child = {
    process: proc,
    stdout: '',
    stderr: '',
    exit: new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal }))),
  };
  proc.stdout.on('data', (chunk: Buffer) => (child.stdout += chunk.toString()));
  proc.stderr.on('data', (chunk: Buffer) => (child.stderr += chunk.toString()));
  children.push(child);
  return child;
}

/** Every decided occurrence fired, one distinct job each, one second apart, and the jobs are exactly those. */
async function expectEachFiredOnce(occurrences: OccurrenceRow[], type: string): Promise<void> {
  expect(occurrences.filter((o) => o.state !== 'fired')).toEqual([]);
  const times = occurrences.map((o) => o.at.getTime());
  expect(times.slice(1).map((t, i) => t - times[i])).toEqual(times.slice(1).map(() => 1000));
  const jobs = await scheduledJobsOf(pool, type);
  expect(jobs.length).toBe(occurrences.length);
  expect(new Set(jobs.map((j) => j.id)).size).toBe(jobs.length);
  expect(jobs.map((j) => j.id).sort()).toEqual(occurrences.map((o) => o.job_id).sort());
  expect(jobs.map((j) => Date.parse(j.occurrence ?? '')).sort()).toEqual(times);
}

it('three worker processes and a 1-second schedule over 15 s: each occurrence fired exactly once', async () => {
  const type = 'multi.tick';
  await queue.syncSchedules('multi', [{ key: 'every-second', type, cron: '* * * * * *', options: { queue: 'multi-q' } }]);
  const processes = ['a', 'b', 'c'].map((name) => startWorkerProcess(`schedule-${name}`, 'multi-q', type));
  await waitFor(() => processes.every((p) => p.stdout.includes('STARTED')), 60_000, 'three worker processes to start');
  const first = await waitFor(async () => (await decidedOccurrencesOf(pool, 'every-second', 'multi'))[0], 30_000, 'a first fire');
  // 15 seconds of occurrences after the first, by the database's clock.
  await waitFor(
    async () => (await decidedOccurrencesOf(pool, 'every-second', 'multi')).some((o) => o.at.getTime() >= first.at.getTime() + 15_000),
    60_000,
    '15 seconds of occurrences',
  );
  for (const p of processes) p.process.kill('SIGTERM');
  const exits = await Promise.all(processes.map((p) => p.exit));
  expect(exits).toEqual(processes.map(() => ({ code: 0, signal: null })));
  expect(processes.map((p) => p.stderr)).toEqual(['', '', '']);
  const occurrences = await decidedOccurrencesOf(pool, 'every-second', 'multi');
  expect(occurrences.length).toBeGreaterThanOrEqual(16);
  await expectEachFiredOnce(occurrences, type);
}, 180_000);

it('a worker SIGKILLed mid-fire leaves no job and no fired occurrence; another worker fires it, once', async () => {
  const type = 'killed.tick';
  await queue.syncSchedules('killed', [{ key: 'every-second', type, cron: '* * * * * *', options: { queue: 'killed-q' } }]);
  const doomed = startWorkerProcess('schedule-doomed', 'killed-q', type, { WORKHORSE_FAILPOINTS: 'after-schedule-fire:1' });
  expect(await doomed.exit).toEqual({ code: null, signal: 'SIGKILL' });
  expect(doomed.stdout).toContain('STARTED');
  // It had fired at least one due occurrence, uncommitted: all of it rolled back.
  const { rows: due } = await pool.query<{ at: Date }>(
    `SELECT o.at FROM workhorse.schedule_occurrence o JOIN workhorse.schedule s ON s.id = o.schedule_id
     WHERE s.namespace = 'killed' AND o.state = 'planned' AND o.at <= clock_timestamp() ORDER BY o.at`,
  );
  expect(due.length).toBeGreaterThanOrEqual(1);
  expect(await decidedOccurrencesOf(pool, 'every-second', 'killed')).toEqual([]);
  expect(await scheduledJobsOf(pool, type)).toEqual([]);

  const recoverer = new Worker(queue, { queues: ['killed-q'], tickMs: 100, pollMs: 50 });
  recoverer.handle(type, async () => null);
  workers.push(recoverer);
  void recoverer.run();
  const lastDue = due[due.length - 1].at.getTime();
  await waitFor(
    async () => (await decidedOccurrencesOf(pool, 'every-second', 'killed')).some((o) => o.at.getTime() >= lastDue + 3000),
    30_000,
    'the recovering worker to fire on',
  );
  await queue.syncSchedules('killed', []);
  await recoverer.stop();
  const occurrences = await decidedOccurrencesOf(pool, 'every-second', 'killed');
  // The occurrences the dead worker had fired are the first ones, now fired once each.
  expect(occurrences.slice(0, due.length).map((o) => [o.at.getTime(), o.state])).toEqual(due.map((d) => [d.at.getTime(), 'fired']));
  await expectEachFiredOnce(occurrences, type);
}, 120_000);
