import type { Pool } from 'pg';
import { WorkhorseValidationError } from './errors';

/**
 * The grants of an application role, as one `DO` block that reads the role's name from the
 * setting `workhorse.grant_role`. `docs/least-privilege.sql` holds the same block for psql users;
 * a test keeps the two identical.
 *
 * The role may use the queue (enqueue, claim, heartbeat, complete, fail, checkpoints, cancel,
 * maintenance ticks, admin reads and actions) and nothing more:
 * - USAGE on the schema (never CREATE), CONNECT on the database;
 * - on each table only the commands the protocol functions run on it (they run with the
 *   caller's rights): the immutable tables (`job`, `job_outcome`, history, checkpoints, ...) get
 *   SELECT and INSERT only, so even a buggy or hostile client cannot rewrite a job or an outcome;
 * - USAGE and SELECT on the three sequences (fence tokens, job order, history ids);
 * - EXECUTE on every function, except internal SECURITY DEFINER helpers (such as
 *   `ensure_history_partition`), which only the versioned API may call.
 * Tables are owned by whoever installed the schema, so the role can never ALTER, DROP or
 * TRUNCATE them, nor create objects in the schema.
 */
export const GRANT_APP_ROLE_SQL = `DO $grants$
DECLARE
  v_role text := current_setting('workhorse.grant_role', true);
  v_function regprocedure;
BEGIN
  IF v_role IS NULL OR v_role = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'set workhorse.grant_role to the name of the application role first';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('role %I does not exist', v_role);
  END IF;
  IF to_regnamespace('workhorse') IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '3F000',
      MESSAGE = 'schema workhorse does not exist: install it first (npx workhorse schema install)';
  END IF;

  EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), v_role);
  EXECUTE format('GRANT USAGE ON SCHEMA workhorse TO %I', v_role);

  -- Read only.
  EXECUTE format('GRANT SELECT ON TABLE workhorse.schema_version, workhorse.job_snapshot TO %I', v_role);
  -- Written once, never updated or deleted by the protocol.
  EXECUTE format('GRANT SELECT, INSERT ON TABLE workhorse.job, workhorse.job_outcome, workhorse.job_query, '
                 'workhorse.job_checkpoint, workhorse.job_wait, workhorse.job_redrive, '
                 'workhorse.job_event, workhorse.attempt_history TO %I', v_role);
  -- The live rows: claims, renewals and transitions update them; terminal transitions and the
  -- expiry of idempotency keys delete them.
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE workhorse.job_runtime, '
                 'workhorse.enqueue_idempotency TO %I', v_role);
  -- Queue pause and resume; the retry policies workers register for their handlers.
  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON TABLE workhorse.queue_control, workhorse.handler_policy TO %I', v_role);
  -- Schedules: definitions are updated, never deleted; planned occurrences are dropped when a
  -- definition changes and decided ones after 7 days; the history is written once.
  EXECUTE format('GRANT SELECT, INSERT, UPDATE ON TABLE workhorse.schedule TO %I', v_role);
  EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE workhorse.schedule_occurrence TO %I', v_role);
  EXECUTE format('GRANT SELECT, INSERT ON TABLE workhorse.schedule_history TO %I', v_role);
  EXECUTE format('GRANT USAGE, SELECT ON SEQUENCE workhorse.fence_seq, workhorse.job_seq, '
                 'workhorse.history_seq TO %I', v_role);

  FOR v_function IN
    SELECT p.oid::regprocedure
    FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'workhorse'::regnamespace
      AND (NOT p.prosecdef OR p.proname ~ '_v[0-9]+$')
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_function, v_role);
  END LOOP;
END
$grants$;`;

/**
 * Grants an existing application role exactly what the library needs to use an installed
 * `workhorse` schema, and nothing to alter or drop it. Run it as the schema's owner (whoever ran
 * `installSchema`) or a superuser, once per role and again after each schema installation.
 * Idempotent.
 *
 * Partition preparation (from `tick_v1`) and retention (`drop_history_before_v1`) create and
 * drop tables; see docs/least-privilege.sql for how they behave for such a role.
 *
 * @example
 * await pool.query('CREATE ROLE app LOGIN PASSWORD ...'); // once, as an administrator
 * await installSchema(ownerPool);
 * await grantAppRole(ownerPool, 'app');
 */
export async function grantAppRole(pool: Pool, role: string): Promise<void> {
  if (typeof role !== 'string' || role.length === 0 || role.length > 63 || role.includes('\u0000')) {
    throw new WorkhorseValidationError('role', 'must be the name of an existing role (1 to 63 characters)');
  }
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query("SELECT set_config('workhorse.grant_role', $1, true)", [role]);
    await client.query(GRANT_APP_ROLE_SQL);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
