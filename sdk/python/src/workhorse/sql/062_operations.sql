-- Operations: queue pause, progress, dead letters and redrive.

-- Who asked for an action and why, as recorded with it (null: not given): the actor at most 200
-- characters, the reason at most 1000. Every function that records an actor or a reason checks
-- them here.
CREATE FUNCTION workhorse.check_actor(p_actor text, p_reason text)
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
CREATE FUNCTION workhorse.pause_queue_v1(p_queue text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
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
CREATE FUNCTION workhorse.resume_queue_v1(p_queue text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
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

-- list_queues_v2 with the per-key limit of each queue's policy (per_key_concurrency, null when
-- not set).
CREATE FUNCTION workhorse.list_queues_v3()
RETURNS TABLE (
  queue text, paused boolean, changed_at timestamptz, changed_by text, login_role text, reason text,
  ready bigint, scheduled bigint, active bigint, blocked bigint,
  concurrency integer, rate_limit integer, rate_interval_ms integer,
  policy_changed_at timestamptz, policy_changed_by text, policy_login_role text, policy_reason text,
  per_key_concurrency integer)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  RETURN QUERY
  SELECT q.*, p.per_key_concurrency
  FROM workhorse.list_queues_v2() q
  LEFT JOIN workhorse.queue_policy p ON p.queue = q.queue
  ORDER BY 1;
END
$$;

-- The previous release's read (deprecated, docs/protocol.md): list_queues_v2 without who changed what.
CREATE FUNCTION workhorse.list_queues_v1()
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

-- Records a running job's progress (any JSON, at most 64 KiB). Fenced like every owner write:
-- `saved` or `stale`. The last value is kept on the outcome when the job ends.
CREATE FUNCTION workhorse.set_progress_v1(p_job_id uuid, p_worker_id text, p_fence bigint, p_progress jsonb)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
BEGIN
  PERFORM workhorse.check_json_size(p_progress, 'progress', 65536);
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN 'stale';
  END IF;
  UPDATE workhorse.job_runtime SET progress = p_progress WHERE job_id = p_job_id;
  RETURN 'saved';
END
$$;

-- Dead letters (failed outcomes), newest first, over job_outcome_dead_letter_idx. The cursor is
-- the (finished_at, job_id) of the last row of the previous page.
CREATE FUNCTION workhorse.list_dead_letters_v1(
  p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_error_name text DEFAULT NULL,
  p_finished_after timestamptz DEFAULT NULL, p_finished_before timestamptz DEFAULT NULL,
  p_limit integer DEFAULT 50, p_cursor_finished_at timestamptz DEFAULT NULL, p_cursor_job_id uuid DEFAULT NULL)
RETURNS SETOF workhorse.job_snapshot
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_where text := 'o.state = ''failed''';
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  IF (p_cursor_finished_at IS NULL) <> (p_cursor_job_id IS NULL) THEN
    PERFORM workhorse.raise_invalid('cursor', 'needs both finished_at and job_id');
  END IF;
  IF length(p_error_name) > 200 THEN
    PERFORM workhorse.raise_invalid('errorName', 'must be at most 200 characters');
  END IF;
  IF p_queue IS NOT NULL THEN v_where := v_where || ' AND o.queue = $1'; END IF;
  IF p_type IS NOT NULL THEN v_where := v_where || ' AND s.type = $2'; END IF;
  IF p_error_name IS NOT NULL THEN v_where := v_where || ' AND o.error ->> ''name'' = $3'; END IF;
  IF p_finished_after IS NOT NULL THEN v_where := v_where || ' AND o.finished_at >= $4'; END IF;
  IF p_finished_before IS NOT NULL THEN v_where := v_where || ' AND o.finished_at < $5'; END IF;
  IF p_cursor_finished_at IS NOT NULL THEN
    v_where := v_where || ' AND (o.finished_at, o.job_id) < ($7, $8)';
  END IF;
  RETURN QUERY EXECUTE
    'SELECT s.*
     FROM workhorse.job_outcome o
     JOIN workhorse.job_snapshot s ON s.id = o.job_id
     WHERE ' || v_where || '
     ORDER BY o.finished_at DESC, o.job_id DESC
     LIMIT $6'
  USING p_queue, p_type, p_error_name, p_finished_after, p_finished_before, p_limit,
        p_cursor_finished_at, p_cursor_job_id;
END
$$;

-- list_dead_letters_v1 with an opaque cursor made here (make_cursor): p_cursor is the
-- next_cursor of the previous page (NULL for the first), refused with P1001 naming `cursor` when
-- this listing did not make it. Returns the dead letters (next_cursor NULL), then, when another
-- one follows, one row whose columns are all NULL but next_cursor: a last page that is full
-- ends there instead of pointing at an empty page.
CREATE FUNCTION workhorse.list_dead_letters_v2(
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

-- Redrives a dead letter (the work of redrive_v1 and redrive_many_v1, whose arguments are
-- checked): a new job with the same definition (type, queue, payload, priority, attempts, retry
-- policy, tags, execution timeout; not the deadline, which has passed), starting at attempt 1
-- with no checkpoints. The source outcome never changes; the lineage is recorded in job_redrive
-- and in both timelines. Idempotent per p_request_id. A dead letter is redriven once: unless
-- p_again, a dead letter redriven before (by any request) gives the job its first redrive
-- created. Returns the job and the request id of the lineage row it comes from.
CREATE FUNCTION workhorse.redrive_job(p_job_id uuid, p_request_id text, p_actor text, p_reason text, p_again boolean)
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
    'executionTimeoutMs', v_job.execution_timeout_ms, 'traceContext', v_job.trace_context,
    'concurrencyKey', v_job.concurrency_key))
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
  PERFORM workhorse.write_events(ARRAY[p_job_id, v_new], ARRAY['redriven', 'redriven_from'], v_now,
    p_data => ARRAY[
      jsonb_build_object('newJobId', v_new, 'requestId', p_request_id, 'actor', p_actor, 'reason', p_reason)
        || CASE WHEN v_redrive.again THEN '{"again": true}'::jsonb ELSE '{}'::jsonb END,
      jsonb_build_object('sourceJobId', p_job_id, 'requestId', p_request_id, 'actor', p_actor, 'reason', p_reason)
        || CASE WHEN v_redrive.again THEN '{"again": true}'::jsonb ELSE '{}'::jsonb END]);
  RETURN v_redrive;
END
$$;

-- Redrives a dead letter (redrive_job) and returns the new job's id. Idempotent per
-- p_request_id; a dead letter is redriven once, so a later call with another request id returns
-- the job the first redrive created, unless p_again asks for another copy.
CREATE FUNCTION workhorse.redrive_v1(
  p_job_id uuid, p_request_id text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL, p_again boolean DEFAULT false)
RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  IF p_request_id IS NULL OR length(p_request_id) NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid('requestId', 'must be a string of 1 to 200 characters');
  END IF;
  IF p_job_id IS NULL THEN
    PERFORM workhorse.raise_invalid('jobId', 'must be a job id');
  END IF;
  IF p_again IS NULL THEN
    PERFORM workhorse.raise_invalid('again', 'must be true or false');
  END IF;
  PERFORM workhorse.check_actor(p_actor, p_reason);
  RETURN (workhorse.redrive_job(p_job_id, p_request_id, p_actor, p_reason, p_again)).new_job_id;
END
$$;

-- Redrives up to p_limit (at most 1000) dead letters matching a filter, newest first, each
-- idempotent under the request id `<p_request_id>:<source job id>`: repeating the same request
-- returns the same new jobs. Dead letters that an earlier, different request already redrove
-- are skipped. With p_dry_run nothing is written and new_job_id is null: the rows say what
-- would be redriven.
CREATE FUNCTION workhorse.redrive_many_v1(
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
