'use strict';
/** What the benchmark ran on, and how busy the machine was meanwhile. */
const fs = require('node:fs');
const os = require('node:os');

function cpuModel() {
  try {
    const m = fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.+)$/m);
    if (m) return m[1].trim();
  } catch {
    // not Linux
  }
  return os.cpus()[0]?.model ?? 'unknown';
}

function machineInfo() {
  return {
    nproc: os.availableParallelism ? os.availableParallelism() : os.cpus().length,
    cpuModel: cpuModel(),
    memoryBytes: os.totalmem(),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    loadAverageAtStart: os.loadavg(),
  };
}

/** Busy and total CPU seconds of the whole machine so far (from /proc/stat). */
function machineCpu() {
  try {
    const line = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + (f[4] || 0); // idle + iowait
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0); // without guest (already in user)
    return { busy: (total - idle) / 100, total: total / 100 };
  } catch {
    return null;
  }
}

/** Seconds of CPU the process `pid` and its waited-for children used so far. */
function processCpuSeconds(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) / 100;
  } catch {
    return 0;
  }
}

/**
 * Waits (up to `maxWaitMs`) until the rest of the machine is quiet: busy CPU over a short
 * window below `threshold` cores. Others may share the machine (the test suite, editors); this
 * lowers the chance that they disturb a measurement and returns how busy it was when we began.
 */
async function waitForQuiet({ threshold = 0.35, maxWaitMs = 1000, windowMs = 200 } = {}) {
  const started = Date.now();
  let load = null;
  for (;;) {
    const a = machineCpu();
    if (!a) return { waitedMs: 0, busyCores: null };
    await new Promise((r) => setTimeout(r, windowMs));
    const b = machineCpu();
    load = (b.busy - a.busy) / (windowMs / 1000);
    if (load < threshold || Date.now() - started >= maxWaitMs) break;
  }
  return { waitedMs: Date.now() - started, busyCores: load };
}

module.exports = { machineInfo, machineCpu, processCpuSeconds, waitForQuiet };
