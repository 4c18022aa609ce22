#!/usr/bin/env node
'use strict';
/**
 * Alternating drain pairs of two variants of our worker, for judging a change on a noisy
 * machine: `node test/bench/compare.js --a workhorse@main --b workhorse --concurrency 50`.
 *
 * A variant is `system[@git-ref]`: one of our systems of test/bench/lib/config.js (workhorse,
 * workhorse-nest, workhorse-lanes), taken from the working tree or, with `@ref`, from that
 * commit (its lib/ and sql/, transpiled as run.js does; the adapters are the working tree's).
 * Each pair drains the same number of preloaded no-op jobs once with each variant, in a fresh
 * database each, on one embedded PostgreSQL with durable settings; the order within a pair
 * alternates (A B, B A, A B, ...). It prints every drain (rate, worker and server CPU per job,
 * peak RSS) and, per pair, B's rate as a multiple of A's, then the medians.
 *
 * Options:
 *   --a VARIANT, --b VARIANT   the two variants (required)
 *   --concurrency N            worker concurrency (default 50)
 *   --jobs N                   jobs per drain (default 20000)
 *   --pairs N                  pairs (default 4)
 *   --options JSON             worker options for both variants, e.g. '{"roundTrips":2}'
 *   --nice N                   run at this nice value (the server and children inherit it), e.g.
 *                              -5 on a shared machine (lower needs root)
 *   --profile                  CPU-profile every drain's worker and print where each variant's
 *                              worker spent its time (profiling slows the drains: compare the
 *                              rates of profiled pairs with each other only)
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SYSTEMS } = require('./lib/config');
const { startServer } = require('./lib/server');
const { transpileLib, ROOT } = require('./lib/transpile');
const { startChild, killAll } = require('./lib/children');
const { waitForQuiet } = require('./lib/machine');
const { summarizeProfile } = require('./lib/diagnose');

function parseArgs(argv) {
  const args = { concurrency: 50, jobs: 20000, pairs: 4, options: {} };
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${flag} needs a value`);
      return argv[++i];
    };
    if (flag === '--a') args.a = value();
    else if (flag === '--b') args.b = value();
    else if (flag === '--concurrency') args.concurrency = Number(value());
    else if (flag === '--jobs') args.jobs = Number(value());
    else if (flag === '--pairs') args.pairs = Number(value());
    else if (flag === '--options') args.options = JSON.parse(value());
    else if (flag === '--nice') args.nice = Number(value());
    else if (flag === '--profile') args.profile = true;
    else if (flag === '--help' || flag === '-h') {
      process.stdout.write(`${fs.readFileSync(__filename, 'utf8').split('*/')[0].split('\n').slice(3).map((l) => l.replace(/^ \*? ?/, '')).join('\n')}\n`);
      process.exit(0);
    } else throw new Error(`unknown option ${flag} (see --help)`);
  }
  if (!args.a || !args.b) throw new Error('give both --a and --b (see --help)');
  return args;
}

const cleanups = [];
async function cleanup() {
  killAll();
  for (const fn of cleanups.splice(0).reverse()) await Promise.resolve(fn()).catch((e) => process.stderr.write(`cleanup: ${e.message}\n`));
}
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => cleanup().finally(() => process.exit(130)));

const log = (message) => process.stderr.write(`[compare] ${message}\n`);

/** A variant's system and the transpiled tree it runs from. */
function prepareVariant(text) {
  const [systemId, ref] = text.split('@');
  if (!SYSTEMS[systemId]?.ours) throw new Error(`${systemId} is not one of our systems (${Object.keys(SYSTEMS).filter((s) => SYSTEMS[s].ours).join(', ')})`);
  let root = ROOT;
  if (ref) {
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'workhorse-compare-'));
    cleanups.push(() => fs.rmSync(root, { recursive: true, force: true }));
    // The protocol's limits (sdk/protocol/limits.json, read by lib/core/limits.ts) where that commit has them.
    const paths = ['lib', 'sql', 'package.json'];
    try {
      execFileSync('git', ['-C', ROOT, 'cat-file', '-e', `${ref}:sdk/protocol`], { stdio: 'ignore' });
      paths.push('sdk/protocol');
    } catch {
      // an older commit: no limits file
    }
    const archive = execFileSync('git', ['-C', ROOT, 'archive', '--format=tar', ref, ...paths], { maxBuffer: 1 << 28 });
    execFileSync('tar', ['-x', '-C', root], { input: archive });
  }
  const lib = transpileLib(root);
  cleanups.push(lib.remove);
  const commit = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', ref ?? 'HEAD']).toString().trim();
  return { text: ref ? text : `${text} (working tree at ${commit})`, systemId, libDir: lib.dir, adapter: require(`./systems/${SYSTEMS[systemId].adapter}.js`) };
}

let dbCounter = 0;
async function drainOnce(server, variant, args) {
  const name = `compare_${++dbCounter}`;
  const profileDir = args.profile ? fs.mkdtempSync(path.join(os.tmpdir(), 'workhorse-compare-prof-')) : null;
  const url = await server.createDatabase(name);
  try {
    await variant.adapter.install({ libDir: variant.libDir, url });
    await variant.adapter.preload({ libDir: variant.libDir, url, count: args.jobs, parallel: 2 });
    await server.withClient((c) => c.query('VACUUM ANALYZE'), name);
    await server.withClient((c) => c.query('CHECKPOINT'), name);
    const child = startChild(
      {
        mode: 'drain',
        adapter: SYSTEMS[variant.systemId].adapter,
        libDir: variant.libDir,
        url,
        concurrency: args.concurrency,
        jobs: args.jobs,
        options: { ...SYSTEMS[variant.systemId].options, ...args.options },
        capMs: 300_000,
      },
      { label: variant.text, execArgv: profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [] },
    );
    await child.next('ready', 60_000);
    await waitForQuiet();
    const cpu0 = server.cpuSeconds();
    child.send({ type: 'go' });
    const { result } = await child.next('done', 420_000);
    const serverCpu = server.cpuSeconds();
    await child.finish();
    const done = result.completed;
    let profile;
    if (profileDir) {
      const file = fs.readdirSync(profileDir).find((f) => f.endsWith('.cpuprofile'));
      if (file) profile = summarizeProfile(path.join(profileDir, file), variant.libDir);
      fs.rmSync(profileDir, { recursive: true, force: true });
    }
    return {
      profile,
      rate: (done / result.elapsedMs) * 1000,
      capped: result.capped,
      workerCpuMsPerJob: (result.cpuUserMs + result.cpuSystemMs) / done,
      serverCpuMsPerJob: cpu0 !== null && serverCpu !== null ? ((serverCpu - cpu0) * 1000) / done : null,
      rssPeakMiB: result.rssPeakBytes / 1048576,
      errors: result.errors.length,
    };
  } finally {
    await server.dropDatabase(name);
  }
}

const median = (values) => {
  const s = [...values].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const fmt = (r) =>
  `${r.rate.toFixed(0).padStart(6)} jobs/s${r.capped ? ' (capped)' : ''}, worker ${r.workerCpuMsPerJob.toFixed(4)} ms/job, ` +
  `server ${r.serverCpuMsPerJob === null ? '?' : r.serverCpuMsPerJob.toFixed(4)} ms/job, RSS peak ${r.rssPeakMiB.toFixed(0)} MiB` +
  (r.errors ? `, ${r.errors} errors` : '');

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.nice !== undefined) os.setPriority(0, args.nice);
  const a = prepareVariant(args.a);
  const b = prepareVariant(args.b);
  const server = await startServer({ log });
  cleanups.push(() => server.stop());
  log(`PostgreSQL ${server.version}; A = ${a.text}, B = ${b.text}; concurrency ${args.concurrency}, ${args.jobs} jobs, ${args.pairs} pairs`);
  const results = { a: [], b: [] };
  for (let pair = 0; pair < args.pairs; pair++) {
    const order = pair % 2 === 0 ? ['a', 'b'] : ['b', 'a'];
    for (const side of order) {
      const r = await drainOnce(server, side === 'a' ? a : b, args);
      results[side].push(r);
      log(`pair ${pair + 1} ${side.toUpperCase()}: ${fmt(r)}`);
    }
  }
  const lines = [
    `A = ${a.text}`,
    `B = ${b.text}`,
    `concurrency ${args.concurrency}, ${args.jobs} jobs per drain, options ${JSON.stringify(args.options)}, nice ${os.getPriority(0)}`,
    '',
  ];
  lines.push('pair | order | A jobs/s | B jobs/s | B/A | A worker ms/job | B worker ms/job | A RSS MiB | B RSS MiB');
  for (let i = 0; i < args.pairs; i++) {
    const [ra, rb] = [results.a[i], results.b[i]];
    lines.push(
      [
        i + 1,
        i % 2 === 0 ? 'A B' : 'B A',
        ra.rate.toFixed(0),
        rb.rate.toFixed(0),
        (rb.rate / ra.rate).toFixed(3),
        ra.workerCpuMsPerJob.toFixed(4),
        rb.workerCpuMsPerJob.toFixed(4),
        ra.rssPeakMiB.toFixed(0),
        rb.rssPeakMiB.toFixed(0),
      ].join(' | '),
    );
  }
  const m = (side, key) => median(results[side].map((r) => r[key]));
  lines.push('');
  for (const side of ['a', 'b']) {
    lines.push(
      `median ${side.toUpperCase()}: ${m(side, 'rate').toFixed(0)} jobs/s, worker ${m(side, 'workerCpuMsPerJob').toFixed(4)} ms/job, ` +
        `server ${results[side].some((r) => r.serverCpuMsPerJob === null) ? '?' : m(side, 'serverCpuMsPerJob').toFixed(4)} ms/job, RSS peak ${m(side, 'rssPeakMiB').toFixed(0)} MiB`,
    );
  }
  const ratios = results.b.map((r, i) => r.rate / results.a[i].rate);
  lines.push(`B/A per pair: median ${median(ratios).toFixed(3)}, range ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}`);
  lines.push(`B/A RSS peak: ${(m('b', 'rssPeakMiB') / m('a', 'rssPeakMiB')).toFixed(2)}`);
  for (const side of args.profile ? ['a', 'b'] : []) {
    const { profile } = results[side].at(-1);
    if (!profile) continue;
    lines.push('', `${side.toUpperCase()}'s worker, last drain (${profile.totalMs.toFixed(0)} ms profiled):`);
    for (const { area, percent } of profile.areas) lines.push(`  ${String(percent).padStart(5)}%  ${area}`);
    for (const { fn, percent } of profile.topFunctions) lines.push(`  ${String(percent).padStart(5)}%  ${fn}`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}

main()
  .then(() => cleanup())
  .then(() => process.exit(0))
  .catch(async (error) => {
    process.stderr.write(`${error.stack}\n`);
    await cleanup();
    process.exit(1);
  });
