-- The privilege model, in one place. Runs last at installation, once every function exists.
--
-- Application roles get no privilege on any table or sequence: the protocol functions
-- (workhorse.*_vN) are the only door. Each runs with the schema owner's rights (SECURITY
-- DEFINER) and a pinned search_path (pg_catalog first, pg_temp last: an unlisted pg_temp would be
-- searched first for tables; every workhorse object is schema-qualified in the bodies, so nothing
-- a caller creates or puts on its own search_path can stand in for one). Internal helpers
-- (finish_job, requeue_job, check_*, ...) run inside those calls and are executable by nobody
-- but the owner.
--
-- Roles get EXECUTE by capability (grantRole in lib/core/grants.ts, docs/least-privilege.sql):
--   producer  enqueues, and reads the jobs its login role enqueued; sends signals and records
--             human decisions; syncs schedules (a schedule enqueues the jobs it defines, so
--             defining one is a producer's right alone);
--   worker    claims, renews leases, completes, fails, releases, checkpoints, sleeps, waits for
--             signals and decisions, reports progress, acknowledges cancels, and offers
--             maintenance ticks (which fire due schedule occurrences);
--   operator  reads every job and history, cancels, pauses and resumes queues, lists and
--             redrives dead letters, runs now, reschedules and deletes jobs (one, or over a
--             filter), lists human waits, sends signals and records decisions,
--             runs maintenance and retention; lists, pauses, resumes and triggers schedules (a
--             trigger enqueues the job a producer defined, as a redrive enqueues a copy of an
--             existing one).
-- The server plans schedules itself (inside tick_v1 and at a sync). The deprecated planning calls
-- of the previous release's TypeScript workers (schedules_to_plan_v1, plan_schedule_v1) stay
-- granted to all three capabilities, as that release used them; they plan only what the server
-- computes.
-- A new protocol function joins with one line below; installation fails while a workhorse.*_vN
-- function is missing from the list (and test/reliability/privileges.test.ts checks it too).
CREATE TABLE workhorse.protocol_function (
  name text PRIMARY KEY CHECK (name ~ '_v[0-9]+$'),
  capabilities text[] NOT NULL
    CHECK (cardinality(capabilities) > 0 AND capabilities <@ ARRAY['producer', 'worker', 'operator'])
);

INSERT INTO workhorse.protocol_function (name, capabilities) VALUES
  ('enqueue_many_v1',         '{producer}'),
  ('enqueue_many_v2',         '{producer}'),
  ('get_own_job_v1',          '{producer}'),
  ('await_results_v1',        '{producer}'),
  ('claim_many_v1',           '{worker}'),
  ('complete_and_claim_v1',   '{worker}'),
  ('complete_many_v1',        '{worker}'),
  ('complete_v1',             '{worker}'),
  ('heartbeat_many_v1',       '{worker}'),
  ('fail_v1',                 '{worker}'),
  ('release_v1',              '{worker}'),
  ('acknowledge_cancel_v1',   '{worker}'),
  ('save_checkpoint_v1',      '{worker}'),
  ('save_checkpoint_v2',      '{worker}'),
  ('set_progress_v1',         '{worker}'),
  ('sleep_v1',                '{worker}'),
  ('register_handlers_v1',    '{worker}'),
  ('run_children_v1',         '{worker}'),
  ('dependencies_v1',         '{worker,operator}'),
  ('dependencies_v2',         '{worker}'),
  ('tick_v1',                 '{worker,operator}'),
  ('get_job_v1',              '{operator}'),
  ('list_jobs_v1',            '{operator}'),
  ('list_jobs_v2',            '{operator}'),
  ('list_jobs_v3',            '{operator}'),
  ('queue_activity_v1',       '{operator}'),
  ('find_jobs_v1',            '{operator}'),
  ('job_durations_v1',        '{operator}'),
  ('job_timings_v1',          '{operator}'),
  ('error_groups_v1',         '{operator}'),
  ('job_links_v1',            '{operator}'),
  ('list_children_v1',        '{operator}'),
  ('list_children_v2',        '{operator}'),
  ('job_signals_v1',          '{operator}'),
  ('job_waits_v1',            '{operator}'),
  ('get_timeline_v1',         '{operator}'),
  ('get_timeline_v2',         '{operator}'),
  ('get_timeline_v3',         '{operator}'),
  ('read_checkpoints_v1',     '{operator}'),
  ('cancel_v1',               '{operator}'),
  ('list_queues_v1',          '{operator}'),
  ('list_queues_v2',          '{operator}'),
  ('list_queues_v3',          '{operator}'),
  ('pause_queue_v1',          '{operator}'),
  ('resume_queue_v1',         '{operator}'),
  ('set_queue_policy_v1',     '{operator}'),
  ('list_dead_letters_v1',    '{operator}'),
  ('list_dead_letters_v2',    '{operator}'),
  ('redrive_v1',              '{operator}'),
  ('redrive_many_v1',         '{operator}'),
  ('run_now_v1',              '{operator}'),
  ('reschedule_v1',           '{operator}'),
  ('delete_job_v1',           '{operator}'),
  ('cancel_matching_v1',      '{operator}'),
  ('run_now_matching_v1',     '{operator}'),
  ('delete_matching_v1',      '{operator}'),
  ('promote_v1',              '{operator}'),
  ('recover_expired_v1',      '{operator}'),
  ('expire_deadlines_v1',     '{operator}'),
  ('prepare_partitions_v1',   '{operator}'),
  ('drop_history_before_v1',  '{operator}'),
  ('wait_signal_v1',          '{worker}'),
  ('wait_human_v1',           '{worker}'),
  ('send_signal_v1',          '{producer,operator}'),
  ('complete_human_wait_v1',  '{producer,operator}'),
  ('list_human_waits_v1',     '{operator}'),
  ('list_human_waits_v2',     '{operator}'),
  ('report_worker_v1',        '{worker}'),
  ('unregister_worker_v1',    '{worker}'),
  ('report_worker_v2',        '{worker}'),
  ('unregister_worker_v2',    '{worker}'),
  ('list_workers_v1',         '{operator}'),
  ('list_workers_v2',         '{operator}'),
  ('drain_worker_v1',         '{operator}'),
  ('health_v1',               '{operator}'),
  ('retention_run_v1',        '{operator}'),
  ('retention_status_v1',     '{operator}'),
  ('retention_status_v2',     '{operator}'),
  ('set_retention_v1',        '{operator}'),
  ('sync_schedules_v1',       '{producer}'),
  ('schedules_to_plan_v1',    '{producer,worker,operator}'),
  ('plan_schedule_v1',        '{producer,worker,operator}'),
  ('list_schedules_v1',       '{operator}'),
  ('get_schedule_history_v1', '{operator}'),
  ('get_schedule_history_v2', '{operator}'),
  ('list_operator_changes_v1', '{operator}'),
  ('pause_schedule_v1',       '{operator}'),
  ('resume_schedule_v1',      '{operator}'),
  ('trigger_schedule_v1',     '{operator}'),
  ('oldest_client_v1',        '{producer,worker,operator}');

-- The oldest client release (named by the schema version it ships) whose calls this schema
-- still serves. A client of version C accepts a newer schema when this is <= C, so a process of
-- the previous release can still (re)start after a migration. A step that retires a function a
-- release calls raises it (docs/upgrading.md). Every capability may call it.
CREATE FUNCTION workhorse.oldest_client_v1() RETURNS integer
LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 4; END $$;

-- Grants every protocol function to the roles recorded in workhorse.role_capability for one
-- of its capabilities, where the role does not hold it yet. A migration step that adds a protocol
-- function ends with `SELECT workhorse.regrant_capabilities();` (docs/upgrading.md), so roles
-- granted before the upgrade can call it at once. Owner-only, like every internal helper.
CREATE FUNCTION workhorse.regrant_capabilities() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_grant record;
  v_count integer := 0;
BEGIN
  FOR v_grant IN
    SELECT DISTINCT r.rolname, p.oid::regprocedure AS function
    FROM workhorse.role_capability rc
    JOIN pg_catalog.pg_roles r ON r.oid = rc.role_oid
    JOIN workhorse.protocol_function f ON rc.capability = ANY (f.capabilities)
    JOIN pg_catalog.pg_proc p ON p.proname = f.name AND p.pronamespace = 'workhorse'::regnamespace
    WHERE NOT pg_catalog.has_function_privilege(r.oid, p.oid, 'EXECUTE')
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_grant.function, v_grant.rolname);
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

DO $privileges$
DECLARE
  v_unlisted text;
  v_missing text;
  v_function regprocedure;
BEGIN
  SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.proname) INTO v_unlisted
  FROM pg_catalog.pg_proc p
  WHERE p.pronamespace = 'workhorse'::regnamespace AND p.proname ~ '_v[0-9]+$'
    AND NOT EXISTS (SELECT 1 FROM workhorse.protocol_function f WHERE f.name = p.proname);
  IF v_unlisted IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42501',
      MESSAGE = format('protocol functions without a capability: %s', v_unlisted),
      HINT = 'Add a line for each to workhorse.protocol_function in sql/990_privileges.sql.';
  END IF;
  SELECT string_agg(f.name, ', ' ORDER BY f.name) INTO v_missing
  FROM workhorse.protocol_function f
  WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_proc p
                    WHERE p.pronamespace = 'workhorse'::regnamespace AND p.proname = f.name);
  IF v_missing IS NOT NULL THEN
    RAISE EXCEPTION USING ERRCODE = '42883',
      MESSAGE = format('sql/990_privileges.sql lists functions that do not exist: %s', v_missing);
  END IF;

  -- New functions are executable by PUBLIC, and ALTER DEFAULT PRIVILEGES cannot change that for
  -- functions created by the installer in this schema: revoke each one explicitly.
  FOR v_function IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p WHERE p.pronamespace = 'workhorse'::regnamespace
  LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_function);
  END LOOP;

  FOR v_function IN
    SELECT p.oid::regprocedure
    FROM pg_catalog.pg_proc p
    JOIN workhorse.protocol_function f ON f.name = p.proname
    WHERE p.pronamespace = 'workhorse'::regnamespace
  LOOP
    EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', v_function);
  END LOOP;
END
$privileges$;
