/**
 * nestjs-workhorse/terminus: a Terminus endpoint answers 200 with the queue's health while it is
 * below the `downAt` level, and 503 with the reasons at it.
 */
import { Controller, Get, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { Queue } from '../../lib/core';
import { WorkhorseModule } from '../../lib/nest';
import { WorkhorseHealthIndicator } from '../../lib/terminus';
import { quietNestLogs } from './support';
import { useTestDatabase } from '../support/test-database';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly workhorse: WorkhorseHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.workhorse.isHealthy('queue')]);
  }

  @Get('strict')
  @HealthCheck()
  strict() {
    return this.health.check([() => this.workhorse.isHealthy('queue', { downAt: 'warn' })]);
  }

  // docs/operations.md: "no workers at all" fails at the first ready job.
  @Get('ready')
  @HealthCheck()
  ready() {
    return this.health.check([() => this.workhorse.isHealthy('queue', { thresholds: { readyWithoutWorkers: { critical: 1 } } })]);
  }
}

const { db } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: () => app?.close(),
});
let app: INestApplication;
let url: string;

beforeAll(async () => {
  quietNestLogs();
  const moduleRef = await Test.createTestingModule({
    imports: [TerminusModule.forRoot({ logger: false }), WorkhorseModule.forRoot({ connectionString: db.url, worker: false })],
    controllers: [HealthController],
    providers: [WorkhorseHealthIndicator],
  }).compile();
  app = moduleRef.createNestApplication({ logger: false });
  await app.listen(0, '127.0.0.1');
  url = await app.getUrl();
});

it('is up (200) while the queue is ok or only warns, and down (503) with the reasons at the downAt level', async () => {
  const ok = await fetch(`${url}/health`);
  expect(ok.status).toBe(200);
  expect((await fetch(`${url}/health/ready`)).status).toBe(200);
  expect(await ok.json()).toMatchObject({ status: 'ok', info: { queue: { status: 'up', level: 'ok', reasons: [] } } });

  // A ready job and no worker registered: warn.
  await new Queue(db.pool).enqueue('t', {}, { queue: 'terminus' });
  const warn = await fetch(`${url}/health`);
  expect(warn.status).toBe(200);
  expect(await warn.json()).toMatchObject({ info: { queue: { status: 'up', level: 'warn' } } });

  const ready = await fetch(`${url}/health/ready`);
  expect(ready.status).toBe(503);
  expect(await ready.json()).toMatchObject({
    error: { queue: { status: 'down', level: 'critical', reasons: [{ code: 'ready_without_workers', level: 'critical', value: 1 }] } },
  });

  const strict = await fetch(`${url}/health/strict`);
  expect(strict.status).toBe(503);
  expect(await strict.json()).toMatchObject({
    status: 'error',
    error: { queue: { status: 'down', level: 'warn', reasons: [{ code: 'ready_without_workers', level: 'warn' }] } },
  });
});
