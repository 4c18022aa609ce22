/**
 * `workhorse jobs cancel|run-now|reschedule|delete`, one job and `--all` with filters and
 * `--dry-run`, against a real database: exit codes, `--json` documents, what changed.
 */
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import type { BulkActionResult } from '../../lib/core';
import { claimOne, complete } from '../support/protocol';
import { cli, documentOf, errorOf, useCliDatabase } from './cli-harness';

const HOUR = 3_600_000;

describe('workhorse jobs run-now, reschedule, delete and cancel --all', () => {
  const { db, env, queue, admin } = useCliDatabase();
  const newQueue = (): string => `q-${randomUUID().slice(0, 8)}`;

  it('runs one job now, refuses a running one naming its state', async () => {
    const q = newQueue();
    const id = await queue.enqueue('work', {}, { queue: q, runAt: new Date(Date.now() + HOUR) });
    const run = await cli(['jobs', 'run-now', id, '--reason', 'customer waiting'], env);
    expect(run).toMatchObject({ code: 0, stdout: `Job ${id} is ready now.\n` });
    expect((await admin.getJob(id))?.state).toBe('ready');
    await claimOne(db.pool, q);
    expect(errorOf(await cli(['jobs', 'run-now', id], env), 1)).toMatch(/is active; only a scheduled, retrying or sleeping job can be run now/);
    expect(errorOf(await cli(['jobs', 'run-now'], env), 2)).toMatch(/give a job ID, or --all/);
    expect(errorOf(await cli(['jobs', 'run-now', id, '--queue', q], env), 2)).toMatch(/option --queue only goes with --all/);
  });

  it('reschedules a job and prints where it stands', async () => {
    const q = newQueue();
    const id = await queue.enqueue('work', {}, { queue: q, runAt: new Date(Date.now() + HOUR) });
    const run = await cli(['jobs', 'reschedule', id, '--run-at', '2099-01-01T00:00:00Z', '--priority', '90', '--json'], env);
    expect(documentOf(run)).toEqual({ id, status: 'rescheduled', state: 'scheduled', runAt: '2099-01-01T00:00:00.000Z', priority: 90 });
    expect(errorOf(await cli(['jobs', 'reschedule', id], env), 2)).toMatch(/give --run-at ISO, --priority P or both/);
    expect(errorOf(await cli(['jobs', 'reschedule', id, '--priority', '101'], env), 2)).toMatch(/priority: must be an integer from 0 to 100/);
  });

  it('deletes finished jobs with --all after a dry run, leaving live ones', async () => {
    const q = newQueue();
    const done: string[] = [];
    for (let i = 0; i < 3; i += 1) {
      done.push(await queue.enqueue('work', {}, { queue: q }));
      await complete(db.pool, await claimOne(db.pool, q));
    }
    await queue.enqueue('work', {}, { queue: q });
    const dry = await cli(['jobs', 'delete', '--all', '--queue', q, '--dry-run'], env);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain('Dry run: delete would change 3 jobs; nothing was written.');
    expect(dry.stdout).toContain('Left alone: 1 ready.');
    for (const id of done) expect(dry.stdout).toContain(id);
    const result = documentOf<BulkActionResult>(await cli(['jobs', 'delete', '--all', '--queue', q, '--limit', '2', '--reason', 'test data', '--json'], env));
    expect(result).toMatchObject({ action: 'delete', changed: 2, more: true, jobIds: done.slice(0, 2), skipped: { ready: 1 } });
    const rest = await cli(['jobs', 'delete', '--all', '--queue', q], env);
    expect(rest.stdout).toBe('delete: changed 1 job (1 deleted).\nLeft alone: 1 ready.\n');
    expect(await admin.getJob(done[2])).toBeNull();
    const { rows } = await db.pool.query("SELECT data FROM workhorse.job_event WHERE job_id = $1 AND kind = 'deleted'", [done[0]]);
    expect(rows[0].data).toMatchObject({ actor: userInfo().username, reason: 'test data' });
  });

  it('cancels what matches with --all, asking the worker of a running job', async () => {
    const q = newQueue();
    await queue.enqueue('work', {}, { queue: q });
    await claimOne(db.pool, q);
    await queue.enqueue('work', {}, { queue: q });
    const run = await cli(['jobs', 'cancel', '--all', '--queue', q, '--reason', 'incident'], env);
    expect(run).toMatchObject({ code: 0, stdout: 'cancel: changed 2 jobs (1 canceled, 1 cancel_requested).\nLeft alone: 1 canceling.\n' });
    expect(errorOf(await cli(['jobs', 'cancel', '--all', '--finished-after', '2026-01-01'], env), 2)).toMatch(/unknown option|finished/i);
  });
});
