-- Step 12 -> 13 (issue 30 item 9, issue 31 item 3): the login role on every operator change, and
-- checkpoints that answer the stored value.
--
-- * Queue pause and resume (queue_control), queue policies (queue_policy), drain requests
--   (worker_registry) and the retention policy (retention_policy) are updated in place: each row
--   gets the login role (session_user) of its last change next to the caller-chosen actor, and
--   every change is also appended to the new workhorse.operator_change (read with
--   list_operator_changes_v1). Rows written before this step read a null login role.
-- * Reads whose answer grows: list_queues_v2, list_workers_v2, retention_status_v2 and
--   get_schedule_history_v2 (schedule_history has recorded the login role since step 7). The _v1
--   reads stay for the previous release, as projections of the _v2 ones.
-- * save_checkpoint_v2 answers the stored value with the status, so a client that got `exists`
--   uses the value another save stored first; save_checkpoint_v1 stays, its status alone.
--
-- Locks: ADD COLUMN without a default on four small tables (catalog changes only, no rewrite);
-- one new table.

ALTER TABLE workhorse.queue_control ADD COLUMN login_role text;
ALTER TABLE workhorse.queue_policy ADD COLUMN login_role text;
ALTER TABLE workhorse.worker_registry ADD COLUMN drain_login_role text;
ALTER TABLE workhorse.retention_policy ADD COLUMN login_role text;

-- Operator changes of the rows below that are updated in place (queue pause and resume, queue
-- policies, drain requests, the retention policy), one append-only row per change: who asked
-- (the caller-chosen actor and reason) and the login role of the session that did it
-- (session_user, which a caller cannot choose), so "who paused billing at 03:12" stays answerable
-- after a later change overwrote the row. A repeat that changes nothing records nothing. Read with
-- list_operator_changes_v1. Operators make few changes: retention leaves these rows alone.
CREATE TABLE workhorse.operator_change (
  -- From the history sequence, as job_event's and schedule_history's ids: ordered by time of writing.
  id bigint PRIMARY KEY DEFAULT nextval('workhorse.history_seq'),
  at timestamptz NOT NULL,
  kind text NOT NULL CHECK (kind IN ('queue_paused', 'queue_resumed', 'queue_policy_set', 'worker_drain_requested',
                                     'retention_set')),
  -- The queue or worker id the change is about; null for the retention policy.
  subject text,
  actor text,
  reason text,
  login_role text NOT NULL,
  -- What was set (a policy, a retention change), as the API shows it; null when the kind says it.
  detail jsonb
);
CREATE INDEX operator_change_subject_idx ON workhorse.operator_change (subject, id);

-- Appends one operator change (see operator_change).
CREATE FUNCTION workhorse.record_operator_change(p_kind text, p_subject text, p_actor text, p_reason text, p_detail jsonb)
RETURNS void
LANGUAGE sql AS $$
  INSERT INTO workhorse.operator_change (at, kind, subject, actor, reason, login_role, detail)
  VALUES (clock_timestamp(), p_kind, p_subject, p_actor, p_reason, session_user, p_detail)
$$;

-- Operator changes, newest first, optionally of one kind and/or one subject (a queue, a worker
-- id); at most p_limit (1..1000) rows with ids below p_before_id (the last id of the previous page).
CREATE FUNCTION workhorse.list_operator_changes_v1(p_kind text DEFAULT NULL, p_subject text DEFAULT NULL,
                                                   p_limit integer DEFAULT 100, p_before_id bigint DEFAULT NULL)
RETURNS TABLE (id bigint, at timestamptz, kind text, subject text, actor text, reason text, login_role text, detail jsonb)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  IF p_kind IS NOT NULL AND p_kind NOT IN ('queue_paused', 'queue_resumed', 'queue_policy_set', 'worker_drain_requested', 'retention_set') THEN
    PERFORM workhorse.raise_invalid('kind', 'must be one of queue_paused, queue_resumed, queue_policy_set, worker_drain_requested, retention_set');
  END IF;
  IF length(p_subject) > 200 THEN
    PERFORM workhorse.raise_invalid('subject', 'must be at most 200 characters');
  END IF;
  RETURN QUERY
    SELECT c.id, c.at, c.kind, c.subject, c.actor, c.reason, c.login_role, c.detail
    FROM workhorse.operator_change c
    WHERE (p_kind IS NULL OR c.kind = p_kind) AND (p_subject IS NULL OR c.subject = p_subject)
      AND (p_before_id IS NULL OR c.id < p_before_id)
    ORDER BY c.id DESC
    LIMIT p_limit;
END
$$;

-- Pauses a queue: claims skip it (running jobs finish; enqueue goes on). Idempotent; a repeat
-- keeps the first pause's time, actor and login role. Returns the queue's control row as JSON.
CREATE OR REPLACE FUNCTION workhorse.pause_queue_v1(p_queue text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_row workhorse.queue_control;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_queue), 'queue');
  PERFORM workhorse.check_actor(p_actor, p_reason);
  INSERT INTO workhorse.queue_control AS c (queue, paused, changed_at, changed_by, reason, login_role)
  VALUES (p_queue, true, clock_timestamp(), p_actor, p_reason, session_user)
  ON CONFLICT (queue) DO UPDATE
    SET paused = true, changed_at = clock_timestamp(), changed_by = EXCLUDED.changed_by, reason = EXCLUDED.reason,
        login_role = EXCLUDED.login_role
    WHERE NOT c.paused
  RETURNING * INTO v_row;
  IF v_row.queue IS NULL THEN
    SELECT * INTO v_row FROM workhorse.queue_control WHERE queue = p_queue;
  ELSE
    PERFORM workhorse.record_operator_change('queue_paused', p_queue, p_actor, p_reason, NULL);
  END IF;
  RETURN to_jsonb(v_row);
END
$$;

-- Resumes a paused queue and wakes its workers. Returns the control row as JSON.
CREATE OR REPLACE FUNCTION workhorse.resume_queue_v1(p_queue text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_row workhorse.queue_control;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_queue), 'queue');
  PERFORM workhorse.check_actor(p_actor, p_reason);
  INSERT INTO workhorse.queue_control AS c (queue, paused, changed_at, changed_by, reason, login_role)
  VALUES (p_queue, false, clock_timestamp(), p_actor, p_reason, session_user)
  ON CONFLICT (queue) DO UPDATE
    SET paused = false, changed_at = clock_timestamp(), changed_by = EXCLUDED.changed_by, reason = EXCLUDED.reason,
        login_role = EXCLUDED.login_role
  RETURNING * INTO v_row;
  PERFORM workhorse.record_operator_change('queue_resumed', p_queue, p_actor, p_reason, NULL);
  PERFORM pg_notify('workhorse_jobs', p_queue);
  RETURN to_jsonb(v_row);
END
$$;

-- Every queue that has live jobs, a control row or a flow-control policy: pause state (with who
-- changed it: actor, login role, reason), live counts per state and the policy's limits with who
-- set them (null when not set).
CREATE FUNCTION workhorse.list_queues_v2()
RETURNS TABLE (
  queue text, paused boolean, changed_at timestamptz, changed_by text, login_role text, reason text,
  ready bigint, scheduled bigint, active bigint, blocked bigint,
  concurrency integer, rate_limit integer, rate_interval_ms integer,
  policy_changed_at timestamptz, policy_changed_by text, policy_login_role text, policy_reason text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  WITH counts AS (
    SELECT r.queue,
           count(*) FILTER (WHERE r.state = 'ready') AS ready,
           count(*) FILTER (WHERE r.state = 'scheduled') AS scheduled,
           count(*) FILTER (WHERE r.state = 'active') AS active,
           count(*) FILTER (WHERE r.state = 'blocked') AS blocked
    FROM workhorse.job_runtime r
    GROUP BY r.queue
  )
  SELECT coalesce(c.queue, k.queue, p.queue), coalesce(c.paused, false), c.changed_at, c.changed_by, c.login_role, c.reason,
         coalesce(k.ready, 0), coalesce(k.scheduled, 0), coalesce(k.active, 0), coalesce(k.blocked, 0),
         p.concurrency, p.rate_limit, p.rate_interval_ms, p.changed_at, p.changed_by, p.login_role, p.reason
  FROM workhorse.queue_control c
  FULL JOIN counts k ON k.queue = c.queue
  FULL JOIN workhorse.queue_policy p ON p.queue = coalesce(c.queue, k.queue)
  ORDER BY 1;
END
$$;

-- The previous release's read (deprecated, docs/protocol.md): list_queues_v2 without who changed what.
CREATE OR REPLACE FUNCTION workhorse.list_queues_v1()
RETURNS TABLE (
  queue text, paused boolean, changed_at timestamptz, changed_by text, reason text,
  ready bigint, scheduled bigint, active bigint, blocked bigint,
  concurrency integer, rate_limit integer, rate_interval_ms integer)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT q.queue, q.paused, q.changed_at, q.changed_by, q.reason, q.ready, q.scheduled, q.active, q.blocked,
         q.concurrency, q.rate_limit, q.rate_interval_ms
  FROM workhorse.list_queues_v2() q
  ORDER BY 1;
END
$$;

-- Sets a queue's flow-control policy, replacing the one it had. p_policy:
-- {"concurrency"?: 1..100000 | null, "rateLimit"?: {"limit": 1..100000, "intervalMs": 1..86400000} | null};
-- a limit left out or null is not applied, and a policy with neither (or a null p_policy) removes
-- the queue's policy. The rate window's recent claims are kept across a change, so a new rate
-- counts the claims already made. Setting the same limits again changes nothing (the first
-- setting keeps its time, actor, login role and reason); every change is recorded in
-- workhorse.operator_change with the login role (session_user). Wakes the queue's workers (a raised limit may let
-- them claim).
-- Returns {"queue", "concurrency", "rateLimit"} as now in force.
CREATE OR REPLACE FUNCTION workhorse.set_queue_policy_v1(p_queue text, p_policy jsonb, p_actor text DEFAULT NULL,
                                              p_reason text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
  v_concurrency integer;
  v_rate jsonb;
  v_limit integer;
  v_interval integer;
  v_changed integer;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_queue), 'queue');
  PERFORM workhorse.check_actor(p_actor, p_reason);
  IF p_policy IS NOT NULL AND p_policy <> 'null'::jsonb THEN
    IF jsonb_typeof(p_policy) <> 'object' THEN
      PERFORM workhorse.raise_invalid('policy', 'must be an object {"concurrency"?, "rateLimit"?} or null');
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_policy) LOOP
      IF v_key NOT IN ('concurrency', 'rateLimit') THEN
        PERFORM workhorse.raise_invalid(v_key, 'is not a queue policy field (concurrency, rateLimit)');
      END IF;
    END LOOP;
    IF p_policy -> 'concurrency' <> 'null'::jsonb THEN
      v_concurrency := workhorse.check_int(p_policy -> 'concurrency', 'concurrency', 1, 100000);
    END IF;
    v_rate := p_policy -> 'rateLimit';
    IF v_rate <> 'null'::jsonb THEN
      IF jsonb_typeof(v_rate) <> 'object' THEN
        PERFORM workhorse.raise_invalid('rateLimit', 'must be an object {"limit", "intervalMs"} or null');
      END IF;
      FOR v_key IN SELECT jsonb_object_keys(v_rate) LOOP
        IF v_key NOT IN ('limit', 'intervalMs') THEN
          PERFORM workhorse.raise_invalid('rateLimit.' || v_key, 'is not a rate limit field (limit, intervalMs)');
        END IF;
      END LOOP;
      v_limit := workhorse.check_int(v_rate -> 'limit', 'rateLimit.limit', 1, 100000);
      v_interval := workhorse.check_int(v_rate -> 'intervalMs', 'rateLimit.intervalMs', 1, 86400000);
    END IF;
  END IF;

  IF v_concurrency IS NULL AND v_limit IS NULL THEN
    DELETE FROM workhorse.queue_policy WHERE queue = p_queue;
    GET DIAGNOSTICS v_changed = ROW_COUNT;
  ELSE
    INSERT INTO workhorse.queue_policy AS p
      (queue, concurrency, rate_limit, rate_interval_ms, changed_at, changed_by, reason, login_role)
    VALUES (p_queue, v_concurrency, v_limit, v_interval, clock_timestamp(), p_actor, p_reason, session_user)
    ON CONFLICT (queue) DO UPDATE
      SET concurrency = EXCLUDED.concurrency, rate_limit = EXCLUDED.rate_limit,
          rate_interval_ms = EXCLUDED.rate_interval_ms,
          window_at = CASE WHEN EXCLUDED.rate_limit IS NULL THEN '{}' ELSE p.window_at END,
          window_n = CASE WHEN EXCLUDED.rate_limit IS NULL THEN '{}' ELSE p.window_n END,
          changed_at = EXCLUDED.changed_at, changed_by = EXCLUDED.changed_by, reason = EXCLUDED.reason,
          login_role = EXCLUDED.login_role
      -- Setting the policy a queue has changes nothing (an application setting it at each start).
      WHERE (p.concurrency, p.rate_limit, p.rate_interval_ms)
            IS DISTINCT FROM (EXCLUDED.concurrency, EXCLUDED.rate_limit, EXCLUDED.rate_interval_ms);
    GET DIAGNOSTICS v_changed = ROW_COUNT;
  END IF;
  IF v_changed > 0 THEN
    PERFORM workhorse.record_operator_change('queue_policy_set', p_queue, p_actor, p_reason,
                                             workhorse.queue_policy_json(p_queue, v_concurrency, v_limit, v_interval));
  END IF;
  PERFORM pg_notify('workhorse_jobs', p_queue);
  RETURN workhorse.queue_policy_json(p_queue, v_concurrency, v_limit, v_interval);
END
$$;

-- The registered workers, newest first, with their status: `running`, `draining` (asked to
-- drain, still holding jobs), `drained` (asked to drain, holding none) or `gone` (three reports
-- missed: it crashed, hung or lost its connection; its jobs come back when their leases expire),
-- and who asked for a drain: the caller-chosen actor and the login role (session_user).
CREATE FUNCTION workhorse.list_workers_v2()
RETURNS TABLE (worker_id text, status text, host text, pid integer, queues text[], concurrency integer,
               in_flight integer, version text, started_at timestamptz, last_seen_at timestamptz,
               drain_requested_at timestamptz, drain_requested_by text, drain_reason text, drain_login_role text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT w.worker_id,
         CASE WHEN workhorse.worker_is_gone(w.last_seen_at, w.period_ms, clock_timestamp()) THEN 'gone'
              WHEN w.drain_requested_at IS NULL THEN 'running'
              WHEN w.in_flight > 0 THEN 'draining'
              ELSE 'drained' END,
         w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.version, w.started_at, w.last_seen_at,
         w.drain_requested_at, w.drain_requested_by, w.drain_reason, w.drain_login_role
  FROM workhorse.worker_registry w
  ORDER BY w.started_at DESC, w.worker_id;
END
$$;

-- The previous release's read (deprecated, docs/protocol.md): list_workers_v2 without the login role.
CREATE OR REPLACE FUNCTION workhorse.list_workers_v1()
RETURNS TABLE (worker_id text, status text, host text, pid integer, queues text[], concurrency integer,
               in_flight integer, version text, started_at timestamptz, last_seen_at timestamptz,
               drain_requested_at timestamptz, drain_requested_by text, drain_reason text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT w.worker_id, w.status, w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.version, w.started_at,
         w.last_seen_at, w.drain_requested_at, w.drain_requested_by, w.drain_reason
  FROM workhorse.list_workers_v2() w
  ORDER BY w.started_at DESC, w.worker_id;
END
$$;

-- Asks a worker to drain: at its next report it stops claiming and finishes the jobs it holds.
-- Answers `requested` (recorded with the login role, also in workhorse.operator_change),
-- `already_requested` (the first request keeps its time, actor, reason and login role) or
-- `not_found`.
CREATE OR REPLACE FUNCTION workhorse.drain_worker_v1(p_worker_id text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_before timestamptz;
BEGIN
  SELECT drain_requested_at INTO v_before FROM workhorse.worker_registry WHERE worker_id = p_worker_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'not_found';
  END IF;
  IF v_before IS NOT NULL THEN
    RETURN 'already_requested';
  END IF;
  UPDATE workhorse.worker_registry
     SET drain_requested_at = clock_timestamp(), drain_requested_by = p_actor, drain_reason = p_reason,
         drain_login_role = session_user
   WHERE worker_id = p_worker_id;
  PERFORM workhorse.record_operator_change('worker_drain_requested', p_worker_id, p_actor, p_reason, NULL);
  RETURN 'requested';
END
$$;

-- Sets the policy; fields left out keep their values. Names the first bad field. Records the
-- caller-chosen actor and the login role (session_user) on the policy and in
-- workhorse.operator_change (with the settings given).
CREATE OR REPLACE FUNCTION workhorse.set_retention_v1(p_policy jsonb, p_actor text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
BEGIN
  IF p_policy IS NULL OR jsonb_typeof(p_policy) <> 'object' THEN
    PERFORM workhorse.raise_invalid('policy', 'must be an object');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_policy) LOOP
    IF v_key NOT IN ('enabled', 'jobEventDays', 'attemptHistoryDays', 'finishedJobMs') THEN
      PERFORM workhorse.raise_invalid(v_key, 'is not a retention setting (enabled, jobEventDays, attemptHistoryDays, finishedJobMs)');
    END IF;
  END LOOP;
  IF p_policy ? 'enabled' AND jsonb_typeof(p_policy -> 'enabled') <> 'boolean' THEN
    PERFORM workhorse.raise_invalid('enabled', 'must be a boolean');
  END IF;
  UPDATE workhorse.retention_policy
     SET enabled = coalesce((p_policy ->> 'enabled')::boolean, enabled),
         job_event_days = CASE WHEN p_policy ? 'jobEventDays' THEN workhorse.check_int(p_policy -> 'jobEventDays', 'jobEventDays', 1, 36500)::integer ELSE job_event_days END,
         attempt_history_days = CASE WHEN p_policy ? 'attemptHistoryDays' THEN workhorse.check_int(p_policy -> 'attemptHistoryDays', 'attemptHistoryDays', 1, 36500)::integer ELSE attempt_history_days END,
         finished_job_ms = CASE WHEN p_policy ? 'finishedJobMs' THEN workhorse.check_int(p_policy -> 'finishedJobMs', 'finishedJobMs', 1000, 3153600000000) ELSE finished_job_ms END,
         changed_at = clock_timestamp(), changed_by = p_actor, login_role = session_user;
  PERFORM workhorse.record_operator_change('retention_set', NULL, p_actor, NULL, p_policy);
END
$$;

-- The policy and how far retention got: when it last ran, the time up to which finished jobs
-- were looked at and how far that is behind the window (lag), jobs waiting to be looked at again,
-- the oldest history day kept and the days past their window still there, totals. The policy
-- says who changed it last: changedBy (the caller-chosen actor) and loginRole (session_user).
CREATE FUNCTION workhorse.retention_status_v2()
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
  WITH parts AS (SELECT h.tbl, h.day FROM workhorse.history_partitions() h),
  today AS (SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date AS d)
  SELECT jsonb_build_object(
    'policy', jsonb_build_object('enabled', pol.enabled, 'jobEventDays', pol.job_event_days,
                                 'attemptHistoryDays', pol.attempt_history_days, 'finishedJobMs', pol.finished_job_ms,
                                 'changedAt', pol.changed_at, 'changedBy', pol.changed_by, 'loginRole', pol.login_role),
    'lastRunAt', st.last_run_at,
    'coveredUntil', st.covered_until,
    'lagMs', CASE WHEN st.covered_until IS NULL THEN NULL
                  ELSE greatest(0, floor(extract(epoch FROM (clock_timestamp() - pol.finished_job_ms * interval '1 millisecond') - st.covered_until) * 1000))::bigint END,
    'deferredJobs', (SELECT count(*) FROM workhorse.retention_deferred),
    'jobsPurged', st.jobs_purged,
    'partitionsDropped', st.partitions_dropped,
    'lockTimeouts', st.lock_timeouts,
    'oldestJobEventDay', (SELECT min(day) FROM parts WHERE tbl = 'job_event'),
    'oldestAttemptHistoryDay', (SELECT min(day) FROM parts WHERE tbl = 'attempt_history'),
    'expiredPartitions', (SELECT count(*) FROM parts, today
                          WHERE day < today.d - CASE WHEN tbl = 'job_event' THEN pol.job_event_days ELSE pol.attempt_history_days END))
  FROM workhorse.retention_policy pol, workhorse.retention_state st
  );
END
$$;

-- The previous release's read (deprecated, docs/protocol.md): retention_status_v2 without the
-- policy's login role.
CREATE OR REPLACE FUNCTION workhorse.retention_status_v1()
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN workhorse.retention_status_v2() #- '{policy,loginRole}';
END
$$;

-- A schedule's history, newest first: each revision's change (with the definition from then on)
-- and each trigger, with who made it: the caller-chosen actor and the login role (session_user;
-- null for a change made before the schema recorded it). At most p_limit rows.
CREATE FUNCTION workhorse.get_schedule_history_v2(p_namespace text, p_key text, p_limit integer DEFAULT 100)
RETURNS TABLE (revision integer, at timestamptz, change text, definition jsonb, actor text, login_role text, reason text,
               job_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_id uuid;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_namespace), 'namespace');
  PERFORM workhorse.check_name(to_jsonb(p_key), 'key');
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  SELECT s.id INTO v_id FROM workhorse.schedule s WHERE s.namespace = p_namespace AND s.key = p_key;
  IF NOT FOUND THEN
    PERFORM workhorse.raise_schedule_not_found(p_namespace, p_key);
  END IF;
  RETURN QUERY
    SELECT h.revision, h.at, h.change, h.definition, h.actor, h.login_role, h.reason, h.job_id
    FROM workhorse.schedule_history h
    WHERE h.schedule_id = v_id
    ORDER BY h.id DESC
    LIMIT p_limit;
END
$$;

-- The previous release's read (deprecated, docs/protocol.md): get_schedule_history_v2 without
-- the login role.
CREATE OR REPLACE FUNCTION workhorse.get_schedule_history_v1(p_namespace text, p_key text, p_limit integer DEFAULT 100)
RETURNS TABLE (revision integer, at timestamptz, change text, definition jsonb, actor text, reason text, job_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
    SELECT h.revision, h.at, h.change, h.definition, h.actor, h.reason, h.job_id
    FROM workhorse.get_schedule_history_v2(p_namespace, p_key, p_limit) h;
END
$$;

-- Saves a completed stage's value under p_name. The first value saved for a name wins; a second
-- save reports `exists` and changes nothing. Answers the status (`saved`, `exists` or `stale`)
-- and, for `saved` and `exists`, the value now stored under the name, wrapped as the claim hands
-- checkpoints over ([] for a stage that returned nothing, [value] otherwise): on `exists` that is
-- the value another save stored first, which the caller must use instead of its own (a checkpoint
-- always answers what is stored). `stale`: no stored value (null).
-- p_in_transaction: the caller is a transactional handler, whose own transaction also records
-- the job's completion (complete_v1). The job's row is then not locked, only read: the
-- completion locks it and checks the owner before anything of that transaction commits, while a
-- lock taken here would be held for the rest of the handler's run, and neither the heartbeat
-- (it skips rows others hold) nor a durable sleep (it would wait for this very transaction)
-- could touch the job until then.
CREATE FUNCTION workhorse.save_checkpoint_v2(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_value jsonb, p_in_transaction boolean DEFAULT false)
RETURNS TABLE (status text, stored jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
BEGIN
  IF p_name IS NULL OR length(p_name) NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid('name', 'must be a string of 1 to 200 characters');
  END IF;
  PERFORM workhorse.check_json_size(p_value, 'value');
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence, p_lock => NOT coalesce(p_in_transaction, false));
  IF r.job_id IS NULL THEN
    RETURN QUERY SELECT 'stale'::text, NULL::jsonb;
    RETURN;
  END IF;
  v_now := clock_timestamp();
  INSERT INTO workhorse.job_checkpoint (job_id, name, value, attempt, fence_token, worker_id, created_at)
  VALUES (p_job_id, p_name, p_value, r.current_attempt, p_fence, p_worker_id, v_now)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    -- A later statement: it sees the save that won, committed while this insert waited for it.
    -- (Checkpoints are removed only with their job, which this caller still owns.)
    RETURN QUERY
      SELECT 'exists'::text, CASE WHEN k.value IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(k.value) END
      FROM workhorse.job_checkpoint k WHERE k.job_id = p_job_id AND k.name = p_name;
    RETURN;
  END IF;
  PERFORM workhorse.write_event(p_job_id, 'checkpoint_saved', v_now, r.current_attempt, jsonb_build_object('name', p_name),
    p_worker_id, p_fence);
  RETURN QUERY SELECT 'saved'::text, CASE WHEN p_value IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(p_value) END;
END
$$;

-- The previous release's call (deprecated, docs/protocol.md): save_checkpoint_v2's status alone.
CREATE OR REPLACE FUNCTION workhorse.save_checkpoint_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_value jsonb, p_in_transaction boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT c.status FROM workhorse.save_checkpoint_v2(p_job_id, p_worker_id, p_fence, p_name, p_value, p_in_transaction) c);
END
$$;

INSERT INTO workhorse.protocol_function (name, capabilities) VALUES
  ('list_operator_changes_v1', '{operator}'),
  ('list_queues_v2', '{operator}'),
  ('list_workers_v2', '{operator}'),
  ('retention_status_v2', '{operator}'),
  ('get_schedule_history_v2', '{operator}'),
  ('save_checkpoint_v2', '{worker}');
REVOKE ALL ON FUNCTION workhorse.record_operator_change(text, text, text, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.list_operator_changes_v1(text, text, integer, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.list_queues_v2() FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.list_workers_v2() FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.retention_status_v2() FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.get_schedule_history_v2(text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.save_checkpoint_v2(uuid, text, bigint, text, jsonb, boolean) FROM PUBLIC;

-- CREATE OR REPLACE resets a function's SECURITY DEFINER and search_path: set them again on every
-- protocol function this step (re)defines.
ALTER FUNCTION workhorse.list_operator_changes_v1(text, text, integer, bigint) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.pause_queue_v1(text, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.resume_queue_v1(text, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_queues_v2() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_queues_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.set_queue_policy_v1(text, jsonb, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_workers_v2() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_workers_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.drain_worker_v1(text, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.set_retention_v1(jsonb, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.retention_status_v2() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.retention_status_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.get_schedule_history_v2(text, text, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.get_schedule_history_v1(text, text, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.save_checkpoint_v2(uuid, text, bigint, text, jsonb, boolean) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.save_checkpoint_v1(uuid, text, bigint, text, jsonb, boolean) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

SELECT workhorse.regrant_capabilities();
