/**
 * A dead letter is redriven once (issue 15, item 3). A second redrive, with another request id,
 * returns the job the first one created; another copy is made only when asked for (`again`),
 * and the lineage says so. Concurrent redrives from several processes, of one dead letter or of
 * a whole filter, produce exactly one job per dead letter.
 */
import { join } from 'node:path';
import { FixtureProcesses, waitForLine } from '../support/fixture-process';
import { claim, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const FIXTURE = join(__dirname, '..', 'fixtures', 'redrive-process.ts');

const { db, queue, admin } = useTestDatabase({ beforeDrop: () => children.killAll() });
const children = new FixtureProcesses();

/** `n` dead letters in queue `q`: enqueued with one attempt, claimed and failed. */
async function deadLetters(q: string, n: number): Promise<string[]> {
  const ids = await queue.enqueueMany(Array.from({ length: n }, (_, i) => ({ type: 'redrive.once', payload: { i }, queue: q, maxAttempts: 1 })));
  for (const owner of await claim(db.pool, q, { limit: n })) await fail(db.pool, owner, { name: 'Declined', message: 'no' });
  expect((await admin.listDeadLetters({ queue: q, limit: 1000 })).items).toHaveLength(n);
  return ids;
}

/** How many jobs were redriven from each of `sources` (every lineage row, copies included). */
async function copies(sources: string[]): Promise<number[]> {
  const { rows } = await db.pool.query<{ n: number }>(
    `SELECT (SELECT count(*)::int FROM workhorse.job_redrive r WHERE r.source_job_id = s.id) AS n
     FROM unnest($1::uuid[]) WITH ORDINALITY AS s (id, ord) ORDER BY s.ord`,
    [sources],
  );
  return rows.map((r) => r.n);
}

async function cancelAll(ids: string[]): Promise<void> {
  for (const id of ids) await admin.cancel(id);
}

describe('redrive', () => {
  it('redrives a dead letter once: another request id gets the same job; `again` makes a copy, marked in the lineage', async () => {
    const [source] = await deadLetters('once-single', 1);
    const first = await admin.redrive(source, { requestId: 'once-1', actor: 'ops' });
    expect(await admin.redrive(source, { requestId: 'once-2' })).toBe(first);
    expect(await admin.redrive(source, { requestId: 'once-1' })).toBe(first);
    expect(await copies([source])).toEqual([1]);

    const copy = await admin.redrive(source, { requestId: 'once-3', again: true, reason: 'one more' });
    expect(copy).not.toBe(first);
    // Idempotent per request id, again included.
    expect(await admin.redrive(source, { requestId: 'once-3', again: true })).toBe(copy);
    // Without again, the first redrive is still the answer.
    expect(await admin.redrive(source, { requestId: 'once-4' })).toBe(first);
    expect(await copies([source])).toEqual([2]);
    expect(await admin.getJob(source)).toMatchObject({ state: 'failed', redrivenTo: [first, copy] });
    expect(await admin.getJob(copy)).toMatchObject({ state: 'ready', redrivenFrom: source, payload: { i: 0 } });

    const events = (await admin.getJobTimeline(source)).items.filter((e) => e.kind === 'redriven').map((e) => e.data);
    expect(events).toEqual([
      expect.objectContaining({ newJobId: first, requestId: 'once-1' }),
      expect.objectContaining({ newJobId: copy, requestId: 'once-3', again: true, reason: 'one more' }),
    ]);
    expect(events[0]).not.toHaveProperty('again');
    const from = (await admin.getJobTimeline(copy)).items.find((e) => e.kind === 'redriven_from');
    expect(from?.data).toMatchObject({ sourceJobId: source, again: true });
    await cancelAll([first, copy]);
  });

  it('redriveMany skips what another request redrove, and redrive of a dead letter redriven by redriveMany returns that job', async () => {
    const sources = await deadLetters('once-many', 3);
    const many = await admin.redriveMany({ queue: 'once-many' }, { requestId: 'bulk-1' });
    expect(many).toHaveLength(3);
    expect(await admin.redriveMany({ queue: 'once-many' }, { requestId: 'bulk-2' })).toEqual([]);
    for (const { sourceJobId, newJobId } of many) expect(await admin.redrive(sourceJobId, { requestId: `single-${sourceJobId}` })).toBe(newJobId);
    expect(await copies(sources)).toEqual([1, 1, 1]);
    await cancelAll(many.map((r) => r.newJobId as string));
  });

  it('refuses a bad again, and a dead-letter redrive of a job that is none', async () => {
    const [source] = await deadLetters('once-refused', 1);
    await expect(admin.redrive(source, { requestId: 'r', again: 'yes' as unknown as boolean })).rejects.toMatchObject({ field: 'again' });
    const live = await queue.enqueue('redrive.once', {}, { queue: 'once-refused' });
    await expect(admin.redrive(live, { requestId: 'r-live', again: true })).rejects.toMatchObject({ field: 'jobId' });
    await expect(db.pool.query('SELECT workhorse.redrive_v1($1, $2, NULL, NULL, NULL)', [source, 'r-null'])).rejects.toMatchObject({ code: 'P1001', column: 'again' });
    expect(await copies([source])).toEqual([0]);
    await cancelAll([live]);
  });
});

describe('redrives from two processes at once', () => {
  async function race(mode: 'many' | 'each', q: string): Promise<{ sourceJobId: string; newJobId: string | null }[][]> {
    const started = ['a', 'b'].map((name) =>
      children.start(FIXTURE, { REDRIVE_DATABASE_URL: db.url, REDRIVE_QUEUE: q, REDRIVE_REQUEST: `${mode}-${name}`, REDRIVE_MODE: mode }),
    );
    for (const child of started) await waitForLine(child, 'READY', 30_000);
    for (const child of started) child.process.stdin.write('GO\n');
    const results = [];
    for (const child of started) {
      const line = await waitForLine(child, 'RESULT ', 30_000);
      results.push(JSON.parse(line.slice('RESULT '.length)) as { sourceJobId: string; newJobId: string | null }[]);
      await child.exited;
      expect(child.process.exitCode).toBe(0);
    }
    return results;
  }

  it('two redriveMany calls with different request ids make exactly one job per dead letter', async () => {
    const sources = await deadLetters('race-many', 20);
    const [a, b] = await race('many', 'race-many');
    expect(await copies(sources)).toEqual(sources.map(() => 1));
    // Each dead letter is reported by exactly one of the two calls.
    const reported = [...a, ...b].map((r) => r.sourceJobId).sort();
    expect(reported).toEqual([...sources].sort());
    const { rows } = await db.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM workhorse.job WHERE queue = 'race-many'");
    expect(rows[0].n).toBe(40);
    await cancelAll([...a, ...b].map((r) => r.newJobId as string));
  });

  it('two processes redriving each dead letter with their own request ids get the same job for each', async () => {
    const sources = await deadLetters('race-each', 20);
    const [a, b] = await race('each', 'race-each');
    expect(await copies(sources)).toEqual(sources.map(() => 1));
    const bySource = (pairs: { sourceJobId: string; newJobId: string | null }[]) =>
      Object.fromEntries(pairs.map((p) => [p.sourceJobId, p.newJobId]));
    expect(bySource(a)).toEqual(bySource(b));
    expect(Object.keys(bySource(a)).sort()).toEqual([...sources].sort());
    await cancelAll(a.map((r) => r.newJobId as string));
  });
});
