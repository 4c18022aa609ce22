import type { Pool } from 'pg';
import { Admin } from '../core/admin';
import type { Queryable } from '../core/types';
import type { WorkhorseTransactionHost } from './workhorse-transaction.host';

/**
 * The `Admin` that Nest injects: with no client argument every call runs in the current
 * transaction of the host (so it sees the transaction's own uncommitted jobs, and its writes
 * commit or roll back with it), on the pool outside one.
 */
export class WorkhorseAdmin extends Admin {
  constructor(
    pool: Pool,
    private readonly host: WorkhorseTransactionHost,
  ) {
    super(pool);
  }

  protected override runner(client?: Queryable): Queryable {
    return client ?? this.host.client ?? this.pool;
  }
}
