/**
 * `workhorse jobs dead-letters`, `jobs redrive` and `queues list|pause|resume|limit|unlimit` against a real
 * database: exit codes, `--json` documents checked against the Admin API, the key facts of the
 * text output, dry runs that write nothing, and one-line errors.
 */
import { randomUUID } from 'node:crypto';
import { userInfo } from 'node:os';
import { type JobSnapshot, type Page, type QueueInfo, type RedriveResult } from '../../lib/core';
import { claim, claimOne, fail } from '../support/protocol';
import { cli, documentOf, errorOf, useCliDatabase, viaJson, WORKER } from './cli-harness';

const ME = userInfo().username;

describe('help and usage of the operations commands', () => {
  const helps: [string[], string, RegExp[]][] = [
    [['jobs', 'dead-letters', '--help'], 'Usage: workhorse jobs dead-letters [options]', [/--queue Q/, /--type T/, /--error-name N/, /--finished-after ISO/, /--finished-before ISO/, /--limit N/, /--cursor C/]],
    [['jobs', 'redrive', '--help'], 'Usage: workhorse jobs redrive [ID] [options]', [/Arguments:\n {2}ID/, /--request-id R/, /--all/, /--dry-run/, /--actor A .*OS user name/, /--reason TEXT/]],
    [['queues', '--help'], 'Usage: workhorse queues <command> [options]', [/list/, /pause Q/, /resume Q/]],
    [['queues', 'list', '--help'], 'Usage: workhorse queues list [options]', [/paused/]],
    [['queues', 'pause', '--help'], 'Usage: workhorse queues pause Q [options]', [/--actor A/, /--reason TEXT/]],
    [['queues', 'resume', '--help'], 'Usage: workhorse queues resume Q [options]', [/--actor A/, /--reason TEXT/]],
    [['queues', 'limit', '--help'], 'Usage: workhorse queues limit Q [options]', [/--concurrency N/, /--rate N/, /--per D/, /--actor A/, /--reason TEXT/]],
    [['queues', 'unlimit', '--help'], 'Usage: workhorse queues unlimit Q [options]', [/--actor A/, /--reason TEXT/]],
  ];

  it.each(helps)('workhorse %j prints its help and exits 0, without a database', async (args, usage, facts) => {
    const run = await cli(args, {});
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout.startsWith(`${usage}\n`)).toBe(true);
    for (const fact of facts) expect(run.stdout).toMatch(fact);
    expect(run.stdout.split('\n').every((line) => line === line.trimEnd())).toBe(true);
  });

  const id = randomUUID();
  const redriveHelp = 'Run `workhorse jobs redrive --help` for usage.';
  const mistakes: [string[], string][] = [
    [['jobs', 'redrive', '--request-id', 'r'], `give a job ID, or --all with optional filters. ${redriveHelp}`],
    [['jobs', 'redrive', id, '--all', '--request-id', 'r'], `give either a job ID or --all, not both. ${redriveHelp}`],
    [['jobs', 'redrive', id], `option --request-id R is required: it makes the redrive safe to repeat (run it again with the same R after a failure). ${redriveHelp}`],
    [['jobs', 'redrive', '--all'], `option --request-id R is required: it makes the redrive safe to repeat (run it again with the same R after a failure). ${redriveHelp}`],
    [['jobs', 'redrive', id, '--request-id', 'r', '--dry-run'], `option --dry-run only goes with --all. ${redriveHelp}`],
    [['jobs', 'redrive', id, '--request-id', 'r', '--queue', 'q'], `option --queue only goes with --all. ${redriveHelp}`],
    [['jobs', 'redrive', id, 'more'], `unexpected argument "more". ${redriveHelp}`],
    [['jobs', 'redrive', '--all', '--request-id', 'r', '--finished-before', '2026-11-29T09:00'],
      `--finished-before: "2026-11-29T09:00" is not an ISO 8601 time such as 2026-11-29T09:00:00Z or 2026-11-29 (a time needs Z or an offset). ${redriveHelp}`],
    [['jobs', 'dead-letters', '--finished-after', 'yesterday'],
      '--finished-after: "yesterday" is not an ISO 8601 time such as 2026-11-29T09:00:00Z or 2026-11-29 (a time needs Z or an offset). Run `workhorse jobs dead-letters --help` for usage.'],
    [['jobs', 'dead-letters', '--dry-run'], 'unknown option --dry-run for `workhorse jobs dead-letters`. Run `workhorse jobs dead-letters --help` for usage.'],
    [['queues'], '`workhorse queues` needs a command: list, pause, resume, limit, unlimit. Run `workhorse queues --help` for usage.'],
    [['queues', 'limit', 'q'], 'give --concurrency N, --rate N --per D, --per-key N, or several (`workhorse queues unlimit Q` removes the limits). Run `workhorse queues limit --help` for usage.'],
    [['queues', 'limit', 'q', '--rate', '5'], '--rate N and --per D go together. Run `workhorse queues limit --help` for usage.'],
    [['queues', 'limit', 'q', '--concurrency', '2', '--per', '1s'], '--rate N and --per D go together. Run `workhorse queues limit --help` for usage.'],
    [['queues', 'pause'], 'missing argument Q. Run `workhorse queues pause --help` for usage.'],
    [['queues', 'list', 'extra'], 'unexpected argument "extra". Run `workhorse queues list --help` for usage.'],
  ];

  it.each(mistakes)('workhorse %j exits 2 with one line, before touching the database', async (args, message) => {
    expect(errorOf(await cli(args, { DATABASE_URL: 'postgres://unused@127.0.0.1:1/x' }), 2)).toBe(`workhorse: ${message}`);
  });
});

describe('operations against a database', () => {
  const { db, env, queue, admin } = useCliDatabase();

  const newQueue = (prefix: string): string => `${prefix}-${randomUUID().slice(0, 8)}`;

  /** One dead letter: enqueued with one attempt, claimed, and failed for good with `errorName`. */
  async function deadLetter(q: string, type: string, errorName: string): Promise<string> {
    const id = await queue.enqueue(type, { type, errorName }, { queue: q, maxAttempts: 1 });
    const claimed = await claimOne(db.pool, q, { workerId: WORKER });
    expect(claimed.jobId).toBe(id);
    await fail(db.pool, claimed, { name: errorName, message: `${errorName} happened` }, { nonRetryable: true });
    expect((await admin.getJob(id))?.state).toBe('failed');
    return id;
  }

  async function jobCount(q: string): Promise<number> {
    return (await admin.listJobs({ queue: q, limit: 1000 })).items.length;
  }

  describe('jobs dead-letters', () => {
    let q: string;
    let declined: string[];
    let timeout: string;

    beforeAll(async () => {
      q = newQueue('dead');
      declined = [await deadLetter(q, 'charge', 'PaymentDeclined'), await deadLetter(q, 'charge', 'PaymentDeclined')];
      timeout = await deadLetter(q, 'mail.send', 'Timeout');
      await queue.enqueue('charge', { alive: true }, { queue: q });
    });

    const ids = (page: Page<JobSnapshot>): string[] => page.items.map((job) => job.id);

    it('--json prints the Admin page, filtered by queue, type, error name and time', async () => {
      const page = documentOf<Page<JobSnapshot>>(await cli(['jobs', 'dead-letters', '--queue', q, '--json'], env));
      expect(page).toEqual(viaJson(await admin.listDeadLetters({ queue: q })));
      expect(ids(page)).toEqual([timeout, declined[1], declined[0]]);
      expect(page.nextCursor).toBeNull();

      const run = (...args: string[]) => cli(['jobs', 'dead-letters', '--queue', q, ...args, '--json'], env);
      expect(ids(documentOf(await run('--type', 'charge')))).toEqual([declined[1], declined[0]]);
      expect(ids(documentOf(await run('--error-name', 'Timeout')))).toEqual([timeout]);
      const finished = (await admin.getJob(declined[1]))!.finishedAt!;
      expect(ids(documentOf(await run('--finished-after', finished.toISOString())))).toEqual(
        ids(await admin.listDeadLetters({ queue: q, finishedAfter: finished })),
      );
      expect(ids(documentOf(await run('--finished-before', '2000-01-01')))).toEqual([]);
      expect(ids(documentOf(await run('--finished-after', '2000-01-01T00:00:00+01:00')))).toHaveLength(3);
    });

    it('prints a table, a count, and the exact command for the next page', async () => {
      const run = await cli(['jobs', 'dead-letters', '--queue', q], env);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const lines = run.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^ID {36}TYPE +QUEUE +ERROR +FINISHED +ATTEMPTS$/);
      const jobs = (await admin.listDeadLetters({ queue: q })).items;
      jobs.forEach((job, i) => {
        expect(lines[i + 1].split(/ {2,}/)).toEqual([job.id, job.type, q, job.error!.name, job.finishedAt!.toISOString(), '1/1']);
      });
      expect(lines.slice(4)).toEqual(['', '3 dead letters.']);

      const first = await cli(['jobs', 'dead-letters', '--queue', q, '--type', 'charge', '--limit', '1'], env);
      const hint = /^1 dead letters shown; more remain\. Next page: (workhorse jobs dead-letters .*)$/m.exec(first.stdout);
      expect(hint?.[1]).toMatch(new RegExp(`^workhorse jobs dead-letters --queue ${q} --type charge --limit 1 --cursor [A-Za-z0-9_-]+$`));
      const second = await cli(hint?.[1].split(' ').slice(1) ?? [], env);
      expect(second.code).toBe(0);
      expect(second.stdout.split('\n')[1].slice(0, 36)).toBe(declined[0]);

      expect(await cli(['jobs', 'dead-letters', '--queue', 'no-such-queue'], env)).toEqual({ code: 0, stdout: 'No dead letters match.\n', stderr: '' });

      // Three dead letters and --limit 3: one page, and it says it is the last.
      const exact = await cli(['jobs', 'dead-letters', '--queue', q, '--limit', '3'], env);
      expect(exact.stdout.trimEnd().split('\n').slice(-2)).toEqual(['', '3 dead letters.']);
    });

    it('refuses bad filters with exit 2 and one line', async () => {
      const cases: [string[], string][] = [
        [['--limit', '0'], 'limit: must be an integer from 1 to 1000'],
        // (Not a number: the client's; its range is the SQL function's.)
        [['--limit', 'many'], 'limit: must be an integer'],
        [['--cursor', 'bm90LWEtY3Vyc29y'], 'cursor: is not a cursor returned by this API'],
        // Crafted in the cursor's own format, at a time PostgreSQL cannot read (it has no year 0).
        [['--cursor', Buffer.from('dead:0000-01-01T00:00:00.000000Z/0190a000-0000-7000-8000-000000000001').toString('base64url')], 'cursor: is not a cursor returned by this API'],
        [['--queue', 'bad queue'], 'queue: must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -'],
        [['--error-name', 'x'.repeat(201)], 'errorName: must be a string of at most 200 characters'],
      ];
      for (const [args, message] of cases) {
        expect(errorOf(await cli(['jobs', 'dead-letters', ...args], env), 2)).toBe(`workhorse: ${message}`);
      }
    });
  });

  describe('jobs redrive ID', () => {
    it('creates a new job, prints its id, records the lineage, and repeats idempotently', async () => {
      const q = newQueue('redrive');
      const source = await deadLetter(q, 'charge', 'PaymentDeclined');
      const other = await deadLetter(q, 'charge', 'PaymentDeclined');
      const requestId = `req-${randomUUID()}`;

      const doc = documentOf<{ sourceJobId: string; newJobId: string }>(
        await cli(['jobs', 'redrive', source, '--request-id', requestId, '--reason', 'provider back', '--json'], env),
      );
      expect(doc).toEqual({ sourceJobId: source, newJobId: expect.any(String) });
      const created = await admin.getJob(doc.newJobId);
      expect(created).toMatchObject({ state: 'ready', queue: q, type: 'charge', currentAttempt: 0, redrivenFrom: source });
      expect((await admin.getJob(source))).toMatchObject({ state: 'failed', redrivenTo: [doc.newJobId] });
      // The same request id again: the same job, nothing new; --actor defaults to the OS user.
      expect(await admin.redrive(source, { requestId })).toBe(doc.newJobId);
      expect(await cli(['jobs', 'redrive', source, '--request-id', requestId], env)).toEqual({
        code: 0,
        stdout: `Job ${source} was already redriven as job ${doc.newJobId}; nothing new was created (--again makes another copy).\n`,
        stderr: '',
      });
      // A dead letter is redriven once: another request id gives the same job, too.
      expect(documentOf(await cli(['jobs', 'redrive', source, '--request-id', `${requestId}-2`, '--json'], env))).toEqual(doc);
      expect(await jobCount(q)).toBe(3);
      const events = (await admin.getJobTimeline(source)).items.filter((entry) => entry.kind === 'redriven');
      expect(events).toHaveLength(1);
      expect(events[0].data).toMatchObject({ newJobId: doc.newJobId, requestId, actor: ME, reason: 'provider back' });

      // --actor overrides the default.
      const again = documentOf<{ newJobId: string }>(
        await cli(['jobs', 'redrive', other, '--request-id', `req-${randomUUID()}`, '--actor', 'ops-bot', '--json'], env),
      );
      const event = (await admin.getJobTimeline(again.newJobId)).items.find((entry) => entry.kind === 'redriven_from');
      expect(event?.data).toMatchObject({ sourceJobId: other, actor: 'ops-bot' });

      // --again makes another copy, marked in the lineage; it goes with an ID only.
      const copy = await cli(['jobs', 'redrive', other, '--request-id', `req-${randomUUID()}`, '--again'], env);
      const copyId = /new job ([0-9a-f-]{36})\.$/.exec(copy.stdout.trimEnd())?.[1] as string;
      expect(copy).toMatchObject({ code: 0, stderr: '', stdout: `Redrove job ${other}: new job ${copyId}.\n` });
      expect(await admin.getJob(other)).toMatchObject({ redrivenTo: [again.newJobId, copyId] });
      const copied = (await admin.getJobTimeline(copyId)).items.find((entry) => entry.kind === 'redriven_from');
      expect(copied?.data).toMatchObject({ sourceJobId: other, again: true });
      expect(errorOf(await cli(['jobs', 'redrive', '--all', '--again', '--request-id', 'r'], env), 2)).toBe(
        'workhorse: option --again goes with one job ID, not with --all. Run `workhorse jobs redrive --help` for usage.',
      );
    });

    it('refuses an unknown job or a live one (exit 1), and bad input (exit 2)', async () => {
      const q = newQueue('redrive-bad');
      const [a, b] = [await deadLetter(q, 'charge', 'X'), await deadLetter(q, 'charge', 'X')];
      const unknown = randomUUID();
      expect(errorOf(await cli(['jobs', 'redrive', unknown, '--request-id', 'r1'], env), 1)).toBe(`workhorse: job ${unknown} not found`);
      const live = await queue.enqueue('charge', {}, { queue: q });
      expect(errorOf(await cli(['jobs', 'redrive', live, '--request-id', 'r2'], env), 1)).toBe(
        `workhorse: job ${live} is ready, not a dead letter: only failed jobs can be redriven.`,
      );
      expect(errorOf(await cli(['jobs', 'redrive', 'nope', '--request-id', 'r3'], env), 2)).toBe(
        'workhorse: jobId: must be a job id (a UUID string)',
      );

      const requestId = `req-${randomUUID()}`;
      expect((await cli(['jobs', 'redrive', a, '--request-id', requestId], env)).code).toBe(0);
      expect(errorOf(await cli(['jobs', 'redrive', b, '--request-id', requestId], env), 2)).toBe(
        `workhorse: requestId: was already used to redrive job ${a}`,
      );
      expect(errorOf(await cli(['jobs', 'redrive', b, '--request-id', 'r'.repeat(201)], env), 2)).toBe(
        'workhorse: requestId: must be a string of 1 to 200 characters',
      );
      expect(errorOf(await cli(['jobs', 'redrive', b, '--request-id', 'r4', '--actor', 'a'.repeat(201)], env), 2)).toBe(
        'workhorse: actor: must be a string of at most 200 characters',
      );
      expect((await admin.getJob(b))?.redrivenTo).toEqual([]);
    });
  });

  describe('jobs redrive --all', () => {
    it('--dry-run lists what would be redriven and writes nothing', async () => {
      const q = newQueue('many-dry');
      const declined = [await deadLetter(q, 'charge', 'PaymentDeclined'), await deadLetter(q, 'charge', 'PaymentDeclined')];
      await deadLetter(q, 'charge', 'Timeout');
      const before = await jobCount(q);
      const requestId = `req-${randomUUID()}`;

      const doc = documentOf<{ dryRun: boolean; items: RedriveResult[] }>(
        await cli(['jobs', 'redrive', '--all', '--queue', q, '--error-name', 'PaymentDeclined', '--request-id', requestId, '--dry-run', '--json'], env),
      );
      expect(doc).toEqual({
        dryRun: true,
        items: await admin.redriveMany({ queue: q, errorName: 'PaymentDeclined' }, { requestId, dryRun: true }),
      });
      expect(doc.items).toEqual([declined[1], declined[0]].map((sourceJobId) => ({ sourceJobId, newJobId: null })));

      const text = await cli(['jobs', 'redrive', '--all', '--queue', q, '--request-id', requestId, '--dry-run'], env);
      expect(text.code).toBe(0);
      const lines = text.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^SOURCE JOB {28}NEW JOB$/);
      expect(lines.slice(1, 4).map((line) => line.split(/ {2,}/)[1])).toEqual(['-', '-', '-']);
      expect(lines.slice(4)).toEqual(['', 'Dry run: would redrive 3 dead letters; nothing was written.']);

      expect(await jobCount(q)).toBe(before);
      for (const id of declined) expect((await admin.getJob(id))?.redrivenTo).toEqual([]);
    });

    it('redrives the matching dead letters, prints the pairs, and a repeat returns the same jobs', async () => {
      const q = newQueue('many');
      const declined = [await deadLetter(q, 'charge', 'PaymentDeclined'), await deadLetter(q, 'charge', 'PaymentDeclined')];
      const timeout = await deadLetter(q, 'charge', 'Timeout');
      const requestId = `req-${randomUUID()}`;
      const args = ['jobs', 'redrive', '--all', '--queue', q, '--error-name', 'PaymentDeclined', '--request-id', requestId];

      const doc = documentOf<{ dryRun: boolean; items: RedriveResult[] }>(await cli([...args, '--reason', 'incident 82', '--json'], env));
      expect(doc.dryRun).toBe(false);
      expect(doc.items.map((item) => item.sourceJobId)).toEqual([declined[1], declined[0]]);
      for (const { sourceJobId, newJobId } of doc.items) {
        expect(await admin.getJob(newJobId!)).toMatchObject({ state: 'ready', redrivenFrom: sourceJobId });
      }
      // Idempotent per request id: Admin and the CLI both get the same pairs back.
      expect(await admin.redriveMany({ queue: q, errorName: 'PaymentDeclined' }, { requestId })).toEqual(doc.items);
      const text = await cli(args, env);
      expect(text.code).toBe(0);
      const lines = text.stdout.trimEnd().split('\n');
      expect(lines.slice(1, 3).map((line) => line.split(/ {2,}/))).toEqual(doc.items.map((item) => [item.sourceJobId, item.newJobId]));
      expect(lines.slice(3)).toEqual(['', 'Redrove 2 dead letters.']);
      expect(await jobCount(q)).toBe(5);
      expect((await admin.getJob(timeout))?.redrivenTo).toEqual([]);

      // --limit, and nothing left to match.
      const limited = documentOf<{ items: RedriveResult[] }>(
        await cli(['jobs', 'redrive', '--all', '--queue', q, '--request-id', `req-${randomUUID()}`, '--limit', '1', '--json'], env),
      );
      expect(limited.items.map((item) => item.sourceJobId)).toEqual([timeout]);
      expect(await cli(['jobs', 'redrive', '--all', '--queue', q, '--type', 'nothing', '--request-id', 'r'], env)).toEqual({
        code: 0,
        stdout: 'No dead letters match; nothing redriven.\n',
        stderr: '',
      });
      expect(errorOf(await cli(['jobs', 'redrive', '--all', '--queue', q, '--request-id', 'r'.repeat(161)], env), 2)).toBe(
        'workhorse: requestId: must be a string of 1 to 160 characters',
      );
      expect(errorOf(await cli(['jobs', 'redrive', '--all', '--request-id', 'r', '--limit', '1001'], env), 2)).toBe(
        'workhorse: limit: must be an integer from 1 to 1000',
      );
    });
  });

  describe('queues', () => {
    const infoOf = async (q: string): Promise<QueueInfo | undefined> => (await admin.listQueues()).find((info) => info.queue === q);

    it('list --json prints Admin.listQueues; the text table shows counts and pause state', async () => {
      const q = newQueue('qlist');
      await queue.enqueue('a', {}, { queue: q });
      await queue.enqueue('a', {}, { queue: q });
      await queue.enqueue('a', {}, { queue: q, runAt: new Date(Date.now() + 3_600_000) });
      await claimOne(db.pool, q, { workerId: WORKER });

      expect(documentOf(await cli(['queues', 'list', '--json'], env))).toEqual(viaJson(await admin.listQueues()));
      const run = await cli(['queues', 'list'], env);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const lines = run.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^QUEUE +PAUSED +READY +SCHEDULED +ACTIVE +BLOCKED +LIMITS +CHANGED AT +CHANGED BY +LOGIN ROLE +REASON$/);
      const row = lines.find((line) => line.startsWith(`${q} `));
      expect(row?.split(/ {2,}/)).toEqual([q, 'no', '1', '1', '1', '0', '-', '-', '-', '-', '-']);
      expect(lines[lines.length - 1]).toBe(`${(await admin.listQueues()).length} queues.`);
    });

    it('pause stops claims and shows in queues list; resume undoes it; repeats change nothing', async () => {
      const q = newQueue('qpause');
      await queue.enqueue('a', {}, { queue: q });

      expect(await cli(['queues', 'pause', q, '--reason', 'provider outage'], env)).toEqual({
        code: 0,
        stdout: `Paused queue ${q}: workers stop claiming its jobs; running jobs finish and enqueue goes on.\n`,
        stderr: '',
      });
      const paused = await infoOf(q);
      expect(paused).toMatchObject({ paused: true, changedBy: ME, reason: 'provider outage', ready: 1 });
      expect(await claim(db.pool, q)).toEqual([]);

      const list = await cli(['queues', 'list'], env);
      const row = list.stdout.split('\n').find((line) => line.startsWith(`${q} `));
      // The actor the caller named, and the login role of the session that paused it.
      expect(row?.split(/ {2,}/)).toEqual([q, 'yes', '1', '0', '0', '0', '-', paused!.changedAt!.toISOString(), ME, paused!.loginRole, 'provider outage']);
      expect(paused!.loginRole).toBe((await db.pool.query<{ u: string }>('SELECT session_user AS u')).rows[0].u);

      // A second pause keeps the first one's actor and reason.
      const repeat = documentOf<QueueInfo & { changed: boolean }>(await cli(['queues', 'pause', q, '--actor', 'other', '--json'], env));
      expect(repeat).toEqual({ ...(viaJson(paused) as object), changed: false });
      expect((await cli(['queues', 'pause', q], env)).stdout).toBe(
        `Queue ${q} is already paused (since ${paused!.changedAt!.toISOString()} by ${ME}); nothing changed.\n`,
      );

      const resumed = documentOf<QueueInfo & { changed: boolean }>(
        await cli(['queues', 'resume', q, '--actor', 'ops-bot', '--reason', 'recovered', '--json'], env),
      );
      expect(resumed).toEqual({ ...(viaJson(await infoOf(q)) as object), changed: true });
      expect(resumed).toMatchObject({ paused: false, changedBy: 'ops-bot', reason: 'recovered' });
      expect(await cli(['queues', 'resume', q], env)).toEqual({
        code: 0,
        stdout: `Queue ${q} was not paused; workers claim its jobs as before.\n`,
        stderr: '',
      });
      expect((await claimOne(db.pool, q, { workerId: WORKER })).jobId).toBeDefined();
    });

    it('changes lists who paused and resumed a queue (actor and login role), newest first; a bad filter exits 2', async () => {
      const q = newQueue('qchanges');
      await cli(['queues', 'pause', q, '--actor', 'alice', '--reason', 'provider outage'], env);
      await cli(['queues', 'pause', q, '--actor', 'bob'], env); // a repeat: not a change
      await cli(['queues', 'resume', q, '--actor', 'bob', '--reason', 'recovered'], env);
      const role = (await db.pool.query<{ u: string }>('SELECT session_user AS u')).rows[0].u;
      const run = await cli(['changes', '--subject', q], env);
      expect(run).toMatchObject({ code: 0, stderr: '' });
      const lines = run.stdout.trimEnd().split('\n');
      expect(lines[0]).toMatch(/^AT +ACTOR +LOGIN ROLE +KIND +SUBJECT +DETAIL +REASON$/);
      expect(lines.slice(1).map((line) => line.split(/ {2,}/).slice(1))).toEqual([
        ['bob', role, 'queue_resumed', q, '-', 'recovered'],
        ['alice', role, 'queue_paused', q, '-', 'provider outage'],
      ]);
      const doc = documentOf<{ kind: string; actor: string; loginRole: string }[]>(await cli(['changes', '--subject', q, '--limit', '1', '--json'], env));
      expect(doc).toEqual([expect.objectContaining({ kind: 'queue_resumed', actor: 'bob', loginRole: role, subject: q })]);
      expect(errorOf(await cli(['changes', '--kind', 'bogus'], env), 2)).toMatch(/kind/);
      expect(errorOf(await cli(['changes', '--limit', 'x'], env), 2)).toMatch(/limit/);
    });

    it('refuses a bad queue name, actor or reason with exit 2, and changes nothing', async () => {
      const q = newQueue('qbad');
      const cases: [string[], string][] = [
        [['queues', 'pause', 'bad queue'], 'queue: must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -'],
        [['queues', 'resume', 'bad queue'], 'queue: must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -'],
        [['queues', 'pause', q, '--reason', 'r'.repeat(1001)], 'reason: must be a string of at most 1000 characters'],
        [['queues', 'pause', q, '--actor', 'a'.repeat(201)], 'actor: must be a string of at most 200 characters'],
      ];
      for (const [args, message] of cases) {
        expect(errorOf(await cli(args, env), 2)).toBe(`workhorse: ${message}`);
      }
      expect(await infoOf(q)).toBeUndefined();
    });

    it('limit sets a queue\'s concurrency and rate, shows them in queues list, and unlimit removes them', async () => {
      const q = newQueue('qlimit');
      for (let i = 0; i < 4; i++) await queue.enqueue('a', {}, { queue: q });

      expect(await cli(['queues', 'limit', q, '--concurrency', '2', '--rate', '50', '--per', '1s'], env)).toEqual({
        code: 0,
        stdout: `Limited queue ${q}: at most 2 active, 50 per 1000 ms, across all workers.\n`,
        stderr: '',
      });
      expect(await infoOf(q)).toMatchObject({ concurrency: 2, rateLimit: { limit: 50, intervalMs: 1000 } });
      expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(2);
      const row = (await cli(['queues', 'list'], env)).stdout.split('\n').find((line) => line.startsWith(`${q} `));
      expect(row?.split(/ {2,}/)).toEqual([q, 'no', '2', '0', '2', '0', 'at most 2 active, 50 per 1000 ms', '-', '-', '-', '-']);

      // Replaced as a whole: the rate alone now, in another unit.
      const json = documentOf<QueueInfo>(await cli(['queues', 'limit', q, '--rate', '3', '--per', '2m', '--json'], env));
      expect(json).toEqual(viaJson(await infoOf(q)));
      expect(json).toMatchObject({ concurrency: null, rateLimit: { limit: 3, intervalMs: 120_000 } });
      expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(1);

      expect(await cli(['queues', 'unlimit', q, '--reason', 'done'], env)).toEqual({
        code: 0,
        stdout: `Queue ${q} has no limits: workers claim its jobs as fast as they have free slots.\n`,
        stderr: '',
      });
      expect(await infoOf(q)).toMatchObject({ concurrency: null, rateLimit: null });
      expect(await claim(db.pool, q, { limit: 10 })).toHaveLength(1);
    });

    it('limit refuses a value out of range, a bad duration or a bad queue with exit 2, and changes nothing', async () => {
      const q = newQueue('qlimitbad');
      const cases: [string[], string][] = [
        [['queues', 'limit', q, '--concurrency', '0'], 'concurrency: must be an integer from 1 to 100000'],
        [['queues', 'limit', q, '--concurrency', 'many'], 'concurrency: must be an integer from 1 to 100000'],
        [['queues', 'limit', q, '--rate', '0', '--per', '1s'], 'rateLimit.limit: must be an integer from 1 to 100000'],
        [['queues', 'limit', q, '--rate', '5', '--per', '1 week'], 'rateLimit.intervalMs: must be an integer from 1 to 86400000'],
        [['queues', 'limit', q, '--rate', '5', '--per', '25h'], 'rateLimit.intervalMs: must be an integer from 1 to 86400000'],
        [['queues', 'limit', 'bad queue', '--concurrency', '1'], 'queue: must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -'],
      ];
      for (const [args, message] of cases) {
        expect(errorOf(await cli(args, env), 2)).toBe(`workhorse: ${message}`);
      }
      expect(await infoOf(q)).toBeUndefined();
    });
  });
});
