'use strict';
/**
 * Fills a database with terminal jobs quickly, for "history does not slow dispatch".
 *
 * Rather than restating the schema here (and going stale when it changes), one real job is
 * enqueued and run to success by the real core Worker; every row it left behind in the
 * `workhorse` schema (job, job_query, job_outcome, job_event, attempt_history, and whatever
 * else a completed job leaves) is then copied N times with one set-based INSERT per table:
 * per copy a new time-ordered job id, a new FIFO sequence and fence token from the schema's own
 * sequences, timestamps shifted to spread the copies over the last hour (within today, UTC, so
 * they land in today's history partitions) and payload {"i": n}. History ids come from their
 * column defaults, so each copy's events keep their order. Two sessions insert in parallel.
 */
const path = require('node:path');

async function columnsOf(client, table) {
  const { rows } = await client.query(
    `SELECT a.attname AS name, format_type(a.atttypid, a.atttypmod) AS type,
            coalesce(pg_get_expr(d.adbin, d.adrelid), '') AS default_expr
       FROM pg_attribute a
       LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
      WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY a.attnum`,
    [table],
  );
  return rows;
}

async function runTemplateJob(libDir, url) {
  const { Pool, Queue, Worker } = require(path.join(libDir, 'lib', 'core', 'index.js'));
  const pool = new Pool({ connectionString: url, max: 4 });
  pool.on('error', () => undefined);
  try {
    const queue = new Queue(pool);
    const jobId = await queue.enqueue('noop', { i: 0 });
    const worker = new Worker(queue, { workerId: 'bench-history-worker', concurrency: 1 });
    worker.handle('noop', async () => undefined);
    const ran = await worker.runOnce();
    if (ran !== 1) throw new Error(`the template job did not run (runOnce returned ${ran})`);
    return jobId;
  } finally {
    await pool.end();
  }
}

/**
 * Adds `count` terminal (succeeded) jobs to the workhorse schema at `url`. Returns what it
 * did: the template's rows per table and the seconds spent.
 */
async function generateHistory({ server, database, libDir, count, log }) {
  const url = server.databaseUrl(database);
  const started = Date.now();
  const jobId = await runTemplateJob(libDir, url);
  const inspected = await server.withClient(async (client) => {
    const live = await client.query('SELECT count(*)::int AS n FROM workhorse.job_runtime WHERE job_id = $1', [jobId]);
    if (live.rows[0].n !== 0) throw new Error('the template job is not terminal');
    // Every table of the schema (partitioned parents, not their partitions) with rows of the job.
    const { rows: tables } = await client.query(
      `SELECT c.oid::regclass::text AS name,
              EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'job_id' AND NOT a.attisdropped) AS has_job_id
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'workhorse' AND c.relkind IN ('r', 'p') AND NOT c.relispartition
        ORDER BY c.relname`,
    );
    const { rows: createdRows } = await client.query('SELECT created_at FROM workhorse.job WHERE id = $1', [jobId]);
    // The per-copy values, shared by the insert sessions (so a plain, unlogged table).
    await client.query(
      `CREATE UNLOGGED TABLE public.bench_gen AS
       SELECT g,
              workhorse.new_job_id() AS id,
              nextval('workhorse.job_seq') AS seq,
              nextval('workhorse.fence_seq') AS fence,
              b.start + (b.stop - b.start) * ((g - 1)::float8 / $1) AS ts
         FROM generate_series(1, $1::int) AS g,
              LATERAL (SELECT greatest(date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
                                       now() - interval '1 hour') AS start,
                              now() - interval '1 minute' AS stop) AS b`,
      [count],
    );
    const statements = [];
    for (const table of tables) {
      const key = table.has_job_id ? 'job_id' : table.name === 'workhorse.job' ? 'id' : null;
      if (!key) continue;
      const n = (await client.query(`SELECT count(*)::int AS n FROM ${table.name} WHERE ${key} = $1`, [jobId])).rows[0].n;
      if (n === 0) continue;
      const columns = await columnsOf(client, table.name);
      const targets = [];
      const exprs = [];
      for (const col of columns) {
        const c = client.escapeIdentifier(col.name);
        if (col.default_expr.startsWith('nextval(')) continue; // history ids: the column default
        targets.push(c);
        if (col.type === 'uuid') exprs.push(`CASE WHEN t.${c} = $1::uuid THEN g.id ELSE t.${c} END`);
        else if (col.type === 'bigint' && col.name === 'seq') exprs.push('g.seq');
        else if (col.type === 'bigint' && (col.name === 'fence_token' || col.name === 'fence')) exprs.push(`CASE WHEN t.${c} IS NULL THEN NULL ELSE g.fence END`);
        else if (col.type === 'timestamp with time zone') exprs.push(`t.${c} + (g.ts - $2::timestamptz)`);
        else if (table.name === 'workhorse.job' && col.name === 'payload') exprs.push(`jsonb_build_object('i', g.g)`);
        else exprs.push(`t.${c}`);
      }
      const order = columns.some((c) => c.name === 'id' && c.default_expr.startsWith('nextval(')) ? 'g.g, t.id' : 'g.g';
      statements.push({
        table: table.name,
        rowsPerJob: n,
        sql: `INSERT INTO ${table.name} (${targets.join(', ')})
              SELECT ${exprs.join(', ')}
                FROM public.bench_gen g
                CROSS JOIN (SELECT * FROM ${table.name} WHERE ${key} = $1::uuid) AS t
               WHERE $2::timestamptz IS NOT NULL
               ORDER BY ${order}`,
      });
    }
    return { statements, templateCreatedAt: createdRows[0].created_at };
  }, database);

  // Two sessions share the tables out, biggest first, so both cores work.
  const lanes = [[], []];
  const weight = [0, 0];
  for (const st of [...inspected.statements].sort((a, b) => b.rowsPerJob - a.rowsPerJob)) {
    const lane = weight[0] <= weight[1] ? 0 : 1;
    lanes[lane].push(st);
    weight[lane] += st.rowsPerJob;
  }
  const copied = {};
  await Promise.all(
    lanes.map((lane) =>
      server.withClient(async (client) => {
        for (const st of lane) {
          const t0 = Date.now();
          await client.query(st.sql, [jobId, inspected.templateCreatedAt]);
          copied[st.table] = { rowsPerJob: st.rowsPerJob, seconds: (Date.now() - t0) / 1000 };
          log(`  history: ${st.table}, ${st.rowsPerJob} row(s) per job, in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
        }
        for (const st of lane) await client.query(`VACUUM ANALYZE ${st.table}`);
      }, database),
    ),
  );
  return server.withClient(async (client) => {
    await client.query('DROP TABLE public.bench_gen');
    await client.query('VACUUM ANALYZE');
    await client.query('CHECKPOINT').catch(() => undefined);
    const counts = await client.query(
      `SELECT (SELECT count(*) FROM workhorse.job_outcome)::int AS outcomes,
              (SELECT count(*) FROM workhorse.job_runtime)::int AS runtime`,
    );
    return {
      jobs: count,
      templateJobId: jobId,
      tables: copied,
      outcomes: counts.rows[0].outcomes,
      runtimeRows: counts.rows[0].runtime,
      seconds: (Date.now() - started) / 1000,
    };
  }, database);
}

module.exports = { generateHistory };
