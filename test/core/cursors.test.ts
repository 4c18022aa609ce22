/**
 * Page cursors are made by the database (workhorse.make_cursor) for every listing, passed through
 * by the SDKs as they are, and a cursor the listing did not make is refused with a typed error.
 */
import { InvalidCursorError, type Page } from '../../lib/core';
import { claimOne, fail } from '../support/protocol';
import { useTestDatabase } from '../support/test-database';

const { db, queue, admin } = useTestDatabase();

async function all<T>(read: (cursor: string | undefined) => Promise<Page<T>>): Promise<{ sizes: number[]; items: T[]; cursors: string[] }> {
  const sizes: number[] = [];
  const items: T[] = [];
  const cursors: string[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 20; i++) {
    const page = await read(cursor);
    sizes.push(page.items.length);
    items.push(...page.items);
    if (page.nextCursor === null) break;
    cursors.push(page.nextCursor);
    cursor = page.nextCursor;
  }
  return { sizes, items, cursors };
}

async function deadLetters(q: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    ids.push(await queue.enqueue('cursor.dead', { i }, { queue: q, maxAttempts: 1 }));
    await fail(db.pool, await claimOne(db.pool, q), { name: 'Error', message: `dead ${i}` });
  }
  return ids;
}

describe('every listing pages with cursors the database makes', () => {
  it('listJobs: full pages, a last page that is exactly full ends there, newest first', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await queue.enqueue('cursor.job', { i }, { queue: 'cursor-jobs' }));
    const { sizes, items } = await all((cursor) => admin.listJobs({ queue: 'cursor-jobs', limit: 2, cursor }));
    expect(sizes).toEqual([2, 2]);
    expect(items.map((j) => j.id)).toEqual([...ids].reverse());
    expect((await all((cursor) => admin.listJobs({ queue: 'cursor-jobs', limit: 3, cursor }))).sizes).toEqual([3, 1]);
  });

  it('listDeadLetters: pages of the failed jobs, newest first, ending with the last', async () => {
    const ids = await deadLetters('cursor-dead', 3);
    const { sizes, items } = await all((cursor) => admin.listDeadLetters({ queue: 'cursor-dead', limit: 1, cursor }));
    expect(sizes).toEqual([1, 1, 1]);
    expect(items.map((j) => j.id)).toEqual([...ids].reverse());
  });

  it('getJobTimeline: every entry once, in order, over pages', async () => {
    const [id] = await deadLetters('cursor-timeline', 1);
    const whole = await admin.getJobTimeline(id, { limit: 1000 });
    expect(whole.nextCursor).toBeNull();
    const { sizes, items } = await all((cursor) => admin.getJobTimeline(id, { limit: 2, cursor }));
    expect(items.map((e) => e.id)).toEqual(whole.items.map((e) => e.id));
    expect(sizes.every((n) => n === 2 || n === sizes[sizes.length - 1])).toBe(true);
  });

  it('listHumanWaits: the empty listing has one page and no cursor', async () => {
    expect(await admin.listHumanWaits({ queue: 'cursor-no-waits', limit: 5 })).toEqual({ items: [], nextCursor: null });
  });
});

describe('a cursor the listing did not make is refused with InvalidCursorError (P1001 naming cursor)', () => {
  it('refuses another listing\'s cursor, a forged one and one that is not text, in every listing', async () => {
    for (let i = 0; i < 3; i++) await queue.enqueue('cursor.forged', null, { queue: 'cursor-forged' });
    const [deadId] = await deadLetters('cursor-forged-dead', 2);
    const jobsCursor = (await admin.listJobs({ queue: 'cursor-forged', limit: 1 })).nextCursor;
    const deadCursor = (await admin.listDeadLetters({ queue: 'cursor-forged-dead', limit: 1 })).nextCursor;
    expect(jobsCursor).toEqual(expect.any(String));
    expect(deadCursor).toEqual(expect.any(String));
    const b64 = (text: string): string => Buffer.from(text).toString('base64url');
    const forged: unknown[] = ['!!!', 'a', b64('jobs:abc'), b64('jobs:99999999999999999999'), b64('dead:2030-02-30T00:00:00.000000Z/00000000-0000-0000-0000-000000000000'), b64('timeline:1;'), 42];
    const reads: [string, (cursor: unknown) => Promise<unknown>, unknown][] = [
      ['listJobs', (cursor) => admin.listJobs({ queue: 'cursor-forged', cursor: cursor as string }), deadCursor],
      ['listDeadLetters', (cursor) => admin.listDeadLetters({ cursor: cursor as string }), jobsCursor],
      ['getJobTimeline', (cursor) => admin.getJobTimeline(deadId, { cursor: cursor as string }), deadCursor],
      ['listHumanWaits', (cursor) => admin.listHumanWaits({ cursor: cursor as string }), jobsCursor],
      ['listJobs of a parent', (cursor) => admin.listJobs({ parentId: deadId, cursor: cursor as string }), jobsCursor],
    ];
    for (const [listing, read, foreign] of reads) {
      for (const cursor of [foreign, ...forged]) {
        const refused = await read(cursor).then(
          () => 'accepted',
          (error: unknown) => (error instanceof InvalidCursorError && error.field === 'cursor' ? 'refused' : String(error)),
        );
        expect([listing, cursor, refused]).toEqual([listing, cursor, 'refused']);
      }
    }
    // Straight to SQL: the same refusal, with the SQLSTATE every SDK maps.
    await expect(db.pool.query('SELECT * FROM workhorse.list_jobs_v3(p_cursor => $1)', [deadCursor])).rejects.toMatchObject({ code: 'P1001', column: 'cursor' });
  });

  it('the database encodes cursors as the SDKs did (base64url of kind:position), so either pages on', async () => {
    const { rows } = await db.pool.query<{ c: string }>("SELECT workhorse.make_cursor('jobs', '12345678901') AS c");
    expect(rows[0].c).toBe(Buffer.from('jobs:12345678901').toString('base64url'));
  });
});
