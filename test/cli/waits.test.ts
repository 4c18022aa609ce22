/**
 * `workhorse waits list` and `workhorse waits complete` against a real database: exit codes,
 * `--json` documents checked against the API, text output with control characters escaped, and
 * one-line errors. Jobs are parked on human waits through the owner protocol (wait_human_v1).
 */
import { userInfo } from 'node:os';
import { type HumanWait, type Page } from '../../lib/core';
import { claimOne } from '../support/protocol';
import { cli, documentOf, errorOf, useCliDatabase, viaJson } from './cli-harness';

const { db, env, queue, admin } = useCliDatabase();

/** Enqueues a job on `queueName`, claims it and parks it on the human wait `name`. */
async function parked(queueName: string, name: string, context: unknown, choices: string[] | null): Promise<string> {
  const jobId = await queue.enqueue('refund.review', { n: 1 }, { queue: queueName });
  const claimed = await claimOne(db.pool, queueName);
  const { rows } = await db.pool.query<{ status: string }>(
    'SELECT status FROM workhorse.wait_human_v1($1, $2, $3, $4, $5::jsonb, $6::jsonb, NULL)',
    [jobId, claimed.workerId, claimed.fence, name, JSON.stringify(context), choices && JSON.stringify(choices)],
  );
  expect(rows[0].status).toBe('waiting');
  return jobId;
}

it('workhorse waits --help lists both commands, without a database', async () => {
  const run = await cli(['waits', '--help'], {});
  expect(run).toMatchObject({ code: 0, stderr: '' });
  expect(run.stdout).toMatch(/list/);
  expect(run.stdout).toMatch(/complete ID NAME DECISION/);
});

it('waits list pages the open waits as the API does, and escapes control characters in text', async () => {
  const ids = [
    await parked('cli-waits', 'approve', { amount: 1200 }, ['approve', 'reject']),
    await parked('cli-waits', 'approve\u001b[31m', { note: 'line\nbreak' }, null),
    await parked('cli-waits', 'approve', null, ['approve', 'reject']),
  ];
  const first = documentOf<Page<HumanWait>>(await cli(['waits', 'list', '--queue', 'cli-waits', '--limit', '2', '--json'], env));
  expect(first).toEqual(viaJson(await admin.listHumanWaits({ queue: 'cli-waits', limit: 2 })));
  expect(first.items.map((w) => w.jobId)).toEqual(ids.slice(0, 2));
  const second = documentOf<Page<HumanWait>>(
    await cli(['waits', 'list', '--queue', 'cli-waits', '--limit', '2', '--cursor', first.nextCursor as string, '--json'], env),
  );
  expect(second.items.map((w) => w.jobId)).toEqual([ids[2]]);

  const text = await cli(['waits', 'list', '--queue', 'cli-waits'], env);
  expect(text).toMatchObject({ code: 0, stderr: '' });
  expect(text.stdout).toContain('"approve\\u001b[31m"');
  expect(text.stdout).toContain('{"note":"line\\nbreak"}');
  expect(text.stdout).not.toContain('\u001b');
  expect(text.stdout.trimEnd().endsWith('3 open waits.')).toBe(true);
  expect((await cli(['waits', 'list', '--queue', 'cli-waits', '--limit', '1'], env)).stdout).toContain(
    'Next page: workhorse waits list --queue cli-waits --limit 1 --cursor ',
  );
  expect((await cli(['waits', 'list', '--name', 'nobody'], env)).stdout).toBe('No open human waits match.\n');
});

it('waits complete records the decision with the actor and resumes the job', async () => {
  const jobId = await parked('cli-complete', 'approve', { amount: 99 }, ['approve', 'reject']);
  const refused = errorOf(await cli(['waits', 'complete', jobId, 'approve', 'maybe', '--actor', 'alice'], env), 2);
  expect(refused).toContain('decision: must be one of');

  const run = await cli(['waits', 'complete', jobId, 'approve', 'approve', '--reason', 'ok', '--idempotency-key', 'k1'], env);
  expect(run).toMatchObject({ code: 0, stderr: '' });
  expect(run.stdout).toBe(`Recorded the decision for wait "approve" of job ${jobId}; the job resumes.\n`);
  expect(await admin.getJob(jobId)).toMatchObject({ state: 'ready' });
  const decided = (await admin.getJobTimeline(jobId)).items.find((e) => e.kind === 'human_decided');
  expect(decided?.data).toMatchObject({ decision: 'approve', actor: userInfo().username, reason: 'ok' });

  expect(documentOf(await cli(['waits', 'complete', jobId, 'approve', 'approve', '--idempotency-key', 'k1', '--json'], env))).toEqual({
    jobId,
    name: 'approve',
    status: 'duplicate',
  });
  expect(errorOf(await cli(['waits', 'complete', jobId, 'approve', 'reject', '--actor', 'bob'], env), 1)).toBe(
    `workhorse: wait "approve" of job ${jobId} was already decided; nothing recorded.`,
  );
  await admin.cancel(jobId);
});

it('waits complete takes JSON with --json-decision and refuses what is not JSON', async () => {
  const jobId = await parked('cli-json', 'review', null, null);
  expect(errorOf(await cli(['waits', 'complete', jobId, 'review', '{oops', '--json-decision', '--actor', 'a'], env), 2)).toContain(
    'is not JSON',
  );
  expect((await cli(['waits', 'complete', jobId, 'review', '{"score": 4}', '--json-decision', '--actor', 'a'], env)).code).toBe(0);
  const decided = (await admin.getJobTimeline(jobId)).items.find((e) => e.kind === 'human_decided');
  expect(decided?.data).toMatchObject({ decision: { score: 4 }, actor: 'a' });
  await admin.cancel(jobId);
});

it('waits complete exits 1 for an unknown job and 2 for a bad id, with one line', async () => {
  expect(errorOf(await cli(['waits', 'complete', '00000000-0000-7000-8000-000000000000', 'x', 'y', '--actor', 'a'], env), 1)).toBe(
    'workhorse: job 00000000-0000-7000-8000-000000000000 not found',
  );
  expect(errorOf(await cli(['waits', 'complete', 'nope', 'x', 'y', '--actor', 'a'], env), 2)).toContain('jobId');
  expect(errorOf(await cli(['waits', 'complete', 'nope', 'x'], env), 2)).toContain('missing argument DECISION');
});
