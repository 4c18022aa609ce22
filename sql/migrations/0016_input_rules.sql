-- Step 15 -> 16: input rules once, in SQL (issue 31, item 2). The inputs the clients still
-- checked themselves are refused here, P1001 naming the field, before anything is written: the
-- name filters (queue, type, wait name) of the listings and of redrive_many_v1, the times of
-- their filters (the years 1970 to 9999, as limits.json `dates`), drain_worker_v1's worker id,
-- actor and reason, set_retention_v1's actor and release_v1's reason (check_actor's bounds,
-- which cancel_v1 now uses too; its messages name the field and its bound).
-- Signatures and answers to valid input are unchanged.
-- Locks: none of a table (functions added and replaced).

CREATE FUNCTION workhorse.check_filter_name(p_value text, p_field text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_value IS NOT NULL THEN
    PERFORM workhorse.check_name(to_jsonb(p_value), p_field);
  END IF;
END
$$;

CREATE FUNCTION workhorse.check_time(p_value timestamptz, p_field text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_value < '1970-01-01T00:00:00Z' OR p_value >= '10000-01-01T00:00:00Z' THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be a time between the years 1970 and 9999');
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.check_actor(p_actor text, p_reason text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF length(p_actor) > 200 THEN
    PERFORM workhorse.raise_invalid('actor', 'must be a string of at most 200 characters');
  END IF;
  IF length(p_reason) > 1000 THEN
    PERFORM workhorse.raise_invalid('reason', 'must be a string of at most 1000 characters');
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.cancel_v1(p_job_id uuid, p_reason text DEFAULT NULL, p_actor text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
BEGIN
  PERFORM workhorse.check_actor(p_actor, p_reason);
  -- A parent's live descendants first, in the order their own ends lock them (046_orchestration.sql).
  PERFORM workhorse.lock_descendants(p_job_id);
  SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id FOR UPDATE;
  IF NOT FOUND THEN
    IF EXISTS (SELECT 1 FROM workhorse.job_outcome WHERE job_id = p_job_id) THEN
      RETURN 'already_terminal';
    END IF;
    RETURN 'not_found';
  END IF;
  v_now := clock_timestamp();
  -- A job past its deadline failed then, whether or not maintenance has written it down yet.
  IF r.deadline IS NOT NULL AND r.deadline <= v_now THEN
    PERFORM workhorse.fail_past_deadline(r, v_now);
    RETURN 'already_terminal';
  END IF;
  IF r.state = 'active' THEN
    IF r.cancel_requested_at IS NULL THEN
      UPDATE workhorse.job_runtime SET cancel_requested_at = v_now, cancel_reason = p_reason WHERE job_id = p_job_id;
      PERFORM workhorse.write_event(p_job_id, 'cancel_requested', v_now, r.current_attempt,
        jsonb_build_object('reason', p_reason) || jsonb_strip_nulls(jsonb_build_object('actor', p_actor)),
        r.worker_id, r.fence_token);
    END IF;
    RETURN 'cancel_requested';
  END IF;
  -- A sleeping job's open attempt closes as `canceled` too.
  PERFORM workhorse.finish_job(r, 'canceled', NULL,
    workhorse.cancel_error(p_reason) || jsonb_strip_nulls(jsonb_build_object('actor', p_actor)), 'canceled', v_now);
  RETURN 'canceled';
END
$$;

CREATE OR REPLACE FUNCTION workhorse.list_jobs_v3(
  p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_states text[] DEFAULT NULL,
  p_limit integer DEFAULT 50, p_cursor text DEFAULT NULL,
  p_created_after timestamptz DEFAULT NULL, p_created_before timestamptz DEFAULT NULL,
  p_scan_limit integer DEFAULT NULL)
RETURNS TABLE (
  id uuid, queue text, type text, payload jsonb, priority integer, max_attempts integer,
  retry_policy jsonb, tags text[], state text, current_attempt integer, run_at timestamptz,
  created_at timestamptz, finished_at timestamptz, result jsonb, error jsonb, worker_id text,
  lease_expires_at timestamptz, cancel_requested_at timestamptz, progress jsonb,
  redriven_from uuid, redriven_to uuid[], seq bigint, deadline timestamptz,
  execution_timeout_ms integer, next_cursor text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  PERFORM workhorse.check_filter_name(p_queue, 'queue');
  PERFORM workhorse.check_filter_name(p_type, 'type');
  PERFORM workhorse.check_time(p_created_after, 'createdAfter');
  PERFORM workhorse.check_time(p_created_before, 'createdBefore');
  RETURN QUERY
  SELECT x.id, x.queue, x.type, x.payload, x.priority, x.max_attempts, x.retry_policy, x.tags,
         x.state, x.current_attempt, x.run_at, x.created_at, x.finished_at, x.result, x.error,
         x.worker_id, x.lease_expires_at, x.cancel_requested_at, x.progress, x.redriven_from,
         x.redriven_to, CASE WHEN x.id IS NOT NULL THEN x.seq END, x.deadline, x.execution_timeout_ms, x.next_cursor
  FROM (
    SELECT s.*, CASE WHEN s.id IS NULL THEN workhorse.make_cursor('jobs', s.seq::text) END AS next_cursor
    FROM workhorse.list_jobs_v2(p_queue, p_type, p_states, p_limit, workhorse.cursor_bigint('jobs', p_cursor),
                                p_created_after, p_created_before, p_scan_limit) WITH ORDINALITY AS s
  ) AS x
  ORDER BY x.ordinality;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.list_dead_letters_v2(
  p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_error_name text DEFAULT NULL,
  p_finished_after timestamptz DEFAULT NULL, p_finished_before timestamptz DEFAULT NULL,
  p_limit integer DEFAULT 50, p_cursor text DEFAULT NULL)
RETURNS TABLE (
  id uuid, queue text, type text, payload jsonb, priority integer, max_attempts integer,
  retry_policy jsonb, tags text[], state text, current_attempt integer, run_at timestamptz,
  created_at timestamptz, finished_at timestamptz, result jsonb, error jsonb, worker_id text,
  lease_expires_at timestamptz, cancel_requested_at timestamptz, progress jsonb,
  redriven_from uuid, redriven_to uuid[], seq bigint, deadline timestamptz,
  execution_timeout_ms integer, next_cursor text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  v_position text := workhorse.cursor_position('dead', p_cursor,
    '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}');
  v_at timestamptz;
  v_id uuid;
BEGIN
  PERFORM workhorse.check_filter_name(p_queue, 'queue');
  PERFORM workhorse.check_filter_name(p_type, 'type');
  IF length(p_error_name) > 200 THEN
    PERFORM workhorse.raise_invalid('errorName', 'must be a string of at most 200 characters');
  END IF;
  PERFORM workhorse.check_time(p_finished_after, 'finishedAfter');
  PERFORM workhorse.check_time(p_finished_before, 'finishedBefore');
  IF v_position IS NOT NULL THEN
    -- A real position: a time this listing wrote (the years 1970 to 9999, a valid date).
    BEGIN
      v_at := left(v_position, 27)::timestamptz;
    EXCEPTION WHEN OTHERS THEN
      v_at := NULL;
    END;
    IF v_at IS NULL OR v_at < '1970-01-01T00:00:00Z'
       OR to_char(v_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') <> left(v_position, 27) THEN
      PERFORM workhorse.raise_invalid('cursor', 'is not a cursor returned by this API');
    END IF;
    v_id := substr(v_position, 29)::uuid;
  END IF;
  RETURN QUERY
  WITH page AS MATERIALIZED (
    SELECT * FROM workhorse.list_dead_letters_v1(p_queue, p_type, p_error_name, p_finished_after, p_finished_before,
                                                 p_limit, v_at, v_id) WITH ORDINALITY AS s
  ),
  last AS (SELECT p.finished_at, p.id FROM page p WHERE p.ordinality = p_limit),
  more AS (
    SELECT workhorse.make_cursor('dead', to_char(l.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '/' || l.id)
             AS next_cursor
    FROM last l
    WHERE EXISTS (SELECT 1 FROM workhorse.list_dead_letters_v1(p_queue, p_type, p_error_name, p_finished_after,
                                                               p_finished_before, 1, l.finished_at, l.id))
  )
  SELECT x.id, x.queue, x.type, x.payload, x.priority, x.max_attempts, x.retry_policy, x.tags,
         x.state, x.current_attempt, x.run_at, x.created_at, x.finished_at, x.result, x.error,
         x.worker_id, x.lease_expires_at, x.cancel_requested_at, x.progress, x.redriven_from,
         x.redriven_to, x.seq, x.deadline, x.execution_timeout_ms, x.next_cursor
  FROM (
    SELECT p.*, NULL::text AS next_cursor FROM page p
    UNION ALL
    SELECT p.*, m.next_cursor FROM more m LEFT JOIN page p ON false
  ) AS x
  ORDER BY x.ordinality NULLS LAST;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.list_children_v2(
  p_parent_id uuid, p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_states text[] DEFAULT NULL,
  p_created_after timestamptz DEFAULT NULL, p_created_before timestamptz DEFAULT NULL,
  p_limit integer DEFAULT 50, p_cursor text DEFAULT NULL)
RETURNS TABLE (
  id uuid, queue text, type text, payload jsonb, priority integer, max_attempts integer,
  retry_policy jsonb, tags text[], state text, current_attempt integer, run_at timestamptz,
  created_at timestamptz, finished_at timestamptz, result jsonb, error jsonb, worker_id text,
  lease_expires_at timestamptz, cancel_requested_at timestamptz, progress jsonb,
  redriven_from uuid, redriven_to uuid[], seq bigint, deadline timestamptz,
  execution_timeout_ms integer, next_cursor text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  v_after bigint := coalesce(workhorse.cursor_bigint('children', p_cursor), 0);
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  PERFORM workhorse.check_filter_name(p_queue, 'queue');
  PERFORM workhorse.check_filter_name(p_type, 'type');
  PERFORM workhorse.check_time(p_created_after, 'createdAfter');
  PERFORM workhorse.check_time(p_created_before, 'createdBefore');
  RETURN QUERY
  WITH page AS MATERIALIZED (
    SELECT s.*, c.ordinal AS position
    FROM workhorse.list_children_v1(p_parent_id) c CROSS JOIN LATERAL workhorse.get_job_v1(c.job_id) s
    WHERE c.ordinal > v_after AND (p_queue IS NULL OR s.queue = p_queue) AND (p_type IS NULL OR s.type = p_type)
      AND (p_states IS NULL OR s.state = ANY (p_states)) AND (p_created_after IS NULL OR s.created_at >= p_created_after)
      AND (p_created_before IS NULL OR s.created_at < p_created_before)
    ORDER BY c.ordinal
    LIMIT p_limit + 1
  ),
  numbered AS (SELECT p.*, row_number() OVER (ORDER BY p.position) AS n FROM page p),
  more AS (
    SELECT workhorse.make_cursor('children', x.position::text) AS next_cursor
    FROM numbered x
    WHERE x.n = p_limit AND EXISTS (SELECT 1 FROM numbered y WHERE y.n = p_limit + 1)
  )
  SELECT x.id, x.queue, x.type, x.payload, x.priority, x.max_attempts, x.retry_policy, x.tags,
         x.state, x.current_attempt, x.run_at, x.created_at, x.finished_at, x.result, x.error,
         x.worker_id, x.lease_expires_at, x.cancel_requested_at, x.progress, x.redriven_from,
         x.redriven_to, x.seq, x.deadline, x.execution_timeout_ms, x.next_cursor
  FROM (
    SELECT n.*, NULL::text AS next_cursor FROM numbered n WHERE n.n <= p_limit
    UNION ALL
    SELECT n.*, m.next_cursor FROM more m LEFT JOIN numbered n ON false
  ) AS x
  ORDER BY x.n NULLS LAST;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.list_human_waits_v2(
  p_queue text, p_type text, p_name text, p_job_id uuid, p_limit integer, p_cursor text DEFAULT NULL)
RETURNS TABLE (
  id bigint, job_id uuid, queue text, type text, name text, context jsonb, choices jsonb,
  timeout_at timestamptz, attempt integer, created_at timestamptz, next_cursor text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  v_after bigint := coalesce(workhorse.cursor_bigint('waits', p_cursor), 0);
BEGIN
  PERFORM workhorse.check_filter_name(p_queue, 'queue');
  PERFORM workhorse.check_filter_name(p_type, 'type');
  IF p_name IS NOT NULL THEN
    PERFORM workhorse.check_wait_name(p_name);
  END IF;
  RETURN QUERY
  WITH page AS MATERIALIZED (
    SELECT * FROM workhorse.list_human_waits_v1(p_queue, p_type, p_name, p_job_id, p_limit, v_after) WITH ORDINALITY AS s
  ),
  more AS (
    SELECT workhorse.make_cursor('waits', p.id::text) AS next_cursor
    FROM page p
    WHERE p.ordinality = p_limit
      AND EXISTS (SELECT 1 FROM workhorse.list_human_waits_v1(p_queue, p_type, p_name, p_job_id, 1, p.id))
  )
  SELECT x.id, x.job_id, x.queue, x.type, x.name, x.context, x.choices, x.timeout_at, x.attempt,
         x.created_at, x.next_cursor
  FROM (
    SELECT p.*, NULL::text AS next_cursor FROM page p
    UNION ALL
    SELECT p.*, m.next_cursor FROM more m LEFT JOIN page p ON false
  ) AS x
  ORDER BY x.ordinality NULLS LAST;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.redrive_many_v1(
  p_filter jsonb, p_request_id text, p_dry_run boolean DEFAULT false, p_actor text DEFAULT NULL,
  p_reason text DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS TABLE (source_job_id uuid, new_job_id uuid)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_key text;
  v_id uuid;
  v_after timestamptz;
  v_before timestamptz;
  v_redrive workhorse.job_redrive;
BEGIN
  IF jsonb_typeof(p_filter) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid('filter', 'must be an object');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_filter) LOOP
    IF v_key NOT IN ('queue', 'type', 'errorName', 'finishedAfter', 'finishedBefore') THEN
      PERFORM workhorse.raise_invalid('filter.' || v_key,
        'is not a dead-letter filter (queue, type, errorName, finishedAfter, finishedBefore)');
    END IF;
  END LOOP;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  IF p_request_id IS NULL OR length(p_request_id) NOT BETWEEN 1 AND 160 THEN
    PERFORM workhorse.raise_invalid('requestId', 'must be a string of 1 to 160 characters');
  END IF;
  IF p_dry_run IS NULL THEN
    PERFORM workhorse.raise_invalid('dryRun', 'must be true or false');
  END IF;
  PERFORM workhorse.check_actor(p_actor, p_reason);
  IF p_filter ? 'queue' THEN
    PERFORM workhorse.check_name(p_filter -> 'queue', 'filter.queue');
  END IF;
  IF p_filter ? 'type' THEN
    PERFORM workhorse.check_name(p_filter -> 'type', 'filter.type');
  END IF;
  IF p_filter ? 'errorName' AND (jsonb_typeof(p_filter -> 'errorName') IS DISTINCT FROM 'string'
                                 OR length(p_filter ->> 'errorName') > 200) THEN
    PERFORM workhorse.raise_invalid('filter.errorName', 'must be a string of at most 200 characters');
  END IF;
  IF p_filter ? 'finishedAfter' THEN
    v_after := workhorse.check_timestamp(p_filter -> 'finishedAfter', 'filter.finishedAfter');
    PERFORM workhorse.check_time(v_after, 'filter.finishedAfter');
  END IF;
  IF p_filter ? 'finishedBefore' THEN
    v_before := workhorse.check_timestamp(p_filter -> 'finishedBefore', 'filter.finishedBefore');
    PERFORM workhorse.check_time(v_before, 'filter.finishedBefore');
  END IF;
  FOR v_id IN
    SELECT o.job_id
    FROM workhorse.job_outcome o
    JOIN workhorse.job j ON j.id = o.job_id
    WHERE o.state = 'failed'
      AND (p_filter ->> 'queue' IS NULL OR o.queue = p_filter ->> 'queue')
      AND (p_filter ->> 'type' IS NULL OR j.type = p_filter ->> 'type')
      AND (p_filter ->> 'errorName' IS NULL OR o.error ->> 'name' = p_filter ->> 'errorName')
      AND (v_after IS NULL OR o.finished_at >= v_after)
      AND (v_before IS NULL OR o.finished_at < v_before)
      AND NOT EXISTS (SELECT 1 FROM workhorse.job_redrive r
                      WHERE r.source_job_id = o.job_id AND r.request_id <> p_request_id || ':' || o.job_id)
    ORDER BY o.finished_at DESC, o.job_id DESC
    LIMIT p_limit
  LOOP
    source_job_id := v_id;
    IF p_dry_run THEN
      new_job_id := NULL;
    ELSE
      v_redrive := workhorse.redrive_job(v_id, p_request_id || ':' || v_id, p_actor, p_reason, false);
      -- Another request redrove it since the list was read (a concurrent call): skipped, as
      -- when that had happened before.
      CONTINUE WHEN v_redrive.request_id <> p_request_id || ':' || v_id;
      new_job_id := v_redrive.new_job_id;
    END IF;
    RETURN NEXT;
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.drain_worker_v1(p_worker_id text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_before timestamptz;
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  PERFORM workhorse.check_actor(p_actor, p_reason);
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

CREATE OR REPLACE FUNCTION workhorse.set_retention_v1(p_policy jsonb, p_actor text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
BEGIN
  PERFORM workhorse.check_actor(p_actor, NULL);
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

CREATE OR REPLACE FUNCTION workhorse.release_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_delay_ms integer DEFAULT 0, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_state text;
BEGIN
  IF p_delay_ms IS NULL OR p_delay_ms < 0 OR p_delay_ms > 604800000 THEN
    PERFORM workhorse.raise_invalid('delayMs', 'must be an integer from 0 to 604800000');
  END IF;
  PERFORM workhorse.check_actor(NULL, p_reason);
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN 'stale';
  END IF;
  v_now := clock_timestamp();
  IF r.cancel_requested_at IS NOT NULL THEN
    PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', v_now);
    RETURN 'canceled';
  END IF;
  IF NOT r.resuming THEN
    INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
    VALUES (r.job_id, r.current_attempt, 'released', r.worker_id, r.fence_token, r.attempt_started_at, v_now,
            workhorse.bounded_error(jsonb_build_object('name', 'Released', 'message', coalesce(p_reason, 'released by the worker'))));
  END IF;
  v_state := workhorse.requeue_job(r.job_id, v_now + p_delay_ms * interval '1 millisecond', v_now, NULL,
                                   CASE WHEN r.resuming THEN 0 ELSE 1 END, r.resuming);
  PERFORM workhorse.write_event(r.job_id, 'released', v_now, r.current_attempt,
    jsonb_build_object('reason', p_reason, 'delayMs', p_delay_ms, 'state', v_state), r.worker_id, r.fence_token);
  IF v_state = 'ready' THEN
    PERFORM pg_notify('workhorse_jobs', r.queue);
  END IF;
  RETURN 'released';
END
$$;

ALTER FUNCTION workhorse.cancel_v1(uuid, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_jobs_v3(text, text, text[], integer, text, timestamptz, timestamptz, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_dead_letters_v2(text, text, text, timestamptz, timestamptz, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_children_v2(uuid, text, text, text[], timestamptz, timestamptz, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_human_waits_v2(text, text, text, uuid, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.redrive_many_v1(jsonb, text, boolean, text, text, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.drain_worker_v1(text, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.set_retention_v1(jsonb, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.release_v1(uuid, text, bigint, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION workhorse.check_filter_name(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.check_time(timestamptz, text) FROM PUBLIC;
