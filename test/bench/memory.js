#!/usr/bin/env node
'use strict';
/**
 * Where a worker process's memory goes, for the Nest-hosted worker against the core one:
 * `node test/bench/memory.js [--jobs 20000] [--reps 3] [--node-flags "--max-semi-space-size=4"]`.
 *
 * Each measurement is a fresh Node process (one per line of output), on one embedded PostgreSQL:
 *
 *   bare          `pg` loaded and one connection open: what any Node process with `pg` costs
 *   nest-empty    the same, plus `NestFactory.createApplicationContext` of an empty module
 *   workhorse     the benchmark's core worker (test/bench/systems/workhorse.js), started, idle
 *   workhorse-nest the benchmark's Nest worker (systems/workhorse-nest.js), started, idle
 *   nest-core     an empty Nest application context and, beside it, the core worker started
 *                 directly (not through our module): what any Nest-hosted worker built on the
 *                 core worker costs at least
 *
 * and then, in rotated order, drains of `--jobs` preloaded no-op jobs at concurrency 50 by each
 * worker. Every line gives VmRSS and VmHWM (peak), and the physical size of V8's young ("new")
 * and old generations, at start (after a GC when the process was started with --expose-gc) and at
 * their largest during the drain. The medians per process kind close the output.
 */
const { execFileSync } = require('node:child_process');
const fs = require('node:fs');
const path = require('node:path');
const v8 = require('node:v8');

const KINDS = ['bare', 'nest-empty', 'workhorse', 'workhorse-nest', 'nest-core'];
const mib = (bytes) => Math.round((bytes / 2 ** 20) * 10) / 10;
const median = (values) => {
  const s = [...values].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function procStatus() {
  const text = fs.readFileSync('/proc/self/status', 'utf8');
  const read = (key) => mib(Number(text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm'))[1]) * 1024);
  return { rss: read('VmRSS'), peak: read('VmHWM') };
}

function generations() {
  const size = (name) => mib(v8.getHeapSpaceStatistics().find((s) => s.space_name === name)?.physical_space_size ?? 0);
  return { young: size('new_space'), old: size('old_space') };
}

/** `NestFactory.createApplicationContext` of a module that declares nothing. */
async function emptyNestContext() {
  require('reflect-metadata');
  const { Module } = require('@nestjs/common');
  const { NestFactory } = require('@nestjs/core');
  class EmptyModule {}
  Module({})(EmptyModule);
  return NestFactory.createApplicationContext(EmptyModule, { logger: false });
}

/** One measured process: starts `kind`, drains `jobs` jobs if asked, prints one JSON line. */
async function measure(kind, { libDir, url, jobs }) {
  let stop;
  let drained = Promise.resolve();
  if (kind === 'bare' || kind === 'nest-empty') {
    const { Client } = require('pg');
    const client = new Client({ connectionString: url });
    await client.connect();
    const app = kind === 'nest-empty' ? await emptyNestContext() : null;
    stop = async () => {
      await app?.close();
      await client.end();
    };
  } else {
    const app = kind === 'nest-core' ? await emptyNestContext() : null;
    const system = require(path.join(__dirname, 'systems', `${kind === 'nest-core' ? 'workhorse' : kind}.js`));
    let count = 0;
    let done;
    drained = jobs > 0 ? new Promise((resolve) => (done = resolve)) : drained;
    const worker = await system.startWorker({
      libDir,
      url,
      concurrency: 50,
      onJob: () => {
        if (++count === jobs) done();
      },
      onError: (message) => process.stderr.write(`${message}\n`),
    });
    stop = async () => {
      await worker.stop();
      await app?.close();
    };
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  if (typeof global.gc === 'function') global.gc();
  const started = { ...procStatus(), ...generations() };
  const largest = generations();
  const sampler = setInterval(() => {
    const now = generations();
    largest.young = Math.max(largest.young, now.young);
    largest.old = Math.max(largest.old, now.old);
  }, 20);
  await drained;
  clearInterval(sampler);
  const line = { kind, drainedJobs: jobs, start: started, end: procStatus(), largest };
  await stop();
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

function parseArgs(argv) {
  const args = { jobs: 20000, reps: 3, nodeFlags: [] };
  for (let i = 0; i < argv.length; i++) {
    const value = () => argv[++i];
    if (argv[i] === '--jobs') args.jobs = Number(value());
    else if (argv[i] === '--reps') args.reps = Number(value());
    else if (argv[i] === '--node-flags') args.nodeFlags = value().split(/\s+/).filter(Boolean);
    else throw new Error(`unknown option ${argv[i]} (see the comment at the top of ${path.basename(__filename)})`);
  }
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const { startServer } = require('./lib/server');
  const { transpileLib } = require('./lib/transpile');
  const core = require('./systems/workhorse');
  const server = await startServer({ log: (message) => process.stderr.write(`[memory] ${message}\n`) });
  const lib = transpileLib();
  const lines = [];
  const run = (kind, jobs) => {
    const out = execFileSync(process.execPath, [...args.nodeFlags, __filename, '--child', kind], {
      env: { ...process.env, MEMORY_SPEC: JSON.stringify({ libDir: lib.dir, url: server.url, jobs }) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = JSON.parse(out.toString());
    lines.push(line);
    process.stdout.write(`${JSON.stringify(line)}\n`);
  };
  try {
    await core.install({ libDir: lib.dir, url: server.url });
    for (let rep = 0; rep < args.reps; rep++) for (const kind of KINDS) run(kind, 0);
    const drains = ['workhorse', 'workhorse-nest', 'nest-core'];
    for (let rep = 0; rep < args.reps; rep++) {
      for (const kind of [...drains.slice(rep % drains.length), ...drains.slice(0, rep % drains.length)]) {
        await core.preload({ libDir: lib.dir, url: server.url, count: args.jobs, parallel: 2 });
        run(kind, args.jobs);
      }
    }
  } finally {
    lib.remove();
    await server.stop();
  }
  process.stdout.write(`\nmedians, MiB (node ${process.version}${args.nodeFlags.length ? `, ${args.nodeFlags.join(' ')}` : ''}):\n`);
  for (const drained of [false, true]) {
    for (const kind of KINDS) {
      const of = lines.filter((l) => l.kind === kind && (l.drainedJobs > 0) === drained);
      if (of.length === 0) continue;
      const m = (pick) => median(of.map(pick));
      process.stdout.write(
        `${drained ? `drain of ${args.jobs}` : 'idle'} | ${kind} | RSS at start ${m((l) => l.start.rss)} | peak ${m((l) => l.end.peak)}` +
          ` | young ${m((l) => l.start.young)} -> ${m((l) => l.largest.young)} | old ${m((l) => l.start.old)} -> ${m((l) => l.largest.old)}\n`,
      );
    }
  }
}

if (process.argv[2] === '--child') {
  measure(process.argv[3], JSON.parse(process.env.MEMORY_SPEC)).then(
    () => process.exit(0),
    (error) => {
      process.stderr.write(`${error.stack}\n`);
      process.exit(1);
    },
  );
} else {
  main().catch((error) => {
    process.stderr.write(`${error.stack}\n`);
    process.exit(1);
  });
}
