/**
 * Transactions over real HTTP: `requestTransactions: true` gives each request one transaction
 * that the business write and the enqueued job share (commit on success, rollback on an
 * HttpException, an error response when the commit itself fails), and `@Transactional()` /
 * `@UseInterceptors(WorkhorseTransactionInterceptor)` do the same per controller method.
 */
import { ConflictException, Controller, Injectable, Param, Post, UseInterceptors, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  JobHandler,
  Queue,
  Transactional,
  WorkhorseModule,
  WorkhorseTransactionHost,
  WorkhorseTransactionInterceptor,
  type WorkhorseModuleOptions,
} from 'nestjs-workhorse';
import { waitForJobState } from 'nestjs-workhorse/testing';
import { quietNestLogs } from './support';
import { useTestDatabase } from '../support/test-database';

@Injectable()
class OrderHandlers {
  constructor(private readonly tx: WorkhorseTransactionHost) {}

  @JobHandler('order.confirm')
  async confirm(payload: { id: string }): Promise<{ confirmed: string }> {
    await this.tx.query('UPDATE orders SET confirmed = true WHERE id = $1', [payload.id]);
    return { confirmed: payload.id };
  }
}

@Controller('orders')
class OrdersController {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
  ) {}

  @Post(':id')
  async create(@Param('id') id: string): Promise<{ jobId: string }> {
    await this.tx.query('INSERT INTO orders (id) VALUES ($1)', [id]);
    return { jobId: await this.queue.enqueue('order.confirm', { id }) };
  }

  @Post(':id/conflict')
  async conflict(@Param('id') id: string): Promise<never> {
    await this.tx.query('INSERT INTO orders (id) VALUES ($1)', [id]);
    await this.queue.enqueue('order.confirm', { id });
    throw new ConflictException(`order ${id} conflicts`);
  }

  // Both statements succeed; the deferred unique constraint fails only at COMMIT.
  @Post(':id/fails-at-commit')
  async failsAtCommit(@Param('id') id: string): Promise<{ jobId: string }> {
    await this.tx.query('INSERT INTO deferred_unique (id) VALUES ($1), ($1)', [id]);
    return { jobId: await this.queue.enqueue('order.confirm', { id }) };
  }

  @Post(':id/txid')
  async txid(): Promise<{ first: string; second: string; active: boolean }> {
    const first = await this.tx.query<{ id: string }>('SELECT txid_current()::text AS id');
    const second = await this.tx.query<{ id: string }>('SELECT txid_current()::text AS id');
    return { first: first.rows[0].id, second: second.rows[0].id, active: this.tx.isActive };
  }
}

@Controller('decorated')
class DecoratedController {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
  ) {}

  // @Transactional() above the route decorator ...
  @Transactional()
  @Post('above/:id')
  async above(@Param('id') id: string): Promise<{ jobId: string }> {
    return this.write(id, false);
  }

  // ... and below it: both must keep the route and the transaction.
  @Post('below/:id')
  @Transactional()
  async below(@Param('id') id: string): Promise<{ jobId: string }> {
    return this.write(id, true);
  }

  @Post('plain/:id')
  async plain(@Param('id') id: string): Promise<never> {
    await this.tx.query('INSERT INTO orders (id) VALUES ($1)', [id]);
    await this.queue.enqueue('order.confirm', { id });
    throw new ConflictException('no transaction here, so the writes stay');
  }

  private async write(id: string, fail: boolean): Promise<{ jobId: string }> {
    await this.tx.query('INSERT INTO orders (id) VALUES ($1)', [id]);
    const jobId = await this.queue.enqueue('order.confirm', { id });
    if (fail && id.startsWith('fail')) throw new ConflictException('rolled back');
    return { jobId };
  }
}

@Controller('intercepted')
@UseInterceptors(WorkhorseTransactionInterceptor)
class InterceptedController {
  constructor(
    private readonly tx: WorkhorseTransactionHost,
    private readonly queue: Queue,
  ) {}

  @Post(':id')
  async create(@Param('id') id: string): Promise<{ jobId: string }> {
    await this.tx.query('INSERT INTO orders (id) VALUES ($1)', [id]);
    const jobId = await this.queue.enqueue('order.confirm', { id });
    if (id.startsWith('fail')) throw new ConflictException('rolled back');
    return { jobId };
  }
}

const { db } = useTestDatabase();

beforeAll(async () => {
  quietNestLogs();
  await db.pool.query('CREATE TABLE orders (id text PRIMARY KEY, confirmed boolean NOT NULL DEFAULT false)');
  await db.pool.query('CREATE TABLE deferred_unique (id text, CONSTRAINT once UNIQUE (id) DEFERRABLE INITIALLY DEFERRED)');
});

async function startApp(options: WorkhorseModuleOptions, controllers: (new (...args: never[]) => object)[]): Promise<{ app: INestApplication; url: string }> {
  const moduleRef = await Test.createTestingModule({
    imports: [WorkhorseModule.forRoot(options)],
    controllers,
    providers: [OrderHandlers],
  }).compile();
  const app = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  return { app, url: await app.getUrl() };
}

async function orderRow(id: string): Promise<{ confirmed: boolean } | undefined> {
  const { rows } = await db.pool.query<{ confirmed: boolean }>('SELECT confirmed FROM orders WHERE id = $1', [id]);
  return rows[0];
}

async function jobsFor(id: string): Promise<number> {
  const { rows } = await db.pool.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM workhorse.job WHERE type = 'order.confirm' AND payload->>'id' = $1",
    [id],
  );
  return rows[0].n;
}

describe('requestTransactions: true', () => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    ({ app, url } = await startApp(
      { connectionString: db.url, requestTransactions: true, worker: { pollMs: 50, tickMs: 50 } },
      [OrdersController],
    ));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('commits the business row and the job of a successful request, and the worker then runs the job', async () => {
    const response = await fetch(`${url}/orders/o-1`, { method: 'POST' });
    expect(response.status).toBe(201);
    const { jobId } = (await response.json()) as { jobId: string };

    // Committed before the response was written: visible from another connection right away.
    expect(await orderRow('o-1')).toBeDefined();
    const job = await waitForJobState(app, jobId, 'succeeded');
    expect(job.result).toEqual({ confirmed: 'o-1' });
    expect(await orderRow('o-1')).toEqual({ confirmed: true });
  });

  it('leaves neither the row nor the job when the request throws an HttpException after enqueueing', async () => {
    const response = await fetch(`${url}/orders/o-2/conflict`, { method: 'POST' });
    expect(response.status).toBe(409);
    expect(((await response.json()) as { message: string }).message).toBe('order o-2 conflicts');
    expect(await orderRow('o-2')).toBeUndefined();
    expect(await jobsFor('o-2')).toBe(0);
  });

  it('turns a failed commit into an error response, with nothing written', async () => {
    const response = await fetch(`${url}/orders/o-3/fails-at-commit`, { method: 'POST' });
    expect(response.status).toBe(500);
    expect(await jobsFor('o-3')).toBe(0);
    const { rows } = await db.pool.query("SELECT 1 FROM deferred_unique WHERE id = 'o-3'");
    expect(rows).toHaveLength(0);
  });

  it('runs all queries of one request in one transaction', async () => {
    const response = await fetch(`${url}/orders/x/txid`, { method: 'POST' });
    const body = (await response.json()) as { first: string; second: string; active: boolean };
    expect(body.active).toBe(true);
    expect(body.first).toBe(body.second);
  });

  it('keeps concurrent requests in their own transactions', async () => {
    const ids = Array.from({ length: 12 }, (_, i) => `c-${i}`);
    const statuses = await Promise.all(
      ids.map(async (id, i) => (await fetch(`${url}/orders/${id}${i % 2 ? '/conflict' : ''}`, { method: 'POST' })).status),
    );
    expect(statuses).toEqual(ids.map((_, i) => (i % 2 ? 409 : 201)));
    for (const [i, id] of ids.entries()) {
      expect(Boolean(await orderRow(id))).toBe(i % 2 === 0);
      expect(await jobsFor(id)).toBe(i % 2 === 0 ? 1 : 0);
    }
  });
});

describe('per-method and per-controller transactions (requestTransactions off)', () => {
  let app: INestApplication;
  let url: string;

  beforeAll(async () => {
    ({ app, url } = await startApp({ connectionString: db.url }, [DecoratedController, InterceptedController]));
  });

  afterAll(async () => {
    await app?.close();
  });

  it('@Transactional() on a controller method commits, whichever side of the route decorator it is on', async () => {
    for (const path of ['above/d-1', 'below/d-2']) {
      const response = await fetch(`${url}/decorated/${path}`, { method: 'POST' });
      expect(response.status).toBe(201);
    }
    expect(await orderRow('d-1')).toBeDefined();
    expect(await orderRow('d-2')).toBeDefined();
    expect(await jobsFor('d-1')).toBe(1);
    expect(await jobsFor('d-2')).toBe(1);
  });

  it('@Transactional() on a controller method rolls back on an HttpException', async () => {
    const response = await fetch(`${url}/decorated/below/fail-1`, { method: 'POST' });
    expect(response.status).toBe(409);
    expect(await orderRow('fail-1')).toBeUndefined();
    expect(await jobsFor('fail-1')).toBe(0);
  });

  it('without a transaction each write commits on its own', async () => {
    const response = await fetch(`${url}/decorated/plain/p-1`, { method: 'POST' });
    expect(response.status).toBe(409);
    expect(await orderRow('p-1')).toBeDefined();
    expect(await jobsFor('p-1')).toBe(1);
  });

  it('@UseInterceptors(WorkhorseTransactionInterceptor) gives that controller request transactions', async () => {
    expect((await fetch(`${url}/intercepted/i-1`, { method: 'POST' })).status).toBe(201);
    expect((await fetch(`${url}/intercepted/fail-2`, { method: 'POST' })).status).toBe(409);
    expect(await orderRow('i-1')).toBeDefined();
    expect(await jobsFor('i-1')).toBe(1);
    expect(await orderRow('fail-2')).toBeUndefined();
    expect(await jobsFor('fail-2')).toBe(0);
  });
});
