/**
 * The crash soak under Jest: 20,000 jobs through three worker processes that are SIGKILLed at
 * random intervals by the driver and at random failpoints by themselves, then the full
 * accounting of soak/run.ts. See docs/reliability.md ("Soak accounting") for what each number
 * means and for measured run times.
 *
 * WORKHORSE_SOAK_JOBS overrides the job count (e.g. for a quick local run).
 */
import { useTestDatabase } from '../support/test-database';
import { account, formatReport, runSoak, type SoakReport } from './soak/run';

const JOBS = Number(process.env.WORKHORSE_SOAK_JOBS ?? 20_000);
// The run gives up (and reports what is still live) well before Jest would kill it.
const DEADLINE_MS = 20 * 60_000;

const { db, pool } = useTestDatabase();

describe(`the crash soak (${JOBS} jobs)`, () => {
  let report: SoakReport;

  it(
    'ends every job exactly once while workers are killed at random, and the accounting adds up',
    async () => {
      report = await runSoak({ url: db.url, jobs: JOBS, deadlineMs: DEADLINE_MS });
      // The accounting goes to the log of every run, passing or not: written as it is, because
      // console.log under Jest would add a stack-like "at ..." line that reads like a failure.
      process.stdout.write(`\n${formatReport(report)}\n`);

      expect(report.violations).toEqual([]);
      expect(report.jobs).toEqual({
        committed: JOBS,
        succeeded: JOBS,
        failed: 0,
        canceled: 0,
        live: 0,
        notExactlyOneOutcome: 0,
        splitViolations: 0,
      });
      expect(Object.values(report.consistency).every((n) => n === 0)).toBe(true);
      expect(report.handler.attemptsRunTwice).toBe(0);
      expect(report.stages.executedAfterTheirCheckpoint).toBe(0);
      expect(report.stages.resultsNotFromTheCheckpoint).toBe(0);
      expect(report.attempts.succeeded).toBe(JOBS);
      expect(report.attempts.total).toBe(report.attempts.succeeded + report.attempts.expired + report.attempts.failed);
      expect(report.staleWrites.withoutExpiredAttempt).toBe(0);
      expect(report.staleWrites.survivorsUnreported).toBe(0);
      expect(report.kills.unexpectedExits).toBe(0);

      // A soak in which nothing died would prove nothing: the driver killed workers holding jobs,
      // those jobs were recovered and ran again.
      expect(report.kills.byDriver).toBeGreaterThan(0);
      expect(report.attempts.expiredFromKilledWorkers).toBeGreaterThan(0);
      expect(report.handler.reruns).toBeGreaterThan(0);
      // Every planned failure that got to the end failed once and was retried to success.
      expect(report.attempts.failed).toBeGreaterThan(0);
    },
    DEADLINE_MS + 3 * 60_000,
  );

  // The accounting must be able to fail: break the finished run in one way at a time (inside a
  // transaction that is rolled back) and check that exactly the matching check objects.
  it.each([
    [
      'a stage executed again after its checkpoint',
      `INSERT INTO public.soak_side_effect (job_id, stage, attempt, worker_id, token)
       SELECT job_id, name, attempt + 1, 'intruder', gen_random_uuid() FROM workhorse.job_checkpoint LIMIT 1`,
      ['1 stage executions after their checkpoint was stored'],
    ],
    [
      'a result that is not the stored checkpoint',
      `UPDATE workhorse.job_checkpoint SET value = jsonb_set(value, '{attempt}', '99')
        WHERE (job_id, name) = (SELECT job_id, name FROM workhorse.job_checkpoint LIMIT 1)`,
      ['1 results not made of the stored checkpoints'],
    ],
    [
      'an attempt without its claimed event',
      `DELETE FROM workhorse.job_event WHERE id = (SELECT min(id) FROM workhorse.job_event WHERE kind = 'claimed')`,
      ['consistency: claimedEventsNotOnePerAttempt = 1'],
    ],
    [
      'a second success event',
      `INSERT INTO workhorse.job_event (job_id, at, kind, attempt)
       SELECT job_id, clock_timestamp(), 'succeeded', final_attempt FROM workhorse.job_outcome LIMIT 1`,
      ['consistency: succeededEventsNotOne = 1'],
    ],
    [
      'a handler that ran twice in one attempt',
      `INSERT INTO public.soak_handler_run (job_id, attempt, worker_id, pid)
       SELECT job_id, attempt, worker_id, pid FROM public.soak_handler_run LIMIT 1`,
      ['1 attempts ran the handler more than once'],
    ],
  ])('the accounting notices %s', async (_what, breakage, expected) => {
    expect(report).toBeDefined();
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(breakage);
      const violations: string[] = [];
      await account(client, report.config, [], [], [], violations);
      expect(violations).toEqual(expected);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  });
});
