/**
 * The CLI and what it cannot trust (issue 15, items 6 and 7).
 *
 * Stored data reaches the operator's terminal in the text views: error names and messages, tags,
 * actors, reasons, worker ids, stack frames. Escape sequences in them (ESC, the one-character
 * CSI U+009B, BEL, carriage return, backspace, bidirectional overrides) could retitle, clear or
 * rewrite the terminal; the text mode writes every one of them escaped as \uXXXX, and the tables
 * stay one line per row. `--json` is a document for programs: its strings are JSON strings.
 *
 * The CLI accepts every connection string node-postgres accepts: a Unix socket directory in
 * `?host=` (with an empty host), a percent-encoded socket directory as the host, `socket:`, and
 * `/directory database`; a socket proxy stands in for the socket the embedded server does not open.
 */
import { Admin, Queue, SCHEMA_VERSION } from '../../lib/core';
import { adminUrl } from '../support/db';
import { unixSocketProxy, type UnixSocketProxy } from '../support/unix-socket-proxy';
import { claimOne, fail } from '../support/protocol';
import { cli, cliConnections, documentOf, type Env } from './cli-harness';
import { useTestDatabase } from '../support/test-database';

const { db } = useTestDatabase({
  checkInvariants: false,
  beforeDrop: async (created) => { if (created) expect(await cliConnections(db)).toBe(0); },
});
let env: Env;

beforeAll(async () => {
  env = { DATABASE_URL: db.url };
});

// Every control character the text views must not write raw (the line feed is theirs).
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
const HOSTILE = {
  retitle: '\u001b]0;owned\u0007',
  clear: '\u001b[2J\u001b[H',
  csi: '\u009b31m',
  overwrite: 'ok\rFAKE',
  erase: 'abc\b\b\b',
  bidi: 'evil\u202egnp.exe',
  del: 'x\u007fy',
};
const ALL = Object.values(HOSTILE).join(' ');

describe('text output of stored data', () => {
  let q: string;
  let failed: string;
  let active: string;

  beforeAll(async () => {
    q = 'hostile-data';
    const queue = new Queue(db.pool);
    failed = await queue.enqueue('hostile.job', { note: ALL }, { queue: q, maxAttempts: 1, tags: Object.values(HOSTILE) });
    const owner = await claimOne(db.pool, q, { workerId: `worker${HOSTILE.clear}` });
    await fail(db.pool, owner, { name: `Boom${HOSTILE.retitle}`, message: `line one\n${ALL}`, stack: `Error\n    at ${HOSTILE.csi} (x.js:1:1)` });
    active = await queue.enqueue('hostile.job', {}, { queue: q, tags: [HOSTILE.bidi] });
    await claimOne(db.pool, q, { workerId: `w${HOSTILE.overwrite}` });
    await new Admin(db.pool).pauseQueue(q, { actor: `ops${HOSTILE.retitle}`, reason: `because${HOSTILE.clear}` });
  });

  it.each([
    ['jobs get (failed)', () => ['jobs', 'get', failed]],
    ['jobs get (active)', () => ['jobs', 'get', active]],
    ['jobs list', () => ['jobs', 'list', '--queue', q]],
    ['jobs timeline', () => ['jobs', 'timeline', failed]],
    ['jobs dead-letters', () => ['jobs', 'dead-letters', '--queue', q]],
    ['queues list', () => ['queues', 'list']],
    ['queues pause (already paused)', () => ['queues', 'pause', q]],
  ])('%s writes no raw control character', async (_name, args) => {
    const run = await cli(args(), env);
    expect({ code: run.code, stderr: run.stderr }).toEqual({ code: 0, stderr: '' });
    const offending = [...run.stdout].filter((c) => RAW_CONTROL.test(c)).map((c) => c.charCodeAt(0).toString(16));
    expect(offending).toEqual([]);
  });

  it('shows what was stored, escaped, so an operator can still read it', async () => {
    const job = (await cli(['jobs', 'get', failed], env)).stdout;
    expect(job).toContain('\\u001b]0;owned\\u0007');
    expect(job).toContain('Boom\\u001b]0;owned\\u0007: line one\\n');
    expect(job).toContain('evil\\u202egnp.exe');
    expect(job).toContain('at \\u009b31m (x.js:1:1)');
    expect((await cli(['jobs', 'get', active], env)).stdout).toMatch(/Worker +wok\\u000dFAKE/);
    expect((await cli(['jobs', 'timeline', failed], env)).stdout).toContain('worker\\u001b[2J\\u001b[H');
    const queues = (await cli(['queues', 'list'], env)).stdout;
    expect(queues).toContain('ops\\u001b]0;owned\\u0007');
    // --json keeps the data as it is, as JSON strings.
    const doc = documentOf<{ tags: string[]; error: { message: string } }>(await cli(['jobs', 'get', failed, '--json'], env));
    expect(doc.tags).toEqual(Object.values(HOSTILE));
    expect(doc.error.message).toBe(`line one\n${ALL}`);
  });

  it('writes errors that quote input on one line, escaped', async () => {
    const run = await cli(['queues', 'pause', `bad${HOSTILE.clear}`], env);
    expect(run.code).toBe(2);
    expect(run.stderr).toMatch(/^workhorse: [^\n]+\n$/);
    expect(RAW_CONTROL.test(run.stderr)).toBe(false);
  });
});

describe('connection strings', () => {
  let proxy: UnixSocketProxy;
  let user: string;
  let password: string;

  beforeAll(async () => {
    const server = new URL(adminUrl());
    proxy = await unixSocketProxy(Number(server.port));
    user = decodeURIComponent(server.username);
    password = decodeURIComponent(server.password);
  });

  afterAll(async () => {
    await proxy?.close();
  });

  it.each([
    ['a socket directory in ?host= with an empty host', () => `postgresql://${user}:${password}@/${db.name}?host=${proxy.directory}&port=${proxy.port}`],
    ['a socket directory in ?host= with no authority', () => `postgresql:///${db.name}?host=${proxy.directory}&port=${proxy.port}&user=${user}&password=${password}`],
    ['a percent-encoded socket directory as the host', () => `postgres://${user}:${password}@${encodeURIComponent(proxy.directory)}:${proxy.port}/${db.name}`],
    ['socket:', () => `socket:${proxy.directory}?db=${db.name}&port=${proxy.port}&user=${user}&password=${password}`],
  ])('reaches the database through %s', async (_name, url) => {
    for (const run of [await cli(['schema', 'status', '--json'], { DATABASE_URL: url() }), await cli(['schema', 'status', '--json', '--database-url', url()], {})]) {
      expect(documentOf<{ installed: number }>(run)).toMatchObject({ installed: SCHEMA_VERSION, upToDate: true });
    }
  });

  it('names the socket directory, never the password, when nothing listens there', async () => {
    const url = `postgresql://${user}:s3cret-pw@/${db.name}?host=${proxy.directory}&port=1`;
    const run = await cli(['schema', 'status'], { DATABASE_URL: url });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`the socket in ${proxy.directory} (port 1), database ${db.name}`);
    expect(run.stderr).not.toContain('s3cret-pw');
  });
});
