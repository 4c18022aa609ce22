-- Step 6 -> 7 (issue 30, defects 1, 7, 9 and the health thresholds): owner-only locks, recorded
-- maintenance runs, prerequisites locked by the enqueue, a floor for drop_history_before_v1, and
-- the login role beside the caller-chosen actor.
--
-- 1. Every advisory lock of the schema (tick, retention, schedule syncs per namespace, redrives
--    per request id) becomes a row lock on an owner-only table, which no application role can
--    take (PostgreSQL has no privilege on advisory locks). The tick records when it last did its
--    work; health_v1 reports maintenance that has not run for too long.
-- 7. batch_dependencies locks the earlier jobs an enqueue names (FOR KEY SHARE) and retention
--    looks at references again under its locks.
-- 9. drop_history_before_v1 refuses a cutoff later than the retention floor; job_event and
--    schedule_history record the login role (session_user) of the session that wrote each row;
--    get_timeline_v2 returns it (get_timeline_v1 stays, without it).
-- health_thresholds checks the thresholds in SQL (warn above critical refused).
--
-- Locks: two new tables; ADD COLUMN without a default and SET DEFAULT on job_event (and its
-- partitions) and schedule_history: catalog changes only, no rewrite, an ACCESS EXCLUSIVE lock
-- held for the length of the step's transaction.

CREATE TABLE workhorse.maintenance_lock (
  name text PRIMARY KEY,
  -- When a caller last held the row and did the work; null: never since it was created.
  last_run_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO workhorse.maintenance_lock (name) VALUES ('tick');

CREATE TABLE workhorse.schedule_namespace (
  namespace text PRIMARY KEY
);
INSERT INTO workhorse.schedule_namespace (namespace) SELECT DISTINCT s.namespace FROM workhorse.schedule s;

-- Old rows read null (written before the login role was recorded); new ones get session_user.
ALTER TABLE workhorse.job_event ADD COLUMN login_role text;
ALTER TABLE workhorse.job_event ALTER COLUMN login_role SET DEFAULT session_user;
ALTER TABLE workhorse.schedule_history ADD COLUMN login_role text;
ALTER TABLE workhorse.schedule_history ALTER COLUMN login_role SET DEFAULT session_user;

CREATE OR REPLACE FUNCTION workhorse.tick_v1()
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_promoted integer;
  v_recovered integer;
  v_expired integer;
  v_fired integer;
  v_keys integer;
  v_created integer := 0;
  v_retention jsonb;
  v_horizon date := (clock_timestamp() AT TIME ZONE 'UTC')::date + 2;
BEGIN
  PERFORM 1 FROM workhorse.maintenance_lock WHERE name = 'tick' FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('skipped', true, 'schedulesToPlan', workhorse.schedules_need_plan());
  END IF;
  v_expired := workhorse.expire_deadlines_v1(1000);
  v_promoted := workhorse.promote_v1(10000);
  v_recovered := workhorse.recover_expired_v1(1000);
  v_fired := workhorse.fire_due_schedules(100);
  DELETE FROM workhorse.enqueue_idempotency
  WHERE ctid = ANY (ARRAY(SELECT ctid FROM workhorse.enqueue_idempotency WHERE expires_at <= clock_timestamp() LIMIT 1000));
  GET DIAGNOSTICS v_keys = ROW_COUNT;
  IF to_regclass('workhorse.job_event_p' || to_char(v_horizon, 'YYYYMMDD')) IS NULL
     OR to_regclass('workhorse.attempt_history_p' || to_char(v_horizon, 'YYYYMMDD')) IS NULL THEN
    BEGIN
      -- Creating a partition briefly locks the parent: give up rather than stall writers, and
      -- try again on a later tick. The wait is shorter than deadlock_timeout (1 s by default):
      -- this transaction already holds the rows it promoted or recovered, and a writer that
      -- holds the parent and waits for one of those rows would otherwise be a deadlock, which
      -- PostgreSQL could resolve by failing the writer.
      PERFORM set_config('lock_timeout', '200', true);
      v_created := workhorse.prepare_partitions_v1(7);
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
      v_created := 0;
    END;
  END IF;
  -- Retention (097_retention.sql): a bounded pass; it never sets `more` (it is background work).
  v_retention := workhorse.retention_run_v1(1000);
  UPDATE workhorse.maintenance_lock SET last_run_at = clock_timestamp() WHERE name = 'tick';
  RETURN jsonb_build_object('skipped', false, 'promoted', v_promoted, 'recovered', v_recovered,
                            'deadlinesExpired', v_expired, 'partitionsCreated', v_created,
                            'jobsPurged', coalesce((v_retention ->> 'jobsPurged')::integer, 0),
                            'schedulesFired', v_fired, 'schedulesToPlan', workhorse.schedules_need_plan(),
                            'more', v_expired = 1000 OR v_promoted = 10000 OR v_recovered = 1000 OR v_keys = 1000
                                    OR v_fired >= 100);
END
$$;

CREATE OR REPLACE FUNCTION workhorse.retention_purge(p_ids uuid[], p_cutoff timestamptz, p_window_ms bigint, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_gone uuid[];
  v_seqs bigint[];
BEGIN
  -- Locked, skipping any a concurrent writer holds (a redrive's foreign-key check): those are
  -- deferred and looked at again later.
  SELECT coalesce(array_agg(g.id), '{}'), coalesce(array_agg(g.seq), '{}') INTO v_gone, v_seqs
  FROM (SELECT j.id, j.seq
        FROM workhorse.job j
        JOIN workhorse.job_outcome o ON o.job_id = j.id
        WHERE j.id = ANY (p_ids) AND o.finished_at < p_cutoff
          AND j.id NOT IN (SELECT x.job_id FROM workhorse.retention_referenced(p_ids) x)
        FOR UPDATE OF j SKIP LOCKED) g;
  -- An enqueue naming one of them as a prerequisite locks its row until it commits (see
  -- batch_dependencies): one that committed after this statement's snapshot but before its lock
  -- is seen by a new statement, so the references are looked at again under the locks.
  IF cardinality(v_gone) > 0 THEN
    SELECT coalesce(array_agg(j.id), '{}'), coalesce(array_agg(j.seq), '{}') INTO v_gone, v_seqs
    FROM workhorse.job j
    WHERE j.id = ANY (v_gone) AND j.id NOT IN (SELECT x.job_id FROM workhorse.retention_referenced(v_gone) x);
  END IF;
  INSERT INTO workhorse.retention_deferred (job_id, recheck_at)
  SELECT i.id,
         CASE WHEN o.job_id IS NULL THEN p_now + least(interval '1 day', p_window_ms * interval '1 millisecond')
              WHEN o.finished_at >= p_cutoff THEN o.finished_at + p_window_ms * interval '1 millisecond'
              ELSE p_now + least(interval '1 hour', p_window_ms * interval '1 millisecond') END
  FROM unnest(p_ids) AS i (id)
  LEFT JOIN workhorse.job_outcome o ON o.job_id = i.id
  WHERE i.id <> ALL (v_gone)
  ON CONFLICT (job_id) DO UPDATE SET recheck_at = EXCLUDED.recheck_at;
  IF cardinality(v_gone) = 0 THEN
    RETURN 0;
  END IF;
  DELETE FROM workhorse.retention_deferred WHERE job_id = ANY (v_gone);
  -- A redrive source that was kept for the job now removed may go in its turn: look at it again now.
  INSERT INTO workhorse.retention_deferred (job_id, recheck_at)
  SELECT r.source_job_id, p_now FROM workhorse.job_redrive r
  WHERE r.new_job_id = ANY (v_gone) AND r.source_job_id <> ALL (v_gone)
  ON CONFLICT (job_id) DO UPDATE SET recheck_at = EXCLUDED.recheck_at;
  DELETE FROM workhorse.job_redrive WHERE source_job_id = ANY (v_gone) OR new_job_id = ANY (v_gone);
  DELETE FROM workhorse.job_dependency WHERE dependent_id = ANY (v_gone) OR prerequisite_id = ANY (v_gone);
  DELETE FROM workhorse.job_child_call WHERE parent_id = ANY (v_gone);
  DELETE FROM workhorse.job_signal WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_signal_wait WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_human_wait WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_checkpoint WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_wait WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_query WHERE seq = ANY (v_seqs);
  DELETE FROM workhorse.job_outcome WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job WHERE id = ANY (v_gone);
  RETURN cardinality(v_gone);
END
$$;

CREATE OR REPLACE FUNCTION workhorse.retention_run_v1(p_budget integer DEFAULT 1000, p_force boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  p workhorse.retention_policy;
  s workhorse.retention_state;
  v_cutoff timestamptz;
  v_floor uuid;
  v_ids uuid[];
  v_block integer;
  v_seen integer := 0;
  v_purged integer := 0;
  v_dropped integer := 0;
  v_timeouts integer := 0;
  v_more boolean := false;
  d record;
BEGIN
  IF p_budget IS NULL OR p_budget < 1 OR p_budget > 1000000 THEN
    PERFORM workhorse.raise_invalid('budget', 'must be an integer from 1 to 1000000');
  END IF;
  -- From the tick: a pass that found nothing to do waits 10 s before the next one, checked
  -- without a lock or a write, so an idle retention costs a tick one row read.
  IF NOT p_force AND EXISTS (SELECT 1 FROM workhorse.retention_state
                             WHERE last_run_at > v_now - interval '10 seconds' AND NOT last_more) THEN
    RETURN jsonb_build_object('skipped', true);
  END IF;
  -- One pass at a time: the row of retention_state, which no application role can lock (an
  -- advisory lock could be taken by any role, and stop retention).
  SELECT * INTO s FROM workhorse.retention_state FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('skipped', true);
  END IF;
  SELECT * INTO p FROM workhorse.retention_policy;
  IF NOT p.enabled THEN
    RETURN jsonb_build_object('skipped', true, 'disabled', true);
  END IF;
  -- At most one partition per pass, and then nothing else: the drop holds its lock on the
  -- parent table until the pass's transaction ends, and every writer of the history waits for it
  -- meanwhile. The next pass (at once: `more`) looks for the next one.
  IF p_force OR s.last_partition_check_at IS NULL OR s.last_partition_check_at < v_now - interval '1 minute' THEN
    d := workhorse.retention_drop_partitions('job_event', 'at', p.job_event_days, 1, 100);
    v_dropped := d.dropped;
    v_timeouts := d.timed_out;
    IF v_dropped = 0 THEN
      d := workhorse.retention_drop_partitions('attempt_history', 'finished_at', p.attempt_history_days, 1, 100);
      v_dropped := d.dropped;
      v_timeouts := v_timeouts + d.timed_out;
    END IF;
    IF v_dropped = 0 THEN
      s.last_partition_check_at := v_now;
    END IF;
  END IF;
  IF v_dropped > 0 THEN
    UPDATE workhorse.retention_state
       SET last_run_at = v_now, partitions_dropped = partitions_dropped + v_dropped,
           lock_timeouts = lock_timeouts + v_timeouts, last_more = true;
    RETURN jsonb_build_object('skipped', false, 'jobsPurged', 0, 'jobsExamined', 0,
                              'partitionsDropped', v_dropped, 'lockTimeouts', v_timeouts, 'more', true);
  END IF;
  v_cutoff := v_now - p.finished_job_ms * interval '1 millisecond';
  v_floor := workhorse.job_id_floor(v_cutoff);
  LOOP
    v_block := least(1000, p_budget - v_seen);
    EXIT WHEN v_block <= 0;
    SELECT coalesce(array_agg(x.job_id), '{}') INTO v_ids
    FROM (SELECT r.job_id FROM workhorse.retention_deferred r WHERE r.recheck_at <= v_now ORDER BY r.recheck_at LIMIT v_block) x;
    IF cardinality(v_ids) = 0 THEN
      SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}') INTO v_ids
      FROM (SELECT j.id FROM workhorse.job j WHERE j.id > s.job_watermark AND j.id < v_floor ORDER BY j.id LIMIT v_block) x;
      IF cardinality(v_ids) < v_block THEN
        -- Every job created before the window's start has been looked at.
        s.job_watermark := greatest(s.job_watermark, v_floor);
        s.covered_until := greatest(s.covered_until, v_cutoff);
      ELSE
        s.job_watermark := v_ids[cardinality(v_ids)];
        s.covered_until := workhorse.job_id_time(s.job_watermark);
      END IF;
    END IF;
    EXIT WHEN cardinality(v_ids) = 0;
    v_seen := v_seen + cardinality(v_ids);
    v_purged := v_purged + workhorse.retention_purge(v_ids, v_cutoff, p.finished_job_ms, v_now);
    IF cardinality(v_ids) < v_block THEN
      CONTINUE;
    END IF;
    v_more := v_seen >= p_budget;
  END LOOP;
  UPDATE workhorse.retention_state
     SET job_watermark = s.job_watermark, covered_until = s.covered_until, last_run_at = v_now,
         last_partition_check_at = s.last_partition_check_at,
         jobs_purged = jobs_purged + v_purged, partitions_dropped = partitions_dropped + v_dropped,
         lock_timeouts = lock_timeouts + v_timeouts, last_more = v_purged > 0 OR v_dropped > 0 OR v_more;
  RETURN jsonb_build_object('skipped', false, 'jobsPurged', v_purged, 'jobsExamined', v_seen,
                            'partitionsDropped', v_dropped, 'lockTimeouts', v_timeouts, 'more', v_more);
END
$$;

CREATE OR REPLACE FUNCTION workhorse.sync_schedules_v1(p_namespace text, p_definitions jsonb, p_actor text DEFAULT NULL)
RETURNS TABLE (key text, change text, revision integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  -- Plans start after now, in whole milliseconds (the precision of a JavaScript Date, which the
  -- planner hands back as p_after of plan_schedule_v1).
  v_now timestamptz := date_trunc('milliseconds', clock_timestamp());
  v_def jsonb;
  v_norm jsonb;
  v_i integer := 0;
  v_keys text[] := '{}';
  v_key text;
  s workhorse.schedule;
  v_change text;
  v_retimed boolean;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_namespace), 'namespace');
  PERFORM workhorse.check_actor(p_actor, NULL);
  IF jsonb_typeof(p_definitions) IS DISTINCT FROM 'array' THEN
    PERFORM workhorse.raise_invalid('definitions', 'must be a JSON array of schedule definitions');
  END IF;
  IF jsonb_array_length(p_definitions) > 1000 THEN
    RAISE EXCEPTION USING ERRCODE = 'P1003', COLUMN = 'definitions',
      MESSAGE = format('definitions: a namespace holds at most 1000 schedules, got %s', jsonb_array_length(p_definitions));
  END IF;
  -- Every definition is checked before anything is written.
  FOR v_def IN SELECT e FROM jsonb_array_elements(p_definitions) AS e LOOP
    PERFORM workhorse.normalize_schedule_definition(v_def, format('definitions[%s]', v_i));
    v_key := v_def ->> 'key';
    IF v_key = ANY (v_keys) THEN
      PERFORM workhorse.raise_invalid(format('definitions[%s].key', v_i), format('"%s" is listed twice', v_key));
    END IF;
    v_keys := v_keys || v_key;
    v_i := v_i + 1;
  END LOOP;

  -- Syncs of one namespace take turns on its row of schedule_namespace (created by the first),
  -- which no application role can lock: only a caller of this function holds it.
  INSERT INTO workhorse.schedule_namespace (namespace) VALUES (p_namespace) ON CONFLICT (namespace) DO NOTHING;
  PERFORM 1 FROM workhorse.schedule_namespace WHERE namespace = p_namespace FOR UPDATE;
  v_i := 0;
  FOR v_def IN SELECT e FROM jsonb_array_elements(p_definitions) AS e LOOP
    v_norm := workhorse.normalize_schedule_definition(v_def, format('definitions[%s]', v_i));
    v_key := v_def ->> 'key';
    v_i := v_i + 1;
    SELECT * INTO s FROM workhorse.schedule sc WHERE sc.namespace = p_namespace AND sc.key = v_key FOR UPDATE;
    IF NOT FOUND THEN
      INSERT INTO workhorse.schedule AS sc (namespace, key, definition, enabled, revision, created_at, updated_at,
                                            planned_through, replan_at)
      VALUES (p_namespace, v_key, v_norm, true, 1, v_now, v_now, v_now, '-infinity')
      RETURNING * INTO s;
      v_change := 'created';
    ELSIF s.enabled AND s.definition = v_norm THEN
      key := v_key; change := 'unchanged'; revision := s.revision;
      RETURN NEXT;
      CONTINUE;
    ELSE
      v_change := CASE WHEN s.enabled THEN 'updated' ELSE 'enabled' END;
      v_retimed := NOT s.enabled OR s.definition -> 'cron' <> v_norm -> 'cron'
                   OR s.definition -> 'timezone' <> v_norm -> 'timezone';
      IF v_retimed THEN
        DELETE FROM workhorse.schedule_occurrence o WHERE o.schedule_id = s.id AND o.state = 'planned' AND o.at > v_now;
      END IF;
      UPDATE workhorse.schedule sc
         SET definition = v_norm, enabled = true, revision = sc.revision + 1, updated_at = v_now,
             planned_through = CASE WHEN v_retimed THEN v_now ELSE sc.planned_through END,
             replan_at = CASE WHEN v_retimed THEN '-infinity' ELSE sc.replan_at END
       WHERE sc.id = s.id
      RETURNING * INTO s;
    END IF;
    INSERT INTO workhorse.schedule_history (schedule_id, revision, at, change, definition, actor)
    VALUES (s.id, s.revision, v_now, v_change, v_norm, p_actor);
    key := v_key; change := v_change; revision := s.revision;
    RETURN NEXT;
  END LOOP;

  FOR s IN
    SELECT * FROM workhorse.schedule sc
    WHERE sc.namespace = p_namespace AND sc.enabled AND NOT (sc.key = ANY (v_keys))
    ORDER BY sc.key
    FOR UPDATE
  LOOP
    -- Its plan goes; occurrences already fired or skipped stay as history.
    DELETE FROM workhorse.schedule_occurrence o WHERE o.schedule_id = s.id AND o.state = 'planned';
    UPDATE workhorse.schedule sc
       SET enabled = false, revision = sc.revision + 1, updated_at = v_now, replan_at = NULL
     WHERE sc.id = s.id
    RETURNING * INTO s;
    INSERT INTO workhorse.schedule_history (schedule_id, revision, at, change, actor)
    VALUES (s.id, s.revision, v_now, 'disabled', p_actor);
    key := s.key; change := 'disabled'; revision := s.revision;
    RETURN NEXT;
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.redrive_job(p_job_id uuid, p_request_id text, p_actor text, p_reason text, p_again boolean)
RETURNS workhorse.job_redrive
LANGUAGE plpgsql AS $$
DECLARE
  v_redrive workhorse.job_redrive;
  v_job workhorse.job;
  v_new uuid;
  v_now timestamptz;
BEGIN
  SELECT * INTO v_redrive FROM workhorse.job_redrive WHERE request_id = p_request_id;
  IF FOUND THEN
    IF v_redrive.source_job_id <> p_job_id THEN
      PERFORM workhorse.raise_invalid('requestId', format('was already used to redrive job %s', v_redrive.source_job_id));
    END IF;
    RETURN v_redrive;
  END IF;
  -- Serialise redrives of one dead letter, whatever their request ids and processes, on its
  -- outcome row (no application role can lock it; an advisory lock any role could take): each
  -- one waits for the one before it to commit, and then (at READ COMMITTED, a statement sees what
  -- committed before it started) sees its lineage row. job_redrive_once_idx holds at any level.
  PERFORM 1 FROM workhorse.job_outcome WHERE job_id = p_job_id AND state = 'failed' FOR UPDATE;
  IF NOT FOUND THEN
    PERFORM workhorse.raise_invalid('jobId', 'is not a dead letter (only failed jobs can be redriven)');
  END IF;
  -- A repeat of this request that committed while this one waited is answered by its row.
  SELECT * INTO v_redrive FROM workhorse.job_redrive WHERE request_id = p_request_id;
  IF FOUND THEN
    IF v_redrive.source_job_id <> p_job_id THEN
      PERFORM workhorse.raise_invalid('requestId', format('was already used to redrive job %s', v_redrive.source_job_id));
    END IF;
    RETURN v_redrive;
  END IF;
  IF NOT p_again THEN
    SELECT * INTO v_redrive FROM workhorse.job_redrive WHERE source_job_id = p_job_id AND NOT again;
    IF FOUND THEN
      RETURN v_redrive;
    END IF;
  END IF;
  v_now := clock_timestamp();
  SELECT * INTO v_job FROM workhorse.job WHERE id = p_job_id;
  SELECT e.job_id INTO v_new FROM workhorse.enqueue_many_v1(jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
    'type', v_job.type, 'queue', v_job.queue, 'payload', v_job.payload, 'priority', v_job.priority,
    'maxAttempts', v_job.max_attempts, 'retryPolicy', v_job.retry_policy, 'tags', to_jsonb(v_job.tags),
    'executionTimeoutMs', v_job.execution_timeout_ms, 'traceContext', v_job.trace_context))
    || jsonb_build_object('payload', v_job.payload))) AS e;
  -- The first copy is the redrive; every further one is `again` (also when the first was asked
  -- for with p_again).
  -- The same request id used at the same time for another dead letter: the insert waits for
  -- that redrive and, once it committed, finds its row.
  INSERT INTO workhorse.job_redrive AS r (request_id, source_job_id, new_job_id, actor, reason, created_at, again)
  VALUES (p_request_id, p_job_id, v_new, p_actor, p_reason, v_now,
          EXISTS (SELECT 1 FROM workhorse.job_redrive x WHERE x.source_job_id = p_job_id))
  ON CONFLICT (request_id) DO NOTHING
  RETURNING * INTO v_redrive;
  IF NOT FOUND THEN
    PERFORM workhorse.raise_invalid('requestId', 'was used at the same time to redrive another job');
  END IF;
  INSERT INTO workhorse.job_event (job_id, at, kind, data)
  VALUES (p_job_id, v_now, 'redriven',
          jsonb_build_object('newJobId', v_new, 'requestId', p_request_id, 'actor', p_actor, 'reason', p_reason)
            || CASE WHEN v_redrive.again THEN '{"again": true}'::jsonb ELSE '{}'::jsonb END),
         (v_new, v_now, 'redriven_from',
          jsonb_build_object('sourceJobId', p_job_id, 'requestId', p_request_id, 'actor', p_actor, 'reason', p_reason)
            || CASE WHEN v_redrive.again THEN '{"again": true}'::jsonb ELSE '{}'::jsonb END);
  RETURN v_redrive;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.batch_dependencies(p_requests jsonb, p_ids uuid[], p_replay boolean[])
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_edges jsonb;
  v_missing record;
BEGIN
  SELECT jsonb_agg(jsonb_build_object(
           'p', CASE WHEN jsonb_typeof(d.v) = 'number' THEN p_ids[(d.v::text)::integer + 1]::text ELSE lower(d.v #>> '{}') END,
           'd', p_ids[x.ord], 'f', coalesce(x.e ->> 'onDependencyFailed', 'fail'),
           'c', coalesce(x.e ->> 'onDependencyCanceled', 'cancel'), 'o', d.ord - 1,
           'field', format('requests[%s].dependsOn[%s]', x.ord - 1, d.ord - 1)))
    INTO v_edges
  FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
  CROSS JOIN LATERAL jsonb_array_elements(x.e -> 'dependsOn') WITH ORDINALITY AS d (v, ord)
  WHERE x.e ? 'dependsOn' AND NOT coalesce(p_replay[x.ord::integer], false);
  -- The earlier jobs named are locked (FOR KEY SHARE of their rows) until the caller commits:
  -- retention, which locks a job's row FOR UPDATE SKIP LOCKED before removing it, leaves them
  -- be, and finds the edges once they committed. One it removed meanwhile is found missing below.
  PERFORM 1 FROM workhorse.job j
  WHERE j.id IN (SELECT (b ->> 'p')::uuid FROM jsonb_array_elements(v_edges) AS b) AND j.id <> ALL (p_ids)
  ORDER BY j.id FOR KEY SHARE;
  SELECT b ->> 'field' AS field, b ->> 'p' AS id INTO v_missing
  FROM jsonb_array_elements(v_edges) AS b
  WHERE NOT (b ->> 'p')::uuid = ANY (p_ids)
    AND NOT EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = (b ->> 'p')::uuid)
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'P1020', COLUMN = v_missing.field,
      MESSAGE = format('%s: no job has the id %s', v_missing.field, v_missing.id),
      DETAIL = jsonb_build_object('jobId', v_missing.id)::text;
  END IF;
  RETURN coalesce(v_edges, '[]'::jsonb);
END
$$;

CREATE OR REPLACE FUNCTION workhorse.drop_history_before_v1(p_before timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_part record;
  v_dropped integer := 0;
  v_cut date;
  v_floor date;
BEGIN
  IF p_before IS NULL THEN
    PERFORM workhorse.raise_invalid('before', 'must be a timestamp');
  END IF;
  v_cut := (p_before AT TIME ZONE 'UTC')::date;
  SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date - greatest(p.job_event_days, p.attempt_history_days)
    INTO v_floor FROM workhorse.retention_policy p;
  IF v_cut > v_floor THEN
    PERFORM workhorse.raise_invalid('before', format(
      'must be no later than %s (UTC), the retention floor: the history windows keep %s days; shorten them with set_retention_v1 to drop more',
      to_char(v_floor, 'YYYY-MM-DD'), (clock_timestamp() AT TIME ZONE 'UTC')::date - v_floor));
  END IF;
  FOR v_part IN
    SELECT c.relname
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    JOIN pg_namespace n ON n.oid = p.relnamespace
    WHERE n.nspname = 'workhorse' AND p.relname IN ('job_event', 'attempt_history')
      AND c.relname ~ '_p[0-9]{8}$'
      AND to_date(right(c.relname, 8), 'YYYYMMDD') < v_cut
  LOOP
    EXECUTE format('DROP TABLE workhorse.%I', v_part.relname);
    v_dropped := v_dropped + 1;
  END LOOP;
  DELETE FROM workhorse.job_event_default WHERE at < v_cut::timestamp AT TIME ZONE 'UTC';
  DELETE FROM workhorse.attempt_history_default WHERE finished_at < v_cut::timestamp AT TIME ZONE 'UTC';
  RETURN v_dropped;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.health_thresholds(p_thresholds jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_defaults jsonb := jsonb_build_object(
    -- How long the oldest ready job of a queue has waited to be claimed.
    'oldestReadyMs', jsonb_build_object('warn', 60000, 'critical', 600000),
    -- Active jobs whose lease ran out over 10 s ago and that maintenance has not recovered.
    'expiredLeases', jsonb_build_object('warn', 1, 'critical', 100),
    -- Jobs of a queue that failed for good (dead letters) in the last hour.
    'failedLastHour', jsonb_build_object('warn', 10, 'critical', 100),
    -- How far retention is behind its window.
    'retentionLagMs', jsonb_build_object('warn', 86400000, 'critical', 604800000),
    -- Ready jobs while no worker is registered as running (workers of the Python and Go SDKs
    -- do not register: set both levels to null when only they run).
    'readyWithoutWorkers', jsonb_build_object('warn', 1, 'critical', null),
    -- Time since a tick last did its work, and since an enabled retention last ran: sixty ticks
    -- at the default interval of 1 s warn; critical is past the longest tick interval a worker
    -- accepts (10 min, jittered up to 12). Raise it for workers that tick less often.
    'maintenanceStaleMs', jsonb_build_object('warn', 60000, 'critical', 900000));
  v_key text;
  v_pair jsonb;
  v_level text;
  v_merged jsonb;
BEGIN
  IF p_thresholds IS NULL OR jsonb_typeof(p_thresholds) <> 'object' THEN
    PERFORM workhorse.raise_invalid('thresholds', 'must be an object');
  END IF;
  FOR v_key, v_pair IN SELECT e.key, e.value FROM jsonb_each(p_thresholds) AS e ORDER BY e.key LOOP
    IF NOT v_defaults ? v_key THEN
      PERFORM workhorse.raise_invalid('thresholds.' || v_key, format('is not a health threshold (%s)',
        (SELECT string_agg(k, ', ') FROM jsonb_object_keys(v_defaults) AS k)));
    END IF;
    IF jsonb_typeof(v_pair) <> 'object' THEN
      PERFORM workhorse.raise_invalid('thresholds.' || v_key, 'must be an object { warn, critical }');
    END IF;
    FOR v_level IN SELECT jsonb_object_keys(v_pair) LOOP
      IF v_level NOT IN ('warn', 'critical') THEN
        PERFORM workhorse.raise_invalid(format('thresholds.%s.%s', v_key, v_level), 'is not a level (warn, critical)');
      END IF;
      IF jsonb_typeof(v_pair -> v_level) NOT IN ('null', 'number') OR (v_pair ->> v_level)::numeric < 0 THEN
        PERFORM workhorse.raise_invalid(format('thresholds.%s.%s', v_key, v_level), 'must be a number of at least 0, or null (never)');
      END IF;
    END LOOP;
  END LOOP;
  FOR v_key, v_pair IN SELECT e.key, e.value FROM jsonb_each(p_thresholds) AS e ORDER BY e.key LOOP
    IF (v_pair ->> 'warn')::numeric > (v_pair ->> 'critical')::numeric THEN
      PERFORM workhorse.raise_invalid('thresholds.' || v_key,
        format('warn (%s) must not be above critical (%s)', v_pair ->> 'warn', v_pair ->> 'critical'));
    END IF;
  END LOOP;
  SELECT jsonb_object_agg(d.key, d.value || coalesce(p_thresholds -> d.key, '{}')) INTO v_merged
  FROM jsonb_each(v_defaults) AS d;
  RETURN v_merged;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.health_v1(p_thresholds jsonb DEFAULT '{}')
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
    WITH t AS (SELECT workhorse.health_thresholds(p_thresholds) AS t),
    now AS (SELECT clock_timestamp() AS now),
    live AS (
      SELECT r.queue,
             count(*) FILTER (WHERE r.state = 'blocked') AS blocked,
             count(*) FILTER (WHERE r.state = 'scheduled') AS scheduled,
             count(*) FILTER (WHERE r.state = 'ready') AS ready,
             count(*) FILTER (WHERE r.state = 'active') AS active,
             min(r.run_at) FILTER (WHERE r.state = 'ready') AS oldest_ready,
             count(*) FILTER (WHERE r.state = 'active' AND r.lease_expires_at < now.now - interval '10 seconds') AS expired
      FROM workhorse.job_runtime r, now
      GROUP BY r.queue
    ),
    dead AS (
      SELECT o.queue, count(*) AS failed
      FROM workhorse.job_outcome o, now
      WHERE o.state = 'failed' AND o.finished_at > now.now - interval '1 hour'
      GROUP BY o.queue
    ),
    queues AS (
      SELECT coalesce(l.queue, d.queue) AS queue,
             coalesce(l.blocked, 0) AS blocked, coalesce(l.scheduled, 0) AS scheduled,
             coalesce(l.ready, 0) AS ready, coalesce(l.active, 0) AS active,
             coalesce(floor(extract(epoch FROM now.now - l.oldest_ready) * 1000), 0)::bigint AS oldest_ready_ms,
             coalesce(l.expired, 0) AS expired_leases, coalesce(d.failed, 0) AS failed_last_hour
      FROM live l FULL JOIN dead d ON d.queue = l.queue, now
    ),
    workers AS (
      SELECT count(*) FILTER (WHERE s.status = 'running') AS running,
             count(*) FILTER (WHERE s.status IN ('draining', 'drained')) AS draining,
             count(*) FILTER (WHERE s.status = 'gone') AS gone
      FROM (SELECT CASE WHEN workhorse.worker_is_gone(w.last_seen_at, w.period_ms, now.now) THEN 'gone'
                        WHEN w.drain_requested_at IS NOT NULL THEN 'draining' ELSE 'running' END AS status
            FROM workhorse.worker_registry w, now) s
    ),
    retention AS (
      SELECT pol.enabled,
             CASE WHEN NOT pol.enabled OR st.covered_until IS NULL THEN NULL
                  ELSE greatest(0, floor(extract(epoch FROM (now.now - pol.finished_job_ms * interval '1 millisecond') - st.covered_until) * 1000))::bigint
             END AS lag_ms
      FROM workhorse.retention_policy pol, workhorse.retention_state st, now
    ),
    -- When maintenance last did its work: the tick (maintenance_lock, 050_maintenance.sql), and
    -- retention when enabled. A tick that never ran counts from the row's creation (the
    -- installation or the upgrade), so a new database is not stale at once.
    maintenance AS (
      SELECT m.last_run_at AS tick_at, st.last_run_at AS retention_at,
             floor(extract(epoch FROM now.now - coalesce(m.last_run_at, m.created_at)) * 1000)::bigint AS tick_ms,
             CASE WHEN pol.enabled THEN
               floor(extract(epoch FROM now.now - coalesce(st.last_run_at, m.created_at)) * 1000)::bigint END AS retention_ms
      FROM workhorse.maintenance_lock m, workhorse.retention_policy pol, workhorse.retention_state st, now
      WHERE m.name = 'tick'
    ),
    missing AS (
      SELECT coalesce(jsonb_agg(x.name ORDER BY x.name), '[]') AS names
      FROM (SELECT tbl || '_p' || to_char(day, 'YYYYMMDD') AS name
            FROM unnest(ARRAY['job_event', 'attempt_history']) AS tbl,
                 generate_series(0, 1) AS k,
                 LATERAL (SELECT ((now.now AT TIME ZONE 'UTC')::date + k) AS day FROM now) d) x
      WHERE to_regclass('workhorse.' || x.name) IS NULL
    ),
    reasons AS (
      SELECT q.queue, 'oldest_ready_age' AS code, q.oldest_ready_ms::numeric AS value, t.t -> 'oldestReadyMs' AS pair FROM queues q, t WHERE q.ready > 0
      UNION ALL SELECT q.queue, 'expired_leases', q.expired_leases, t.t -> 'expiredLeases' FROM queues q, t
      UNION ALL SELECT q.queue, 'dead_letters', q.failed_last_hour, t.t -> 'failedLastHour' FROM queues q, t
      UNION ALL SELECT NULL, 'retention_lag', r.lag_ms, t.t -> 'retentionLagMs' FROM retention r, t WHERE r.lag_ms IS NOT NULL
      UNION ALL SELECT NULL, 'ready_without_workers', (SELECT sum(ready) FROM queues), t.t -> 'readyWithoutWorkers'
        FROM workers w, t WHERE w.running = 0
      UNION ALL SELECT NULL, 'maintenance_stale', greatest(m.tick_ms, 0), t.t -> 'maintenanceStaleMs' FROM maintenance m, t
      UNION ALL SELECT NULL, 'retention_stale', greatest(m.retention_ms, 0), t.t -> 'maintenanceStaleMs'
        FROM maintenance m, t WHERE m.retention_ms IS NOT NULL
      UNION ALL SELECT NULL, 'partitions_missing', jsonb_array_length(m.names), '{"warn": 1, "critical": null}'::jsonb
        FROM missing m
    ),
    leveled AS (
      SELECT r.*, workhorse.health_level(r.value, r.pair) AS level FROM reasons r
    )
    SELECT jsonb_build_object(
      'status', (SELECT CASE WHEN bool_or(level = 'critical') THEN 'critical' WHEN bool_or(level = 'warn') THEN 'warn' ELSE 'ok' END
                 FROM leveled),
      'checkedAt', (SELECT now FROM now),
      'reasons', coalesce((SELECT jsonb_agg(jsonb_build_object(
                    'code', l.code, 'level', l.level, 'queue', l.queue, 'value', l.value,
                    'threshold', (l.pair ->> l.level)::numeric)
                    ORDER BY l.level = 'warn', l.code, l.queue)
                  FROM leveled l WHERE l.level IS NOT NULL), '[]'),
      'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                    'queue', q.queue, 'blocked', q.blocked, 'scheduled', q.scheduled, 'ready', q.ready, 'active', q.active,
                    'oldestReadyMs', q.oldest_ready_ms, 'expiredLeases', q.expired_leases, 'failedLastHour', q.failed_last_hour)
                    ORDER BY q.queue) FROM queues q), '[]'),
      'workers', (SELECT jsonb_build_object('running', w.running, 'draining', w.draining, 'gone', w.gone) FROM workers w),
      'retention', (SELECT jsonb_build_object('enabled', r.enabled, 'lagMs', r.lag_ms) FROM retention r),
      'missingPartitions', (SELECT names FROM missing),
      'maintenance', coalesce((SELECT jsonb_build_object('tickLastRunAt', m.tick_at, 'retentionLastRunAt', m.retention_at) FROM maintenance m),
                              '{"tickLastRunAt": null, "retentionLastRunAt": null}')
    )
  );
END
$$;

CREATE OR REPLACE FUNCTION workhorse.get_timeline_v2(p_job_id uuid, p_after_id bigint DEFAULT 0, p_limit integer DEFAULT 100)
RETURNS TABLE (
  id bigint, at timestamptz, source text, kind text, attempt integer, worker_id text,
  fence_token bigint, data jsonb, login_role text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  RETURN QUERY
  SELECT t.id, t.at, t.source, t.kind, t.attempt, t.worker_id, t.fence_token, t.data, t.login_role
  FROM (
    (SELECT e.id, e.at, 'event'::text AS source, e.kind, e.attempt, e.worker_id, e.fence_token,
            -- enqueue_many_v1 stores no data for a job that was ready at once (see there).
            CASE WHEN e.kind = 'enqueued' AND e.data IS NULL
                 THEN jsonb_build_object('state', 'ready', 'runAt', e.at) ELSE e.data END,
            e.login_role
     FROM workhorse.job_event e
     WHERE e.job_id = p_job_id AND e.id > coalesce(p_after_id, 0)
     ORDER BY e.id LIMIT p_limit)
    UNION ALL
    (SELECT a.id, a.finished_at, 'attempt'::text, a.outcome, a.attempt, a.worker_id, a.fence_token,
            jsonb_build_object('startedAt', a.started_at, 'finishedAt', a.finished_at, 'error', a.error),
            NULL::text
     FROM workhorse.attempt_history a
     WHERE a.job_id = p_job_id AND a.id > coalesce(p_after_id, 0)
     ORDER BY a.id LIMIT p_limit)
  ) AS t
  ORDER BY t.id
  LIMIT p_limit;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.get_timeline_v1(p_job_id uuid, p_after_id bigint DEFAULT 0, p_limit integer DEFAULT 100)
RETURNS TABLE (
  id bigint, at timestamptz, source text, kind text, attempt integer, worker_id text,
  fence_token bigint, data jsonb)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT t.id, t.at, t.source, t.kind, t.attempt, t.worker_id, t.fence_token, t.data
  FROM workhorse.get_timeline_v2(p_job_id, p_after_id, p_limit) AS t;
END
$$;

INSERT INTO workhorse.protocol_function (name, capabilities) VALUES ('get_timeline_v2', '{operator}');
REVOKE ALL ON FUNCTION workhorse.get_timeline_v2(uuid, bigint, integer) FROM PUBLIC;

-- CREATE OR REPLACE resets a function's SECURITY DEFINER and search_path: set them again on every
-- protocol function this step (re)defined, as sql/990_privileges.sql does at installation.
ALTER FUNCTION workhorse.tick_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.retention_run_v1(integer, boolean) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.sync_schedules_v1(text, jsonb, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.drop_history_before_v1(timestamptz) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.health_v1(jsonb) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.get_timeline_v1(uuid, bigint, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.get_timeline_v2(uuid, bigint, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Roles granted before this step may call get_timeline_v2 at once (step 6).
SELECT workhorse.regrant_capabilities();
