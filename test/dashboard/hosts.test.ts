/**
 * The dashboard handler served by each kind of host the package supports, over real HTTP on a
 * real database: plain Node `http`, Express (which parses the form itself), Fastify (which must
 * leave the body to the handler) and Nest through WorkhorseDashboardModule, on its Express and
 * its Fastify platform. Each serves the
 * pages and assets under its mount point, passes other requests on, and carries out a change
 * posted from its own page, recorded with the actor and the reason.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import express from 'express';
import Fastify from 'fastify';
import { NonRetryableError, Queue, Worker } from '../../lib/core';
import { WorkhorseDashboardModule } from '../../lib/dashboard';
import { createDashboardHandler, type DashboardHandler, type DashboardOptions } from '../../lib/dashboard/handler';
import { WorkhorseModule } from '../../lib/nest';
import { FormClient, linksOf } from './form-client';
import { useTestDatabase } from '../support/test-database';

const { db, admin } = useTestDatabase({ checkInvariants: false });
let deadLetter: string;

const ACTOR = 'ops:ada';

beforeAll(async () => {
  const queue = new Queue(db.pool);
  deadLetter = await queue.enqueue('mail.send', { to: 'ada@example.com' }, { queue: 'mail' });
  await queue.enqueue('report.build', { month: '2026-11' }, { queue: 'reports' });
  const worker = new Worker(queue, { queues: ['mail'] }).handle('mail.send', () => {
    throw new NonRetryableError('mailbox unavailable');
  });
  await worker.runOnce();
});

function options(extra: Partial<DashboardOptions> = {}): DashboardOptions {
  return { admin, path: '/workhorse', authorize: () => true, actor: () => ACTOR, ...extra };
}

async function listen(server: Server): Promise<{ origin: string; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://127.0.0.1:${port}`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

interface Host {
  origin: string;
  close(): Promise<void>;
}

const hosts: Record<string, () => Promise<Host>> = {
  async 'node http'() {
    const handler = createDashboardHandler(options());
    return listen(createServer((request, response) => void handler(request, response)));
  },
  async express() {
    const app = express();
    // The application parses forms itself: the handler uses request.body.
    app.use(express.urlencoded({ extended: false }));
    app.use(createDashboardHandler(options()));
    app.get('/elsewhere', (_request, response) => response.send('the application'));
    return listen(createServer(app));
  },
  async fastify() {
    const app = Fastify();
    const handler: DashboardHandler = createDashboardHandler(options());
    await app.register(async (scope) => {
      // Leave the body unread: the handler reads the form from the raw request.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', (_request, _payload, done) => done(null));
      const serve = (request: { raw: IncomingMessage }, reply: { hijack(): void; raw: ServerResponse }) => {
        reply.hijack();
        return handler(request.raw, reply.raw);
      };
      scope.all('/workhorse', serve);
      scope.all('/workhorse/*', serve);
    });
    app.get('/elsewhere', async () => 'the application');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = app.server.address() as AddressInfo;
    return { origin: `http://127.0.0.1:${port}`, close: () => app.close() };
  },
  nest: () => nestHost(),
  // The Fastify platform runs the module's middleware before Fastify parses the body.
  'nest on fastify': () => nestHost(new FastifyAdapter()),
};

async function nestHost(adapter?: FastifyAdapter): Promise<Host> {
  @Module({
    imports: [
      WorkhorseModule.forRoot({ pool: db.pool, schema: 'verify' }),
      WorkhorseDashboardModule.forRoot({ path: '/workhorse', authorize: () => true, actor: () => ACTOR }),
    ],
  })
  class AppModule {}
  const options = { logger: false as const, abortOnError: false };
  const app: INestApplication = adapter
    ? await NestFactory.create<NestFastifyApplication>(AppModule, adapter, options)
    : await NestFactory.create(AppModule, options);
  await app.listen(0, '127.0.0.1');
  return { origin: (await app.getUrl()).replace('[::1]', '127.0.0.1'), close: () => app.close() };
}

describe.each(Object.keys(hosts))('served by %s', (kind) => {
  let host: Host;
  let client: FormClient;

  beforeAll(async () => {
    host = await hosts[kind]();
    client = new FormClient(`${host.origin}/workhorse/`);
  });

  afterAll(async () => {
    await host?.close();
  });

  it('redirects the bare mount point to its slash, serves every page and its assets', async () => {
    const bare = await fetch(`${host.origin}/workhorse?window=24h`, { redirect: 'manual' });
    expect([301, 308]).toContain(bare.status);
    expect(bare.headers.get('location')).toBe('workhorse/?window=24h');

    const overview = await client.get('');
    expect(overview.status).toBe(200);
    expect(overview.response.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(overview.response.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(overview.text).toContain('<h1>Overview</h1>');
    for (const path of ['jobs', 'jobs?state=failed', `jobs/${deadLetter}`, 'dead-letters', 'queues', 'schedules', 'workers']) {
      const page = await client.get(path);
      expect([path, page.status]).toEqual([path, 200]);
    }
    const links = linksOf(overview.text);
    expect(links.filter((link) => link.startsWith('/') || /^[a-z]+:/.test(link))).toEqual(['data:,']);
    for (const asset of links.filter((link) => link.startsWith('./assets/'))) {
      const response = await fetch(new URL(asset, client.base));
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toContain('immutable');
      expect(response.headers.get('content-type')).toMatch(/^text\/(css|javascript)/);
    }
  });

  it('pauses and resumes a queue from its form, recording the actor and the reason', async () => {
    await client.get('queues');
    const paused = await client.post('queues', { do: 'pause', queue: 'reports', reason: `maintenance via ${kind}` });
    expect(paused.status).toBe(303);
    expect(paused.location).toBe('./queues?notice=paused');
    expect((await admin.listQueues()).find((q) => q.queue === 'reports')).toMatchObject({
      paused: true,
      changedBy: ACTOR,
      reason: `maintenance via ${kind}`,
    });
    const shown = await client.get('queues?notice=paused');
    expect(shown.text).toContain('The queue is paused');
    expect((await client.post('queues', { do: 'resume', queue: 'reports', reason: 'done' })).status).toBe(303);
    expect((await admin.listQueues()).find((q) => q.queue === 'reports')?.paused).toBe(false);
  });

  it('passes requests outside its path on to the application', async () => {
    const response = await fetch(`${host.origin}/elsewhere`);
    if (kind === 'node http' || kind.startsWith('nest')) expect(response.status).toBe(404);
    else expect(await response.text()).toBe('the application');
    expect((await fetch(`${host.origin}/workhorsex`)).status).toBe(404);
  });
});
