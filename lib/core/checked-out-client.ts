import type { Pool, PoolClient } from 'pg';

/**
 * A client taken out of a pool and listened to for as long as it is out.
 *
 * pg-pool listens to a client only while it sits idle in the pool: once checked out, a client
 * whose connection breaks (`pg_terminate_backend`, a server or PgBouncer restart, a failover)
 * emits `error` to nobody, and Node ends the process. A checked-out client here always has a
 * listener: the first such error is remembered (and passed to `onBreak`, where the caller has a
 * log to write it to), the next query on the client fails with it, and {@link release} destroys
 * the connection instead of returning it to the pool.
 */
export class CheckedOutClient {
  private brokenWith: Error | undefined;
  private released = false;
  private readonly onError = (error: Error): void => {
    if (this.brokenWith !== undefined) return;
    this.brokenWith = error;
    this.onBreak?.(error);
  };

  constructor(
    readonly client: PoolClient,
    private readonly onBreak?: (error: Error) => void,
  ) {
    client.on('error', this.onError);
  }

  /** Checks a client out of `pool`; rejects as `pool.connect()` does. */
  static async take(pool: Pool, onBreak?: (error: Error) => void): Promise<CheckedOutClient> {
    return new CheckedOutClient(await pool.connect(), onBreak);
  }

  /** The error the connection broke with while checked out, if it did. */
  get broken(): Error | undefined {
    return this.brokenWith;
  }

  /**
   * Gives the client back to its pool (once; later calls do nothing). A connection that broke, or
   * that `failure` says cannot be trusted (a transaction whose end is unknown), is destroyed.
   * From here on the pool's own listener covers the client.
   */
  release(failure?: Error): void {
    if (this.released) return;
    this.released = true;
    this.client.off('error', this.onError);
    this.client.release(this.brokenWith ?? failure);
  }
}
