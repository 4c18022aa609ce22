-- Cron schedules: definitions synced as the desired state of a namespace, occurrences planned
-- by the server (the cron evaluator of sql/084_cron.sql) and fired by any caller of tick_v1,
-- whatever its language.
--
-- Exactly once per occurrence: each occurrence is one row of schedule_occurrence, keyed by
-- (schedule, time). Firing turns that row from `planned` into `fired` and enqueues the job in the
-- same transaction, under the schedule's row lock (which every writer of a schedule's
-- occurrences takes first) and the tick's lock (maintenance_lock). A tick that dies before its commit
-- leaves the row `planned` and no job; the next tick fires it. Nothing else creates a job for an
-- occurrence, so no number of workers and no crash can fire one twice.
--
-- The plan: each schedule holds its occurrences of the next minute (at least its next one) as
-- `planned` rows. The tick plans a schedule again when its last planned occurrence comes due
-- (`replan_at`), before it fires, so the plan never runs out while any worker ticks; a sync, a
-- re-timing and a resume plan at once. No client computes an occurrence.

CREATE TABLE workhorse.schedule (
  id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  namespace text NOT NULL,
  key text NOT NULL,
  -- The normalized definition (defaults filled in), as sync_schedules_v1 compares it: type, cron,
  -- timezone, payload, options (of each job), catchUp, catchUpLimit, overlap, missedAfterMs.
  definition jsonb NOT NULL,
  -- False once a sync of its namespace no longer lists it: disabled, never deleted.
  enabled boolean NOT NULL,
  -- Set while an operator has paused it.
  paused_at timestamptz,
  paused_by text,
  pause_reason text,
  -- Bumped by every change; each revision is in schedule_history.
  revision integer NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL,
  -- The planner continues after this time (the latest occurrence planned, or the moment the
  -- plan was started again).
  planned_through timestamptz NOT NULL,
  -- From this time on the tick plans it again (its last planned occurrence); null while nothing
  -- is to plan (disabled, or the expression has no further occurrence).
  replan_at timestamptz,
  -- The time of the occurrence (or trigger) that enqueued the last job, and that job.
  last_run_at timestamptz,
  last_job_id uuid,
  -- The last failure to enqueue an occurrence's job (the occurrence stays planned and is retried).
  last_error text,
  last_error_at timestamptz,
  UNIQUE (namespace, key)
);
-- Ticks look for schedules to plan again.
CREATE INDEX schedule_replan_idx ON workhorse.schedule (replan_at)
  WHERE enabled AND paused_at IS NULL AND replan_at IS NOT NULL;

-- One row per (schedule, occurrence time): the barrier. `planned` rows wait for their time;
-- `fired` rows hold the job; `skipped` rows say why none was enqueued (`missed`: no tick fired it
-- within missedAfterMs and the catch-up mode left it out; `overlap`: the previous job was still
-- live; `paused`).
CREATE TABLE workhorse.schedule_occurrence (
  schedule_id uuid NOT NULL REFERENCES workhorse.schedule (id),
  at timestamptz NOT NULL,
  state text NOT NULL,
  reason text,
  job_id uuid,
  -- The schedule's revision when the occurrence was fired or skipped.
  revision integer,
  decided_at timestamptz,
  PRIMARY KEY (schedule_id, at),
  CONSTRAINT schedule_occurrence_state_check CHECK (
    CASE state
      WHEN 'planned' THEN reason IS NULL AND job_id IS NULL AND decided_at IS NULL
      WHEN 'fired' THEN reason IS NULL AND job_id IS NOT NULL AND decided_at IS NOT NULL
      WHEN 'skipped' THEN reason IN ('missed', 'overlap', 'paused') AND job_id IS NULL AND decided_at IS NOT NULL
      ELSE false
    END)
);
-- Due occurrences, for the tick.
CREATE INDEX schedule_occurrence_due_idx ON workhorse.schedule_occurrence (at) WHERE state = 'planned';
-- Decided occurrences, for their retention (7 days).
CREATE INDEX schedule_occurrence_decided_idx ON workhorse.schedule_occurrence (at) WHERE state <> 'planned';

-- Every change of a schedule (a new revision), and every trigger (no new revision).
CREATE TABLE workhorse.schedule_history (
  -- From the history sequence, as job_event's ids: ordered by time of writing.
  id bigint PRIMARY KEY DEFAULT nextval('workhorse.history_seq'),
  schedule_id uuid NOT NULL REFERENCES workhorse.schedule (id),
  revision integer NOT NULL,
  at timestamptz NOT NULL,
  change text NOT NULL CHECK (change IN ('created', 'updated', 'disabled', 'enabled', 'paused', 'resumed', 'triggered')),
  -- The definition from this revision on (created, updated, enabled).
  definition jsonb,
  actor text,
  reason text,
  -- The job a trigger enqueued.
  job_id uuid,
  -- The login role of the session that made the change (session_user), next to `actor`; null
  -- for changes made before the schema recorded it.
  login_role text DEFAULT session_user
);
CREATE INDEX schedule_history_schedule_idx ON workhorse.schedule_history (schedule_id, id);

-- Refuses an unknown schedule with SQLSTATE P1010 (ScheduleNotFoundError in TypeScript).
CREATE FUNCTION workhorse.raise_schedule_not_found(p_namespace text, p_key text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'P1010', COLUMN = 'key',
    MESSAGE = format('key: no schedule "%s" in namespace "%s"', p_key, p_namespace);
END
$$;

-- Checks one definition (as a client sends it) and returns it normalized, every default filled
-- in, so that two syncs of the same definition compare equal. The cron expression is parsed here
-- (sql/084_cron.sql); the time zone is checked for shape only, and against the time zone
-- database by sync_schedules_v1 (once per zone: that lookup reads the database's zone files).
CREATE FUNCTION workhorse.normalize_schedule_definition(p_def jsonb, p_path text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
  v_options jsonb;
  v_def jsonb;
BEGIN
  IF jsonb_typeof(p_def) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid(p_path, 'must be an object with at least "key", "type" and "cron"');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_def) LOOP
    IF v_key NOT IN ('key', 'type', 'cron', 'timezone', 'payload', 'options', 'catchUp', 'catchUpLimit', 'overlap', 'missedAfterMs') THEN
      PERFORM workhorse.raise_invalid(p_path || '.' || v_key,
        'is not a schedule field (key, type, cron, timezone, payload, options, catchUp, catchUpLimit, overlap, missedAfterMs)');
    END IF;
  END LOOP;
  PERFORM workhorse.check_name(p_def -> 'key', p_path || '.key');
  PERFORM workhorse.check_name(p_def -> 'type', p_path || '.type');
  IF jsonb_typeof(p_def -> 'cron') IS DISTINCT FROM 'string' OR length(p_def ->> 'cron') NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid(p_path || '.cron', 'must be a cron expression of 1 to 200 characters');
  END IF;
  PERFORM workhorse.check_cron(p_def ->> 'cron', p_path || '.cron');
  IF p_def ? 'timezone' AND (jsonb_typeof(p_def -> 'timezone') IS DISTINCT FROM 'string'
      OR (p_def ->> 'timezone') !~ '^[A-Za-z][A-Za-z0-9/_+-]{0,63}$') THEN
    PERFORM workhorse.raise_invalid(p_path || '.timezone', 'must be an IANA time zone name such as Europe/Berlin');
  END IF;
  v_options := coalesce(p_def -> 'options', '{}'::jsonb);
  IF jsonb_typeof(v_options) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid(p_path || '.options', 'must be an object of enqueue options');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(v_options) LOOP
    IF v_key NOT IN ('queue', 'priority', 'maxAttempts', 'retryPolicy', 'tags', 'executionTimeoutMs') THEN
      PERFORM workhorse.raise_invalid(p_path || '.options.' || v_key,
        'is not an option of a scheduled job (queue, priority, maxAttempts, retryPolicy, tags, executionTimeoutMs)');
    END IF;
  END LOOP;
  -- The job each occurrence enqueues must be a valid request now, so that firing never fails on it.
  PERFORM workhorse.validate_enqueue_request(
    v_options || jsonb_build_object('type', p_def -> 'type', 'payload', coalesce(p_def -> 'payload', '{}'::jsonb)),
    p_path || '.options');
  IF p_def ? 'catchUp' AND (p_def ->> 'catchUp') IS DISTINCT FROM 'skip' AND (p_def ->> 'catchUp') IS DISTINCT FROM 'latest'
     AND (p_def ->> 'catchUp') IS DISTINCT FROM 'all' THEN
    PERFORM workhorse.raise_invalid(p_path || '.catchUp', 'must be "skip", "latest" or "all"');
  END IF;
  IF p_def ? 'catchUpLimit' THEN
    PERFORM workhorse.check_int(p_def -> 'catchUpLimit', p_path || '.catchUpLimit', 1, 1000);
  END IF;
  IF p_def ? 'overlap' AND (p_def ->> 'overlap') IS DISTINCT FROM 'allow' AND (p_def ->> 'overlap') IS DISTINCT FROM 'skip' THEN
    PERFORM workhorse.raise_invalid(p_path || '.overlap', 'must be "allow" or "skip"');
  END IF;
  IF p_def ? 'missedAfterMs' THEN
    PERFORM workhorse.check_int(p_def -> 'missedAfterMs', p_path || '.missedAfterMs', 1000, 86400000);
  END IF;
  v_def := jsonb_build_object(
    'type', p_def -> 'type',
    'cron', p_def -> 'cron',
    'timezone', coalesce(p_def -> 'timezone', '"UTC"'::jsonb),
    'payload', coalesce(p_def -> 'payload', '{}'::jsonb),
    'options', v_options,
    'catchUp', coalesce(p_def -> 'catchUp', '"skip"'::jsonb),
    'catchUpLimit', coalesce(p_def -> 'catchUpLimit', '100'::jsonb),
    'overlap', coalesce(p_def -> 'overlap', '"allow"'::jsonb),
    'missedAfterMs', coalesce(p_def -> 'missedAfterMs', '60000'::jsonb));
  RETURN v_def;
END
$$;

-- The namespaces schedules were synced in, one row each: the row a sync of the namespace locks
-- (an advisory lock on the namespace could be taken by any connecting role, and hang every sync).
CREATE TABLE workhorse.schedule_namespace (
  namespace text PRIMARY KEY
);

-- Makes the given definitions the desired state of a namespace, in the caller's transaction
-- under a lock per namespace (two syncs of one namespace take turns): a new key is created, a
-- changed definition updated, an unchanged one left alone, a key no longer listed disabled (never
-- deleted), and a disabled key listed again enabled. Each change bumps the schedule's revision
-- and writes a history row. A new, re-enabled, or re-timed (cron or time zone changed) schedule
-- starts a new plan after now: its future planned occurrences are dropped and it is planned at
-- once (plan_schedule). Returns one row per key listed or disabled, with what happened: created,
-- updated, unchanged, enabled or disabled.
CREATE FUNCTION workhorse.sync_schedules_v1(p_namespace text, p_definitions jsonb, p_actor text DEFAULT NULL)
RETURNS TABLE (key text, change text, revision integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  -- Plans start after now, in whole milliseconds (the precision of a JavaScript Date, which the
  -- previous release's planner hands back as p_after of plan_schedule_v1).
  v_now timestamptz := date_trunc('milliseconds', clock_timestamp());
  v_zone text;
  v_zones text[] := '{}';
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
    v_zone := workhorse.normalize_schedule_definition(v_def, format('definitions[%s]', v_i)) ->> 'timezone';
    IF NOT v_zone = ANY (v_zones) THEN
      PERFORM workhorse.check_time_zone(v_zone, format('definitions[%s].timezone', v_i));
      v_zones := v_zones || v_zone;
    END IF;
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
      PERFORM workhorse.plan_schedule(s, v_now);
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
      IF v_retimed AND s.paused_at IS NULL THEN
        PERFORM workhorse.plan_schedule(s, v_now);
      END IF;
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

-- Deprecated (kept for the previous release's TypeScript workers, see docs/protocol.md): the
-- schedules due for planning, as that release's planner read them before calling
-- plan_schedule_v1. The tick plans them itself now, so this mostly answers nothing.
CREATE FUNCTION workhorse.schedules_to_plan_v1(p_limit integer DEFAULT 100, p_namespace text DEFAULT NULL)
RETURNS TABLE (schedule_id uuid, revision integer, cron text, timezone text, catch_up text, catch_up_limit integer,
               missed_after_ms integer, planned_through timestamptz, db_now timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_now timestamptz := clock_timestamp();
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  RETURN QUERY
    SELECT s.id, s.revision, s.definition ->> 'cron', s.definition ->> 'timezone', s.definition ->> 'catchUp',
           (s.definition ->> 'catchUpLimit')::integer, (s.definition ->> 'missedAfterMs')::integer, s.planned_through, v_now
    FROM workhorse.schedule s
    WHERE s.enabled AND s.paused_at IS NULL AND s.replan_at <= v_now
      AND (p_namespace IS NULL OR s.namespace = p_namespace)
    ORDER BY s.replan_at
    LIMIT p_limit;
END
$$;

-- Plans one schedule (its row locked by the caller) at p_now: its occurrences after
-- planned_through up to a minute ahead (at least its next one after now, at most 200) become
-- `planned` rows, and replan_at the last of them, when the tick plans it again.
-- After an outage the plan may end before p_now minus missedAfterMs: the occurrences of that gap
-- were missed. For catch-up `skip` none of them is planned; for `latest` the most recent, for
-- `all` the most recent catchUpLimit, so that the tick fires them (fire_due_schedules decides
-- which occurrences are missed). The expression was checked when it was synced.
CREATE FUNCTION workhorse.plan_schedule(s workhorse.schedule, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_spec workhorse.cron_spec := workhorse.cron_parse(s.definition ->> 'cron', 'cron');
  v_zone text := s.definition ->> 'timezone';
  v_boundary timestamptz := p_now - (s.definition ->> 'missedAfterMs')::integer * interval '1 millisecond';
  v_start timestamptz := s.planned_through;
  v_missed timestamptz[] := '{}';
  v_future timestamptz[];
  v_last timestamptz;
  v_next timestamptz;
BEGIN
  IF v_start < v_boundary THEN
    IF s.definition ->> 'catchUp' <> 'skip' THEN
      v_missed := workhorse.cron_latest(v_spec, v_zone, v_start, v_boundary,
        CASE s.definition ->> 'catchUp' WHEN 'latest' THEN 1 ELSE (s.definition ->> 'catchUpLimit')::integer END);
    END IF;
    v_start := v_boundary;
  END IF;
  v_future := workhorse.cron_occurrences(v_spec, v_zone, v_start, p_now + interval '1 minute', 200);
  v_last := v_future[cardinality(v_future)];
  IF v_last IS NULL OR (v_last <= p_now AND cardinality(v_future) < 200) THEN
    v_next := workhorse.cron_next(v_spec, v_zone, coalesce(v_last, v_start));
    IF v_next IS NOT NULL THEN
      v_future := v_future || v_next;
      v_last := v_next;
    END IF;
  END IF;
  INSERT INTO workhorse.schedule_occurrence (schedule_id, at, state)
  SELECT s.id, u.at, 'planned' FROM unnest(v_missed || v_future) AS u (at)
  ON CONFLICT DO NOTHING;
  UPDATE workhorse.schedule
     SET planned_through = greatest(v_start, coalesce(v_last, v_missed[cardinality(v_missed)])), replan_at = v_last
   WHERE id = s.id;
  RETURN cardinality(v_missed) + cardinality(v_future);
END
$$;

-- Plans the schedules due for it (replan_at passed), up to p_limit, those due the longest first
-- (called by tick_v1 before it fires; a schedule that a sync or an operator holds is left to the
-- next tick). A schedule that cannot be planned (its zone gone from a newer time zone database,
-- say) never fails the tick: the error goes on the schedule and it is tried again an hour later.
-- Returns how many were planned.
CREATE FUNCTION workhorse.plan_due_schedules(p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  s workhorse.schedule;
  v_planned integer := 0;
BEGIN
  FOR s IN
    SELECT * FROM workhorse.schedule sc
    WHERE sc.enabled AND sc.paused_at IS NULL AND sc.replan_at <= v_now
    ORDER BY sc.replan_at
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  LOOP
    BEGIN
      PERFORM workhorse.plan_schedule(s, v_now);
      v_planned := v_planned + 1;
    EXCEPTION WHEN OTHERS THEN
      UPDATE workhorse.schedule
         SET replan_at = v_now + interval '1 hour', last_error = 'planning: ' || SQLERRM, last_error_at = v_now
       WHERE id = s.id;
    END;
  END LOOP;
  RETURN v_planned;
END
$$;

-- Deprecated (the previous release's TypeScript planner calls it; see docs/protocol.md). It no
-- longer takes a plan from its caller: p_occurrences and p_replan_at are checked for shape, as
-- before, and otherwise ignored. If the schedule is still at p_revision, its plan still ends at
-- p_after and it is due for planning, the server plans it (plan_schedule), exactly as the tick
-- would; otherwise nothing is written. Returns `planned` or `stale`.
CREATE FUNCTION workhorse.plan_schedule_v1(
  p_schedule_id uuid, p_revision integer, p_after timestamptz, p_occurrences timestamptz[], p_replan_at timestamptz)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  s workhorse.schedule;
  v_last timestamptz;
  v_at timestamptz;
  v_now timestamptz := clock_timestamp();
BEGIN
  IF p_after IS NULL THEN
    PERFORM workhorse.raise_invalid('after', 'must be the end of the plan that schedules_to_plan_v1 gave');
  END IF;
  IF p_occurrences IS NULL OR cardinality(p_occurrences) > 2000 THEN
    PERFORM workhorse.raise_invalid('occurrences', 'must be an array of at most 2000 times');
  END IF;
  v_last := p_after;
  FOREACH v_at IN ARRAY p_occurrences LOOP
    IF v_at IS NULL OR v_at <= v_last THEN
      PERFORM workhorse.raise_invalid('occurrences', 'must be ascending times, each after the plan''s end');
    END IF;
    v_last := v_at;
  END LOOP;
  SELECT * INTO s FROM workhorse.schedule WHERE id = p_schedule_id FOR UPDATE;
  IF NOT FOUND OR s.revision <> p_revision OR s.planned_through <> p_after OR NOT s.enabled OR s.paused_at IS NOT NULL
     OR NOT s.replan_at <= v_now THEN
    RETURN 'stale';
  END IF;
  PERFORM workhorse.plan_schedule(s, v_now);
  RETURN 'planned';
END
$$;

-- Enqueues the job of one occurrence (the schedule row is locked by the caller) and marks the
-- occurrence fired, or skipped as `overlap` while the schedule's previous job is still live.
-- Returns the new job's id, or null when skipped.
CREATE FUNCTION workhorse.fire_occurrence(s workhorse.schedule, p_at timestamptz, p_now timestamptz)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  v_job_id uuid;
BEGIN
  IF s.definition ->> 'overlap' = 'skip' AND s.last_job_id IS NOT NULL
     AND EXISTS (SELECT 1 FROM workhorse.job_runtime r WHERE r.job_id = s.last_job_id) THEN
    UPDATE workhorse.schedule_occurrence
       SET state = 'skipped', reason = 'overlap', revision = s.revision, decided_at = p_now
     WHERE schedule_id = s.id AND at = p_at AND state = 'planned';
    RETURN NULL;
  END IF;
  SELECT e.job_id INTO v_job_id
  FROM workhorse.enqueue_many_v1(jsonb_build_array(
         (s.definition -> 'options') || jsonb_build_object('type', s.definition -> 'type', 'payload', s.definition -> 'payload'))) AS e;
  PERFORM workhorse.write_event(v_job_id, 'schedule_fired', p_now,
    p_data => jsonb_build_object('namespace', s.namespace, 'key', s.key, 'occurrence', p_at, 'revision', s.revision));
  UPDATE workhorse.schedule_occurrence
     SET state = 'fired', job_id = v_job_id, revision = s.revision, decided_at = p_now
   WHERE schedule_id = s.id AND at = p_at AND state = 'planned';
  UPDATE workhorse.schedule SET last_run_at = p_at, last_job_id = v_job_id, last_error = NULL, last_error_at = NULL
   WHERE id = s.id;
  RETURN v_job_id;
END
$$;

-- Fires the due occurrences of up to p_limit schedules (called by tick_v1, under its lock).
-- Per schedule, locked (a schedule that a sync or an operator holds is left to the next tick):
-- a paused schedule's due occurrences are skipped as `paused`. An occurrence due for less than
-- missedAfterMs fires. One due for longer was missed (no tick ran in time: every worker was down,
-- or the schedule was just planned after an outage): catch-up `skip` skips each, `latest` fires
-- the most recent and skips the rest, `all` fires the most recent catchUpLimit and skips the
-- rest. Which occurrences were missed is only known once the plan reaches past now, so while a
-- plan has run out the missed ones wait for the planner (plan_due_schedules, which the tick runs
-- first; a `skip` schedule needs no wait).
-- A job that cannot be enqueued leaves its occurrence planned, to be tried on the next tick, and
-- the error on the schedule. Returns how many jobs were enqueued.
CREATE FUNCTION workhorse.fire_due_schedules(p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_id uuid;
  s workhorse.schedule;
  v_cutoff timestamptz;
  v_missed timestamptz[];
  v_on_time timestamptz[];
  v_fire timestamptz[];
  v_keep integer;
  v_at timestamptz;
  v_fired integer := 0;
BEGIN
  FOR v_id IN
    SELECT o.schedule_id FROM workhorse.schedule_occurrence o
    WHERE o.state = 'planned' AND o.at <= v_now
    GROUP BY o.schedule_id
    ORDER BY min(o.at)
    LIMIT p_limit
  LOOP
    SELECT * INTO s FROM workhorse.schedule WHERE id = v_id FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN NOT FOUND;
    IF s.paused_at IS NOT NULL THEN
      UPDATE workhorse.schedule_occurrence
         SET state = 'skipped', reason = 'paused', revision = s.revision, decided_at = v_now
       WHERE schedule_id = s.id AND state = 'planned' AND at <= v_now;
      CONTINUE;
    END IF;
    v_cutoff := v_now - (s.definition ->> 'missedAfterMs')::integer * interval '1 millisecond';
    SELECT coalesce(array_agg(o.at ORDER BY o.at) FILTER (WHERE o.at <= v_cutoff), '{}'),
           coalesce(array_agg(o.at ORDER BY o.at) FILTER (WHERE o.at > v_cutoff), '{}')
      INTO v_missed, v_on_time
    FROM workhorse.schedule_occurrence o
    WHERE o.schedule_id = s.id AND o.state = 'planned' AND o.at <= v_now;
    IF cardinality(v_missed) > 0 AND s.definition ->> 'catchUp' <> 'skip' AND s.planned_through <= v_now THEN
      CONTINUE;
    END IF;
    v_keep := CASE s.definition ->> 'catchUp'
                WHEN 'skip' THEN 0
                WHEN 'latest' THEN 1
                ELSE (s.definition ->> 'catchUpLimit')::integer END;
    UPDATE workhorse.schedule_occurrence
       SET state = 'skipped', reason = 'missed', revision = s.revision, decided_at = v_now
     WHERE schedule_id = s.id AND state = 'planned'
       AND at = ANY (v_missed[1 : greatest(cardinality(v_missed) - v_keep, 0)]);
    v_fire := v_missed[greatest(cardinality(v_missed) - v_keep, 0) + 1 :] || v_on_time;
    FOREACH v_at IN ARRAY v_fire LOOP
      BEGIN
        IF workhorse.fire_occurrence(s, v_at, v_now) IS NOT NULL THEN
          v_fired := v_fired + 1;
        END IF;
      EXCEPTION WHEN OTHERS THEN
        UPDATE workhorse.schedule SET last_error = SQLERRM, last_error_at = v_now WHERE id = s.id;
        EXIT;
      END;
      -- The next occurrence's overlap check sees the job just enqueued.
      SELECT * INTO s FROM workhorse.schedule WHERE id = s.id;
    END LOOP;
  END LOOP;
  -- Decided occurrences are kept for 7 days.
  DELETE FROM workhorse.schedule_occurrence
  WHERE ctid = ANY (ARRAY(SELECT ctid FROM workhorse.schedule_occurrence
                          WHERE state <> 'planned' AND at < v_now - interval '7 days' LIMIT 1000));
  RETURN v_fired;
END
$$;

-- True when some schedule is due for planning that the tick has not planned yet (more than one
-- tick's worth were due): the previous release's TypeScript workers then call plan_schedule_v1.
-- PL/pgSQL, not SQL: every tick calls it, and PostgreSQL before 18 plans a SQL function that it
-- cannot inline on every call, where PL/pgSQL keeps the plan.
CREATE FUNCTION workhorse.schedules_need_plan()
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
  -- A variable, not clock_timestamp() in the condition: a volatile call there keeps the index
  -- out (a scan of every schedule on every tick).
  v_now timestamptz := clock_timestamp();
BEGIN
  RETURN EXISTS (SELECT 1 FROM workhorse.schedule s
                 WHERE s.enabled AND s.paused_at IS NULL AND s.replan_at IS NOT NULL AND s.replan_at <= v_now);
END
$$;

-- The schedule of (namespace, key), locked; P1010 when there is none.
CREATE FUNCTION workhorse.lock_schedule(p_namespace text, p_key text)
RETURNS workhorse.schedule
LANGUAGE plpgsql AS $$
DECLARE
  s workhorse.schedule;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_namespace), 'namespace');
  PERFORM workhorse.check_name(to_jsonb(p_key), 'key');
  SELECT * INTO s FROM workhorse.schedule WHERE namespace = p_namespace AND key = p_key FOR UPDATE;
  IF NOT FOUND THEN
    PERFORM workhorse.raise_schedule_not_found(p_namespace, p_key);
  END IF;
  RETURN s;
END
$$;

-- Pauses (p_pause) or resumes a schedule; returns whether it changed (pausing a paused schedule,
-- or resuming a running one, changes nothing). A resumed schedule continues from its next
-- occurrence after now: what came due while it was paused is skipped (as `paused`), never caught
-- up, and a plan that ran out meanwhile starts again after now, at once.
CREATE FUNCTION workhorse.set_schedule_paused(p_namespace text, p_key text, p_pause boolean, p_actor text, p_reason text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  s workhorse.schedule;
  -- In whole milliseconds, as in sync_schedules_v1 (it may become the plan's end).
  v_now timestamptz := date_trunc('milliseconds', clock_timestamp());
BEGIN
  PERFORM workhorse.check_actor(p_actor, p_reason);
  s := workhorse.lock_schedule(p_namespace, p_key);
  IF (s.paused_at IS NOT NULL) = p_pause THEN
    RETURN false;
  END IF;
  IF NOT p_pause THEN
    UPDATE workhorse.schedule_occurrence
       SET state = 'skipped', reason = 'paused', revision = s.revision, decided_at = v_now
     WHERE schedule_id = s.id AND state = 'planned' AND at <= v_now;
  END IF;
  UPDATE workhorse.schedule
     SET paused_at = CASE WHEN p_pause THEN v_now END,
         paused_by = CASE WHEN p_pause THEN p_actor END,
         pause_reason = CASE WHEN p_pause THEN p_reason END,
         revision = revision + 1, updated_at = v_now,
         planned_through = CASE WHEN p_pause THEN planned_through ELSE greatest(planned_through, v_now) END,
         replan_at = CASE WHEN NOT p_pause AND planned_through <= v_now THEN '-infinity' ELSE replan_at END
   WHERE id = s.id
  RETURNING * INTO s;
  INSERT INTO workhorse.schedule_history (schedule_id, revision, at, change, actor, reason)
  VALUES (s.id, s.revision, v_now, CASE WHEN p_pause THEN 'paused' ELSE 'resumed' END, p_actor, p_reason);
  IF NOT p_pause AND s.replan_at <= v_now THEN
    PERFORM workhorse.plan_schedule(s, v_now);
  END IF;
  RETURN true;
END
$$;

-- Pauses a schedule: its occurrences are skipped (as `paused`) until it is resumed. Returns
-- whether it changed.
CREATE FUNCTION workhorse.pause_schedule_v1(p_namespace text, p_key text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RETURN workhorse.set_schedule_paused(p_namespace, p_key, true, p_actor, p_reason);
END
$$;

-- Resumes a paused schedule from its next occurrence after now (nothing is caught up). Returns
-- whether it changed.
CREATE FUNCTION workhorse.resume_schedule_v1(p_namespace text, p_key text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  RETURN workhorse.set_schedule_paused(p_namespace, p_key, false, p_actor, p_reason);
END
$$;

-- Enqueues the schedule's job now, outside its cron occurrences (whatever its overlap rule, and
-- also while it is paused); refused for a disabled schedule. Recorded in its history; the job
-- becomes the schedule's last job. Returns the job's id.
CREATE FUNCTION workhorse.trigger_schedule_v1(p_namespace text, p_key text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS uuid
LANGUAGE plpgsql AS $$
DECLARE
  s workhorse.schedule;
  v_now timestamptz := clock_timestamp();
  v_job_id uuid;
BEGIN
  PERFORM workhorse.check_actor(p_actor, p_reason);
  s := workhorse.lock_schedule(p_namespace, p_key);
  IF NOT s.enabled THEN
    PERFORM workhorse.raise_invalid('key', format('schedule "%s" in namespace "%s" is disabled (its definition was removed)',
                                                 p_key, p_namespace));
  END IF;
  SELECT e.job_id INTO v_job_id
  FROM workhorse.enqueue_many_v1(jsonb_build_array(
         (s.definition -> 'options') || jsonb_build_object('type', s.definition -> 'type', 'payload', s.definition -> 'payload'))) AS e;
  PERFORM workhorse.write_event(v_job_id, 'schedule_triggered', v_now,
    p_data => jsonb_build_object('namespace', s.namespace, 'key', s.key, 'revision', s.revision, 'actor', p_actor, 'reason', p_reason));
  UPDATE workhorse.schedule SET last_run_at = v_now, last_job_id = v_job_id WHERE id = s.id;
  INSERT INTO workhorse.schedule_history (schedule_id, revision, at, change, actor, reason, job_id)
  VALUES (s.id, s.revision, v_now, 'triggered', p_actor, p_reason, v_job_id);
  RETURN v_job_id;
END
$$;

-- Schedules (of one namespace, or all), by namespace and key: definition, state, revision, the
-- next planned occurrence (null unless active), the last run and its job's state, the plan's end
-- and the last enqueue error.
CREATE FUNCTION workhorse.list_schedules_v1(p_namespace text DEFAULT NULL)
RETURNS TABLE (namespace text, key text, definition jsonb, state text, revision integer, created_at timestamptz,
               updated_at timestamptz, paused_at timestamptz, paused_by text, pause_reason text,
               next_run_at timestamptz, last_run_at timestamptz, last_job_id uuid, last_job_state text,
               planned_through timestamptz, last_error text, last_error_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  IF p_namespace IS NOT NULL THEN
    PERFORM workhorse.check_name(to_jsonb(p_namespace), 'namespace');
  END IF;
  RETURN QUERY
    SELECT s.namespace, s.key, s.definition,
           CASE WHEN NOT s.enabled THEN 'disabled' WHEN s.paused_at IS NOT NULL THEN 'paused' ELSE 'active' END,
           s.revision, s.created_at, s.updated_at, s.paused_at, s.paused_by, s.pause_reason,
           CASE WHEN s.enabled AND s.paused_at IS NULL THEN
             (SELECT min(o.at) FROM workhorse.schedule_occurrence o WHERE o.schedule_id = s.id AND o.state = 'planned')
           END,
           s.last_run_at, s.last_job_id,
           coalesce((SELECT r.state FROM workhorse.job_runtime r WHERE r.job_id = s.last_job_id),
                    (SELECT o.state FROM workhorse.job_outcome o WHERE o.job_id = s.last_job_id)),
           s.planned_through, s.last_error, s.last_error_at
    FROM workhorse.schedule s
    WHERE p_namespace IS NULL OR s.namespace = p_namespace
    ORDER BY s.namespace, s.key;
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
CREATE FUNCTION workhorse.get_schedule_history_v1(p_namespace text, p_key text, p_limit integer DEFAULT 100)
RETURNS TABLE (revision integer, at timestamptz, change text, definition jsonb, actor text, reason text, job_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
    SELECT h.revision, h.at, h.change, h.definition, h.actor, h.reason, h.job_id
    FROM workhorse.get_schedule_history_v2(p_namespace, p_key, p_limit) h;
END
$$;
