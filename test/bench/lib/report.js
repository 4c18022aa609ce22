'use strict';
/**
 * Turns the raw runs into summaries, the target verdicts, results.md, results.json and the
 * charts (hand-written SVG, no dependencies).
 */
const fs = require('node:fs');
const path = require('node:path');
const { summary, median } = require('./stats');

const MiB = 1048576;
const OURS = ['workhorse', 'workhorse-nest', 'workhorse-lanes'];

// ---- summaries ----------------------------------------------------------------------------------

function ok(runs) {
  return (runs ?? []).filter((r) => !r.error);
}

/** Per-rep ratios of a metric between two systems, from runs of the same repetition. */
function pairedRatios(runs, a, b, metric, match = () => true) {
  const out = [];
  for (const ra of runs.filter((r) => r.system === a && match(r))) {
    const rb = runs.find((r) => r.system === b && r.rep === ra.rep && match(r));
    if (rb && rb[metric] > 0 && ra[metric] !== null) out.push(ra[metric] / rb[metric]);
  }
  return summary(out);
}

function pgbenchRef(results, clients) {
  const s = results.pgbench?.summary?.[clients];
  return s && s.median ? s.median : null;
}

function drainSummary(results) {
  const runs = ok(results.drain?.runs);
  const cfg = results.drain?.config;
  if (!cfg) return [];
  const rows = [];
  for (const c of cfg.concurrencies) {
    for (const systemId of cfg.systems) {
      const mine = runs.filter((r) => r.system === systemId && r.concurrency === c);
      const failed = (results.drain.runs ?? []).filter((r) => r.system === systemId && r.concurrency === c && r.error);
      if (mine.length === 0 && failed.length === 0) continue;
      const row = {
        concurrency: c,
        system: systemId,
        n: mine.length,
        failed: failed.length,
        error: failed[0]?.error,
        capped: mine.some((r) => r.capped),
        jobs: mine[0]?.jobs,
        rate: summary(mine.map((r) => r.rate)),
        rssPeakMiB: summary(mine.map((r) => r.rssPeakBytes / MiB)),
        walBytesPerJob: median(mine.map((r) => r.walBytesPerJob)),
        bytesQueuedPerJob: median(mine.map((r) => r.bytesQueuedPerJob)),
        bytesAfterPerJob: median(mine.map((r) => r.bytesAfterPerJob)),
        workerCpuMsPerJob: median(mine.map((r) => r.workerCpuMsPerJob)),
        serverCpuMsPerJob: median(mine.map((r) => r.serverCpuMsPerJob)),
        backgroundCores: median(mine.map((r) => r.backgroundCores)),
        ratios: {},
      };
      const ref = pgbenchRef(results, Math.min(c, 10));
      row.ofPgbench = ref && row.rate.median !== null ? row.rate.median / ref : null;
      if (OURS.includes(systemId)) {
        for (const peer of cfg.systems.filter((s) => !OURS.includes(s))) {
          row.ratios[peer] = {
            rate: pairedRatios(runs, systemId, peer, 'rate', (r) => r.concurrency === c),
            rss: pairedRatios(runs, systemId, peer, 'rssPeakBytes', (r) => r.concurrency === c),
            wal: pairedRatios(runs, systemId, peer, 'walBytesPerJob', (r) => r.concurrency === c),
            bytes: pairedRatios(runs, systemId, peer, 'bytesAfterPerJob', (r) => r.concurrency === c),
          };
        }
      }
      rows.push(row);
    }
  }
  return rows;
}

function enqueueSummary(results) {
  const runs = ok(results.enqueue?.runs);
  const cfg = results.enqueue?.config;
  if (!cfg) return [];
  const rows = [];
  for (const mode of ['single', 'batch']) {
    for (const systemId of cfg.systems) {
      const mine = runs.filter((r) => r.system === systemId && r.mode === mode);
      if (mine.length === 0) continue;
      const row = {
        mode,
        system: systemId,
        n: mine.length,
        jobs: mine[0].jobs,
        rate: summary(mine.map((r) => r.rate)),
        walBytesPerJob: median(mine.map((r) => r.walBytesPerJob)),
        bytesPerJob: median(mine.map((r) => r.bytesPerJob)),
        producerCpuMsPerJob: median(mine.map((r) => r.producerCpuMsPerJob)),
        serverCpuMsPerJob: median(mine.map((r) => r.serverCpuMsPerJob)),
        ratios: {},
      };
      const ref = pgbenchRef(results, mode === 'single' ? cfg.producers : 1);
      row.ofPgbench = ref && row.rate.median ? row.rate.median / ref : null;
      if (OURS.includes(systemId)) {
        for (const peer of cfg.systems.filter((s) => !OURS.includes(s))) {
          row.ratios[peer] = { rate: pairedRatios(runs, systemId, peer, 'rate', (r) => r.mode === mode) };
        }
      }
      rows.push(row);
    }
  }
  return rows;
}

function latencySummary(results) {
  const runs = ok(results.latency?.runs);
  const cfg = results.latency?.config;
  if (!cfg) return [];
  return cfg.systems
    .map((systemId) => {
      const mine = runs.filter((r) => r.system === systemId);
      const failed = (results.latency.runs ?? []).filter((r) => r.system === systemId && r.error);
      if (mine.length === 0 && failed.length === 0) return null;
      return {
        system: systemId,
        n: mine.length,
        error: failed[0]?.error,
        commitToNotificationP50: summary(mine.map((r) => r.commitToNotificationP50)),
        notificationToStartP50: summary(mine.map((r) => r.notificationToStartP50)),
        notificationToStartP99: summary(mine.map((r) => r.notificationToStartP99)),
        withoutNotification: mine.reduce((a, r) => a + (r.startedWithoutNotification ?? 0), 0),
        p50: summary(mine.map((r) => r.p50)),
        p95: summary(mine.map((r) => r.p95)),
        p99: summary(mine.map((r) => r.p99)),
        max: summary(mine.map((r) => r.max)),
        missing: mine.reduce((a, r) => a + r.missing, 0),
        sent: mine.reduce((a, r) => a + r.sent, 0),
      };
    })
    .filter(Boolean);
}

function historySummary(results) {
  const runs = ok(results.history?.runs);
  if (!results.history?.config) return null;
  const byVariant = (v) => runs.filter((r) => r.variant === v);
  const ratios = [];
  for (const h of byVariant('history')) {
    const e = byVariant('empty').find((r) => r.rep === h.rep);
    if (e) ratios.push(h.rate / e.rate);
  }
  return {
    empty: summary(byVariant('empty').map((r) => r.rate)),
    history: summary(byVariant('history').map((r) => r.rate)),
    ratio: summary(ratios),
    walEmpty: median(byVariant('empty').map((r) => r.walBytesPerJob)),
    walHistory: median(byVariant('history').map((r) => r.walBytesPerJob)),
  };
}

/** Orchestration: each shape's rate, and its ratio to the plain drain of the same repetition. */
function orchestrationSummary(results) {
  const runs = ok(results.orchestration?.runs);
  if (!runs.length) return null;
  const of = (shape) => runs.filter((r) => r.shape === shape);
  const ratio = (shape) =>
    summary(of(shape).map((r) => r.rate / (of('plain').find((p) => p.rep === r.rep)?.rate ?? NaN)).filter((x) => Number.isFinite(x)));
  return ['plain', 'fanout', 'fanin'].map((shape) => ({ shape, rate: summary(of(shape).map((r) => r.rate)), ratio: ratio(shape) }));
}

/** RSS over the run: flat when the last quarter is at most 10% above the second quarter. */
function rssSummary(results) {
  const run = results.rss?.run;
  if (!run || !run.rssSamples || run.rssSamples.length < 8) return null;
  const s = run.rssSamples;
  const q = Math.floor(s.length / 4);
  const mean = (a) => a.reduce((x, y) => x + y.rss, 0) / a.length;
  const second = mean(s.slice(q, 2 * q));
  const last = mean(s.slice(3 * q));
  const after = s.slice(q);
  return {
    samples: s.length,
    secondQuarterMiB: second / MiB,
    lastQuarterMiB: last / MiB,
    growth: last / second - 1,
    minAfterWarmupMiB: Math.min(...after.map((x) => x.rss)) / MiB,
    maxAfterWarmupMiB: Math.max(...after.map((x) => x.rss)) / MiB,
    peakMiB: run.rssPeakBytes / MiB,
    flat: last / second - 1 <= 0.1,
  };
}

function targets(results, sums) {
  const out = [];
  const d = sums.drain;
  const find = (c, s) => d.find((r) => r.concurrency === c && r.system === s);
  const w10 = find(10, 'workhorse');
  if (w10 && w10.ratios.graphile) {
    const r = w10.ratios.graphile.rate;
    out.push({
      id: 'drain-2x-graphile',
      target: 'drain at concurrency 10, our defaults >= 2x graphile-worker defaults',
      value: r.median,
      detail: `${fmtRatio(r)} (${fmtRate(w10.rate.median)} vs ${fmtRate(find(10, 'graphile')?.rate.median)} jobs/s)`,
      met: r.median !== null && r.median >= 2,
    });
  }
  const bestOf = (systems) => {
    let best = null;
    for (const row of d.filter((r) => systems.includes(r.system) && r.rate.median !== null)) {
      if (!best || row.rate.median > best.rate.median) best = row;
    }
    return best;
  };
  const oursBest = bestOf(OURS);
  const gBest = bestOf(['graphile-batch']);
  if (oursBest && gBest) {
    const same = find(oursBest.concurrency, 'graphile-batch');
    out.push({
      id: 'best-vs-graphile-batch',
      target: "our best configuration >= graphile-worker's batching configuration",
      value: oursBest.rate.median / gBest.rate.median,
      detail: `ours best ${fmtRate(oursBest.rate.median)} jobs/s (${oursBest.system}, c=${oursBest.concurrency}) vs graphile batching best ${fmtRate(gBest.rate.median)} jobs/s (c=${gBest.concurrency})${same && oursBest.ratios['graphile-batch'] ? `; same-run ratio at c=${oursBest.concurrency}: ${fmtRatio(oursBest.ratios['graphile-batch'].rate)}` : ''}`,
      met: oursBest.rate.median >= gBest.rate.median,
    });
  }
  // The Go SDK's worker against the TypeScript worker and River's defaults, same repetition.
  const drainRuns = ok(results.drain?.runs);
  for (const c of results.drain?.config?.concurrencies ?? []) {
    const go = find(c, 'workhorse-go');
    for (const [peer, name] of [['workhorse', 'the TypeScript worker'], ['river', "River with its defaults"]]) {
      const other = find(c, peer);
      if (!go || !other) continue;
      const r = pairedRatios(drainRuns, 'workhorse-go', peer, 'rate', (x) => x.concurrency === c);
      out.push({
        id: `go-vs-${peer}-c${c}`,
        target: `drain at concurrency ${c}, the Go worker >= ${name}`,
        value: r.median,
        detail: `${fmtRatio(r)} (${fmtRate(go.rate.median)} vs ${fmtRate(other.rate.median)} jobs/s)`,
        met: r.median !== null && r.median >= 1,
      });
    }
  }
  const eb = sums.enqueue.find((r) => r.mode === 'batch' && r.system === 'workhorse');
  if (eb && eb.ratios.graphile) {
    const r = eb.ratios.graphile.rate;
    out.push({
      id: 'batch-enqueue',
      target: "batch enqueue >= graphile-worker's add_jobs",
      value: r.median,
      detail: `${fmtRatio(r)} (${fmtRate(eb.rate.median)} vs ${fmtRate(sums.enqueue.find((x) => x.mode === 'batch' && x.system === 'graphile')?.rate.median)} jobs/s)`,
      met: r.median !== null && r.median >= 1,
    });
  }
  const lat = sums.latency.find((r) => r.system === 'workhorse');
  if (lat && lat.n) {
    out.push({
      id: 'latency',
      target: 'LISTEN latency p50 <= 5 ms and p99 <= 25 ms',
      value: [lat.p50.median, lat.p99.median],
      detail: `p50 ${fmtMs(lat.p50.median)} ms [${fmtMs(lat.p50.min)}–${fmtMs(lat.p50.max)}], p99 ${fmtMs(lat.p99.median)} ms [${fmtMs(lat.p99.min)}–${fmtMs(lat.p99.max)}]`,
      met: lat.p50.median <= 5 && lat.p99.median <= 25,
    });
  }
  const h = sums.history;
  if (h && h.ratio.n) {
    out.push({
      id: 'history',
      target: `drain with ${fmtInt(results.history.config.jobs)} terminal jobs >= 0.9x empty`,
      value: h.ratio.median,
      detail: `${fmtRatio(h.ratio)} (${fmtRate(h.history.median)} vs ${fmtRate(h.empty.median)} jobs/s)`,
      met: h.ratio.median >= 0.9,
    });
  }
  const w50 = find(50, 'workhorse');
  if (w50 && w50.ratios.graphile) {
    const r = w50.ratios.graphile.rss;
    const flat = sums.rss;
    out.push({
      id: 'rss',
      target: "worker peak RSS at concurrency 50 <= 1.5x graphile-worker's, and flat over 200k jobs",
      value: r.median,
      detail:
        `${fmtRatio(r)} of graphile defaults (${fmtMiB(w50.rssPeakMiB.median)} vs ${fmtMiB(find(50, 'graphile')?.rssPeakMiB.median)} MiB)` +
        (w50.ratios['graphile-batch'] ? `, ${fmtRatio(w50.ratios['graphile-batch'].rss)} of graphile batching` : '') +
        (flat
          ? `; over ${fmtInt(results.rss.run.completed)} jobs RSS went ${fmtMiB(flat.secondQuarterMiB)} -> ${fmtMiB(flat.lastQuarterMiB)} MiB (2nd vs last quarter, ${(flat.growth * 100).toFixed(1)}%)`
          : '; RSS-over-time run not measured'),
      met: r.median !== null && r.median <= 1.5 && (flat ? flat.flat : false),
      partial: flat ? undefined : 'flatness not measured in this run',
    });
  }
  return out;
}

// ---- formatting ---------------------------------------------------------------------------------

function fmtInt(n) {
  return n === null || n === undefined ? '–' : Math.round(n).toLocaleString('en-US');
}
function fmtRate(n) {
  if (n === null || n === undefined) return '–';
  return n >= 100 ? fmtInt(n) : n.toFixed(1);
}
function fmtMs(n) {
  if (n === null || n === undefined) return '–';
  return n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);
}
function fmtMiB(n) {
  return n === null || n === undefined ? '–' : n.toFixed(1);
}
function fmtRatio(s) {
  if (!s || s.median === null) return '–';
  const f = (x) => (x >= 10 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(3));
  return s.n > 1 ? `${f(s.median)}x [${f(s.min)}–${f(s.max)}]` : `${f(s.median)}x`;
}
function fmtRange(s, f = fmtRate) {
  if (!s || s.median === null) return '–';
  return s.n > 1 ? `${f(s.median)} [${f(s.min)}–${f(s.max)}]` : f(s.median);
}
function fmtBytes(n) {
  if (n === null || n === undefined) return '–';
  return Math.abs(n) >= 10 ? fmtInt(n) : n.toFixed(1);
}
function table(header, rows) {
  const esc = (c) => String(c ?? '–').replace(/\|/g, '\\|');
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.map(esc).join(' | ')} |`)].join('\n');
}

// ---- markdown -----------------------------------------------------------------------------------

/** Median CPU used by other processes during each repetition's runs of a group, in cores. */
function backgroundByRep(runs) {
  const reps = [...new Set(ok(runs).map((r) => r.rep))].filter((r) => r >= 0).sort((a, b) => a - b);
  return reps.map((rep) => median(ok(runs).filter((r) => r.rep === rep).map((r) => r.backgroundCores)));
}

function backgroundLine(runs) {
  const per = backgroundByRep(runs).filter((x) => x !== null);
  if (!per.length) return null;
  return `Other load on the machine during these runs (CPU used by processes other than the server and the measured one, median per repetition): ${per.map((x, i) => `repetition ${i + 1}: ${x.toFixed(2)}`).join(', ')} cores.`;
}

/** The limited group: our worker draining one queue under each flow-control policy. */
function limitedMarkdown(limited) {
  const c = limited.config;
  const L = ['## Flow control: a limited queue', ''];
  L.push(
    `Our worker (concurrency ${c.concurrency}, ${JSON.stringify(c.options)}) drains ${fmtInt(c.jobs)} preloaded no-op jobs of one queue under each policy ` +
      '(docs/workers.md, flow control). "never binding" takes the policy path of the claim (row lock, active count, rate window) without ever holding a job back: its cost against "none". ' +
      'The busiest window counts the claims (job_event) in any window of the rate interval (1 s without a rate).',
  );
  L.push('');
  const rows = c.cases.map((policyCase) => {
    const runs = ok(limited.runs).filter((r) => r.case === policyCase.name);
    return [
      policyCase.name,
      policyCase.policy ? `\`${JSON.stringify(policyCase.policy)}\`` : 'none',
      fmtRange(summary(runs.map((r) => r.rate))),
      fmtRange(summary(runs.map((r) => r.serverCpuMsPerJob)), fmtMs),
      fmtRange(summary(runs.map((r) => r.workerCpuMsPerJob)), fmtMs),
      fmtRange(summary(runs.map((r) => r.busiestWindow?.claims)), fmtInt),
    ];
  });
  L.push(table(['case', 'policy', 'jobs/s', 'server CPU ms/job', 'worker CPU ms/job', 'busiest window (claims)'], rows));
  L.push('');
  return L;
}

function markdown(results, sums) {
  const m = results.meta;
  const S = m.systems;
  const label = (id) => S[id]?.label ?? id;
  const L = [];
  L.push(`# Benchmark results (${m.mode} run)`);
  L.push('');
  L.push(
    `Generated by \`npm run bench${m.mode === 'quick' ? ' -- --quick' : ''}\` on ${m.startedAt.slice(0, 16).replace('T', ' ')} UTC in ${(m.durationSeconds / 60).toFixed(1)} minutes. ` +
      `Method, caveats and how to read this: [README.md](README.md). Raw data: [results${m.mode === 'quick' ? '-quick' : ''}.json](results${m.mode === 'quick' ? '-quick' : ''}.json).`,
  );
  L.push('');
  L.push(`Every case ran ${m.config.reps} time(s) in rotated order; cells show the median and [min–max]. Ratios are computed per repetition (our run against the peer's run of the same repetition) and then summarised the same way.`);
  L.push('');
  if (m.calibration) {
    const k = m.calibration;
    const cut = m.config.drain.jobs[10] < k.issueSizes.drainJobs[10] || (m.config.rss?.jobs ?? 0) < (k.issueSizes.rssJobs ?? 0);
    L.push(
      `Sizes: calibration drains of our worker (2 x ${fmtInt(k.jobs)} jobs, concurrency 10) ran at ${(k.rates ?? [k.rate]).map(fmtRate).join(' and ')} jobs/s` +
        (k.backgroundCores !== null && k.backgroundCores !== undefined ? ` (other load on the machine: ${k.backgroundCores.toFixed(2)} cores)` : '') +
        `, so drains use ${fmtInt(m.config.drain.jobs[1])} jobs at concurrency 1 and ${fmtInt(m.config.drain.jobs[10])} at ${m.config.drain.concurrencies.filter((c) => c > 1).join(', ')}, the history drain ${fmtInt(m.config.history.drainJobs)}, the RSS run ${fmtInt(m.config.rss?.jobs)}` +
        (cut
          ? ` (the issue asks for ${fmtInt(k.issueSizes.drainJobs[10])} and ${fmtInt(k.issueSizes.rssJobs)}: at this rate those sizes would not fit the 15-minute budget, so they were cut; \`--drain-jobs 20000 --rss-jobs 200000\` runs them as asked).`
          : ' (the issue\'s sizes).') +
        (Object.keys(k.overridden ?? {}).length ? ` Overridden on the command line: ${JSON.stringify(k.overridden)}.` : ''),
    );
    L.push('');
  }

  const busy = [
    ['drain', results.drain?.runs],
    ['enqueue', results.enqueue?.runs],
    ['history', results.history?.runs],
    ['latency', results.latency?.runs],
  ]
    .map(([name, runs]) => [name, backgroundByRep(runs)])
    .filter(([, per]) => per.some((x) => x !== null && x > 0.5));
  if (busy.length) {
    L.push(
      `> **The machine was shared and busy during part of this run** (other people's test suites on the same ${m.machine.nproc} cores): ${busy
        .map(([name, per]) => `${name} repetitions used ${per.map((x) => (x === null ? '–' : x.toFixed(2))).join(' / ')} cores of other load`)
        .join('; ')}. Runs under load are slower and noisier, so the medians below lean towards the busy repetitions and the [min–max] ranges are wide; ratios are paired within a repetition (both systems under similar load) and hold up better. Each run's load is in results.json (\`backgroundCores\`).`,
    );
    L.push('');
  }

  if (sums.targets.length) {
    L.push('## Targets');
    L.push('');
    L.push(table(['target', 'result', 'met?'], sums.targets.map((t) => [t.target, t.detail, t.met ? '**yes**' : t.partial ? `no (${t.partial})` : '**no**'])));
    L.push('');
  }

  if (sums.drain.length) {
    const d = results.drain.config;
    L.push('## Drain: preloaded no-op jobs, one worker process');
    L.push('');
    L.push(
      `Jobs per run: ${Object.entries(d.jobs).map(([c, n]) => `${fmtInt(n)} at concurrency ${c}`).join(', ')}. Rate = jobs / (first handler call → database holds no unfinished job). pg-boss runs are capped at ${(d.pgbossCapMs / 1000).toFixed(0)} s (it is poll-bound; its rate is what it completed in that time). "x pgbench" compares with single-row insert transactions at min(concurrency, 10) clients.`,
    );
    L.push('');
    L.push('![drain throughput](drain' + (m.mode === 'quick' ? '-quick' : '') + '.svg)');
    L.push('');
    L.push(
      table(
        ['c', 'system', 'jobs/s', 'x pgbench', 'peak RSS MiB', 'WAL B/job', 'table+index B/job queued → after', 'worker CPU ms/job', 'server CPU ms/job'],
        sums.drain.map((r) => [
          r.concurrency,
          label(r.system) + (r.capped ? ' (capped)' : '') + (r.failed ? ` (${r.failed} failed)` : ''),
          fmtRange(r.rate),
          r.ofPgbench === null ? '–' : `${r.ofPgbench.toFixed(2)}`,
          fmtRange(r.rssPeakMiB, fmtMiB),
          fmtBytes(r.walBytesPerJob),
          `${fmtBytes(r.bytesQueuedPerJob)} → ${fmtBytes(r.bytesAfterPerJob)}`,
          r.workerCpuMsPerJob === null ? '–' : r.workerCpuMsPerJob.toFixed(3),
          r.serverCpuMsPerJob === null ? '–' : r.serverCpuMsPerJob.toFixed(3),
        ]),
      ),
    );
    L.push('');
    if (sums.drain.some((r) => r.capped)) {
      L.push('Capped rows completed only a handful of jobs, so their per-job WAL and CPU are dominated by fixed background work (maintenance, polling) and say little.');
      L.push('');
    }
    const bgDrain = backgroundLine(results.drain.runs);
    if (bgDrain) L.push(bgDrain, '');
    const peers = d.systems.filter((s) => !OURS.includes(s));
    const ourRows = sums.drain.filter((r) => OURS.includes(r.system));
    if (ourRows.length) {
      L.push('Ours against each peer, same repetition (throughput; peak RSS; WAL per job; table+index bytes per job after the drain):');
      L.push('');
      L.push(
        table(
          ['c', 'ours', ...peers.map((p) => `vs ${S[p].short}`)],
          ourRows.map((r) => [
            r.concurrency,
            S[r.system].short,
            ...peers.map((p) =>
              r.ratios[p] ? `${fmtRatio(r.ratios[p].rate)}; RSS ${fmtRatio(r.ratios[p].rss)}; WAL ${fmtRatio(r.ratios[p].wal)}; bytes ${fmtRatio(r.ratios[p].bytes)}` : '–',
            ),
          ]),
        ),
      );
      L.push('');
    }
  }

  if (sums.enqueue.length) {
    const e = results.enqueue.config;
    L.push('## Enqueue');
    L.push('');
    L.push(
      `single: ${fmtInt(e.singleJobs)} jobs, each in its own transaction, from ${e.producers} concurrent producers (\`Queue.enqueue\`, graphile \`addJob\`, pg-boss \`send\`). batch: ${fmtInt(e.batchJobs)} jobs in batches of ${e.batchSize}, one after another (\`Queue.enqueueMany\`, graphile \`addJobs\` = \`add_jobs\`, pg-boss \`insert\`). "x pgbench": against ${e.producers} clients (single) and 1 client (batch).`,
    );
    L.push('');
    const peers = e.systems.filter((s) => !OURS.includes(s));
    L.push(
      table(
        ['mode', 'system', 'jobs/s', 'x pgbench', ...peers.map((p) => `ours vs ${S[p].short}`), 'WAL B/job', 'table+index B/job', 'producer CPU ms/job', 'server CPU ms/job'],
        sums.enqueue.map((r) => [
          r.mode,
          label(r.system),
          fmtRange(r.rate),
          r.ofPgbench === null ? '–' : r.ofPgbench.toFixed(2),
          ...peers.map((p) => (r.ratios[p] ? fmtRatio(r.ratios[p].rate) : '')),
          fmtBytes(r.walBytesPerJob),
          fmtBytes(r.bytesPerJob),
          r.producerCpuMsPerJob?.toFixed(3),
          r.serverCpuMsPerJob?.toFixed(3),
        ]),
      ),
    );
    L.push('');
    const bgEnq = backgroundLine(results.enqueue.runs);
    if (bgEnq) L.push(bgEnq, '');
  }

  if (sums.latency.length) {
    const l = results.latency.config;
    L.push('## Latency: enqueue commit → handler start');
    L.push('');
    L.push(
      `${l.rate} jobs/s for ${l.seconds} s from a separate producer process, each job its own transaction, into an idle worker (concurrency ${l.concurrency}, LISTEN on where the system has it). Latency = wall clock at handler start (worker process) − wall clock when the producer saw its commit acknowledged.`,
    );
    L.push('');
    L.push(
      table(
        ['system', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'jobs not started', 'commit → notification p50', 'notification → handler p50 / p99', 'started without a notification'],
        sums.latency.map((r) => [
          label(r.system) + (r.error && !r.n ? ` (failed: ${r.error.split('\n')[0].slice(0, 80)})` : ''),
          fmtRange(r.p50, fmtMs),
          fmtRange(r.p95, fmtMs),
          fmtRange(r.p99, fmtMs),
          fmtRange(r.max, fmtMs),
          `${r.missing} of ${r.sent}`,
          fmtRange(r.commitToNotificationP50, fmtMs),
          r.notificationToStartP50.median === null ? '–' : `${fmtRange(r.notificationToStartP50, fmtMs)} / ${fmtRange(r.notificationToStartP99, fmtMs)}`,
          r.withoutNotification,
        ]),
      ),
    );
    L.push('');
    L.push(
      'The last three columns split the latency: when the worker process received the LISTEN notification for the job (matched to the first notification after its commit), and from there to the handler. Jobs started without a notification were picked up by a poll or by a claim already under way.',
    );
    L.push('');
    const bgLat = backgroundLine(results.latency.runs);
    if (bgLat) L.push(bgLat, '');
  }

  const h = sums.history;
  if (h) {
    const g = results.history.generation;
    L.push('## History does not slow dispatch');
    L.push('');
    L.push(
      `Our drain (concurrency ${results.history.config.concurrency}, ${fmtInt(results.history.config.drainJobs)} jobs, ${results.history.config.reps ?? m.config.reps} repetitions alternating which database goes first) in a database that already holds ${fmtInt(results.history.config.jobs)} terminal jobs, against the same drain in an empty one.` +
        (g ? ` The history (job, job_query, job_outcome, ${g.tables['workhorse.job_event']?.rowsPerJob ?? 3} job_event rows and ${g.tables['workhorse.attempt_history']?.rowsPerJob ?? 1} attempt_history row per job, copied from a job a real worker ran) took ${g.seconds.toFixed(0)} s to generate and occupies ${fmtInt(g.schemaBytes / MiB)} MiB.` : ''),
    );
    L.push('');
    L.push(
      table(
        ['database', 'jobs/s', 'WAL B/job', 'ratio to empty (same repetition)'],
        [
          ['empty', fmtRange(h.empty), fmtBytes(h.walEmpty), ''],
          [`${fmtInt(results.history.config.jobs)} terminal jobs`, fmtRange(h.history), fmtBytes(h.walHistory), fmtRatio(h.ratio)],
        ],
      ),
    );
    L.push('');
    const bgHist = backgroundLine(results.history.runs);
    if (bgHist) L.push(bgHist, '');
    const hd = results.history.diagnosis;
    if (hd && hd.empty?.statements && hd.history?.statements) {
      L.push(
        `Where a difference comes from: one more drain in each database with pg_stat_statements on (instrumented, ${fmtRate(hd.empty.rate)} vs ${fmtRate(hd.history.rate)} jobs/s; server CPU ${hd.empty.serverCpuMsPerJob?.toFixed(3)} vs ${hd.history.serverCpuMsPerJob?.toFixed(3)} ms/job), plan + execution time per call of the costliest statements:`,
        '',
      );
      const byQuery = new Map(hd.history.statements.map((x) => [x.query, x]));
      L.push(
        table(
          ['statement', 'level', 'calls/job', 'empty: ms/call', 'history: ms/call', 'history / empty', 'blocks/job empty → history'],
          hd.empty.statements
            .filter((x) => byQuery.has(x.query) && x.totalMsPerJob > 0.001)
            .map((x) => {
              const y = byQuery.get(x.query);
              const a = x.meanPlanMs + x.meanExecMs;
              const b = y.meanPlanMs + y.meanExecMs;
              return [`\`${x.query.slice(0, 100)}\``, x.toplevel ? 'top' : 'nested', x.callsPerJob.toFixed(3), fmtMs(a), fmtMs(b), a > 0 ? `${(b / a).toFixed(2)}x` : '–', `${x.blocksPerJob.toFixed(1)} → ${y.blocksPerJob.toFixed(1)}`];
            }),
        ),
        '',
      );
    }
  }

  if (sums.rss) {
    const r = sums.rss;
    const run = results.rss.run;
    L.push('## Worker memory over a long drain');
    L.push('');
    L.push(
      `${fmtInt(run.completed)} jobs at concurrency ${results.rss.config.concurrency} (${fmtRate(run.rate)} jobs/s), VmRSS sampled every ${results.rss.config.sampleMs} ms: second quarter ${fmtMiB(r.secondQuarterMiB)} MiB, last quarter ${fmtMiB(r.lastQuarterMiB)} MiB (${(r.growth * 100).toFixed(1)}%), range after the first quarter ${fmtMiB(r.minAfterWarmupMiB)}–${fmtMiB(r.maxAfterWarmupMiB)} MiB, peak (VmHWM) ${fmtMiB(r.peakMiB)} MiB: ${r.flat ? 'flat' : 'NOT flat'}.`,
    );
    L.push('');
    L.push(`![worker RSS over time](rss${m.mode === 'quick' ? '-quick' : ''}.svg)`);
    L.push('');
  }

  if (results.limited?.runs?.length) L.push(...limitedMarkdown(results.limited));
  if (sums.orchestration) {
    const names = { plain: 'plain drain', fanout: '1 parent, 1,000 children (ctx.runChildren)', fanin: '1,000 prerequisites, 1 dependent (dependsOn)' };
    L.push('## Orchestration: fan-out and fan-in');
    L.push('');
    L.push(
      `${fmtInt(results.orchestration.jobs)} jobs per run at concurrency ${results.orchestration.concurrency}, one worker process; rate = jobs / (go → the database holds no unfinished job: the parent or the dependent ends last). The ratio is to the plain drain of the same ${fmtInt(results.orchestration.jobs)} no-op jobs in the same repetition.`,
    );
    L.push('');
    L.push(table(['shape', 'jobs/s', 'x plain'], sums.orchestration.map((o) => [names[o.shape], fmtRange(o.rate), o.shape === 'plain' ? '1' : fmtRatio(o.ratio)])));
    L.push('');
  }

  if (results.pgbench?.runs?.length) {
    L.push('## Physical reference: pgbench');
    L.push('');
    L.push(`\`${results.pgbench.script}\` as a custom script (\`pgbench -n -f\`), ${results.pgbench.seconds} s per run, autocommit: one WAL flush per transaction.`);
    L.push('');
    L.push(table(['clients', 'transactions/s'], Object.entries(results.pgbench.summary).map(([c, s]) => [c, fmtRange(s)])));
    L.push('');
  }

  if (results.diagnose) L.push(...diagnoseMarkdown(results, label));

  L.push('## Machine, versions, settings');
  L.push('');
  const mc = m.machine;
  L.push(`- Machine: ${mc.nproc} CPUs (${mc.cpuModel}), ${(mc.memoryBytes / 1024 ** 3).toFixed(1)} GiB memory, ${mc.kernel}; load average at start ${mc.loadAverageAtStart.map((x) => x.toFixed(2)).join(' ')}.`);
  const bg = [...ok(results.drain?.runs), ...ok(results.enqueue?.runs)].map((r) => r.backgroundCores).filter((x) => x !== null && x !== undefined);
  if (bg.length) {
    L.push(
      `- Other load on the machine during the measured windows (CPU not used by the server or the measured process): median ${median(bg).toFixed(2)} cores, max ${Math.max(...bg).toFixed(2)} cores (per run in the JSON as \`backgroundCores\`).`,
    );
  }
  if (m.nice) L.push(`- The benchmark ran at nice ${m.nice} (\`--nice\`; the server and every child process inherited it).`);
  L.push(`- Versions: ${Object.entries(m.versions).map(([k, v]) => `${k} ${v}`).join(', ')}.`);
  L.push(
    `- PostgreSQL ${m.server.external ? 'from BENCH_DATABASE_URL' : "embedded (the test harness's server, with the harness's durability overrides removed)"}; every run gets a fresh database (the history case reuses its one generated database), then \`VACUUM ANALYZE\` and \`CHECKPOINT\` before the measured window. Settings that differ from PostgreSQL's defaults, and the ones that matter here:`,
  );
  L.push('');
  L.push(table(['setting', 'value', 'source'], m.server.settings.map((s) => [s.name, s.setting, s.source])));
  L.push('');
  L.push('- Systems:');
  for (const [id, s] of Object.entries(S)) L.push(`  - **${s.label}** (\`${id}\`): ${s.settings}`);
  if (!m.nest?.ok) L.push(`- **TODO**: the Nest variant (WorkhorseModule) was not measured: ${m.nest?.reason}.`);
  L.push(`- Workload configuration: \`${JSON.stringify(m.config)}\`.`);
  L.push('');
  return L.join('\n');
}

function statementTable(statements, digits = 3) {
  return table(
    ['statement', 'level', 'calls/job', 'plan ms/call', 'exec ms/call', 'ms/job', 'rows/call', 'blocks/job', 'WAL B/job'],
    statements.map((s) => [
      `\`${s.query.slice(0, 120)}\``,
      s.toplevel ? 'top' : 'nested',
      s.callsPerJob.toFixed(3),
      fmtMs(s.meanPlanMs),
      fmtMs(s.meanExecMs),
      s.totalMsPerJob.toFixed(digits),
      s.rowsPerCall.toFixed(1),
      s.blocksPerJob.toFixed(1),
      fmtBytes(s.walBytesPerJob),
    ]),
  );
}

function diagnoseMarkdown(results, label) {
  const dg = results.diagnose;
  const L = ['## Where the time goes (instrumented runs)', ''];
  if (dg.error) {
    L.push(`Diagnosis failed: ${dg.error.split('\n')[0]}`, '');
    return L;
  }
  L.push(
    `Drains at concurrency ${dg.config.concurrency} (${fmtInt(dg.config.jobs)} jobs) with pg_stat_statements tracking every statement (nested ones inside SQL functions and planning too) and every node-postgres call of the worker counted and timed on the client. The instruments slow every system down: compare within this section only.`,
    '',
  );
  const entries = Object.entries(dg.systems).filter(([, e]) => !e.error);
  L.push(
    table(
      ['system', 'jobs/s (instrumented)', 'round trips/job', 'worker CPU ms/job', 'server CPU ms/job', 'WAL B/job'],
      entries.map(([id, e]) => [label(id), fmtRate(e.rate), e.roundTripsPerJob.toFixed(3), e.workerCpuMsPerJob?.toFixed(3), e.serverCpuMsPerJob?.toFixed(3), fmtBytes(e.walBytesPerJob)]),
    ),
    '',
  );
  for (const [id, e] of Object.entries(dg.systems).filter(([, x]) => x.error)) L.push(`- ${label(id)}: diagnosis failed: ${e.error.split('\n')[0]}`, '');
  for (const [id, e] of entries) {
    L.push(`### ${label(id)}: drain`, '');
    L.push('Client side (send → result, so commit, network and queueing included):', '');
    L.push(table(['statement', 'calls/job', 'mean ms', 'max ms'], e.clientCalls.map((q) => [`\`${q.query.slice(0, 110)}\``, q.callsPerJob.toFixed(3), fmtMs(q.meanClientMs), fmtMs(q.maxClientMs)])), '');
    L.push('Server side (pg_stat_statements; nested = inside a function):', '');
    L.push(statementTable(e.statements), '');
    if (e.profile) {
      L.push(`CPU profile of the worker process (${e.profile.totalMs.toFixed(0)} ms sampled, start-up included), by area:`, '');
      L.push(table(['area', 'share'], e.profile.areas.map((a) => [a.area, `${a.percent}%`])), '');
      L.push('Top functions by self time:', '');
      L.push(table(['function', 'share'], e.profile.topFunctions.map((f) => [`\`${f.fn}\``, `${f.percent}%`])), '');
    }
  }
  if (dg.planCache && !dg.planCache.error) {
    L.push(`### ${label('workhorse')}: re-planning`, '');
    L.push(
      `The same drain (uninstrumented) with \`plan_cache_mode\` at \`auto\` everywhere (any function-level setting removed) and at \`force_generic_plan\` for the database (functions keep their own settings), alternating. Under \`auto\` a PL/pgSQL function re-plans a statement on every call while its custom plans look cheaper than the generic one:`,
      '',
    );
    L.push(table(['plan_cache_mode', 'jobs/s (median)', 'runs'], Object.entries(dg.planCache).map(([k, v]) => [k, fmtRate(v.median), v.rates.map(fmtRate).join(', ')])), '');
  }
  if (dg.plans && !dg.plans.error && dg.plans.plans.length) {
    L.push(`### ${label('workhorse')}: plans under load`, '');
    L.push(
      `auto_explain (ANALYZE, BUFFERS, nested statements, 5% of top-level statements sampled) loaded into the worker's own sessions during a drain at concurrency ${dg.config.concurrency} (${fmtRate(dg.plans.rate)} jobs/s with it); per statement that touches a table, the sampled plan whose top node returned the most rows:`,
      '',
    );
    for (const plan of dg.plans.plans) L.push('```text', plan, '```', '');
  }
  const e = dg.enqueue;
  if (e && !e.error) {
    L.push(`### ${label('workhorse')}: batch enqueue`, '');
    L.push(
      `${fmtInt(e.jobs)} jobs in batches of 1000 (\`Queue.enqueueMany\`), instrumented: ${fmtRate(e.rate)} jobs/s, server CPU ${e.serverCpuMsPerJob?.toFixed(3)} ms/job, producer CPU ${e.producerCpuMsPerJob?.toFixed(3)} ms/job.`,
      '',
    );
    L.push(statementTable(e.statements, 4), '');
    if (e.plans?.length) {
      L.push('Statements over 1 ms while enqueueing (auto_explain, ANALYZE, BUFFERS, nested):', '');
      for (const plan of e.plans) L.push('```text', plan, '```', '');
    }
  }
  return L;
}

// ---- SVG ----------------------------------------------------------------------------------------

const COLORS = {
  workhorse: '#1f6feb',
  'workhorse-nest': '#6cb6ff',
  'workhorse-lanes': '#0a3069',
  graphile: '#d1242f',
  'graphile-batch': '#fb8f44',
  pgboss: '#8250df',
  'workhorse-go': '#1a7f37',
  river: '#bf8700',
  'river-bench': '#7d4e00',
};

function xml(s) {
  return String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function shortNum(n) {
  const trim = (s) => s.replace(/\.0$/, '');
  if (n >= 1e6) return `${trim((n / 1e6).toFixed(1))}M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(0)}k`;
  if (n >= 1e3) return `${trim((n / 1e3).toFixed(1))}k`;
  return n >= 10 ? n.toFixed(0) : trim(n.toFixed(1));
}

/** Grouped bars (log scale) of drain throughput per concurrency, min–max whiskers, pgbench line. */
function drainSvg(results, sums) {
  const rows = sums.drain.filter((r) => r.rate.median);
  if (!rows.length) return null;
  const cfg = results.drain.config;
  const systems = cfg.systems.filter((s) => rows.some((r) => r.system === s));
  const groups = cfg.concurrencies.filter((c) => rows.some((r) => r.concurrency === c));
  const S = results.meta.systems;
  const W = 960;
  const H = 480;
  const m = { l: 70, r: 20, t: 76, b: 96 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const refs = groups.map((c) => pgbenchRef(results, Math.min(c, 10))).filter(Boolean);
  const maxV = Math.max(...rows.map((r) => r.rate.max), ...refs);
  const minV = Math.min(...rows.map((r) => r.rate.min));
  const lo = Math.pow(10, Math.floor(Math.log10(Math.max(1, minV))));
  const hi = Math.pow(10, Math.ceil(Math.log10(maxV)));
  const y = (v) => m.t + ph - ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * ph;
  const gw = pw / groups.length;
  const bw = Math.min(56, (gw * 0.8) / systems.length);
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${m.l}" y="24" font-size="16" font-weight="bold">Drain throughput: no-op jobs per second, one worker process (higher is better)</text>`);
  out.push(
    `<text x="${m.l}" y="42" fill="#555">median of ${results.meta.config.reps} run(s), whiskers min–max, log scale; dashed: pgbench single-row insert transactions at min(c, 10) clients</text>`,
    `<text x="${m.l}" y="58" fill="#555">PostgreSQL ${xml(results.meta.versions.postgres)} with fsync and synchronous_commit on; ${results.meta.machine.nproc} CPUs (${xml(results.meta.machine.cpuModel)}); pool max 10 for every system</text>`,
  );
  for (let v = lo; v <= hi; v *= 10) {
    out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#ddd"/>`);
    out.push(`<text x="${m.l - 8}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end" fill="#555">${shortNum(v)}</text>`);
    for (const k of [2, 5]) {
      if (v * k < hi) out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${y(v * k).toFixed(1)}" y2="${y(v * k).toFixed(1)}" stroke="#f2f2f2"/>`);
    }
  }
  out.push(`<text transform="translate(18 ${m.t + ph / 2}) rotate(-90)" text-anchor="middle" fill="#333">jobs per second</text>`);
  const labels = [];
  groups.forEach((c, gi) => {
    const here = systems.filter((s) => rows.some((x) => x.system === s && x.concurrency === c));
    const gx = m.l + gi * gw + (gw - bw * here.length) / 2;
    const ref = pgbenchRef(results, Math.min(c, 10));
    if (ref) {
      labels.push(`<line x1="${(gx - 14).toFixed(1)}" x2="${(gx + bw * here.length + 14).toFixed(1)}" y1="${y(ref).toFixed(1)}" y2="${y(ref).toFixed(1)}" stroke="#333" stroke-dasharray="6 4"/>`);
      labels.push(
        `<text x="${(gx + bw * here.length + 14).toFixed(1)}" y="${(y(ref) - 4).toFixed(1)}" text-anchor="end" fill="#333" font-size="10" stroke="#fff" stroke-width="3" paint-order="stroke">pgbench ${shortNum(ref)} tx/s</text>`,
      );
    }
    here.forEach((s, si) => {
      const r = rows.find((x) => x.system === s && x.concurrency === c);
      const x = gx + si * bw;
      const top = y(r.rate.median);
      out.push(`<rect x="${(x + 2).toFixed(1)}" y="${top.toFixed(1)}" width="${(bw - 4).toFixed(1)}" height="${(m.t + ph - top).toFixed(1)}" fill="${COLORS[s] ?? '#888'}"><title>${xml(S[s].label)}, c=${c}: ${fmtRate(r.rate.median)} jobs/s</title></rect>`);
      if (r.rate.n > 1) {
        const cx = x + bw / 2;
        out.push(`<line x1="${cx.toFixed(1)}" x2="${cx.toFixed(1)}" y1="${y(r.rate.max).toFixed(1)}" y2="${y(r.rate.min).toFixed(1)}" stroke="#111"/>`);
        for (const v of [r.rate.min, r.rate.max]) out.push(`<line x1="${(cx - 5).toFixed(1)}" x2="${(cx + 5).toFixed(1)}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="#111"/>`);
      }
      labels.push(
        `<text x="${(x + bw / 2).toFixed(1)}" y="${(Math.min(top, y(r.rate.max)) - 5).toFixed(1)}" text-anchor="middle" font-size="11" fill="#111" stroke="#fff" stroke-width="3" paint-order="stroke">${shortNum(r.rate.median)}${r.capped ? '*' : ''}</text>`,
      );
    });
    out.push(`<text x="${(m.l + gi * gw + gw / 2).toFixed(1)}" y="${m.t + ph + 20}" text-anchor="middle" font-weight="bold">concurrency ${c}</text>`);
    out.push(`<text x="${(m.l + gi * gw + gw / 2).toFixed(1)}" y="${m.t + ph + 36}" text-anchor="middle" fill="#555">${fmtInt(cfg.jobs[c])} jobs per run</text>`);
  });
  out.push(...labels);
  out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${m.t + ph}" y2="${m.t + ph}" stroke="#333"/>`);
  let lx = m.l;
  const ly = H - 26;
  for (const s of systems) {
    const text = S[s].label;
    out.push(`<rect x="${lx}" y="${ly - 10}" width="12" height="12" fill="${COLORS[s] ?? '#888'}"/>`);
    out.push(`<text x="${lx + 16}" y="${ly}">${xml(text)}</text>`);
    lx += 16 + text.length * 6.6 + 18;
  }
  if (rows.some((r) => r.capped)) out.push(`<text x="${m.l}" y="${H - 6}" fill="#555" font-size="10">* capped: poll-bound, rate = jobs completed within the time cap</text>`);
  out.push('</svg>');
  return out.join('\n');
}

function rssSvg(results) {
  const run = results.rss?.run;
  if (!run || !run.rssSamples || run.rssSamples.length < 2) return null;
  const s = run.rssSamples;
  const W = 960;
  const H = 360;
  const m = { l: 70, r: 70, t: 50, b: 50 };
  const pw = W - m.l - m.r;
  const ph = H - m.t - m.b;
  const tMax = s[s.length - 1].t / 1000;
  const rMax = Math.ceil(Math.max(...s.map((x) => x.rss)) / MiB / 50) * 50;
  const jobs = run.jobs;
  const x = (t) => m.l + (t / 1000 / tMax) * pw;
  const yr = (b) => m.t + ph - (b / MiB / rMax) * ph;
  const yj = (n) => m.t + ph - (n / jobs) * ph;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="Helvetica, Arial, sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="#ffffff"/>`);
  out.push(`<text x="${m.l}" y="22" font-size="16" font-weight="bold">Our worker's memory (VmRSS) while draining ${fmtInt(jobs)} jobs at concurrency ${results.rss.config.concurrency}</text>`);
  out.push(`<text x="${m.l}" y="40" fill="#555">blue: RSS in MiB (left axis); grey: jobs handled (right axis)</text>`);
  for (let v = 0; v <= rMax; v += 50) {
    out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${yr(v * MiB).toFixed(1)}" y2="${yr(v * MiB).toFixed(1)}" stroke="#eee"/>`);
    out.push(`<text x="${m.l - 8}" y="${(yr(v * MiB) + 4).toFixed(1)}" text-anchor="end" fill="#1f6feb">${v}</text>`);
  }
  for (let k = 0; k <= 4; k++) {
    out.push(`<text x="${W - m.r + 8}" y="${(yj((jobs * k) / 4) + 4).toFixed(1)}" fill="#777">${shortNum((jobs * k) / 4)}</text>`);
  }
  const step = tMax > 200 ? 60 : tMax > 60 ? 20 : 10;
  for (let t = 0; t <= tMax; t += step) out.push(`<text x="${x(t * 1000).toFixed(1)}" y="${m.t + ph + 18}" text-anchor="middle" fill="#555">${t} s</text>`);
  out.push(`<polyline fill="none" stroke="#999" stroke-width="1.5" points="${s.map((p) => `${x(p.t).toFixed(1)},${yj(p.handled).toFixed(1)}`).join(' ')}"/>`);
  out.push(`<polyline fill="none" stroke="#1f6feb" stroke-width="2" points="${s.map((p) => `${x(p.t).toFixed(1)},${yr(p.rss).toFixed(1)}`).join(' ')}"/>`);
  out.push(`<line x1="${m.l}" x2="${W - m.r}" y1="${m.t + ph}" y2="${m.t + ph}" stroke="#333"/>`);
  out.push('</svg>');
  return out.join('\n');
}

// ---- entry ---------------------------------------------------------------------------------------

function summarize(results) {
  const sums = {
    drain: drainSummary(results),
    enqueue: enqueueSummary(results),
    latency: latencySummary(results),
    history: historySummary(results),
    rss: rssSummary(results),
    orchestration: orchestrationSummary(results),
  };
  sums.targets = targets(results, sums);
  return sums;
}

function writeReports(results, outDir, suffix = '') {
  fs.mkdirSync(outDir, { recursive: true });
  const sums = summarize(results);
  results.summary = sums;
  const files = [];
  const write = (name, text) => {
    if (text === null) return;
    const file = path.join(outDir, name);
    fs.writeFileSync(file, text.endsWith('\n') ? text : `${text}\n`);
    files.push(path.relative(process.cwd(), file));
  };
  write(`results${suffix}.json`, JSON.stringify(results, null, 1));
  write(`results${suffix}.md`, markdown(results, sums));
  write(`drain${suffix}.svg`, drainSvg(results, sums));
  write(`rss${suffix}.svg`, rssSvg(results));
  return files;
}

module.exports = { writeReports, summarize, markdown };
