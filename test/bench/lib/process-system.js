'use strict';
/**
 * Workers and producers of a system that runs in a process of another language (the Python and
 * Go SDKs, River), driven by a benchmark child over stdin/stdout, one JSON object per line:
 *
 *   worker    prints {"event": "started"}, then {"handled": n} (the count so far) at the first
 *             job and as jobs run; on a "stop" line it drains, prints {"event": "stopped"}
 *             and exits.
 *   producer  prints one line when ready; each {"from": i, "to": j} line enqueues payloads
 *             {"i": i..j-1} as one batch and is answered by one line; "stop" ends it.
 *
 * The process's CPU time and peak RSS are read from /proc and reported as the worker's or
 * producer's (the Node child around it only relays counts). Producers are measured with
 * batches only: one enqueue per round trip over a pipe would measure the pipe.
 */
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const { createInterface } = require('node:readline');

/** CPU milliseconds (user, system) of a process, from /proc/PID/stat (clock ticks of 1/100 s). */
function cpuOf(pid) {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return { userMs: Number(fields[11]) * 10, systemMs: Number(fields[12]) * 10 };
}

function peakRssOf(pid) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmHWM:\s+(\d+) kB/m);
  return m ? Number(m[1]) * 1024 : null;
}

/** Starts `command` ({ file, args, env, cwd }); `next()` resolves with its next JSON line. */
function startProcess(command) {
  const child = spawn(command.file, command.args, { env: command.env ?? process.env, cwd: command.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk).slice(-8000);
  });
  const exited = new Promise((resolve) => child.on('exit', resolve));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const { value, done } = await lines.next();
    if (done) throw new Error(`${command.file} ended: ${stderr}`);
    return JSON.parse(value);
  };
  return { child, next, exited };
}

/** startWorker of a process system: counts the process's handled jobs into `onJob`. */
async function processWorker(command, { onJob, onError }) {
  const p = startProcess(command);
  const started = await p.next();
  if (started.event !== 'started') throw new Error(`unexpected ${JSON.stringify(started)}`);
  let handled = 0;
  const reading = (async () => {
    for (;;) {
      const message = await p.next().catch(() => null);
      if (message === null || message.event === 'stopped') return;
      for (; handled < message.handled; handled++) onJob(undefined);
    }
  })();
  p.child.on('error', (error) => onError(error.message));
  return {
    cpu: () => cpuOf(p.child.pid),
    rssPeakBytes: () => peakRssOf(p.child.pid),
    async stop() {
      p.child.stdin.write('stop\n');
      await reading;
      await p.exited;
    },
  };
}

/** producer of a process system: one batch per request line. */
async function processProducer(command) {
  const p = startProcess(command);
  await p.next();
  let next = 0;
  return {
    enqueue() {
      throw new Error(`${command.file}'s producer is measured with batches only`);
    },
    async enqueueBatch(payloads) {
      p.child.stdin.write(`${JSON.stringify({ from: next, to: next + payloads.length })}\n`);
      next += payloads.length;
      await p.next();
    },
    cpu: () => cpuOf(p.child.pid),
    async close() {
      p.child.stdin.write('stop\n');
      await p.exited;
    },
  };
}

module.exports = { processWorker, processProducer };
