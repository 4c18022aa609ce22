import { Client, type ClientConfig } from 'pg';

/**
 * One long-lived connection of its own (for LISTEN and for heartbeats), opened with the pool's
 * settings (or, for LISTEN, a direct connection that bypasses a pooler). A broken connection is dropped and opened again on next use, so a database restart
 * or a killed backend costs one failed round, never the process.
 */
export class DedicatedConnection {
  private client: Client | null = null;
  private connecting: Promise<Client> | null = null;
  private closed = false;

  constructor(
    private readonly config: ClientConfig,
    private readonly onError: (error: Error) => void,
    private readonly onConnect?: (client: Client) => Promise<void>,
  ) {}

  get connected(): boolean {
    return this.client !== null;
  }

  async get(): Promise<Client> {
    if (this.closed) throw new Error('connection closed');
    if (this.client) return this.client;
    this.connecting ??= this.open().finally(() => {
      this.connecting = null;
    });
    return this.connecting;
  }

  async query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }> {
    const client = await this.get();
    try {
      return await client.query(text, values);
    } catch (error) {
      // A query error on a healthy connection leaves it usable; only drop it when it broke.
      if (!isQueryError(error)) this.drop(client);
      throw error;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const pending = this.connecting;
    if (pending) await pending.catch(() => undefined);
    const client = this.client;
    this.client = null;
    if (client) await client.end().catch(() => undefined);
  }

  private async open(): Promise<Client> {
    const client = new Client(this.config);
    client.on('error', (error: Error) => {
      this.drop(client);
      this.onError(error);
    });
    client.on('end', () => this.drop(client));
    try {
      await client.connect();
      if (this.onConnect) await this.onConnect(client);
    } catch (error) {
      client.end().catch(() => undefined);
      throw error;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      throw new Error('connection closed');
    }
    this.client = client;
    return client;
  }

  private drop(client: Client): void {
    if (this.client === client) {
      this.client = null;
      client.end().catch(() => undefined);
    }
  }
}

// Errors the server raised for one statement (it has a SQLSTATE and the session lives on),
// as opposed to a broken connection. Class 57 (operator intervention, e.g. admin shutdown)
// and 08 (connection exception) mean the session is gone.
function isQueryError(error: unknown): boolean {
  const code = (error as { code?: unknown })?.code;
  return typeof code === 'string' && code.length === 5 && !code.startsWith('57') && !code.startsWith('08');
}
