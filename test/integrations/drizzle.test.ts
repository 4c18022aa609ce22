/**
 * nestjs-workhorse/drizzle against Drizzle's node-postgres driver: the conformance suite with
 * the `tx` of `db.transaction` (Drizzle keeps timestamps as text; the adapter must give Dates).
 */
import { fromDrizzle, drizzleTransactionScope } from 'nestjs-workhorse/drizzle';
import { drizzle } from 'drizzle-orm/node-postgres';
import { Pool } from 'pg';
import { describeOrmConformance } from './orm-conformance';
import { ordersTable } from './orm-models';

function openDrizzle(url: string) {
  const pool = new Pool({ connectionString: url, max: 4 });
  // As test/support's pools: an idle connection that dies (CI saw one terminated mid-file) must
  // not crash the test process; the tests see such failures through their own queries.
  pool.on('error', () => undefined);
  return { db: drizzle(pool), pool };
}

type DrizzleTransaction = Parameters<Parameters<ReturnType<typeof openDrizzle>['db']['transaction']>[0]>[0];

describeOrmConformance<DrizzleTransaction>('Drizzle (node-postgres)', async (database) => {
  const { db, pool } = openDrizzle(database.url);
  return {
    transaction: (fn) => db.transaction(fn),
    insertOrder: async (tx, id) => {
      await tx.insert(ordersTable).values({ id, amountCents: 4200 });
    },
    adapt: fromDrizzle,
    plain: fromDrizzle(db),
    scope: drizzleTransactionScope(db),
    close: () => pool.end(),
  };
});
