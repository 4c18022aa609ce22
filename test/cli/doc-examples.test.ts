/**
 * The example outputs of docs/cli.md are what the CLI prints. Every ```text block of the document
 * whose lines start with `$ workhorse ...` is a transcript: each command and what it printed. Each
 * block is either re-enacted here (its state built on a fresh database with the same names, its
 * commands run in order, and the output compared with the document's after the parts that differ
 * from run to run are masked: job ids, times, durations, cursors) or listed in NOT_COMPARED with
 * the reason. A new example therefore fails here until it is compared or listed.
 */
import { createServer, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { Admin, Queryable, Queue } from '../../lib/core';
import type { TestDatabase } from '../support/db';
import { fencedBlocks } from '../support/markdown';
import { claimOne, complete, fail } from '../support/protocol';
import { cli, useCliDatabase, type Env } from './cli-harness';

const ROOT = resolve(__dirname, '..', '..');
const DOC = 'docs/cli.md';

interface Step {
  /** The command line as the document shows it, after `$ `. */
  command: string;
  /** What the document shows it printing (stdout and stderr, in that order). */
  output: string;
}

interface Transcript {
  /** The section (`## ...` heading) of the block. */
  section: string;
  line: number;
  steps: Step[];
}

function transcripts(): Transcript[] {
  return fencedBlocks(ROOT, DOC)
    .filter((block) => block.language === 'text' && block.code.startsWith('$ '))
    .map((block) => {
      const steps: Step[] = [];
      for (const text of block.code.split('\n')) {
        if (text.startsWith('$ ')) steps.push({ command: text.slice(2), output: '' });
        else steps[steps.length - 1].output += `${text}\n`;
      }
      for (const step of steps) step.output = step.output.replace(/\n+$/, '\n');
      return { section: block.section, line: block.line, steps };
    });
}

/** Blocks not re-enacted, by their section, and why. */
const NOT_COMPARED: Record<string, string> = {
  '`workhorse schema migrate`':
    "version numbers: they change with every release; test/cli/cli.test.ts asserts these texts with this release's SCHEMA_VERSION",
  '`workhorse schema status`': 'the same (version numbers and the steps between them)',
  '`workhorse health`': 'an oldest ready job 74 s old, a state made by the clock; test/cli/operations.test.ts checks the report',
  '`workhorse retention status`': 'times, lags and counts of a long-running deployment',
  '`workhorse retention run`': 'counts of a deployment with 100,000 expired jobs',
};

/** The parts of an output that differ between runs, masked the same way on both sides. */
function masked(text: string): string {
  return text
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<uuid>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/g, '<time>')
    .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+\+00:00/g, '<time>')
    .replace(/took=\d+ms/g, 'took=<n>ms')
    .replace(/--cursor \S+/g, '--cursor <cursor>')
    .replace(/ +$/gm, '');
}

/** A local port nothing listens on (one the system just handed out and took back). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((done) => server.close(() => done()));
  return port;
}

/** A command line split into words (double quotes group), with `NAME=value` prefixes as environment. */
function parse(command: string): { env: Env; args: string[] } {
  const words = [...command.matchAll(/"([^"]*)"|(\S+)/g)].map((match) => match[1] ?? match[2]);
  const env: Env = {};
  while (/^[A-Z_]+=/.test(words[0])) {
    const [name, ...value] = words.shift()!.split('=');
    env[name] = value.join('=');
  }
  expect(words.shift()).toBe('workhorse');
  return { env, args: words };
}

interface Bed {
  db: TestDatabase;
  queue: Queue;
  admin: Admin;
  /** The document's job ids mapped to the ids of the jobs built for them. */
  ids: Map<string, string>;
}

const ERROR_STACK = 'SmtpError: 421 try again later\n    at send (mailer.ts:42:11)\n    at handler (invoice.ts:18:5)';
const SMTP_ERROR = { name: 'SmtpError', message: '421 try again later', stack: ERROR_STACK };

/** An invoice that failed its first attempt on worker-a and waits 30 s for its retry. */
async function failedInvoice(bed: Bed, docId: string): Promise<void> {
  const id = await bed.queue.enqueue('invoice.send', { invoiceId: 'inv-7' }, { queue: 'billing', tags: ['eu'] });
  const owner = await claimOne(bed.db.pool, 'billing', { workerId: 'worker-a' });
  await fail(bed.db.pool, owner, SMTP_ERROR, { retryDelayMs: 30_000 });
  bed.ids.set(docId, id);
}

/** A dead letter of queue billing: one attempt of one, failed with `name`. */
async function deadLetter(bed: Bed, docId: string, type: string, name: string): Promise<void> {
  const id = await bed.queue.enqueue(type, {}, { queue: 'billing', maxAttempts: 1 });
  const owner = await claimOne(bed.db.pool, 'billing', { workerId: 'worker-a' });
  await fail(bed.db.pool, owner, { name, message: 'refused' });
  bed.ids.set(docId, id);
}

/** A refund parked on the human wait `approve-refund`, as its handler's `ctx.waitForHuman` parks it. */
async function refundWaitingForApproval(bed: Bed, docId: string): Promise<void> {
  const id = await bed.queue.enqueue('order.refund', { orderId: 'o-1' }, { queue: 'refunds' });
  const owner = await claimOne(bed.db.pool, 'refunds', { workerId: 'worker-a' });
  const { rows } = await bed.db.pool.query<{ status: string }>(
    'SELECT status FROM workhorse.wait_human_v1($1, $2, $3, $4, $5::jsonb, $6::jsonb, NULL)',
    [id, owner.workerId, owner.fence, 'approve-refund', JSON.stringify({ orderId: 'o-1', amount: 1200 }), JSON.stringify(['approve', 'reject'])],
  );
  expect(rows[0].status).toBe('waiting');
  bed.ids.set(docId, id);
}

/** A worker in the registry of live workers, as a worker's first report puts it there. */
async function registerWorker(bed: Bed, id: string, host: string, pid: number, queues: string[], inFlight: number): Promise<void> {
  const info = { host, pid, queues, concurrency: 10, version: '0.1.0', startedAt: new Date().toISOString(), periodMs: 5000 };
  await bed.db.pool.query('SELECT * FROM workhorse.report_worker_v2($1, $2::jsonb, $3, NULL)', [id, JSON.stringify(info), inFlight]);
}

/**
 * Runs `act` on a connection whose session user is `ops_alice`, the login role the examples
 * show (changes record `session_user`): a role made once for the cluster, with the operator's
 * calls on this database. (`SET SESSION AUTHORIZATION` needs the test's superuser login.)
 */
async function asOpsAlice(bed: Bed, act: (client: Queryable) => Promise<unknown>): Promise<void> {
  const client = await bed.db.pool.connect();
  try {
    await client.query(`DO $$ BEGIN CREATE ROLE ops_alice; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`);
    await client.query('GRANT USAGE ON SCHEMA workhorse TO ops_alice');
    await client.query('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA workhorse TO ops_alice');
    await client.query('SET SESSION AUTHORIZATION ops_alice');
    await act(client);
  } finally {
    await client.query('RESET SESSION AUTHORIZATION');
    client.release();
  }
}

/** Each compared block's state, built before its first command. */
const SCENARIOS: Record<string, (bed: Bed) => Promise<void>> = {
  'Exit codes': async () => undefined,
  '`workhorse jobs get ID`': (bed) => failedInvoice(bed, '01a2269c-6133-7123-8e3f-ea8c1cb9ab3c'),
  '`workhorse jobs list`': async (bed) => {
    for (let i = 0; i < 3; i += 1) await bed.queue.enqueue('invoice.send', {}, { queue: 'billing' });
  },
  '`workhorse jobs timeline ID`': (bed) => failedInvoice(bed, '01a2269c-6133-7123-8e3f-ea8c1cb9ab3c'),
  '`workhorse jobs cancel ID`': async (bed) => {
    bed.ids.set('01a2269c-6133-7123-8e3f-ea8c1cb9ab3c', await bed.queue.enqueue('invoice.send', {}, { queue: 'billing' }));
    bed.ids.set('01a2269d-0a41-7f1e-9d3c-5b8e2f6a1c07', await bed.queue.enqueue('invoice.send', {}, { queue: 'emails' }));
    await claimOne(bed.db.pool, 'emails', { workerId: 'worker-a' });
  },
  '`workhorse jobs cancel --all`, `workhorse jobs run-now --all` and `workhorse jobs delete --all`': async (bed) => {
    await bed.queue.enqueue('newsletter.send', {}, { queue: 'emails' });
    await claimOne(bed.db.pool, 'emails', { workerId: 'worker-a' });
    await bed.queue.enqueue('newsletter.send', {}, { queue: 'emails', runAt: new Date(Date.now() + 3_600_000) });
  },
  '`workhorse jobs run-now ID`': async (bed) => {
    bed.ids.set('01a2269c-6133-7123-8e3f-ea8c1cb9ab3c', await bed.queue.enqueue('invoice.send', {}, { queue: 'billing', runAt: new Date(Date.now() + 3_600_000) }));
    bed.ids.set('01a2269d-0a41-7f1e-9d3c-5b8e2f6a1c07', await bed.queue.enqueue('invoice.send', {}, { queue: 'emails' }));
    await claimOne(bed.db.pool, 'emails', { workerId: 'worker-a' });
  },
  '`workhorse jobs reschedule ID`': async (bed) => {
    bed.ids.set('01a2269c-6133-7123-8e3f-ea8c1cb9ab3c', await bed.queue.enqueue('invoice.send', {}, { queue: 'billing', runAt: new Date(Date.now() + 3_600_000) }));
  },
  '`workhorse jobs delete ID`': async (bed) => {
    bed.ids.set('01a2269c-6133-7123-8e3f-ea8c1cb9ab3c', await bed.queue.enqueue('invoice.send', {}, { queue: 'billing' }));
    await complete(bed.db.pool, await claimOne(bed.db.pool, 'billing', { workerId: 'worker-a' }));
    bed.ids.set('01a2269d-0a41-7f1e-9d3c-5b8e2f6a1c07', await bed.queue.enqueue('invoice.send', {}, { queue: 'emails' }));
    await claimOne(bed.db.pool, 'emails', { workerId: 'worker-a' });
  },
  '`workhorse jobs dead-letters`': async (bed) => {
    await deadLetter(bed, 'oldest', 'invoice.send', 'SmtpError');
    await deadLetter(bed, '01a226ab-2c61-73aa-8c11-0e9b4d7f6a52', 'invoice.send', 'SmtpError');
    await deadLetter(bed, '01a226ab-2cb3-7d4e-9a0e-f2b3c55a1d20', 'charge', 'PaymentDeclined');
  },
  '`workhorse jobs redrive`': async (bed) => {
    await deadLetter(bed, '01a226ab-2a05-7b31-8d6e-3c9f1a4e7b58', 'charge', 'PaymentDeclined');
    await deadLetter(bed, '01a226ab-2b17-7f09-a4c2-5d8e1f3a7b94', 'charge', 'PaymentDeclined');
    await deadLetter(bed, '01a226ab-2cb3-7d4e-9a0e-f2b3c55a1d20', 'charge', 'PaymentDeclined');
  },
  '`workhorse queues list`': async (bed) => {
    for (let i = 0; i < 12; i += 1) await bed.queue.enqueue('invoice.send', {}, { queue: 'billing' });
    for (let i = 0; i < 3; i += 1) await bed.queue.enqueue('invoice.send', {}, { queue: 'billing', runAt: new Date(Date.now() + 3_600_000) });
    await bed.queue.enqueue('mail.send', {}, { queue: 'emails', runAt: new Date(Date.now() + 3_600_000) });
    for (let i = 0; i < 2; i += 1) {
      await bed.queue.enqueue('mail.send', {}, { queue: 'emails' });
      await claimOne(bed.db.pool, 'emails', { workerId: 'worker-a' });
    }
    await bed.admin.setQueuePolicy('billing', { concurrency: 5 });
    await bed.admin.setQueuePolicy('emails', { concurrency: 20, rateLimit: { limit: 50, intervalMs: 1000 } });
    await asOpsAlice(bed, (client) => bed.admin.pauseQueue('billing', { actor: 'alice', reason: 'payment provider outage' }, client));
  },
  '`workhorse queues pause Q` and `workhorse queues resume Q`': async (bed) => {
    await bed.queue.enqueue('invoice.send', {}, { queue: 'billing' });
  },
  '`workhorse queues limit Q` and `workhorse queues unlimit Q`': async () => undefined,
  '`workhorse schedules list`': async (bed) => {
    await bed.queue.syncSchedules('default', [
      { key: 'reports.nightly', cron: '0 6 * * *', timezone: 'Europe/Berlin', type: 'report.daily' },
      { key: 'cache.warm', cron: '*/5 * * * *', type: 'cache.warm' },
    ]);
    for (const key of ['reports.nightly', 'cache.warm']) {
      await bed.admin.triggerSchedule(key);
      const owner = await claimOne(bed.db.pool, 'default', { workerId: 'worker-a' });
      await complete(bed.db.pool, owner);
    }
    await bed.admin.pauseSchedule('cache.warm');
  },
  '`workhorse schedules pause KEY`, `workhorse schedules resume KEY` and `workhorse schedules trigger KEY`': async (bed) => {
    await bed.queue.syncSchedules('default', [{ key: 'reports.nightly', cron: '0 6 * * *', timezone: 'Europe/Berlin', type: 'report.daily' }]);
  },
  '`workhorse waits list`': (bed) => refundWaitingForApproval(bed, '0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10'),
  '`workhorse waits complete ID NAME DECISION`': (bed) => refundWaitingForApproval(bed, '0192b1c4-6f0e-7c53-9a8e-2f1d5b7c9a10'),
  '`workhorse workers list`': async (bed) => {
    await registerWorker(bed, 'web-2:3121:1b7d22aa', 'web-2', 3121, ['default'], 7);
    await registerWorker(bed, 'web-1:4242:9f3a0c1e', 'web-1', 4242, ['default', 'emails'], 3);
    await asOpsAlice(bed, (client) => bed.admin.drainWorker('web-1:4242:9f3a0c1e', { actor: 'alice' }, client));
  },
  '`workhorse changes`': async (bed) => {
    await asOpsAlice(bed, async (client) => {
      await bed.admin.pauseQueue('billing', { actor: 'alice', reason: 'payment provider outage' }, client);
      await bed.admin.setQueuePolicy('billing', { concurrency: 5 }, { actor: 'alice', reason: 'provider asks us to slow down' }, client);
    });
  },
  '`workhorse workers drain ID`': async (bed) => {
    await bed.db.pool.query('SELECT * FROM workhorse.report_worker_v2($1, $2::jsonb, 0, NULL)', [
      'web-1:4242:9f3a0c1e',
      JSON.stringify({ host: 'web-1', pid: 4242, queues: ['default'], concurrency: 10, version: '0.1.0', startedAt: new Date().toISOString(), periodMs: 5000 }),
    ]);
  },
};

const ALL = transcripts();

/** The ```json blocks of docs/cli.md (documents a `--json` run prints), by section. */
const JSON_BLOCKS = fencedBlocks(ROOT, DOC).filter((block) => block.language === 'json');

/**
 * How each JSON block is checked: the whole document (masked) where its state can be built, else
 * its keys, in order, against a real run's.
 */
const JSON_CHECKS: Record<string, (bed: Bed, env: Env, shown: string) => Promise<void>> = {
  '`workhorse schema status`': async (_bed, env, shown) => {
    const run = await cli(['schema', 'status', '--json'], env);
    expect(Object.keys(JSON.parse(shown) as object)).toEqual(Object.keys(JSON.parse(run.stdout) as object));
  },
  '`workhorse jobs get ID`': async (bed, env, shown) => {
    await failedInvoice(bed, 'doc');
    const run = await cli(['jobs', 'get', bed.ids.get('doc') as string, '--json'], env);
    expect(masked(run.stdout)).toEqual(masked(`${shown}\n`));
  },
};

it('every JSON example of docs/cli.md is checked here', () => {
  expect(JSON_BLOCKS.map((block) => block.section).sort()).toEqual(Object.keys(JSON_CHECKS).sort());
});

describe.each(JSON_BLOCKS.map((block) => [`${block.section} (line ${block.line})`, block] as const))('docs/cli.md %s, its --json document', (_title, block) => {
  const { db, env, queue, admin } = useCliDatabase();

  it('is what the CLI prints', async () => {
    await JSON_CHECKS[block.section]({ db, queue, admin, ids: new Map() }, env, block.code);
  });
});

it('every example transcript of docs/cli.md is compared here or listed with the reason it is not', () => {
  const sections = ALL.map((transcript) => transcript.section);
  expect(sections.filter((section) => !(section in SCENARIOS) && !(section in NOT_COMPARED))).toEqual([]);
  // Nothing is listed that the document no longer has.
  expect([...Object.keys(SCENARIOS), ...Object.keys(NOT_COMPARED)].filter((section) => !sections.includes(section))).toEqual([]);
});

describe.each(ALL.filter((transcript) => transcript.section in SCENARIOS).map((t) => [`${t.section} (line ${t.line})`, t] as const))(
  'docs/cli.md %s',
  (_title, transcript) => {
    const { db, env, queue, admin } = useCliDatabase();

    it('prints what the document shows', async () => {
      const bed: Bed = { db, queue, admin, ids: new Map() };
      await SCENARIOS[transcript.section](bed);
      for (const step of transcript.steps) {
        const { env: prefix, args } = parse(step.command);
        const real = args.map((word) => bed.ids.get(word) ?? word);
        // A command with its own environment runs with only that (a URL's port replaced by one
        // nothing listens on, shown back as the document's); the others with the test database.
        const closed = await closedPort();
        const own = Object.fromEntries(Object.entries(prefix).map(([name, value]) => [name, value?.replace(/:(\d+)\//, `:${closed}/`)]));
        const run = await cli(real, Object.keys(own).length > 0 ? own : /schema status$/.test(step.command) ? {} : env);
        if (process.env.DOC_EXAMPLES_PRINT) process.stdout.write(`$ ${step.command}\n${run.stdout}${run.stderr}`);
        const port = /:(\d+)\//.exec(Object.values(prefix).join(' '))?.[1];
        const printed = port ? (run.stdout + run.stderr).replaceAll(`:${closed}/`, `:${port}/`) : run.stdout + run.stderr;
        expect({ command: step.command, output: masked(printed) }).toEqual({ command: step.command, output: masked(step.output) });
      }
    });
  },
);
