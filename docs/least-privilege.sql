-- Least privilege for an application role of nestjs-workhorse.
--
-- Grants an existing role exactly what the library needs to use an installed `workhorse`
-- schema (enqueue, run workers, maintenance ticks, admin reads and actions), and nothing to
-- alter or drop it. Run it as the schema's owner (whoever installed it) or a superuser, once per
-- role and again after each schema installation; running it twice is harmless.
--
--   psql "$OWNER_DATABASE_URL" -v ON_ERROR_STOP=1 -v role=my_app -f docs/least-privilege.sql
--
-- From TypeScript, `grantAppRole(ownerPool, 'my_app')` (lib/core/grants.ts) runs the same block.
--
-- What the role gets:
-- * CONNECT on the database and USAGE on schema workhorse; never CREATE on the schema.
-- * Per table, only the commands the protocol functions run (they are SECURITY INVOKER, so they
--   use the caller's rights): SELECT and INSERT on the write-once tables (job, job_outcome,
--   job_query, job_checkpoint, job_wait, job_redrive, job_event, attempt_history); SELECT,
--   INSERT, UPDATE and DELETE on job_runtime, enqueue_idempotency and schedule_occurrence;
--   SELECT, INSERT and UPDATE on queue_control, handler_policy and schedule; SELECT and
--   INSERT on schedule_history; SELECT on schema_version and the job_snapshot view.
-- * USAGE and SELECT on the sequences fence_seq, job_seq and history_seq.
-- * EXECUTE on every function of the schema except internal SECURITY DEFINER helpers.
-- The tables stay owned by the installer, so the role cannot ALTER, DROP or TRUNCATE them.
--
-- Limitations:
-- * Partition preparation. tick_v1 creates the next days' history partitions when they run short
--   (today + 2). That is DDL, which only the owner may run: it works for this role only while
--   prepare_partitions_v1 and ensure_history_partition are SECURITY DEFINER functions owned by
--   the schema owner with a fixed search_path (sql/020_partitions.sql). Without that, a tick by
--   this role fails with 42501 once the prepared days run out (tick_v1 only catches
--   lock_not_available), and workers report it as a tick error on every tick.
-- * Retention. drop_history_before_v1 drops partitions and deletes from the default partitions:
--   run it as the schema owner (this role gets 42501).
-- * New history partitions need no grants: rows are written and read through the partitioned
--   parent tables, whose privileges apply.

SELECT set_config('workhorse.grant_role', :'role', false);

DO $grants$
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
$grants$;
