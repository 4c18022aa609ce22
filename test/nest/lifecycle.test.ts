/**
 * The worker's lifecycle: `app.close()` while a handler runs stops intake, lets the handler
 * finish and closes everything; a child process with `enableShutdownHooks()` drains the same
 * way on SIGTERM and exits 0; a web-only process (no `worker` option) never claims.
 */
import { Injectable } from '@nestjs/common';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { lastValueFrom, toArray } from 'rxjs';
import { JobHandler, Queue, WorkhorseModule, WorkhorseWorker, type HandlerContext } from 'nestjs-workhorse';
import { Queue as CoreQueue } from 'nestjs-workhorse/core';
import { stateOf } from '../support/job-state';
import { gate, waitFor } from '../support/wait';
import { quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

const started = new Set<string>();
const release = gate();

@Injectable()
class SlowHandlers {
  @JobHandler('slow.task')
  async run(_payload: unknown, ctx: HandlerContext): Promise<string> {
    started.add(ctx.jobId);
    await release.promise;
    return 'finished';
  }
}

const { db } = useTestDatabase();
let coreQueue: CoreQueue;

beforeAll(async () => {
  quietNestLogs();
  coreQueue = new CoreQueue(db.pool);
});

async function connectionsOf(applicationName: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2',
    [db.name, applicationName],
  );
  return rows[0].n;
}

it('app.close() stops intake, lets the running handler finish, and leaves nothing open', async () => {
  const moduleRef = await startModule({
    imports: [
      WorkhorseModule.forRoot({
        connectionString: db.url,
        poolConfig: { application_name: 'nest-close-test' },
        worker: { pollMs: 50, tickMs: 50 },
      }),
    ],
    providers: [SlowHandlers],
  });
  const worker = moduleRef.get(WorkhorseWorker);
  const pool = moduleRef.get(Queue).pool;
  const running = await moduleRef.get(Queue).enqueue('slow.task', {});
  await waitFor(() => started.has(running), 10_000, 'the handler to start');
  expect(await connectionsOf('nest-close-test')).toBeGreaterThan(0);

  let closed = false;
  const closing = moduleRef.close().then(() => {
    closed = true;
  });
  await waitFor(() => !worker.isRunning, 10_000, 'intake to stop');
  const late = await coreQueue.enqueue('slow.task', {});
  expect(closed).toBe(false); // still draining: the handler holds it open
  expect(worker.activeCount).toBe(1);

  release.open();
  await closing;
  expect(await stateOf(db.pool, running)).toBe('succeeded');
  expect(await stateOf(db.pool, late)).toBe('ready');
  expect(started.has(late)).toBe(false);
  expect(pool.ended).toBe(true);
  expect(pool.totalCount).toBe(0);
  // The pool, the LISTEN and the heartbeat connections are all gone.
  await waitFor(async () => (await connectionsOf('nest-close-test')) === 0, 10_000, 'the server to see every connection closed');
});

it('a child process with enableShutdownHooks() drains on SIGTERM and exits 0', async () => {
  const child = spawn(
    process.execPath,
    ['-r', join(__dirname, '../support/ts-register.js'), join(__dirname, '../fixtures/nest-sigterm-app.ts')],
    { env: { ...process.env, WORKHORSE_FIXTURE_DATABASE_URL: db.url }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: { event: string; jobId?: string }[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const complete = buffered.split('\n');
    buffered = complete.pop() ?? '';
    for (const line of complete) if (line.startsWith('{')) lines.push(JSON.parse(line) as { event: string; jobId?: string });
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  try {
    await waitFor(() => lines.some((l) => l.event === 'ready'), 30_000, 'the child to start').catch((error: Error) => {
      throw new Error(`${error.message}; child stderr: ${stderr}`);
    });
    const jobId = await coreQueue.enqueue('sigterm.task', {}, { queue: 'sigterm' });
    await waitFor(() => lines.some((l) => l.event === 'started' && l.jobId === jobId), 10_000, 'the handler to start');

    child.kill('SIGTERM');
    expect(await exited).toEqual({ code: 0, signal: null });
    expect(lines.map((l) => l.event)).toEqual(['ready', 'started', 'finishing']);
    expect(await stateOf(db.pool, jobId)).toBe('succeeded');
    const { rows } = await db.pool.query('SELECT result FROM workhorse.job_outcome WHERE job_id = $1', [jobId]);
    expect(rows[0].result).toEqual({ finishedAfterIntakeStopped: true });
    expect(stderr).toBe('');
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
});

it('a web-only process (no worker option) never claims', async () => {
  const moduleRef = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url, poolConfig: { application_name: 'nest-web-only' } })],
    providers: [SlowHandlers],
  });
  const worker = moduleRef.get(WorkhorseWorker);
  const events = lastValueFrom(worker.events$.pipe(toArray()));
  try {
    expect(worker.isEnabled).toBe(false);
    expect(worker.isRunning).toBe(false);
    expect(worker.queues).toEqual([]);
    worker.pause();
    worker.resume();
    const jobId = await moduleRef.get(Queue).enqueue('slow.task', {});
    // No LISTEN connection was opened ...
    const { rows } = await db.pool.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'nest-web-only' AND query ILIKE 'LISTEN%'",
      [db.name],
    );
    expect(rows[0].n).toBe(0);
    // ... and the job stays ready: absence needs a bounded wait, longer than a worker's poll and tick.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(await stateOf(db.pool, jobId)).toBe('ready');
    expect(started.has(jobId)).toBe(false);
  } finally {
    await moduleRef.close();
  }
  expect(await events).toEqual([]);
});
