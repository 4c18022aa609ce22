/**
 * The transaction host and `@Transactional()` on providers: commit, rollback, nested calls
 * joining one transaction, the pool outside a transaction, an explicit client winning, lazy
 * connections that are always released, and the Nest `Queue` / `Admin` defaults (client and
 * the handler's queue).
 */
import { BadRequestException, Injectable } from '@nestjs/common';
import type { TestingModule } from '@nestjs/testing';
import {
  Admin,
  JobHandler,
  Pool,
  Queue,
  Transactional,
  WorkhorseConfigurationError,
  WorkhorseModule,
  WorkhorseTransactionError,
  WorkhorseTransactionHost,
  WorkhorseWorker,
  type Queryable,
} from 'nestjs-workhorse';
import { WorkhorseAdmin } from '../../lib/nest/workhorse-admin.provider';
import { WorkhorseQueue } from '../../lib/nest/workhorse-queue.provider';
import { stateOf } from '../support/job-state';
import { waitFor } from '../support/wait';
import { countJobs, quietNestLogs, startModule } from './support';
import { useTestDatabase } from '../support/test-database';

const txidSql = 'SELECT txid_current()::text AS id';

@Injectable()
class LedgerService {
  constructor(private readonly tx: WorkhorseTransactionHost) {}

  @Transactional()
  async record(id: string): Promise<string> {
    await this.tx.query('INSERT INTO accounts (id) VALUES ($1)', [id]);
    return (await this.tx.query<{ id: string }>(txidSql)).rows[0].id;
  }
}

@Injectable()
class AccountService {
  constructor(
    readonly tx: WorkhorseTransactionHost,
    readonly queue: Queue,
    readonly admin: Admin,
    private readonly ledger: LedgerService,
  ) {}

  @Transactional()
  async open(id: string, error?: Error): Promise<string> {
    await this.tx.query('INSERT INTO accounts (id) VALUES ($1)', [id]);
    const jobId = await this.queue.enqueue('account.welcome', { id });
    if (error) throw error;
    return jobId;
  }

  @Transactional()
  async openPair(a: string, b: string, fail: boolean): Promise<{ outer: string; inner: string }> {
    const outer = (await this.tx.query<{ id: string }>(txidSql)).rows[0].id;
    await this.tx.query('INSERT INTO accounts (id) VALUES ($1)', [a]);
    const inner = await this.ledger.record(b);
    if (fail) throw new Error('pair failed after the inner call returned');
    return { outer, inner };
  }

  @Transactional()
  async openWithExplicitClient(id: string, client: Queryable): Promise<never> {
    await this.tx.query('INSERT INTO accounts (id) VALUES ($1)', [id]);
    const jobId = await this.queue.enqueue('account.audit', { id }, {}, client);
    throw Object.assign(new Error('roll back the account, not the audit job'), { jobId });
  }

  /** A job and one that depends on it, in the request's transaction; `fail` rolls both back. */
  @Transactional()
  async openWithFollowUp(id: string, fail: boolean): Promise<{ first: string; followUp: string; waitsOn: string[] | undefined }> {
    await this.tx.query('INSERT INTO accounts (id) VALUES ($1)', [id]);
    const first = await this.queue.enqueue('account.welcome', { id });
    const followUp = await this.queue.enqueue('account.audit', { id }, { dependsOn: [first] });
    const waitsOn = (await this.admin.getJob(followUp))?.waitingOn.map((link) => link.id);
    if (fail) throw new Error('roll back the pair');
    return { first, followUp, waitsOn };
  }

  @Transactional()
  async seesOwnJob(id: string): Promise<{ inside: string | undefined; outside: string | null }> {
    const jobId = await this.queue.enqueue('account.welcome', { id });
    const inside = (await this.admin.getJob(jobId))?.state;
    const outside = await this.admin.getJob(jobId, this.tx.pool);
    return { inside, outside: outside?.state ?? null };
  }
}

@Injectable()
class MailHandlers {
  @JobHandler('mail.send', { queue: 'mail' })
  send(): void {}
}

/** Records the transaction it sees, and enqueues a follow-up through the Nest Queue. */
@Injectable()
class ReferralHandlers {
  readonly seen: (Queryable | undefined)[] = [];

  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
  ) {}

  @JobHandler('account.referral', { queue: 'referrals' })
  async refer(payload: { id: string }): Promise<void> {
    this.seen.push(this.tx.client);
    await this.queue.enqueue('account.thanks', payload, { queue: 'thanks' });
  }
}

const { db } = useTestDatabase({ beforeDrop: () => moduleRef?.close() });
let moduleRef: TestingModule;
let service: AccountService;
let host: WorkhorseTransactionHost;

async function accountExists(id: string): Promise<boolean> {
  const { rows } = await db.pool.query('SELECT 1 FROM accounts WHERE id = $1', [id]);
  return rows.length === 1;
}

beforeAll(async () => {
  quietNestLogs();
  await db.pool.query('CREATE TABLE accounts (id text PRIMARY KEY)');
  moduleRef = await startModule({
    imports: [WorkhorseModule.forRoot({ connectionString: db.url })],
    providers: [AccountService, LedgerService, MailHandlers, ReferralHandlers],
  });
  service = moduleRef.get(AccountService);
  host = moduleRef.get(WorkhorseTransactionHost);
});

describe('@Transactional() on a provider method', () => {
  it('commits the row and the job when the method succeeds', async () => {
    const jobId = await service.open('a-1');
    expect(await accountExists('a-1')).toBe(true);
    expect(await stateOf(db.pool, jobId)).toBe('ready');
  });

  it('rolls both back and rethrows when the method throws', async () => {
    const error = new Error('boom');
    await expect(service.open('a-2', error)).rejects.toBe(error);
    expect(await accountExists('a-2')).toBe(false);
    expect(await countJobs(db.pool, 'account.welcome')).toBe(1); // only a-1's
  });

  it('rolls back on an HttpException too', async () => {
    await expect(service.open('a-3', new BadRequestException('bad'))).rejects.toBeInstanceOf(BadRequestException);
    expect(await accountExists('a-3')).toBe(false);
  });

  it('joins the outer transaction in nested calls, so the outer failure undoes the inner writes', async () => {
    const { outer, inner } = await service.openPair('n-1', 'n-2', false);
    expect(inner).toBe(outer);
    expect(await accountExists('n-1')).toBe(true);
    expect(await accountExists('n-2')).toBe(true);

    await expect(service.openPair('n-3', 'n-4', true)).rejects.toThrow('pair failed');
    expect(await accountExists('n-3')).toBe(false);
    expect(await accountExists('n-4')).toBe(false);
  });

  it('lets an explicit client win over the current transaction', async () => {
    const failure = await service.openWithExplicitClient('e-1', db.pool).catch((e: unknown) => e as Error & { jobId: string });
    expect(failure.message).toContain('roll back the account');
    expect(await accountExists('e-1')).toBe(false);
    expect(await stateOf(db.pool, failure.jobId)).toBe('ready');
  });

  it('enqueues a job that depends on one enqueued earlier in the same transaction (dependsOn), and rolls both back together', async () => {
    const { first, followUp, waitsOn } = await service.openWithFollowUp('d-1', false);
    expect(waitsOn).toEqual([first]);
    expect(await stateOf(db.pool, followUp)).toBe('blocked');
    const before = await countJobs(db.pool, 'account.audit');
    await expect(service.openWithFollowUp('d-2', true)).rejects.toThrow('roll back the pair');
    expect(await countJobs(db.pool, 'account.audit')).toBe(before);
  });

  it('makes Admin calls join the transaction, so they see its uncommitted job', async () => {
    expect(await service.seesOwnJob('s-1')).toEqual({ inside: 'ready', outside: null });
  });

  it('refuses, with a clear error, on an instance WorkhorseModule did not set up', async () => {
    const stray = new AccountService(host, moduleRef.get(Queue), moduleRef.get(Admin), moduleRef.get(LedgerService));
    const attempt = stray.open('stray');
    await expect(attempt).rejects.toBeInstanceOf(WorkhorseConfigurationError);
    await expect(attempt).rejects.toThrow('@Transactional() AccountService.open found no transaction host');
    expect(await accountExists('stray')).toBe(false);
  });
});

describe('WorkhorseTransactionHost', () => {
  it('uses the pool outside a transaction: each statement commits on its own', async () => {
    expect(host.isActive).toBe(false);
    expect(host.client).toBeUndefined();
    expect(await host.getPoolClient()).toBeUndefined();
    const first = (await host.query<{ id: string }>(txidSql)).rows[0].id;
    const second = (await host.query<{ id: string }>(txidSql)).rows[0].id;
    expect(first).not.toBe(second);
    const jobId = await moduleRef.get(Queue).enqueue('account.welcome', { id: 'outside' });
    expect(await stateOf(db.pool, jobId)).toBe('ready');
  });

  it('gives the same transaction through query, client and getPoolClient', async () => {
    const ids = await host.run(async () => {
      expect(host.isActive).toBe(true);
      const viaQuery = (await host.query<{ id: string }>(txidSql)).rows[0].id;
      const viaClient = ((await host.client?.query(txidSql))?.rows[0] as { id: string }).id;
      const poolClient = await host.getPoolClient();
      const viaPoolClient = (await poolClient?.query<{ id: string }>(txidSql))?.rows[0].id;
      return [viaQuery, viaClient, viaPoolClient];
    });
    expect(new Set(ids).size).toBe(1);
  });

  it('takes no connection until the first query, and always gives it back', async () => {
    const pool = new Pool({ connectionString: db.url, max: 1 });
    try {
      const own = new WorkhorseTransactionHost(pool);
      const held = await pool.connect();
      // The pool's only connection is taken: a transaction that needed one would wait forever.
      await expect(own.run(() => 'no query')).resolves.toBe('no query');
      held.release();
      for (let i = 0; i < 5; i++) {
        await own.run(() => own.query('SELECT 1'));
        await expect(own.run(async () => {
          await own.query('SELECT 1');
          throw new Error('roll back');
        })).rejects.toThrow('roll back');
      }
      expect(pool.idleCount).toBe(1);
      expect(pool.waitingCount).toBe(0);
    } finally {
      await pool.end();
    }
  });

  it('reports a transaction that PostgreSQL rolled back instead of committing', async () => {
    const attempt = host.run(async () => {
      await host.query('INSERT INTO accounts (id) VALUES ($1)', ['r-1']);
      await host.query('SELECT 1/0').catch(() => undefined);
      return 'looks fine';
    });
    await expect(attempt).rejects.toBeInstanceOf(WorkhorseTransactionError);
    await expect(attempt).rejects.toThrow('rolled back instead of committed');
    expect(await accountExists('r-1')).toBe(false);
  });

  it('survives a connection that breaks mid-transaction: the transaction fails, the process goes on', async () => {
    const pool = new Pool({ connectionString: db.url, max: 1 });
    try {
      const own = new WorkhorseTransactionHost(pool);
      const attempt = own.run(async () => {
        const { rows } = await own.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
        await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
        // Let the broken connection report while it sits idle (checked out, no query running).
        await waitFor(async () => {
          const left = await db.pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [rows[0].pid]);
          return left.rows.length === 0;
        }, 10_000, 'the backend to end');
        await new Promise((resolve) => setTimeout(resolve, 50));
        await own.query('SELECT 1');
      });
      await expect(attempt).rejects.toThrow();
      // The broken connection was destroyed, not returned: the pool's one slot works again.
      await expect(own.run(() => own.query('SELECT 1 AS one'))).resolves.toHaveProperty('rows', [{ one: 1 }]);
    } finally {
      await pool.end();
    }
  });

  it('refuses queries through a transaction that has ended', async () => {
    let leaked: Queryable | undefined;
    await host.run(async () => {
      leaked = host.client;
      await leaked?.query('SELECT 1');
    });
    await expect(leaked?.query('SELECT 1')).rejects.toThrow('already ended');
  });

  it('runs a job handler outside the transaction of whoever started the pass: its writes commit on their own', async () => {
    const handlers = moduleRef.get(ReferralHandlers);
    const jobId = await moduleRef.get(Queue).enqueue('account.referral', { id: 'ref-1' }, { queue: 'referrals' });
    const rollback = new Error('roll back the caller');
    await expect(
      host.run(async () => {
        await host.query('INSERT INTO accounts (id) VALUES ($1)', ['ref-1']);
        expect(await moduleRef.get(WorkhorseWorker).runOnce({ queues: ['referrals'] })).toBe(1);
        throw rollback;
      }),
    ).rejects.toBe(rollback);
    expect(await accountExists('ref-1')).toBe(false);
    expect(handlers.seen).toEqual([undefined]);
    expect(await stateOf(db.pool, jobId)).toBe('succeeded');
    expect(await countJobs(db.pool, 'account.thanks')).toBe(1);
  });

  it('runWith makes a client the caller manages the current transaction, without ending it', async () => {
    const client = await db.pool.connect();
    try {
      await client.query('BEGIN');
      const jobId = await host.runWith(client, () => moduleRef.get(Queue).enqueue('account.welcome', { id: 'with' }));
      expect(await stateOf(db.pool, jobId)).toBeNull(); // not committed: the caller owns the transaction
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});

describe('the Nest Queue and Admin', () => {
  it('are the transaction-aware subclasses', () => {
    expect(moduleRef.get(Queue)).toBeInstanceOf(WorkhorseQueue);
    expect(moduleRef.get(Admin)).toBeInstanceOf(WorkhorseAdmin);
  });

  it('make every Admin call join the transaction', async () => {
    const admin = moduleRef.get(Admin);
    await host.run(async () => {
      const jobId = await moduleRef.get(Queue).enqueue('account.welcome', { id: 'admin-calls' }, { queue: 'admin-calls' });
      const page = await admin.listJobs({ queue: 'admin-calls' });
      expect(page.items.map((job) => job.id)).toEqual([jobId]);
      expect((await admin.getJobTimeline(jobId)).items.map((entry) => entry.kind)).toContain('enqueued');
      expect((await admin.pauseQueue('admin-calls')).paused).toBe(true);
      expect((await admin.listQueues()).find((q) => q.queue === 'admin-calls')?.paused).toBe(true);
      expect(await admin.cancel(jobId)).toBe('canceled');
      throw new Error('roll all of it back');
    }).catch(() => undefined);
    const queues = await new Admin(db.pool).listQueues();
    expect(queues.find((q) => q.queue === 'admin-calls')).toBeUndefined();
  });

  it('puts a job type into the queue its handler declares unless the caller names one', async () => {
    const queue = moduleRef.get(Queue);
    const admin = moduleRef.get(Admin);
    const routed = await queue.enqueue('mail.send', {});
    const explicit = await queue.enqueue('mail.send', {}, { queue: 'urgent' });
    const unrouted = await queue.enqueue('account.welcome', { id: 'q' });
    const [many] = await queue.enqueueMany([{ type: 'mail.send', payload: {} }]);
    expect((await admin.getJob(routed))?.queue).toBe('mail');
    expect((await admin.getJob(explicit))?.queue).toBe('urgent');
    expect((await admin.getJob(unrouted))?.queue).toBe('default');
    expect((await admin.getJob(many))?.queue).toBe('mail');
  });

  it('enqueueDeduped takes the handler queue and the current transaction too: a rollback frees the key', async () => {
    const queue = moduleRef.get(Queue);
    const admin = moduleRef.get(Admin);
    const dedupe = { key: 'nest-digest', windowMs: 60000, mode: 'throttle' } as const;
    await expect(
      host.run(async () => {
        await queue.enqueueDeduped('mail.send', { n: 0 }, { dedupe });
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    const first = await queue.enqueueDeduped('mail.send', { n: 1 }, { dedupe });
    const second = await queue.enqueueDeduped('mail.send', { n: 2 }, { dedupe });
    expect(first.outcome).toBe('created');
    expect(second).toEqual({ jobId: first.jobId, outcome: 'throttled' });
    expect(await admin.getJob(first.jobId)).toMatchObject({ queue: 'mail', payload: { n: 1 } });
  });
});
