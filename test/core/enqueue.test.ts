import { randomUUID } from 'node:crypto';
import { Client, type Notification, type PoolClient } from 'pg';
import { WorkhorseValidationError } from '../../lib/core';
import type { TestDatabase } from '../support/db';
import { useTestDatabase } from '../support/test-database';
import { waitFor } from '../support/wait';

const TABLES = ['job', 'job_runtime', 'job_query', 'job_event'] as const;
type RowCounts = Record<(typeof TABLES)[number], number>;

async function countRows(db: TestDatabase): Promise<RowCounts> {
  const { rows } = await db.pool.query<RowCounts>(
    `SELECT ${TABLES.map((t) => `(SELECT count(*)::int FROM workhorse.${t}) AS ${t}`).join(', ')}`,
  );
  return rows[0];
}

/** Rows that mention these job ids, per table (0 everywhere means "nothing left behind"). */
async function rowsFor(db: TestDatabase, ids: string[]): Promise<RowCounts> {
  const { rows } = await db.pool.query<RowCounts>(
    `SELECT (SELECT count(*)::int FROM workhorse.job WHERE id = ANY($1::uuid[])) AS job,
            (SELECT count(*)::int FROM workhorse.job_runtime WHERE job_id = ANY($1::uuid[])) AS job_runtime,
            (SELECT count(*)::int FROM workhorse.job_query WHERE job_id = ANY($1::uuid[])) AS job_query,
            (SELECT count(*)::int FROM workhorse.job_event WHERE job_id = ANY($1::uuid[])) AS job_event`,
    [ids],
  );
  return rows[0];
}

const NOTHING: RowCounts = { job: 0, job_runtime: 0, job_query: 0, job_event: 0 };

async function inTransaction<T>(db: TestDatabase, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK');
    throw error;
  } finally {
    client.release();
  }
}

describe('enqueue', () => {
  const { db, queue, admin } = useTestDatabase();

  beforeAll(async () => {
    await db.pool.query('CREATE TABLE public.orders (id text PRIMARY KEY)');
  });

  describe('transactional enqueue', () => {
    it('makes the job visible to another connection only after COMMIT', async () => {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        const id = await queue.enqueue('order.fulfill', { orderId: 'o-visible' }, {}, client);

        // Inside the transaction the job is there...
        const inside = await admin.getJob(id, client);
        expect(inside?.state).toBe('ready');
        // ...but the pool runs on other connections, which must not see uncommitted work.
        expect(await admin.getJob(id)).toBeNull();
        expect(await rowsFor(db, [id])).toEqual(NOTHING);

        await client.query('COMMIT');
        const after = await admin.getJob(id);
        expect(after).toMatchObject({ id, state: 'ready', type: 'order.fulfill', queue: 'default', payload: { orderId: 'o-visible' } });
      } finally {
        client.release();
      }
    });

    it('rolls the job back together with the business row', async () => {
      const client = await db.pool.connect();
      let id = '';
      try {
        await client.query('BEGIN');
        await client.query('INSERT INTO public.orders (id) VALUES ($1)', ['o-rollback']);
        id = await queue.enqueue('order.fulfill', { orderId: 'o-rollback' }, {}, client);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      const orders = await db.pool.query('SELECT 1 FROM public.orders WHERE id = $1', ['o-rollback']);
      expect(orders.rowCount).toBe(0);
      expect(await admin.getJob(id)).toBeNull();
      expect(await rowsFor(db, [id])).toEqual(NOTHING);
    });

    it('commits the job together with the business row', async () => {
      const id = await inTransaction(db, async (client) => {
        await client.query('INSERT INTO public.orders (id) VALUES ($1)', ['o-commit']);
        return queue.enqueue('order.fulfill', { orderId: 'o-commit' }, {}, client);
      });
      const orders = await db.pool.query('SELECT 1 FROM public.orders WHERE id = $1', ['o-commit']);
      expect(orders.rowCount).toBe(1);
      expect((await admin.getJob(id))?.state).toBe('ready');
    });

    it('leaves nothing behind when a later statement of the transaction fails', async () => {
      const client = await db.pool.connect();
      let id = '';
      try {
        await client.query('BEGIN');
        await client.query('INSERT INTO public.orders (id) VALUES ($1)', ['o-later-error']);
        id = await queue.enqueue('order.fulfill', { orderId: 'o-later-error' }, {}, client);
        await expect(client.query('SELECT 1 / 0')).rejects.toMatchObject({ code: '22012' });
        // An aborted transaction cannot commit: PostgreSQL turns COMMIT into ROLLBACK.
        const end = await client.query('COMMIT');
        expect(end.command).toBe('ROLLBACK');
      } finally {
        client.release();
      }
      expect(id).toMatch(/^[0-9a-f-]{36}$/);
      const orders = await db.pool.query('SELECT 1 FROM public.orders WHERE id = $1', ['o-later-error']);
      expect(orders.rowCount).toBe(0);
      expect(await rowsFor(db, [id])).toEqual(NOTHING);
    });

    it('without a client runs on the pool and commits on its own', async () => {
      const id = await queue.enqueue('email.send', { to: 'a@example.com' });
      expect((await admin.getJob(id))?.state).toBe('ready');
    });
  });

  describe('enqueueMany', () => {
    it('gives time-ordered UUID version 7 ids: a later enqueue sorts after an earlier one', async () => {
      const first = await queue.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ type: 'ids.order', payload: { i } })));
      await new Promise((resolve) => setTimeout(resolve, 5));
      const second = await queue.enqueue('ids.order', { i: 5 });
      for (const id of [...first, second]) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      // The first 48 bits are the enqueue time in Unix milliseconds.
      const ms = (id: string) => parseInt(id.replace(/-/g, '').slice(0, 12), 16);
      expect(Math.abs(ms(second) - Date.now())).toBeLessThan(60_000);
      for (const id of first) expect(ms(id)).toBeLessThan(ms(second));
      // Within a batch the ids ascend in input order.
      expect([...first].sort()).toEqual(first);
    });

    it('numbers a batch from one block: creation order and event ids consecutive in input order, later batches after', async () => {
      const drawn = async () => BigInt((await db.pool.query<{ v: string }>('SELECT last_value AS v FROM workhorse.job_seq')).rows[0].v);
      await queue.enqueue('block.job', null); // (so the sequence has been drawn from)
      const before = await drawn();
      const first = await queue.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ type: 'block.job', payload: { i } })));
      // One draw for the whole batch: the sequence moved by one block, not by one value per job.
      expect((await drawn()) - before).toBe(1000n);
      const second = await queue.enqueueMany([{ type: 'block.job', payload: { i: 5 } }]);
      const { rows } = await db.pool.query<{ job_id: string; seq: string; event_id: string }>(
        `SELECT q.job_id, q.seq, e.id AS event_id FROM workhorse.job_query q
           JOIN workhorse.job_event e ON e.job_id = q.job_id AND e.kind = 'enqueued'
          WHERE q.job_id = ANY ($1::uuid[])`,
        [[...first, ...second]],
      );
      const of = (id: string) => rows.find((r) => r.job_id === id) as { seq: string; event_id: string };
      const seqs = first.map((id) => BigInt(of(id).seq));
      const events = first.map((id) => BigInt(of(id).event_id));
      expect(seqs).toEqual(seqs.map((_, k) => seqs[0] + BigInt(k)));
      expect(events).toEqual(events.map((_, k) => events[0] + BigInt(k)));
      expect(BigInt(of(second[0]).seq)).toBeGreaterThan(seqs[4]);
      expect(BigInt(of(second[0]).event_id)).toBeGreaterThan(events[4]);
      // The runtime row carries the same creation order (FIFO among ready jobs).
      const runtime = await db.pool.query<{ job_id: string; seq: string }>('SELECT job_id, seq FROM workhorse.job_runtime WHERE job_id = ANY ($1::uuid[])', [first]);
      expect(first.map((id) => runtime.rows.find((r) => r.job_id === id)?.seq)).toEqual(first.map((id) => of(id).seq));
    });

    it('gives distinct ids across concurrent full batches', async () => {
      const batches = await Promise.all(
        Array.from({ length: 4 }, (_, b) =>
          queue.enqueueMany(Array.from({ length: 1000 }, (_, i) => ({ type: 'ids.distinct', payload: { b, i } }))),
        ),
      );
      const ids = batches.flat();
      expect(new Set(ids).size).toBe(4000);
      const { rows } = await db.pool.query<{ n: string }>(
        "SELECT count(*) AS n FROM workhorse.job WHERE type = 'ids.distinct'",
      );
      expect(rows[0].n).toBe('4000');
    });

    it('returns the ids in input order', async () => {
      const requests = Array.from({ length: 20 }, (_, i) => ({
        type: `batch.order.${i % 3}`,
        payload: { i },
        queue: i % 2 === 0 ? 'even' : 'odd',
        priority: 20 - i,
      }));
      const ids = await queue.enqueueMany(requests);
      expect(ids).toHaveLength(20);
      expect(new Set(ids).size).toBe(20);
      const { rows } = await db.pool.query<{ id: string; type: string; queue: string; payload: { i: number }; priority: number }>(
        'SELECT id, type, queue, payload, priority FROM workhorse.job WHERE id = ANY($1::uuid[])',
        [ids],
      );
      const byId = new Map(rows.map((row) => [row.id, row]));
      ids.forEach((id, i) => {
        expect(byId.get(id)).toMatchObject({ type: requests[i].type, queue: requests[i].queue, payload: { i }, priority: 20 - i });
      });
    });

    it('returns [] for an empty batch and writes nothing', async () => {
      const before = await countRows(db);
      await expect(queue.enqueueMany([])).resolves.toEqual([]);
      expect(await countRows(db)).toEqual(before);
    });

    it('is all or nothing: one bad request in the middle writes no row at all', async () => {
      const before = await countRows(db);
      const requests = [
        { type: 'batch.ok', payload: { n: 1 } },
        { type: 'batch.ok', payload: { n: 2 } },
        { type: 'batch.ok', payload: { n: 3 }, priority: 101 },
        { type: 'batch.ok', payload: { n: 4 } },
      ];
      const error = await queue.enqueueMany(requests).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkhorseValidationError);
      expect((error as WorkhorseValidationError).field).toBe('requests[2].priority');
      expect(await countRows(db)).toEqual(before);
    });

    it('is all or nothing in the SQL function too, when the client-side checks are bypassed', async () => {
      const before = await countRows(db);
      const requests = [
        { type: 'batch.ok', payload: { n: 1 } },
        { type: 'batch.ok', payload: { n: 2 }, maxAttempts: 0 },
        { type: 'batch.ok', payload: { n: 3 } },
      ];
      await expect(
        db.pool.query('SELECT * FROM workhorse.enqueue_many_v1($1::jsonb)', [JSON.stringify(requests)]),
      ).rejects.toMatchObject({ code: 'P1001', column: 'requests[1].maxAttempts' });
      expect(await countRows(db)).toEqual(before);
    });

    it('rolls back a whole batch with the transaction', async () => {
      const client = await db.pool.connect();
      let ids: string[] = [];
      try {
        await client.query('BEGIN');
        ids = await queue.enqueueMany(
          Array.from({ length: 5 }, (_, i) => ({ type: 'batch.rollback', payload: { i } })),
          client,
        );
        expect(await rowsFor(db, ids)).toEqual(NOTHING);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      expect(ids).toHaveLength(5);
      expect(await rowsFor(db, ids)).toEqual(NOTHING);
    });
  });

  describe('rows written', () => {
    it('writes job, job_runtime, job_query and exactly one enqueued event per job', async () => {
      const runAt = new Date(Date.now() + 3_600_000);
      const [readyId, scheduledId] = await queue.enqueueMany([
        {
          type: 'rows.ready',
          payload: { a: [1, 'two', null] },
          queue: 'rows',
          priority: 7,
          maxAttempts: 3,
          retryPolicy: { kind: 'fixed', delayMs: 250 },
          tags: ['x', 'y'],
        },
        { type: 'rows.scheduled', payload: null, runAt },
      ]);

      const job = await db.pool.query(
        'SELECT id, queue, type, payload, priority, max_attempts, retry_policy, tags, run_at, created_at FROM workhorse.job WHERE id = ANY($1::uuid[]) ORDER BY type',
        [[readyId, scheduledId]],
      );
      expect(job.rows).toEqual([
        expect.objectContaining({
          id: readyId,
          queue: 'rows',
          type: 'rows.ready',
          payload: { a: [1, 'two', null] },
          priority: 7,
          max_attempts: 3,
          retry_policy: { kind: 'fixed', delayMs: 250 },
          tags: ['x', 'y'],
        }),
        expect.objectContaining({
          id: scheduledId,
          queue: 'default',
          type: 'rows.scheduled',
          payload: null,
          priority: 0,
          max_attempts: 25,
          // No policy given: none is stored, so the handler's (or the default) applies at retry time.
          retry_policy: null,
          tags: [],
          run_at: runAt,
        }),
      ]);

      const runtime = await db.pool.query(
        `SELECT job_id, queue, priority, state, run_at, current_attempt, max_attempts, fence_token, worker_id,
                lease_expires_at, heartbeat_at, attempt_started_at, cancel_requested_at, last_error
         FROM workhorse.job_runtime WHERE job_id = ANY($1::uuid[]) ORDER BY state`,
        [[readyId, scheduledId]],
      );
      const unowned = {
        current_attempt: 0,
        fence_token: null,
        worker_id: null,
        lease_expires_at: null,
        heartbeat_at: null,
        attempt_started_at: null,
        cancel_requested_at: null,
        last_error: null,
      };
      expect(runtime.rows).toEqual([
        { job_id: readyId, queue: 'rows', priority: 7, state: 'ready', run_at: expect.any(Date), max_attempts: 3, ...unowned },
        { job_id: scheduledId, queue: 'default', priority: 0, state: 'scheduled', run_at: runAt, max_attempts: 25, ...unowned },
      ]);

      const query = await db.pool.query(
        'SELECT job_id, queue, type FROM workhorse.job_query WHERE job_id = ANY($1::uuid[]) ORDER BY seq',
        [[readyId, scheduledId]],
      );
      expect(query.rows).toEqual([
        { job_id: readyId, queue: 'rows', type: 'rows.ready' },
        { job_id: scheduledId, queue: 'default', type: 'rows.scheduled' },
      ]);

      // A job ready at once stores no event data (get_timeline_v1 shows {state: 'ready', runAt: at});
      // a scheduled one stores its state and runAt.
      const events = await db.pool.query<{ job_id: string; kind: string; attempt: number; data: { state: string; runAt: string } | null }>(
        'SELECT job_id, kind, attempt, data FROM workhorse.job_event WHERE job_id = ANY($1::uuid[]) ORDER BY id',
        [[readyId, scheduledId]],
      );
      expect(events.rows).toEqual([
        { job_id: readyId, kind: 'enqueued', attempt: 0, data: null },
        { job_id: scheduledId, kind: 'enqueued', attempt: 0, data: { state: 'scheduled', runAt: expect.any(String) } },
      ]);
      expect(new Date(events.rows[1].data?.runAt ?? 0)).toEqual(runAt);

      expect(await db.pool.query('SELECT 1 FROM workhorse.job_outcome WHERE job_id = ANY($1::uuid[])', [[readyId, scheduledId]]))
        .toMatchObject({ rowCount: 0 });
    });

    it('a future runAt is scheduled; now or a past runAt is ready', async () => {
      const future = await queue.enqueue('state.future', {}, { runAt: new Date(Date.now() + 60_000) });
      const past = await queue.enqueue('state.past', {}, { runAt: new Date(Date.now() - 60_000) });
      const none = await queue.enqueue('state.none', {});
      expect((await admin.getJob(future))?.state).toBe('scheduled');
      expect((await admin.getJob(past))?.state).toBe('ready');
      expect((await admin.getJob(none))?.state).toBe('ready');
      // A past runAt cannot put a job ahead of time: it runs now, not in the past.
      const pastJob = await admin.getJob(past);
      expect(pastJob!.runAt.getTime()).toBeGreaterThanOrEqual(pastJob!.createdAt.getTime());
    });
  });

  describe('pg_notify on workhorse_jobs', () => {
    let listener: Client;
    let received: Notification[];

    beforeAll(async () => {
      listener = new Client({ connectionString: db.url });
      listener.on('error', () => undefined);
      received = [];
      listener.on('notification', (message) => {
        if (message.channel === 'workhorse_jobs') received.push(message);
      });
      await listener.connect();
      await listener.query('LISTEN workhorse_jobs');
    });

    afterAll(async () => {
      await listener?.end();
    });

    beforeEach(() => {
      received.length = 0;
    });

    /**
     * Commits an enqueue into a queue of its own and waits for its notification. Notifications
     * arrive in commit order, so once the sentinel is here, anything committed before it would
     * be here too: "nothing else arrived" becomes a condition, not a sleep.
     */
    async function sentinel(): Promise<string> {
      const name = `sentinel-${randomUUID().slice(0, 8)}`;
      await queue.enqueue('sentinel', null, { queue: name });
      await waitFor(() => received.some((n) => n.payload === name), 10_000, `a notification for queue ${name}`);
      return name;
    }

    function payloads(): string[] {
      return received.map((n) => n.payload ?? '');
    }

    it('is delivered at COMMIT only, with the queue name as payload', async () => {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        await queue.enqueue('notify.commit', {}, { queue: 'notify-commit' }, client);
        const early = await sentinel();
        expect(payloads()).toEqual([early]);

        await client.query('COMMIT');
      } finally {
        client.release();
      }
      await waitFor(() => received.some((n) => n.payload === 'notify-commit'), 10_000, 'the notification at commit');
      const late = await sentinel();
      expect(payloads().filter((p) => !p.startsWith('sentinel-'))).toEqual(['notify-commit']);
      expect(payloads().at(-1)).toBe(late);
    });

    it('is never delivered after ROLLBACK', async () => {
      const client = await db.pool.connect();
      try {
        await client.query('BEGIN');
        await queue.enqueue('notify.rollback', {}, { queue: 'notify-rollback' }, client);
        await client.query('ROLLBACK');
      } finally {
        client.release();
      }
      const name = await sentinel();
      expect(payloads()).toEqual([name]);
    });

    // PostgreSQL already folds identical (channel, payload) pairs within one transaction, so this
    // guards the payload (the queue name, not a job id) and the count per queue.
    it('is sent once per queue per statement: 50 jobs over 2 queues give exactly 2 notifications', async () => {
      const ids = await queue.enqueueMany(
        Array.from({ length: 50 }, (_, i) => ({ type: 'notify.batch', payload: { i }, queue: i % 2 === 0 ? 'q-alpha' : 'q-beta' })),
      );
      expect(ids).toHaveLength(50);
      const name = await sentinel();
      const batch = payloads().filter((p) => p !== name);
      expect(batch.sort()).toEqual(['q-alpha', 'q-beta']);
    });

    it('is not sent for a queue that gained only scheduled (future) work', async () => {
      await queue.enqueue('notify.later', {}, { queue: 'notify-later', runAt: new Date(Date.now() + 3_600_000) });
      const name = await sentinel();
      expect(payloads()).toEqual([name]);
    });
  });
});
