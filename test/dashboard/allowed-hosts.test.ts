/**
 * The dashboard answers only on its own host names, against DNS rebinding (a page of another
 * site whose name resolves to the dashboard's address reaches it with that name in `Host`):
 * by default the first host an authorized reader reached it on, or the `allowedHosts` option,
 * and loopback always. A request for another host is a 421 that shows no data and asks
 * `authorize` nothing. Over real HTTP against a real database; every answer for readers only
 * (the bare mount's redirect and a 405 included) asks `authorize` first, and nothing the
 * dashboard answers may be stored by a cache.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect as connectHttp2, createServer as createHttp2Server } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { createDashboardHandler, type DashboardAction, type DashboardOptions } from '../../lib/dashboard/handler';
import { FormClient } from './form-client';
import { useTestDatabase } from '../support/test-database';

const { queue, admin } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async () => {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  },
});
const servers: Server[] = [];

const SECRET_QUEUE = 'payroll-secret-queue';

beforeAll(async () => {
  await queue.enqueue('salary.pay', { iban: 'DE00 1234' }, { queue: SECRET_QUEUE });
});

interface Answer {
  status: number;
  headers: IncomingMessage['headers'];
  text: string;
}

/** A request with the given `Host` header, which `fetch` would not let a test set (nor a page). */
function get(origin: string, path: string, host: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  const { hostname, port } = new URL(origin);
  return new Promise((resolve, reject) => {
    const outgoing = httpRequest({ hostname, port, path, method, headers: { ...headers, host } }, (incoming) => {
      const chunks: Buffer[] = [];
      incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
      incoming.on('end', () => resolve({ status: incoming.statusCode ?? 0, headers: incoming.headers, text: Buffer.concat(chunks).toString('utf8') }));
      incoming.on('error', reject);
    });
    outgoing.on('error', reject);
    outgoing.end();
  });
}

/** Serves a dashboard whose `authorize` lets in requests with `x-role: operator` and records what it was asked. */
async function serve(extra: Partial<DashboardOptions> = {}): Promise<{ origin: string; port: string; asked: string[] }> {
  const asked: string[] = [];
  const authorize = (request: IncomingMessage, action: DashboardAction): boolean => {
    asked.push(`${String(request.headers.host)} ${action}`);
    return request.headers['x-role'] === 'operator';
  };
  const handler = createDashboardHandler({ admin, path: '/workhorse', authorize, ...extra });
  const server = createServer((request, response) => void handler(request, response));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = String((server.address() as AddressInfo).port);
  return { origin: `http://127.0.0.1:${port}`, port, asked };
}

const operator = { 'x-role': 'operator' };

function expectRefusedHost(answer: Answer): void {
  expect(answer.status).toBe(421);
  expect(answer.text).toContain('not served on');
  expect(answer.text).not.toContain(SECRET_QUEUE);
  expect(answer.headers['cache-control']).toBe('no-store');
}

describe('without allowedHosts', () => {
  it('keeps the first host an authorized reader reached it on, and refuses every other name unasked', async () => {
    const { origin, port, asked } = await serve();
    // A request that authorize refuses keeps nothing: a stranger cannot claim the dashboard for its name.
    expect((await get(origin, '/workhorse/queues', `stranger.example.test:${port}`)).status).toBe(403);
    const first = await get(origin, '/workhorse/queues', `ops.example.test:${port}`, operator);
    expect(first.status).toBe(200);
    expect(first.text).toContain(SECRET_QUEUE);
    // The same name in another case or with its trailing dot, on any port: the same host.
    expect((await get(origin, '/workhorse/queues', 'OPS.example.test.', operator)).status).toBe(200);

    asked.length = 0;
    // A rebinding page: its own name in Host, the request otherwise as the operator's browser would send it.
    for (const path of ['/workhorse/', '/workhorse/queues', '/workhorse/jobs', '/workhorse/assets/dashboard.css', '/workhorse']) {
      expectRefusedHost(await get(origin, path, `rebound.attacker.test:${port}`, operator));
    }
    expectRefusedHost(await get(origin, '/workhorse/queues', `stranger.example.test:${port}`, operator));
    expectRefusedHost(await get(origin, '/workhorse/queues', `attacker.test@ops.example.test:${port}`, operator));
    expect(asked).toEqual([]);

    // Loopback cannot be rebound: always served.
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`]) {
      expect((await get(origin, '/workhorse/queues', host, operator)).status).toBe(200);
    }
  });

  it('keeps one host when two first readers arrive at once under different names', async () => {
    // authorize answers both only once both have asked, so that neither is kept before the other arrives.
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let waiting = 0;
    const authorize = async (): Promise<boolean> => {
      waiting += 1;
      if (waiting === 2) release();
      await gate;
      return true;
    };
    const { origin, port } = await serve({ authorize });
    const answers = Promise.all([get(origin, '/workhorse/', `one.example.test:${port}`), get(origin, '/workhorse/', `two.example.test:${port}`)]);
    const statuses = (await answers).map((answer) => answer.status).sort();
    expect(statuses).toEqual([200, 421]);
  });

  it('keeps loopback when it is reached there first, so no other name is served afterwards', async () => {
    const { origin, port } = await serve();
    expect((await get(origin, '/workhorse/', `localhost:${port}`, operator)).status).toBe(200);
    expectRefusedHost(await get(origin, '/workhorse/', `rebound.attacker.test:${port}`, operator));
  });
});

describe('with allowedHosts', () => {
  it('serves the listed names, a leading dot covering subdomains, and loopback; nothing else is kept', async () => {
    const { origin, port } = await serve({ allowedHosts: ['ops.example.test', '.corp.test'] });
    for (const host of [`ops.example.test:${port}`, 'corp.test', `eu.ops.corp.test:${port}`, `localhost:${port}`]) {
      expect([host, (await get(origin, '/workhorse/queues', host, operator)).status]).toEqual([host, 200]);
    }
    for (const host of ['evilcorp.test', 'corp.test.attacker.test', 'sub.ops.example.test', `127.0.0.1.nip.test:${port}`]) {
      expectRefusedHost(await get(origin, '/workhorse/queues', host, operator));
    }
  });
});

describe('answers for readers only', () => {
  it('asks authorize before the bare mount point redirects and before a 405', async () => {
    const { origin, port, asked } = await serve();
    const host = `127.0.0.1:${port}`;
    expect((await get(origin, '/workhorse', host)).status).toBe(403);
    const deleted = await get(origin, '/workhorse/queues', host, {}, 'DELETE');
    expect(deleted.status).toBe(403);
    expect(deleted.headers.allow).toBeUndefined();
    expect(asked).toEqual([`${host} read`, `${host} read`]);

    const bare = await get(origin, '/workhorse?window=24h', host, operator);
    expect([bare.status, bare.headers.location, bare.headers['cache-control']]).toEqual([308, 'workhorse/?window=24h', 'no-store']);
    const refused = await get(origin, '/workhorse/queues', host, operator, 'DELETE');
    expect([refused.status, refused.headers.allow]).toEqual([405, 'GET, HEAD, POST']);
  });

  it('answers a change with a redirect no cache may keep', async () => {
    const { origin } = await serve();
    const client = new FormClient(`${origin}/workhorse/`, operator);
    await client.get('queues');
    const paused = await client.post('queues', { do: 'pause', queue: SECRET_QUEUE, reason: 'month end' });
    expect(paused.status).toBe(303);
    expect(paused.headers.get('cache-control')).toBe('no-store');
    await admin.resumeQueue(SECRET_QUEUE);
  });
});

describe('over HTTP/2', () => {
  it('reads the host from :authority, and refuses another name', async () => {
    const handler = createDashboardHandler({ admin, path: '/workhorse', authorize: () => true, allowedHosts: ['ops.example.test'] });
    // Node's HTTP/2 compatibility API hands the handler request and response objects of the same shape.
    const server = createHttp2Server((request, response) => void handler(request as unknown as IncomingMessage, response as unknown as ServerResponse));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const session = connectHttp2(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    const status = (authority: string) =>
      new Promise<number>((resolve, reject) => {
        const stream = session.request({ ':path': '/workhorse/queues', ':authority': authority });
        stream.on('response', (headers) => resolve(Number(headers[':status'])));
        stream.on('error', reject);
        stream.resume();
        stream.end();
      });
    try {
      expect(await status('ops.example.test')).toBe(200);
      expect(await status('rebound.attacker.test')).toBe(421);
    } finally {
      session.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
