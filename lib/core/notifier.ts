import type { ClientConfig } from 'pg';
import { DedicatedConnection } from './connection';

import { LISTEN, NOTIFY_CHANNEL } from './protocol/session';

/**
 * Wakes the worker when a queue it serves gains ready work (`pg_notify` from the SQL functions,
 * delivered at commit). Polling stays the source of truth: a lost notification only costs
 * latency. A broken LISTEN connection is reopened with capped, jittered backoff, and the worker
 * is woken after each reconnect in case something arrived meanwhile.
 */
export class Notifier {
  private readonly connection: DedicatedConnection;
  private retryTimer: NodeJS.Timeout | null = null;
  private failures = 0;
  private stopped = false;

  constructor(
    config: ClientConfig,
    private readonly queues: ReadonlySet<string>,
    /** A queue it listens for gained ready work; without a queue: something may have arrived meanwhile. */
    private readonly wake: (queue?: string) => void,
    private readonly onError: (error: Error) => void,
    /** The listener is connected (again). */
    private readonly onConnected: () => void = () => undefined,
  ) {
    this.connection = new DedicatedConnection(
      config,
      (error) => {
        this.onError(error);
        this.scheduleReconnect();
      },
      async (client) => {
        client.on('notification', (message) => {
          if (message.channel === NOTIFY_CHANNEL && message.payload !== undefined && this.queues.has(message.payload)) {
            this.wake(message.payload);
          }
        });
        await client.query(LISTEN);
      },
    );
  }

  start(): void {
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    await this.connection.close();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    try {
      const client = await this.connection.get();
      client.once('end', () => this.scheduleReconnect());
      this.failures = 0;
      this.onConnected();
      this.wake();
    } catch (error) {
      if (this.stopped) return;
      this.onError(error as Error);
      this.scheduleReconnect();
    }
  }

  private scheduleReconnect(): void {
    if (this.stopped || this.retryTimer) return;
    this.failures++;
    const delay = Math.min(30_000, 250 * 2 ** Math.min(this.failures, 7)) * (0.5 + Math.random() / 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }
}
