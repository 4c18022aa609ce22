/**
 * `npm run demo`: run a job, kill the worker, watch it finish anyway. Scripted, no input needed.
 *
 * 1. Starts the database (the embedded PostgreSQL unless DATABASE_URL is set) and the web-only
 *    API (`api.ts`) as a child process.
 * 2. Places an order over HTTP: the order row and its `order.fulfill` job commit together.
 * 3. Starts worker A (`worker.ts`, a 3 s lease, and a long pause before the label stage). As soon
 *    as the job's `charge` checkpoint is saved, kills worker A with SIGKILL: no shutdown hook runs.
 * 4. Starts worker B. Once A's lease has expired, B recovers the job, replays `charge` from its
 *    checkpoint instead of charging again, prints the label and completes the job.
 * 5. Prints the job's timeline and the provider calls: one charge, one label.
 *
 * It exits 0 when the story went as told, 1 otherwise, and leaves nothing running either way.
 */
import type { LoggerService } from '@nestjs/common';
import { Admin, Pool, type JobSnapshot, type TimelineEntry } from 'nestjs-workhorse/core';
import { setTimeout as sleep } from 'node:timers/promises';
import { openSampleDatabase, type SampleDatabase } from './database/sample-database';
import { SampleProcess } from './demo/sample-process';
import { formatTimeline } from './demo/timeline-table';
import { readSampleConfig } from './sample-config';

const LEASE_MS = 3_000;
/** Worker A pauses this long before the label; it is killed long before the pause ends. */
const LABEL_DELAY_MS = 60_000;
const STEP_TIMEOUT_MS = 60_000;
const ORDER = { customer: 'Ada Lovelace', item: 'Punched cards for the Analytical Engine', amountCents: 4200 };

const startedAt = Date.now();

function say(message: string): void {
  const elapsed = `${((Date.now() - startedAt) / 1000).toFixed(1)}s`.padStart(6);
  process.stdout.write(`[${elapsed}] ${message}\n`);
}

function indent(line: string): void {
  process.stdout.write(`           ${line}\n`);
}

/** Lets openSampleDatabase report in the demo's own voice. */
const demoLogger: LoggerService = {
  log: (message: unknown) => say(String(message)),
  error: (message: unknown) => say(`ERROR ${String(message)}`),
  warn: (message: unknown) => say(`WARN ${String(message)}`),
};

async function poll<T>(what: string, probe: () => Promise<T | null | undefined>): Promise<T> {
  const deadline = Date.now() + STEP_TIMEOUT_MS;
  for (;;) {
    const value = await probe();
    if (value !== null && value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${STEP_TIMEOUT_MS} ms waiting for ${what}`);
    await sleep(100);
  }
}

async function timeline(admin: Admin, jobId: string): Promise<TimelineEntry[]> {
  const entries: TimelineEntry[] = [];
  let cursor: string | undefined;
  do {
    const page = await admin.getJobTimeline(jobId, { limit: 500, cursor });
    entries.push(...page.items);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
  return entries;
}

interface ProviderCallRow {
  operation: string;
  reference: string;
  pid: number;
}

class Demo {
  private database: SampleDatabase | null = null;
  private pool: Pool | null = null;
  private readonly processes: SampleProcess[] = [];
  private cleaning: Promise<void> | null = null;

  async run(): Promise<boolean> {
    const config = readSampleConfig();
    say('nestjs-workhorse demo: run a job, kill the worker, watch it finish anyway');
    this.database = await openSampleDatabase(config, demoLogger, { cliHint: false });
    const env = { DATABASE_URL: this.database.url };

    // The API creates the sample's tables and installs the workhorse schema if needed; the demo
    // connects only once it listens.
    const api = this.start({ name: 'api', script: 'api.ts', env: { ...env, PORT: '0' } });
    const [, apiUrl] = await api.waitForLog(/Listening on (http:\/\/[^\s;]+)/, STEP_TIMEOUT_MS);
    say(`API (pid ${api.pid}) listens on ${apiUrl}: web only, it enqueues and never runs a job`);
    this.pool = new Pool({ connectionString: this.database.url, max: 2 });
    this.pool.on('error', () => undefined);
    const admin = new Admin(this.pool);
    const leftover = await admin.listJobs({ type: 'order.fulfill', states: ['ready', 'scheduled', 'active'], limit: 1000 });
    if (leftover.items.length > 0) {
      say(`Note: ${leftover.items.length} order.fulfill job(s) of an earlier run are still unfinished; the workers below finish them too`);
    }

    say(`POST ${apiUrl}/orders ${JSON.stringify(ORDER)}`);
    const response = await fetch(`${apiUrl}/orders`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(ORDER),
    });
    if (response.status !== 201) throw new Error(`POST /orders answered ${response.status}: ${await response.text()}`);
    const { orderId, jobId } = (await response.json()) as { orderId: string; jobId: string };
    say(`201: order ${orderId} and its job ${jobId} committed in one transaction`);

    const workerA = this.start({
      name: 'worker A',
      script: 'worker.ts',
      env: { ...env, SAMPLE_WORKER_ID: 'worker-A', SAMPLE_LEASE_MS: String(LEASE_MS), SAMPLE_LABEL_DELAY_MS: String(LABEL_DELAY_MS) },
    });
    say(`Started worker A (pid ${workerA.pid}): lease ${LEASE_MS} ms, pauses ${LABEL_DELAY_MS / 1000} s before the label stage`);

    await poll('the "charge" checkpoint', async () =>
      (await timeline(admin, jobId)).find((e) => e.kind === 'checkpoint_saved' && e.data?.name === 'charge'),
    );
    say('The "charge" checkpoint is saved: the card is charged, the label not printed yet');
    const killed = await workerA.stop('SIGKILL');
    if (killed.signal !== 'SIGKILL') throw new Error(`worker A had already ended (exit code ${killed.code}) before the kill`);
    say('Killed worker A with SIGKILL: no shutdown hook ran, nothing more was recorded');

    const orphan = await admin.getJob(jobId);
    if (orphan?.state === 'active' && orphan.leaseExpiresAt) {
      const left = Math.max(0, orphan.leaseExpiresAt.getTime() - Date.now());
      say(`The job is still "active", owned by ${orphan.workerId}, whose lease runs out in ${(left / 1000).toFixed(1)} s`);
    } else {
      say(`The job is now "${orphan?.state}"`);
    }

    // Worker B keeps the default lease: A's lease is what decides when the job comes back.
    const workerB = this.start({ name: 'worker B', script: 'worker.ts', env: { ...env, SAMPLE_WORKER_ID: 'worker-B' } });
    say(`Started worker B (pid ${workerB.pid}); it recovers the job once A's lease has expired`);

    const done = await poll<JobSnapshot>('the job to end', async () => {
      const job = await admin.getJob(jobId);
      return job && ['succeeded', 'failed', 'canceled'].includes(job.state) ? job : null;
    });
    say(`The job ${done.state} at attempt ${done.currentAttempt}: ${JSON.stringify(done.result ?? done.error)}`);

    await Promise.all([workerB.stop('SIGTERM'), api.stop('SIGTERM')]);
    say('Stopped worker B and the API with SIGTERM: the worker drained, both closed their connections and exited');

    process.stdout.write(`\nTimeline of job ${jobId} (workhorse jobs timeline ${jobId}):\n\n`);
    process.stdout.write(`${formatTimeline(await timeline(admin, jobId))}\n\n`);

    const { rows: calls } = await this.pool.query<ProviderCallRow>(
      'SELECT operation, reference, pid FROM sample_provider_calls WHERE order_id = $1 ORDER BY id',
      [orderId],
    );
    const charges = calls.filter((call) => call.operation === 'charge');
    const labels = calls.filter((call) => call.operation === 'label');
    const by = (rows: ProviderCallRow[]) => rows.map((row) => `${row.reference} by pid ${row.pid}`).join(', ');
    process.stdout.write(`Provider calls for order ${orderId}: charge ${charges.length} (${by(charges)}), label ${labels.length} (${by(labels)})\n`);

    const ok = done.state === 'succeeded' && charges.length === 1 && labels.length === 1;
    if (ok) {
      process.stdout.write(
        `Card charged once and label printed once: worker A charged and died, worker B replayed the charge ` +
          `from its checkpoint and printed the label.\n`,
      );
    } else {
      process.stdout.write(`Expected one succeeded job, one charge and one label; got ${done.state}, ${charges.length}, ${labels.length}.\n`);
    }
    if (this.database.embedded) {
      process.stdout.write(
        `\nThe data stays in sample-app/.pgdata. To look around: npm start, then in another terminal\n` +
          `  export DATABASE_URL=${this.database.url}\n  node bin/workhorse.js jobs timeline ${jobId}\n`,
      );
    }
    return ok;
  }

  private start(options: { name: string; script: string; env: Record<string, string> }): SampleProcess {
    const child = new SampleProcess({ ...options, print: indent });
    this.processes.push(child);
    return child;
  }

  /** Kills what still runs, closes the pool, stops the embedded database. Safe to call twice. */
  cleanUp(): Promise<void> {
    this.cleaning ??= (async () => {
      await Promise.all(this.processes.filter((child) => child.running).map((child) => child.stop('SIGKILL')));
      await this.pool?.end().catch(() => undefined);
      await this.database?.stop();
    })();
    return this.cleaning;
  }
}

/** Resolves with the exit code, or null after an interrupt, whose handler ends the process. */
async function main(): Promise<number | null> {
  const demo = new Demo();
  let interrupted = false;
  const interrupt = (signal: NodeJS.Signals) => {
    interrupted = true;
    say(`${signal}: stopping everything the demo started`);
    void demo.cleanUp().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143));
  };
  process.once('SIGINT', interrupt);
  process.once('SIGTERM', interrupt);
  let ok = false;
  try {
    ok = await demo.run();
  } catch (error) {
    // After an interrupt, the failures of the steps cut short are expected and say nothing.
    if (!interrupted) say(`The demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    await demo.cleanUp();
  }
  if (interrupted) return null;
  say(ok ? 'Done.' : 'Done, with a failure.');
  return ok ? 0 : 1;
}

main().then(
  (code) => {
    if (code !== null) process.exit(code);
  },
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
