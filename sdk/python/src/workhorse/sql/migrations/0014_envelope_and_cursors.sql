-- Step 13 -> 14: every stored error envelope is bounded in one place, workhorse.bounded_error:
-- the name at most 200 characters, the message and the stack at most 32,768 each, a cut part
-- ending with `… [truncated: n of m characters kept]`, the same whichever SDK sent it. fail_v1
-- bounds what it is given instead of refusing an envelope over 1 MiB (that refusal lost the
-- job's failure); release_v1 and every cancellation bound their reason the same way.
-- Signatures and answers are unchanged.
-- Page cursors are made and read by the database (make_cursor, cursor_position): every listing
-- has a version that takes the previous page's cursor as text and answers the next one
-- (list_jobs_v3, list_dead_letters_v2, get_timeline_v3, list_human_waits_v2, list_children_v2);
-- the versions they succeed stay as they are for the previous release's clients.
-- Locks: none of a table (functions added and replaced).

-- One part of an error envelope as it is stored: at most p_max characters; a longer part is cut
-- and says so.
CREATE OR REPLACE FUNCTION workhorse.bounded_error_part(p_text text, p_max integer)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN length(p_text) <= p_max THEN p_text
              ELSE left(p_text, p_max) || format('… [truncated: %s of %s characters kept]', p_max, length(p_text)) END
$$;

-- The one bound of every stored error envelope, whoever sends or makes it (fail_v1, release_v1,
-- cancellations): {"name", "message", "stack"?}, the name at most 200 characters, the message
-- and the stack at most 32,768 each (characters are Unicode code points, the same for every
-- SDK); a longer part ends with `… [truncated: n of m characters kept]`. A part that is not a
-- string is kept as its JSON text, a missing or null name reads "Error", a missing message "", a
-- null stack is left out, other keys are dropped. So a stored envelope is at most about 400 KB
-- of JSON, whatever the parts held, and a failure is never refused for its size.
CREATE OR REPLACE FUNCTION workhorse.bounded_error(p_error jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
           'name', workhorse.bounded_error_part(coalesce(p_error ->> 'name', 'Error'), 200),
           'message', workhorse.bounded_error_part(coalesce(p_error ->> 'message', ''), 32768))
         || CASE WHEN p_error ->> 'stack' IS NULL THEN '{}'::jsonb
                 ELSE jsonb_build_object('stack', workhorse.bounded_error_part(p_error ->> 'stack', 32768)) END
$$;

-- The error envelope of a job ended by a cancel request.
CREATE OR REPLACE FUNCTION workhorse.cancel_error(p_reason text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT workhorse.bounded_error(jsonb_build_object('name', 'Canceled', 'message', coalesce(p_reason, 'canceled on request')))
$$;

-- Records a failed attempt. p_options: {"retryDelayMs"?: explicit delay for the next attempt,
-- "nonRetryable"?: fail now whatever attempts remain, "attemptOutcome"?: "failed" | "timeout",
-- "retryPolicy"?: the handler's policy, used when the job has none of its own}.
-- Retries follow the job's policy, else the handler's (the one given here, else the one
-- registered for the job's queue and type by register_handlers_v1), else the default, while
-- attempts remain and the next attempt could start before the job's deadline; otherwise the job
-- fails for good with p_error, as bounded_error stores it, as its error envelope. Returns the status (`retry_scheduled`,
-- `failed`, `canceled` or `stale`), and for a retry the next run time, the delay and its source
-- (`explicit`, `job`, `handler` or `default`).
CREATE OR REPLACE FUNCTION workhorse.fail_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_error jsonb, p_options jsonb DEFAULT '{}'::jsonb)
RETURNS TABLE (status text, run_at timestamptz, delay_ms bigint, delay_source text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_key text;
  v_outcome text := coalesce(p_options ->> 'attemptOutcome', 'failed');
  v_delay bigint;
  v_source text;
  v_state text;
  v_policy jsonb;
  v_handler_policy jsonb;
  v_next timestamptz;
BEGIN
  IF jsonb_typeof(p_error) IS DISTINCT FROM 'object' OR jsonb_typeof(p_error -> 'name') IS DISTINCT FROM 'string'
     OR jsonb_typeof(p_error -> 'message') IS DISTINCT FROM 'string' THEN
    PERFORM workhorse.raise_invalid('error', 'must be an object {"name": string, "message": string, "stack"?: string}');
  END IF;
  -- Stored as bounded_error makes it (cut parts say so): a failure is never refused for its size.
  p_error := workhorse.bounded_error(p_error);
  IF jsonb_typeof(p_options) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid('options', 'must be an object');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_options) LOOP
    IF v_key NOT IN ('retryDelayMs', 'nonRetryable', 'attemptOutcome', 'retryPolicy') THEN
      PERFORM workhorse.raise_invalid('options.' || v_key,
        'is not a fail option (retryDelayMs, nonRetryable, attemptOutcome, retryPolicy)');
    END IF;
  END LOOP;
  IF v_outcome NOT IN ('failed', 'timeout') THEN
    PERFORM workhorse.raise_invalid('options.attemptOutcome', 'must be "failed" or "timeout"');
  END IF;
  IF p_options ? 'nonRetryable' AND jsonb_typeof(p_options -> 'nonRetryable') <> 'boolean' THEN
    PERFORM workhorse.raise_invalid('options.nonRetryable', 'must be true or false');
  END IF;
  IF p_options ? 'retryDelayMs' THEN
    v_delay := workhorse.check_int(p_options -> 'retryDelayMs', 'options.retryDelayMs', 0, 604800000);
    v_source := 'explicit';
  END IF;
  IF p_options ? 'retryPolicy' AND p_options -> 'retryPolicy' <> 'null'::jsonb THEN
    v_handler_policy := workhorse.normalize_retry_policy(p_options -> 'retryPolicy', 'options.retryPolicy');
  END IF;

  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence, v_outcome = 'timeout');
  IF r.job_id IS NULL THEN
    RETURN QUERY SELECT 'stale'::text, NULL::timestamptz, NULL::bigint, NULL::text;
    RETURN;
  END IF;
  v_now := clock_timestamp();

  IF r.cancel_requested_at IS NOT NULL THEN
    PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', v_now);
    RETURN QUERY SELECT 'canceled'::text, NULL::timestamptz, NULL::bigint, NULL::text;
    RETURN;
  END IF;

  IF v_delay IS NULL THEN
    SELECT p.policy, p.source, workhorse.retry_delay_ms(p.policy, p.counted) INTO v_policy, v_source, v_delay
    FROM workhorse.retry_policy_of(r, v_handler_policy) AS p;
  END IF;
  v_next := v_now + v_delay * interval '1 millisecond';

  -- No retry when attempts are spent, the handler said so, or the next attempt could not start
  -- before the job's deadline.
  IF coalesce((p_options ->> 'nonRetryable')::boolean, false) OR r.current_attempt >= r.max_attempts
     OR (r.deadline IS NOT NULL AND v_next >= r.deadline) THEN
    PERFORM workhorse.finish_job(r, 'failed', NULL, p_error, v_outcome, v_now);
    RETURN QUERY SELECT 'failed'::text, NULL::timestamptz, NULL::bigint, NULL::text;
    RETURN;
  END IF;

  INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
  VALUES (r.job_id, r.current_attempt, v_outcome, r.worker_id, r.fence_token, r.attempt_started_at, v_now, p_error);
  v_state := workhorse.requeue_job(r.job_id, v_next, v_now, p_error, 0);
  PERFORM workhorse.write_event(r.job_id, 'retry_scheduled', v_now, r.current_attempt,
    jsonb_build_object('error', p_error, 'delayMs', v_delay, 'delaySource', v_source,
                       'runAt', v_next, 'state', v_state, 'attemptOutcome', v_outcome),
    r.worker_id, r.fence_token);
  IF v_state = 'ready' THEN
    PERFORM pg_notify('workhorse_jobs', r.queue);
  END IF;
  RETURN QUERY SELECT 'retry_scheduled'::text, v_next, v_delay, v_source;
END
$$;

ALTER FUNCTION workhorse.fail_v1(uuid, text, bigint, jsonb, jsonb) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Hands a job back without counting an attempt, for a worker that cannot run it (it has no
-- handler for the job's type); it may be claimed again after p_delay_ms. Attempt numbers are
-- never used twice, so the history stays unambiguous (one closing row per attempt number):
-- * a claim that opened attempt N closes it as `released` (the handler never ran) and gives its
--   place back: the job's attempt budget (max_attempts) grows by one, and the next claim opens
--   attempt N + 1;
-- * a claim that continued a slept attempt hands it back still open, as the sleep left it: no
--   row, and the next claim continues it.
-- Returns `released`, `canceled` (a cancel had been requested) or `stale`.
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

ALTER FUNCTION workhorse.release_v1(uuid, text, bigint, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION workhorse.bounded_error_part(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.bounded_error(jsonb) FROM PUBLIC;

-- Page cursors are made and read here, for every listing: opaque text, the base64url (no
-- padding) of `<kind>:<position>`, the kind naming the listing that made it. (The encoding the
-- SDKs used before they left it to the database, so a cursor of either pages on.)
CREATE OR REPLACE FUNCTION workhorse.make_cursor(p_kind text, p_position text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT rtrim(translate(encode(convert_to(p_kind || ':' || p_position, 'UTF8'), 'base64'), E'+/\n', '-_'), '=')
$$;

-- The position of a cursor that the listing p_kind made (NULL for no cursor), matching
-- p_pattern. Anything else (not base64url, another listing's cursor, a forged position) is
-- refused with P1001 naming `cursor`.
CREATE OR REPLACE FUNCTION workhorse.cursor_position(p_kind text, p_cursor text, p_pattern text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_text text;
BEGIN
  IF p_cursor IS NULL THEN
    RETURN NULL;
  END IF;
  IF p_cursor ~ '^[A-Za-z0-9_-]+$' AND length(p_cursor) <= 400 AND length(p_cursor) % 4 <> 1 THEN
    BEGIN
      v_text := convert_from(decode(translate(p_cursor, '-_', '+/') || repeat('=', (4 - length(p_cursor) % 4) % 4), 'base64'), 'UTF8');
    EXCEPTION WHEN OTHERS THEN
      v_text := NULL; -- not UTF-8 text: not a cursor
    END;
  END IF;
  IF v_text IS NULL OR v_text !~ ('^' || p_kind || ':(' || p_pattern || ')$') THEN
    PERFORM workhorse.raise_invalid('cursor', 'is not a cursor returned by this API');
  END IF;
  RETURN substr(v_text, length(p_kind) + 2);
END
$$;

-- The bigint position of a cursor of p_kind (jobs, timeline, waits); NULL for no cursor.
CREATE OR REPLACE FUNCTION workhorse.cursor_bigint(p_kind text, p_cursor text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_position text := workhorse.cursor_position(p_kind, p_cursor, '[0-9]{1,19}');
BEGIN
  IF v_position::numeric > 9223372036854775807 THEN
    PERFORM workhorse.raise_invalid('cursor', 'is not a cursor returned by this API');
  END IF;
  RETURN v_position::bigint;
END
$$;

-- list_jobs_v2 with an opaque cursor made here (make_cursor): p_cursor is the next_cursor of the
-- previous page (NULL for the first), refused with P1001 naming `cursor` when this listing did
-- not make it. Returns the jobs (next_cursor NULL), then, when the listing goes on, one row
-- whose columns are all NULL but next_cursor.
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

-- list_dead_letters_v1 with an opaque cursor made here (make_cursor): p_cursor is the
-- next_cursor of the previous page (NULL for the first), refused with P1001 naming `cursor` when
-- this listing did not make it. Returns the dead letters (next_cursor NULL), then, when another
-- one follows, one row whose columns are all NULL but next_cursor: a last page that is full
-- ends there instead of pointing at an empty page.
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

-- get_timeline_v2 with an opaque cursor made here (make_cursor): p_cursor is the next_cursor of
-- the previous page (NULL for the first), refused with P1001 naming `cursor` when this listing
-- did not make it. Returns the entries (next_cursor NULL), then, when another one follows, one
-- row whose columns are all NULL but next_cursor.
CREATE OR REPLACE FUNCTION workhorse.get_timeline_v3(p_job_id uuid, p_cursor text DEFAULT NULL, p_limit integer DEFAULT 100)
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

-- list_human_waits_v1 with an opaque cursor made here (make_cursor): p_cursor is the next_cursor
-- of the previous page (NULL for the first), refused with P1001 naming `cursor` when this
-- listing did not make it. Returns the waits (next_cursor NULL), then, when another one
-- follows, one row whose columns are all NULL but next_cursor.
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

-- The children of a job in the order they were started, as snapshots, filtered by queue, type,
-- states and creation time, a page at a time (admin.listJobs({ parentId })): p_cursor is the
-- next_cursor of the previous page (NULL for the first), refused with P1001 naming `cursor` when
-- this listing did not make it. Returns the children (next_cursor NULL), then, when another one
-- follows, one row whose columns are all NULL but next_cursor.
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

REVOKE ALL ON FUNCTION workhorse.make_cursor(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.cursor_position(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.cursor_bigint(text, text) FROM PUBLIC;
INSERT INTO workhorse.protocol_function (name, capabilities) VALUES
  ('list_jobs_v3', '{operator}'),
  ('get_timeline_v3', '{operator}'),
  ('list_dead_letters_v2', '{operator}'),
  ('list_human_waits_v2', '{operator}'),
  ('list_children_v2', '{operator}');
REVOKE ALL ON FUNCTION workhorse.list_jobs_v3(text, text, text[], integer, text, timestamptz, timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.get_timeline_v3(uuid, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.list_dead_letters_v2(text, text, text, timestamptz, timestamptz, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.list_human_waits_v2(text, text, text, uuid, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.list_children_v2(uuid, text, text, text[], timestamptz, timestamptz, integer, text) FROM PUBLIC;
ALTER FUNCTION workhorse.list_jobs_v3(text, text, text[], integer, text, timestamptz, timestamptz, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.get_timeline_v3(uuid, text, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_dead_letters_v2(text, text, text, timestamptz, timestamptz, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_human_waits_v2(text, text, text, uuid, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_children_v2(uuid, text, text, text[], timestamptz, timestamptz, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Roles granted before this step may call the new functions at once (step 6).
SELECT workhorse.regrant_capabilities();
