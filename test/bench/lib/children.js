'use strict';
/**
 * Starts benchmark children (child.js) and keeps track of them, so that every one is killed
 * when the run ends, fails or is interrupted.
 */
const { fork } = require('node:child_process');
const path = require('node:path');

const CHILD = path.join(__dirname, '..', 'child.js');
const live = new Set();

function killAll() {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}

/**
 * Forks child.js with `spec`. The returned handle's `next(type, timeoutMs)` resolves with the
 * next message of that type (rejecting on an `error` message, an early exit or the timeout).
 */
function startChild(spec, { execArgv = [], label = spec.adapter } = {}) {
  const child = fork(CHILD, [], {
    execArgv,
    env: { ...process.env, BENCH_SPEC: JSON.stringify(spec) },
    stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
  });
  live.add(child);
  let stderr = '';
  child.stderr.on('data', (chunk) => {
    stderr = (stderr + chunk.toString()).slice(-8000);
  });
  const queue = [];
  const waiters = [];
  let exited = null;
  const exitPromise = new Promise((resolve) => {
    child.on('exit', (code, signal) => {
      live.delete(child);
      exited = { code, signal };
      for (const w of waiters.splice(0)) w.reject(new Error(`${label} child exited (${code ?? signal}) while waiting for "${w.type}"\n${stderr}`));
      resolve(exited);
    });
  });
  child.on('message', (message) => {
    if (message && message.type === 'error') {
      for (const w of waiters.splice(0)) w.reject(new Error(`${label} child failed: ${message.message}`));
      return;
    }
    const i = waiters.findIndex((w) => w.type === message.type);
    if (i >= 0) waiters.splice(i, 1)[0].resolve(message);
    else queue.push(message);
  });

  return {
    pid: child.pid,
    send(message) {
      if (!exited && child.connected) child.send(message);
    },
    next(type, timeoutMs = 180_000) {
      const i = queue.findIndex((m) => m.type === type);
      if (i >= 0) return Promise.resolve(queue.splice(i, 1)[0]);
      if (exited) return Promise.reject(new Error(`${label} child already exited (${exited.code ?? exited.signal})\n${stderr}`));
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          const j = waiters.indexOf(waiter);
          if (j >= 0) waiters.splice(j, 1);
          reject(new Error(`${label} child sent no "${type}" within ${timeoutMs} ms\n${stderr}`));
        }, timeoutMs);
        const waiter = {
          type,
          resolve: (m) => {
            clearTimeout(timer);
            resolve(m);
          },
          reject: (e) => {
            clearTimeout(timer);
            reject(e);
          },
        };
        waiters.push(waiter);
      });
    },
    /** Asks the child to stop and waits for it to exit; kills it after `graceMs`. */
    async finish(graceMs = 20_000) {
      this.send({ type: 'stop' });
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const result = await exitPromise;
      clearTimeout(timer);
      return result;
    },
    kill() {
      child.kill('SIGKILL');
      return exitPromise;
    },
    stderr: () => stderr,
  };
}

module.exports = { startChild, killAll };
