/**
 * nestjs-workhorse/kysely against Kysely's PostgresDialect: the conformance suite with a
 * transaction's `trx`, on an instance that has a CamelCasePlugin (which must not rename the
 * columns Queue and Admin read).
 */
import { fromKysely, kyselyTransactionScope } from 'nestjs-workhorse/kysely';
import { CamelCasePlugin, Kysely, PostgresDialect, type Transaction } from 'kysely';
import { Pool } from 'pg';
import { describeOrmConformance } from './orm-conformance';
import type { KyselyDatabase as Database } from './orm-models';

describeOrmConformance<Transaction<Database>>('Kysely', async (db) => {
  const kysely = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: new Pool({ connectionString: db.url, max: 4 }) }),
    plugins: [new CamelCasePlugin()],
  });
  return {
    transaction: (fn) => kysely.transaction().execute(fn),
    insertOrder: async (trx, id) => {
      await trx.insertInto('orders').values({ id, amountCents: 4200 }).execute();
    },
    adapt: fromKysely,
    plain: fromKysely(kysely),
    scope: kyselyTransactionScope(kysely),
    close: () => kysely.destroy(),
  };
});
