/**
 * The server's cron evaluator (sql/084_cron.sql) against the shared vectors
 * (sdk/protocol/cron-vectors.json, which the Python and Go tests run too) and against croner,
 * the library the TypeScript client planned with before the server did: every vector's
 * occurrences (daylight-saving gaps and repeats in several zones, leap days, month ends, `L`,
 * `#`, every example of docs/schedules.md) are what both compute; every refused expression is
 * refused by both (the server with P1001 naming the field); the croner extensions the server
 * does not read are refused; and random expressions over random instants (many near transitions)
 * give the same next occurrences in both.
 */
import { Cron } from 'croner';
import type { DatabaseError } from 'pg';
import vectors from '../../sdk/protocol/cron-vectors.json';
import { useTestDatabase } from '../support/test-database';

const { pool } = useTestDatabase();

const ISO = `to_char(u AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The next `count` occurrences after `after`, as the server computes them. */
async function serverOccurrences(cron: string, timezone: string, after: string, count: number): Promise<string[]> {
  const { rows } = await pool.query<{ at: string[] }>(
    `SELECT ARRAY(SELECT ${ISO} FROM unnest(workhorse.cron_occurrences(workhorse.cron_parse($1, 'cron'), $2, $3, 'infinity', $4)) AS u) AS at`,
    [cron, timezone, after, count],
  );
  return rows[0].at;
}

function cronerOccurrences(cron: string, timezone: string, after: string, count: number): string[] {
  return new Cron(cron, { timezone, mode: '5-or-6-parts' }).nextRuns(count, new Date(after)).map((d) => d.toISOString());
}

/** The server's refusal of an expression: SQLSTATE, field and message. */
async function refusal(cron: string): Promise<{ code?: string; column?: string; message: string } | null> {
  try {
    await pool.query(`SELECT workhorse.check_cron($1, 'definitions[0].cron')`, [cron]);
    return null;
  } catch (error) {
    const e = error as DatabaseError;
    return { code: e.code, column: e.column, message: e.message };
  }
}

describe('the shared vectors', () => {
  it.each(vectors.occurrences.map((v) => [v.note, v] as const))('%s', async (_note, v) => {
    expect(await serverOccurrences(v.cron, v.timezone, v.after, v.expected.length)).toEqual(v.expected);
    expect(cronerOccurrences(v.cron, v.timezone, v.after, v.expected.length)).toEqual(v.expected);
  });

  it('refuses every invalid expression, naming the field, as croner does', async () => {
    for (const v of vectors.invalid) {
      const refused = await refusal(v.cron);
      expect({ cron: v.cron, refused: refused && { code: refused.code, column: refused.column } }).toEqual({
        cron: v.cron,
        refused: { code: 'P1001', column: 'definitions[0].cron' },
      });
      expect(refused?.message).toMatch(/^definitions\[0\]\.cron: /);
      let croner: Cron | null = null;
      try {
        croner = new Cron(v.cron, { timezone: 'UTC', mode: '5-or-6-parts' });
      } catch {
        croner = null;
      }
      expect({ cron: v.cron, occurs: croner !== null && croner.nextRun(new Date(0)) !== null }).toEqual({ cron: v.cron, occurs: false });
    }
  });

  it('refuses the croner extensions the documented syntax leaves out (W, LW, +)', async () => {
    for (const v of vectors.refusedExtensions) {
      expect({ cron: v.cron, code: (await refusal(v.cron))?.code }).toEqual({ cron: v.cron, code: 'P1001' });
    }
  });
});

describe('random expressions, compared with croner', () => {
  // A fixed seed: a failure names the expression, the zone and the instant, and repeats.
  let seed = 20261202;
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const pick = <T>(values: readonly T[]): T => values[next(values.length)];
  const field = (min: number, max: number, special: readonly string[] = []): string => {
    const value = () => min + next(max - min + 1);
    switch (next(10)) {
      case 0:
      case 1:
      case 2:
        return '*';
      case 3:
      case 4:
        return String(value());
      case 5: {
        const [a, b] = [value(), value()].sort((x, y) => x - y);
        return `${a}-${b}`;
      }
      case 6:
        return `*/${1 + next(Math.min(max, 15))}`;
      case 7: {
        const [a, b] = [value(), value()].sort((x, y) => x - y);
        return `${a}-${b}/${1 + next(5)}`;
      }
      case 8:
        return `${value()},${value()}`;
      default:
        return special.length > 0 ? pick(special) : String(value());
    }
  };
  const zones = ['UTC', 'Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'America/Santiago', 'Asia/Tokyo', 'Pacific/Chatham', 'America/Havana', 'Australia/Sydney'];
  // Instants around the 2026 transitions of those zones, and anywhere in 2024-2027.
  const transitions = ['2026-03-08T06:00:00Z', '2026-11-01T05:00:00Z', '2026-03-29T00:30:00Z', '2026-10-25T00:00:00Z', '2026-04-04T14:30:00Z', '2026-10-03T15:00:00Z', '2026-09-06T04:00:00Z', '2026-04-05T03:00:00Z'];

  it('gives the same next five occurrences for 400 expressions', async () => {
    const differences: unknown[] = [];
    for (let i = 0; i < 400; i++) {
      const parts = [
        field(0, 59),
        field(0, 59),
        field(0, 23),
        field(1, 31, ['L', '1,L', '15']),
        field(1, 12, ['JAN-MAR', 'feb', '*/3']),
        field(0, 7, ['5L', '1#2', 'MON-FRI', 'sun', '0#5', '6#L']),
      ];
      if (next(3) !== 0) parts.shift();
      const cron = parts.join(' ');
      const timezone = pick(zones);
      const after = (
        next(2) === 0
          ? new Date(Date.parse(pick(transitions)) + (next(7200) - 3600) * 1000 + next(1000))
          : new Date(Date.UTC(2024 + next(4), next(12), 1 + next(28), next(24), next(60), next(60), next(1000)))
      ).toISOString();
      const expected = cronerOccurrences(cron, timezone, after, 5);
      const actual = await serverOccurrences(cron, timezone, after, 5);
      if (JSON.stringify(actual) !== JSON.stringify(expected)) differences.push({ cron, timezone, after, expected, actual });
    }
    expect(differences).toEqual([]);
  });
});
