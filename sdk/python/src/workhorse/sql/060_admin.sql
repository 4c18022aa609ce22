-- Operator side: cancellation and reads. Reads see one snapshot, so a job is reported on exactly
-- one side of the runtime/outcome split.

-- Cancels a job. A job that is not running ends `canceled` at once; for a running job the
-- request is recorded and its worker is told on its next heartbeat (it stops the handler and
-- acknowledges). A job whose deadline has passed is failed with DeadlineExceeded instead (as
-- maintenance would) and answers `already_terminal`. Returns `canceled`, `cancel_requested`,
-- `already_terminal` or `not_found`. p_actor (who asked, e.g. an operator of the dashboard) is
-- recorded with the reason: in the `cancel_requested` event of a running job, in the
-- cancellation envelope of any other.
CREATE FUNCTION workhorse.cancel_v1(p_job_id uuid, p_reason text DEFAULT NULL, p_actor text DEFAULT NULL)
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

-- A job's snapshot, whichever side of the split it is on. Reads see one snapshot, so a job is
-- reported on exactly one side. The view is inlined by the planner: a filter on `id` becomes
-- primary-key probes of each table.
CREATE VIEW workhorse.job_snapshot AS
  SELECT j.id, j.queue, j.type, j.payload, j.priority::integer AS priority, j.max_attempts, j.retry_policy, j.tags,
         coalesce(r.state, o.state) AS state,
         coalesce(r.current_attempt, o.final_attempt) AS current_attempt,
         coalesce(r.run_at, j.run_at) AS run_at,
         j.created_at, o.finished_at, o.result,
         coalesce(o.error, r.last_error) AS error,
         r.worker_id, r.lease_expires_at, r.cancel_requested_at,
         coalesce(r.progress, o.progress) AS progress,
         (SELECT d.source_job_id FROM workhorse.job_redrive d WHERE d.new_job_id = j.id) AS redriven_from,
         ARRAY(SELECT d.new_job_id FROM workhorse.job_redrive d WHERE d.source_job_id = j.id ORDER BY d.created_at) AS redriven_to,
         j.seq, j.deadline, j.execution_timeout_ms, j.concurrency_key
  FROM workhorse.job j
  LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
  LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id;

-- One job's snapshot; no row when the id is unknown. (PL/pgSQL, whose plans are kept per
-- connection: a SECURITY DEFINER SQL function is planned again on every call before
-- PostgreSQL 18, which made this read ten times slower.)
CREATE FUNCTION workhorse.get_job_v1(p_job_id uuid)
RETURNS SETOF workhorse.job_snapshot
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY SELECT * FROM workhorse.job_snapshot WHERE id = p_job_id;
END
$$;

-- One job's snapshot for the producer that enqueued it: no row when the id is unknown or the job
-- was enqueued by another login role (so a producer cannot learn whether other jobs exist).
CREATE FUNCTION workhorse.get_own_job_v1(p_job_id uuid)
RETURNS SETOF workhorse.job_snapshot
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT s.* FROM workhorse.job_snapshot s
  WHERE s.id = p_job_id
    AND EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = p_job_id AND j.enqueued_by = session_user);
END
$$;

-- What waitForResult reads, for up to 1000 ids at once: each id's `state` (`succeeded`, `failed`,
-- `canceled`; `live` while the job has not ended; `not_found` for an unknown id and for a job
-- another login role enqueued, the rule of get_own_job_v1), and the `result` or error envelope
-- (`error`) of an ended job. Each live job is registered in result_waiter for p_ttl_seconds (a
-- waiter calls again before that passes), so its end notifies `workhorse_results` with its id.
-- The live jobs' runtime rows are locked FOR KEY SHARE first: an end that commits meanwhile
-- either comes before the registration (its outcome is read here) or waits for it and sees it
-- (and notifies). Expired registrations of waiters that went away are dropped.
CREATE FUNCTION workhorse.await_results_v1(p_job_ids uuid[], p_ttl_seconds integer DEFAULT 60)
RETURNS TABLE (job_id uuid, state text, result jsonb, error jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_ids uuid[];
  v_own uuid[];
  v_live uuid[];
BEGIN
  IF p_job_ids IS NULL OR cardinality(p_job_ids) > 1000 OR array_position(p_job_ids, NULL) IS NOT NULL THEN
    PERFORM workhorse.raise_invalid('jobIds', 'must list at most 1000 job ids, none null');
  END IF;
  IF p_ttl_seconds IS NULL OR p_ttl_seconds < 1 OR p_ttl_seconds > 3600 THEN
    PERFORM workhorse.raise_invalid('ttlSeconds', 'must be an integer from 1 to 3600');
  END IF;
  v_ids := ARRAY(SELECT DISTINCT u FROM unnest(p_job_ids) AS u ORDER BY u);
  v_own := ARRAY(SELECT j.id FROM workhorse.job j WHERE j.id = ANY (v_ids) AND j.enqueued_by = session_user ORDER BY j.id);
  v_live := ARRAY(SELECT r.job_id FROM workhorse.job_runtime r WHERE r.job_id = ANY (v_own) ORDER BY r.job_id FOR KEY SHARE);
  DELETE FROM workhorse.result_waiter w
   WHERE w.job_id IN (SELECT x.job_id FROM workhorse.result_waiter x WHERE x.expires_at < clock_timestamp()
                      FOR UPDATE SKIP LOCKED);
  INSERT INTO workhorse.result_waiter AS w (job_id, expires_at)
  SELECT u.id, clock_timestamp() + make_interval(secs => p_ttl_seconds) FROM unnest(v_live) AS u (id) ORDER BY u.id
  ON CONFLICT (job_id) DO UPDATE SET expires_at = greatest(w.expires_at, EXCLUDED.expires_at);
  RETURN QUERY
  SELECT u.id,
         CASE WHEN o.job_id IS NOT NULL THEN o.state WHEN u.id = ANY (v_live) THEN 'live' ELSE 'not_found' END,
         o.result, o.error
  FROM unnest(v_ids) AS u (id)
  LEFT JOIN workhorse.job_outcome o ON o.job_id = u.id AND u.id = ANY (v_own);
END
$$;

-- Pages through jobs newest first in creation order (keyset on job_query.seq: stable while jobs
-- are added), optionally filtered by queue, type and current states. p_before_seq is the `seq`
-- of the last row of the previous page. The listing of list_jobs_v2 (064_operator_reads.sql)
-- without its time window and scan bound, and without its continuation row.
CREATE FUNCTION workhorse.list_jobs_v1(
  p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_states text[] DEFAULT NULL,
  p_limit integer DEFAULT 50, p_before_seq bigint DEFAULT NULL)
RETURNS SETOF workhorse.job_snapshot
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY SELECT * FROM workhorse.list_jobs_v2(p_queue, p_type, p_states, p_limit, p_before_seq) AS s WHERE s.id IS NOT NULL;
END
$$;

-- A job's history, events and closed attempts merged in the order they were written. p_after_id
-- is the id of the last entry of the previous page. login_role: the login role of the session
-- that wrote an event (null for attempts, and for events written before the schema recorded it).
CREATE FUNCTION workhorse.get_timeline_v2(p_job_id uuid, p_after_id bigint DEFAULT 0, p_limit integer DEFAULT 100)
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

-- get_timeline_v2 without login_role, for clients of schema version 5 (deprecated, see
-- docs/protocol.md).
CREATE FUNCTION workhorse.get_timeline_v1(p_job_id uuid, p_after_id bigint DEFAULT 0, p_limit integer DEFAULT 100)
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

-- get_timeline_v2 with an opaque cursor made here (make_cursor): p_cursor is the next_cursor of
-- the previous page (NULL for the first), refused with P1001 naming `cursor` when this listing
-- did not make it. Returns the entries (next_cursor NULL), then, when another one follows, one
-- row whose columns are all NULL but next_cursor.
CREATE FUNCTION workhorse.get_timeline_v3(p_job_id uuid, p_cursor text DEFAULT NULL, p_limit integer DEFAULT 100)
RETURNS TABLE (
  id bigint, at timestamptz, source text, kind text, attempt integer, worker_id text,
  fence_token bigint, data jsonb, login_role text, next_cursor text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  v_after bigint := coalesce(workhorse.cursor_bigint('timeline', p_cursor), 0);
BEGIN
  RETURN QUERY
  WITH page AS MATERIALIZED (
    SELECT * FROM workhorse.get_timeline_v2(p_job_id, v_after, p_limit) WITH ORDINALITY AS s
  ),
  more AS (
    SELECT workhorse.make_cursor('timeline', p.id::text) AS next_cursor
    FROM page p
    WHERE p.ordinality = p_limit AND EXISTS (SELECT 1 FROM workhorse.get_timeline_v2(p_job_id, p.id, 1))
  )
  SELECT x.id, x.at, x.source, x.kind, x.attempt, x.worker_id, x.fence_token, x.data, x.login_role, x.next_cursor
  FROM (
    SELECT p.*, NULL::text AS next_cursor FROM page p
    UNION ALL
    SELECT p.*, m.next_cursor FROM more m LEFT JOIN page p ON false
  ) AS x
  ORDER BY x.ordinality NULLS LAST;
END
$$;
