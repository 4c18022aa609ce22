-- Step 11 -> 12: the SQL reads as a composition of named internal helpers; nothing a client sees
-- changes (same signatures, answers, locking order, rows and events).
-- * One owner-write preamble: lock_owned checks the worker id, locks the job's row (or, for a
--   transactional handler's checkpoint, reads it) and returns it only to its owner; the owner
--   functions no longer check the worker id each on their own.
-- * One event writer: every job_event row is written by write_events (write_event for one),
--   but the hot path's: complete_and_claim_v1 stays one function (docs/decisions.md).
-- Every function that changes is defined again whole. Locks: none of a table.

-- lock_owned gains p_lock (a new argument list: dropped and created again).
DROP FUNCTION workhorse.lock_owned(uuid, text, bigint, boolean);

-- The preamble of every owner write on one job, after the function's own input checks: checks
-- the worker id, locks the job's runtime row and returns it only if the caller still owns the
-- job (see owns); for a null row the caller answers `stale` and writes nothing. The clock is read
-- after the lock is granted, so a lease that ran out while we waited counts as lost.
-- p_past_timeout lets the owner report its own timed-out attempt (the worker aborts the handler at
-- the execution timeout, so its report necessarily arrives just after it) while the lease holds,
-- the job's deadline has not passed and recovery has not taken the job. p_lock false reads the row
-- without locking it (a transactional handler's checkpoint: see save_checkpoint_v1).
CREATE OR REPLACE FUNCTION workhorse.lock_owned(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_past_timeout boolean DEFAULT false, p_lock boolean DEFAULT true)
RETURNS workhorse.job_runtime
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  IF p_lock THEN
    SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id FOR UPDATE;
  ELSE
    SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id;
  END IF;
  v_now := clock_timestamp();
  IF NOT FOUND OR NOT (CASE WHEN p_past_timeout
                            THEN r.state = 'active' AND r.worker_id = p_worker_id AND r.fence_token = p_fence
                                 AND r.lease_expires_at > v_now AND (r.deadline IS NULL OR r.deadline > v_now)
                            ELSE workhorse.owns(r, p_worker_id, p_fence, v_now) END) THEN
    RETURN NULL;
  END IF;
  RETURN r;
END
$$;

-- The one writer of job_event: row k is the event of kind p_kinds[k] for job p_job_ids[k] at
-- p_at. The other arrays may be null (no worker, no fence, no data; ids from history_seq), or
-- carry ids a caller took as one block of history_seq (see 010_tables.sql). login_role is
-- the column's default, the session's login role (a SECURITY DEFINER function does not change
-- it); an `actor` travels in p_data. One statement for a whole batch, so the hot path pays one
-- insert per batch, not one per job.
CREATE OR REPLACE FUNCTION workhorse.write_events(
  p_job_ids uuid[], p_kinds text[], p_at timestamptz, p_attempts integer[] DEFAULT NULL, p_data jsonb[] DEFAULT NULL,
  p_worker_ids text[] DEFAULT NULL, p_fences bigint[] DEFAULT NULL, p_ids bigint[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workhorse.job_event (id, job_id, at, kind, attempt, worker_id, fence_token, data)
  SELECT coalesce(e.id, nextval('workhorse.history_seq')), e.job_id, p_at, e.kind, e.attempt, e.worker_id, e.fence, e.data
  FROM unnest(p_job_ids, p_kinds, p_attempts, p_data, p_worker_ids, p_fences, p_ids)
       AS e (job_id, kind, attempt, data, worker_id, fence, id);
END
$$;

-- One event (see write_events).
CREATE OR REPLACE FUNCTION workhorse.write_event(
  p_job_id uuid, p_kind text, p_at timestamptz, p_attempt integer DEFAULT NULL, p_data jsonb DEFAULT NULL,
  p_worker_id text DEFAULT NULL, p_fence bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM workhorse.write_events(ARRAY[p_job_id], ARRAY[p_kind], p_at, ARRAY[p_attempt], ARRAY[p_data],
                                 ARRAY[p_worker_id], ARRAY[p_fence]);
END
$$;



-- Ends a live job: deletes its runtime row and writes its outcome, the closing row of its open
-- attempt (with outcome p_attempt_outcome) and the terminal event, all in the caller's
-- transaction. An attempt is open while a worker runs it (`active`) and while the job sleeps
-- (`resuming` outside `active`: the sleep columns say who ran it last and since when); every
-- other live job has closed all the attempts it started.
-- Then (unless p_follow is false: settle_blocked, which settles in a loop of its own) the jobs
-- that wait on this one are counted down (settle_dependents) and its live children are
-- canceled (cancel_children); each costs one index probe for a job that has none.
CREATE OR REPLACE FUNCTION workhorse.finish_job(
  r workhorse.job_runtime, p_state text, p_result jsonb, p_error jsonb, p_attempt_outcome text, p_now timestamptz,
  p_follow boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM workhorse.job_runtime WHERE job_id = r.job_id;
  INSERT INTO workhorse.job_outcome (job_id, queue, state, result, error, final_attempt, fence_token, worker_id, finished_at, progress)
  VALUES (r.job_id, r.queue, p_state, p_result, p_error, r.current_attempt, r.fence_token, r.worker_id, p_now, r.progress);
  IF r.state = 'active' OR r.resuming THEN
    INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
    VALUES (r.job_id, r.current_attempt, p_attempt_outcome, coalesce(r.worker_id, r.sleep_worker_id), r.fence_token,
            coalesce(r.attempt_started_at, r.sleep_attempt_started_at), p_now,
            CASE WHEN p_attempt_outcome <> 'succeeded' THEN p_error END);
  END IF;
  PERFORM workhorse.write_event(r.job_id, p_state, p_now, r.current_attempt,
    CASE WHEN p_error IS NOT NULL THEN jsonb_build_object('error', p_error) END, r.worker_id, r.fence_token);
  IF p_follow THEN
    IF EXISTS (SELECT 1 FROM workhorse.job_dependency e WHERE e.prerequisite_id = r.job_id) THEN
      PERFORM workhorse.settle_dependents(ARRAY[r.job_id], p_now);
    END IF;
    IF EXISTS (SELECT 1 FROM workhorse.job_dependency e WHERE e.dependent_id = r.job_id AND e.kind = 'child') THEN
      PERFORM workhorse.cancel_children(r.job_id, p_now);
    END IF;
  END IF;
END
$$;

-- enqueue_many_v1's work. p_parent_id: null for an enqueue; the parent job for the children
-- run_children_v1 starts (their idempotency keys are the parent's, see claim_idempotency_keys).
CREATE OR REPLACE FUNCTION workhorse.enqueue_batch(p_requests jsonb, p_parent_id uuid)
RETURNS TABLE (job_id uuid)
LANGUAGE plpgsql
-- See complete_and_claim_v1: plan every statement once per connection.
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
  v_now timestamptz := clock_timestamp();
  -- Ids: one time-ordered id per batch; request k gets it with k added to its last 48 (random)
  -- bits. Unique within the batch, still time-ordered, and a batch draws random bits once
  -- instead of once per job (a random draw costs ~2.5 us here, a tenth of a whole enqueue).
  v_id_base text := workhorse.new_job_id()::text;
  v_id_prefix text := left(v_id_base, 24);
  v_id_low bigint := ('x' || right(v_id_base, 12))::bit(48)::bigint;
  v_seq bigint;
  v_event_id bigint;
  v_req jsonb;
  v_i bigint;
  v_queue text;
  v_ids uuid[];
  v_replay boolean[];
  v_edges jsonb;
  -- The jobs written (exact repeats of an idempotent enqueue are not), for their events.
  v_new uuid[];
  v_data jsonb[];
  v_event_ids bigint[];
BEGIN
  IF jsonb_typeof(p_requests) IS DISTINCT FROM 'array' THEN
    PERFORM workhorse.raise_invalid('requests', 'must be a JSON array of enqueue requests');
  END IF;
  IF jsonb_array_length(p_requests) > 1000 THEN
    RAISE EXCEPTION USING ERRCODE = 'P1003', COLUMN = 'requests',
      MESSAGE = format('requests: a batch holds at most 1000 jobs, got %s', jsonb_array_length(p_requests));
  END IF;
  -- And at most 16 MiB of JSON, as clients measure it. Only a batch whose stored form is over
  -- half that can be so large, so the exact measure (which renders the batch as text) runs for
  -- those alone; pg_column_size is a header read.
  IF pg_column_size(p_requests) > 8388608 AND workhorse.json_text_bytes(p_requests, 16777216) > 16777216 THEN
    RAISE EXCEPTION USING ERRCODE = 'P1003', COLUMN = 'requests',
      MESSAGE = 'requests: a batch holds at most 16 MiB of JSON (16777216 bytes)';
  END IF;
  FOR v_req, v_i IN
    SELECT x.e, x.ord - 1 FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
    WHERE NOT coalesce(workhorse.is_plain_request(x.e), false)
    ORDER BY x.ord
  LOOP
    PERFORM workhorse.validate_enqueue_request(v_req, format('requests[%s]', v_i));
  END LOOP;
  IF jsonb_path_exists(p_requests, '$[*].idempotencyKey') THEN
    SELECT k.ids, k.replay INTO v_ids, v_replay FROM workhorse.claim_idempotency_keys(p_requests, v_now, p_parent_id) AS k;
  END IF;
  -- Jobs that wait on others start `blocked`; their edges are checked now and written after the
  -- jobs (046_orchestration.sql).
  IF jsonb_path_exists(p_requests, '$[*].dependsOn') THEN
    v_edges := workhorse.batch_dependencies(p_requests,
      ARRAY(SELECT coalesce(v_ids[o], (v_id_prefix || lpad(to_hex((v_id_low + o) & 281474976710655), 12, '0'))::uuid)
            FROM generate_series(1, jsonb_array_length(p_requests)) AS o),
      v_replay);
  END IF;

  -- Blocks of 1000 values (see the sequences in 010_tables.sql): request k gets base + k - 1.
  v_seq := nextval('workhorse.job_seq');
  v_event_id := nextval('workhorse.history_seq');
  WITH input AS (
    SELECT x.ord,
           coalesce(v_ids[x.ord::integer],
                    (v_id_prefix || lpad(to_hex((v_id_low + x.ord) & 281474976710655), 12, '0'))::uuid) AS id,
           v_seq + x.ord - 1 AS seq,
           x.e ->> 'type' AS type,
           coalesce(x.e ->> 'queue', 'default') AS queue,
           x.e -> 'payload' AS payload,
           -- Through numeric: JSON encoders may write a whole number as 50.0 or 5e1.
           coalesce((x.e ->> 'priority')::numeric::smallint, 0) AS priority,
           coalesce((x.e ->> 'maxAttempts')::numeric::integer, 25) AS max_attempts,
           CASE WHEN x.e -> 'retryPolicy' <> 'null'::jsonb
                THEN workhorse.normalize_retry_policy(x.e -> 'retryPolicy', 'retryPolicy') END AS retry_policy,
           (x.e ->> 'deadline')::timestamptz AS deadline,
           (x.e ->> 'executionTimeoutMs')::numeric::integer AS execution_timeout_ms,
           CASE WHEN x.e ? 'tags' THEN ARRAY(SELECT jsonb_array_elements_text(x.e -> 'tags')) ELSE '{}' END AS tags,
           greatest(coalesce((x.e ->> 'runAt')::timestamptz, v_now), v_now) AS run_at,
           x.e ? 'dependsOn' AS blocked,
           CASE WHEN jsonb_typeof(x.e -> 'traceContext') = 'object' THEN x.e -> 'traceContext' END AS trace_context
    FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
    -- Exact repeats of an idempotent enqueue write nothing; they return the existing job's id.
    WHERE NOT coalesce(v_replay[x.ord::integer], false)
  ),
  ins_job AS (
    INSERT INTO workhorse.job (id, queue, type, payload, priority, max_attempts, retry_policy, tags, run_at, created_at, seq,
                               deadline, execution_timeout_ms, trace_context)
    SELECT id, queue, type, payload, priority, max_attempts, retry_policy, tags, run_at, v_now, seq,
           deadline, execution_timeout_ms, trace_context
    FROM input
  ),
  ins_runtime AS (
    INSERT INTO workhorse.job_runtime (job_id, queue, priority, state, seq, run_at, max_attempts, deadline, execution_timeout_ms)
    SELECT id, queue, priority, CASE WHEN blocked THEN 'blocked' WHEN run_at <= v_now THEN 'ready' ELSE 'scheduled' END,
           seq, run_at, max_attempts,
           deadline, execution_timeout_ms
    FROM input
  ),
  ins_query AS (
    INSERT INTO workhorse.job_query (seq, job_id, queue, type, created_at)
    SELECT seq, id, queue, type, v_now FROM input
  )
  -- A job due now is ready with runAt = the event's own time: stored as null data and shown as
  -- {"state": "ready", "runAt": at} by get_timeline_v1 (formatting the timestamp per row costs
  -- about 6% of a batch enqueue).
  SELECT array_agg(id), array_agg(v_event_id + ord - 1),
         array_agg(CASE WHEN blocked THEN jsonb_build_object('state', 'blocked', 'runAt', run_at)
                        WHEN run_at > v_now THEN jsonb_build_object('state', 'scheduled', 'runAt', run_at) END)
    INTO v_new, v_event_ids, v_data
  FROM input;
  IF v_new IS NOT NULL THEN
    PERFORM workhorse.write_events(v_new, array_fill('enqueued'::text, ARRAY[cardinality(v_new)]), v_now,
                                   array_fill(0, ARRAY[cardinality(v_new)]), v_data, p_ids => v_event_ids);
  END IF;
  -- Request k's job: the one written for it, else the existing one an exact repeat names.
  RETURN QUERY
  SELECT coalesce(v_ids[x.ord], (v_id_prefix || lpad(to_hex((v_id_low + x.ord) & 281474976710655), 12, '0'))::uuid)
  FROM generate_series(1, jsonb_array_length(p_requests)) AS x (ord)
  ORDER BY x.ord;
  IF v_edges IS NOT NULL THEN
    PERFORM workhorse.link_dependencies(v_edges, v_now);
  END IF;

  FOR v_queue IN
    SELECT DISTINCT coalesce(x.e ->> 'queue', 'default')
    FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
    WHERE coalesce((x.e ->> 'runAt')::timestamptz, v_now) <= v_now AND NOT coalesce(v_replay[x.ord::integer], false)
      AND NOT x.e ? 'dependsOn'
  LOOP
    PERFORM pg_notify('workhorse_jobs', v_queue);
  END LOOP;
END
$$;

-- Records a failed attempt. p_options: {"retryDelayMs"?: explicit delay for the next attempt,
-- "nonRetryable"?: fail now whatever attempts remain, "attemptOutcome"?: "failed" | "timeout",
-- "retryPolicy"?: the handler's policy, used when the job has none of its own}.
-- Retries follow the job's policy, else the handler's (the one given here, else the one
-- registered for the job's queue and type by register_handlers_v1), else the default, while
-- attempts remain and the next attempt could start before the job's deadline; otherwise the job
-- fails for good with p_error as its error envelope. Returns the status (`retry_scheduled`,
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
  PERFORM workhorse.check_json_size(p_error, 'error');
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
            jsonb_build_object('name', 'Released', 'message', coalesce(p_reason, 'released by the worker')));
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

-- The owning worker confirms that it stopped a job whose cancellation was requested.
-- Returns `canceled`, `not_requested` (no cancel is pending; nothing changes) or `stale`.
CREATE OR REPLACE FUNCTION workhorse.acknowledge_cancel_v1(p_job_id uuid, p_worker_id text, p_fence bigint)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
BEGIN
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN 'stale';
  END IF;
  IF r.cancel_requested_at IS NULL THEN
    RETURN 'not_requested';
  END IF;
  PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', clock_timestamp());
  RETURN 'canceled';
END
$$;

-- Saves a completed stage's value under p_name. The first value saved for a name wins; a second
-- save reports `exists` and changes nothing. Returns `saved`, `exists` or `stale`.
-- p_in_transaction: the caller is a transactional handler, whose own transaction also records
-- the job's completion (complete_v1). The job's row is then not locked, only read: the
-- completion locks it and checks the owner before anything of that transaction commits, while a
-- lock taken here would be held for the rest of the handler's run, and neither the heartbeat
-- (it skips rows others hold) nor a durable sleep (it would wait for this very transaction)
-- could touch the job until then.
CREATE OR REPLACE FUNCTION workhorse.save_checkpoint_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_value jsonb, p_in_transaction boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql AS $$
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
    RETURN 'stale';
  END IF;
  v_now := clock_timestamp();
  INSERT INTO workhorse.job_checkpoint (job_id, name, value, attempt, fence_token, worker_id, created_at)
  VALUES (p_job_id, p_name, p_value, r.current_attempt, p_fence, p_worker_id, v_now)
  ON CONFLICT DO NOTHING;
  IF NOT FOUND THEN
    RETURN 'exists';
  END IF;
  PERFORM workhorse.write_event(p_job_id, 'checkpoint_saved', v_now, r.current_attempt, jsonb_build_object('name', p_name),
    p_worker_id, p_fence);
  RETURN 'saved';
END
$$;

-- A durable sleep. The first time a job reaches the sleep named p_name, its wake time is fixed
-- (p_until, or the database clock plus p_delay_ms) and kept: later runs of the handler reach the
-- same wake time. If it is still ahead, the job becomes `scheduled` until then and the worker
-- lets go of it; the attempt is not consumed (the next claim continues it), and the handler
-- starts again from the top when the job wakes (checkpoints replay). Returns `sleeping`,
-- `elapsed` (the wake time has passed: go on), `canceled` (a cancel was pending) or `stale`,
-- with the wake time.
CREATE OR REPLACE FUNCTION workhorse.sleep_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_until timestamptz, p_delay_ms bigint)
RETURNS TABLE (status text, wake_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_wake timestamptz;
BEGIN
  IF p_name IS NULL OR length(p_name) NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid('name', 'must be a string of 1 to 200 characters');
  END IF;
  IF (p_until IS NULL) = (p_delay_ms IS NULL) THEN
    PERFORM workhorse.raise_invalid('until', 'give exactly one of a wake time and a delay');
  END IF;
  IF p_delay_ms < 0 OR p_delay_ms > 31536000000 THEN
    PERFORM workhorse.raise_invalid('ms', 'must be an integer from 0 to 31536000000 (one year)');
  END IF;
  IF p_until < '1970-01-01T00:00:00Z' OR p_until >= '10000-01-01T00:00:00Z' THEN
    PERFORM workhorse.raise_invalid('until', 'must be a time between the years 1970 and 9999');
  END IF;
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN QUERY SELECT 'stale'::text, NULL::timestamptz;
    RETURN;
  END IF;
  v_now := clock_timestamp();
  INSERT INTO workhorse.job_wait AS w (job_id, name, wake_at, attempt, created_at)
  VALUES (p_job_id, p_name, coalesce(p_until, v_now + p_delay_ms * interval '1 millisecond'), r.current_attempt, v_now)
  ON CONFLICT (job_id, name) DO NOTHING;
  SELECT w.wake_at INTO v_wake FROM workhorse.job_wait w WHERE w.job_id = p_job_id AND w.name = p_name;
  IF v_wake <= v_now THEN
    RETURN QUERY SELECT 'elapsed'::text, v_wake;
    RETURN;
  END IF;
  IF r.cancel_requested_at IS NOT NULL THEN
    PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', v_now);
    RETURN QUERY SELECT 'canceled'::text, v_wake;
    RETURN;
  END IF;
  PERFORM workhorse.requeue_job(p_job_id, v_wake, v_now, NULL, 0, true);
  PERFORM workhorse.write_event(p_job_id, 'sleeping', v_now, r.current_attempt,
    jsonb_build_object('name', p_name, 'wakeAt', v_wake), p_worker_id, p_fence);
  RETURN QUERY SELECT 'sleeping'::text, v_wake;
END
$$;

-- The worker's hot path in one statement and one commit: records a batch of completions
-- (p_items: [{"jobId", "fence", "result"}], as complete_many_v1) and then claims up to p_limit
-- jobs from p_queues (as claim_many_v1). Rows of the first kind carry the completion's status
-- (`succeeded`, `canceled` or `stale`) and nothing else; claimed jobs have status `claimed`.
-- A durable queue pays a WAL flush per commit, so sharing one commit between the completions of
-- a batch and the next claim halves the commits per job. Either part may be empty
-- (`[]`, p_limit 0).
--
-- Why this shape (it runs once per batch of jobs, so every statement in it counts):
-- * Every statement is a plain one whose cached plan is as good as a fresh one, so PL/pgSQL
--   plans each once per connection instead of on every call: per running queue one walk of
--   job_runtime_ready_idx in index order that stops after p_limit rows, then the update,
--   the event insert and the read of the jobs by primary key.
-- * FOR UPDATE SKIP LOCKED lets concurrent workers take disjoint rows without waiting on each
--   other; a row another claimer holds is simply skipped. With several queues, each queue
--   gives up to p_limit candidates and the best p_limit of all of them by (priority DESC, seq)
--   are claimed; the other candidates stay locked until the commit, which only delays them.
-- * SKIP LOCKED is only safe at READ COMMITTED: at higher isolation a row updated by a
--   concurrent claimer raises a serialization error instead of being skipped, so it is refused.
-- * Completions lock their rows in id order (no deadlock between two batches), read the clock
--   after the locks, and write outcome, attempt and event set-based, one statement per table.
-- * A job claimed for the first time cannot have checkpoints or sleeps yet, so it skips those
--   probes.
CREATE OR REPLACE FUNCTION workhorse.complete_and_claim_v1(
  p_worker_id text, p_items jsonb, p_queues text[], p_limit integer, p_lease_ms integer)
RETURNS TABLE (
  job_id uuid, status text, queue text, type text, payload jsonb, attempt integer, max_attempts integer,
  fence_token bigint, lease_expires_at timestamptz, execution_timeout_ms integer, checkpoints jsonb, waits jsonb,
  trace_context jsonb)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
  v_ids uuid[];
  v_fences bigint[];
  v_results jsonb[];
  v_lease interval;
  v_queues text[];
  v_queue text;
  v_picked uuid[];
  v_picked_before uuid[];
  -- Claimed jobs that were claimed before (a fence was issued): only those can have
  -- checkpoints or sleeps to hand over.
  v_before uuid[];
  v_now timestamptz;
  v_i integer;
  v_large boolean;
  -- First values of this statement's blocks (see the sequences in 010_tables.sql): row k of a
  -- batch gets base + k - 1.
  v_fence bigint;
  v_attempt_id bigint;
  v_event_id bigint;
  -- Flow control (042_flow_control.sql): the served queues that have a policy, how many jobs this
  -- claim may take from each, and how many it takes from the queue at hand.
  v_limited text[];
  v_allowed integer[];
  v_take integer;
BEGIN
  IF p_limit IS NULL OR p_limit < 0 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 0 to 1000');
  END IF;

  -- ---- completions ----
  IF jsonb_typeof(p_items) = 'array' AND jsonb_array_length(p_items) = 0 THEN
    NULL;
  ELSE
    PERFORM workhorse.check_worker(p_worker_id);
    -- Well-formed input (what the worker sends) is read in one set-based pass of plain casts; if
    -- a cast fails, or anything came out null, parse_leases goes through the items again and
    -- names the first bad field. (Casts inside an exception block rather than casts guarded by
    -- regular expressions: a regular expression match costs ~3.5 us here, ~7% of a job's server
    -- time at 100 jobs per round trip. A job id counts only in the canonical form the regular
    -- expression of check_uuid accepts: 36 characters that read back the same, case aside.)
    IF jsonb_typeof(p_items) = 'array' AND jsonb_array_length(p_items) <= 1000 THEN
      BEGIN
        -- (One aggregate pass, so the three arrays line up item by item, in input order.)
        -- (No DISTINCT or ORDER BY aggregate here: either may make PostgreSQL sort the rows first.)
        SELECT array_agg(x.id), array_agg(x.fence), array_agg(x.result),
               coalesce(max(octet_length(x.result::text)), 0) > 1048576
          INTO v_ids, v_fences, v_results, v_large
        FROM (
          SELECT CASE WHEN jsonb_typeof(e.v -> 'jobId') = 'string' AND length(e.v ->> 'jobId') = 36
                           AND (e.v ->> 'jobId')::uuid::text = lower(e.v ->> 'jobId')
                      THEN (e.v ->> 'jobId')::uuid END AS id,
                 CASE WHEN jsonb_typeof(e.v -> 'fence') = 'number' AND (e.v ->> 'fence')::bigint > 0
                      THEN (e.v ->> 'fence')::bigint END AS fence,
                 e.v -> 'result' AS result
          FROM jsonb_array_elements(p_items) AS e (v)) AS x;
      EXCEPTION WHEN invalid_text_representation OR numeric_value_out_of_range THEN
        v_ids := NULL;
      END;
    END IF;
    IF v_ids IS NULL OR array_position(v_ids, NULL) IS NOT NULL OR array_position(v_fences, NULL) IS NOT NULL THEN
      SELECT array_agg(l.job_id ORDER BY l.ord), array_agg(l.fence ORDER BY l.ord),
             array_agg(l.item -> 'result' ORDER BY l.ord)
        INTO v_ids, v_fences, v_results
      FROM workhorse.parse_leases(p_items, 'items', 1000) AS l;
      v_large := true;
    END IF;
    IF cardinality(v_ids) > 1 AND cardinality(v_ids) <> (SELECT count(DISTINCT u) FROM unnest(v_ids) AS u) THEN
      PERFORM workhorse.raise_invalid('items', 'names the same job more than once');
    END IF;
    IF v_large THEN
      -- Only a result whose JSON text could be over the limit needs the exact measure.
      FOR v_i IN SELECT u.o FROM unnest(v_results) WITH ORDINALITY AS u (r, o) WHERE octet_length(u.r::text) > 1048576 LOOP
        PERFORM workhorse.check_json_size(v_results[v_i], format('items[%s].result', v_i - 1));
      END LOOP;
    END IF;
    PERFORM 1 FROM workhorse.job_runtime r WHERE r.job_id = ANY (v_ids) ORDER BY r.job_id FOR UPDATE;
    v_now := clock_timestamp();
    -- The attempt's block first: a job's closed attempt precedes its terminal event, as in fail_v1.
    v_attempt_id := nextval('workhorse.history_seq');
    v_event_id := nextval('workhorse.history_seq');
    RETURN QUERY
    WITH input AS (
      SELECT i.job_id, i.fence, i.result, i.ord
      FROM unnest(v_ids, v_fences, v_results) WITH ORDINALITY AS i (job_id, fence, result, ord)
    ),
    done AS (
      DELETE FROM workhorse.job_runtime r
       USING input i
       WHERE r.job_id = i.job_id AND workhorse.owns(r, p_worker_id, i.fence, v_now)
      -- A cancel request that arrived meanwhile wins over the result: the job ends `canceled`.
      RETURNING r.job_id, r.queue, r.current_attempt, r.fence_token, r.attempt_started_at, r.progress,
                CASE WHEN r.cancel_requested_at IS NOT NULL THEN 'canceled' ELSE 'succeeded' END AS state,
                CASE WHEN r.cancel_requested_at IS NOT NULL
                     THEN jsonb_build_object('name', 'Canceled', 'message', coalesce(r.cancel_reason, 'canceled on request'))
                END AS cancel_error,
                i.result, i.ord
    ),
    outcome AS (
      INSERT INTO workhorse.job_outcome (job_id, queue, state, result, error, final_attempt, fence_token, worker_id, finished_at, progress)
      SELECT d.job_id, d.queue, d.state, CASE WHEN d.state = 'succeeded' THEN d.result END, d.cancel_error,
             d.current_attempt, d.fence_token, p_worker_id, v_now, d.progress
      FROM done d
    ),
    attempts AS (
      INSERT INTO workhorse.attempt_history (id, job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
      SELECT v_attempt_id + d.ord - 1, d.job_id, d.current_attempt, d.state, p_worker_id, d.fence_token, d.attempt_started_at,
             v_now, d.cancel_error
      FROM done d
    ),
    events AS (
      INSERT INTO workhorse.job_event (id, job_id, at, kind, attempt, worker_id, fence_token, data)
      SELECT v_event_id + d.ord - 1, d.job_id, v_now, d.state, d.current_attempt, p_worker_id, d.fence_token,
             CASE WHEN d.cancel_error IS NOT NULL THEN jsonb_build_object('error', d.cancel_error, 'resultRefused', true) END
      FROM done d
    )
    SELECT i.job_id,
           CASE WHEN d.job_id IS NOT NULL THEN d.state
                -- A retry of a completion that already committed (its first answer was lost with
                -- the connection) finds its own outcome: same worker, same fence. Answer as before.
                WHEN EXISTS (SELECT 1 FROM workhorse.job_outcome o
                             WHERE o.job_id = i.job_id AND o.state = 'succeeded'
                               AND o.worker_id = p_worker_id AND o.fence_token = i.fence) THEN 'succeeded'
                ELSE 'stale' END,
           NULL::text, NULL::text, NULL::jsonb, NULL::integer, NULL::integer,
           NULL::bigint, NULL::timestamptz, NULL::integer, NULL::jsonb, NULL::jsonb, NULL::jsonb
    FROM input i LEFT JOIN done d ON d.job_id = i.job_id
    ORDER BY i.ord;
    -- Jobs that wait on the ones that just ended are counted down (046_orchestration.sql). One
    -- probe of job_dependency's primary key per batch when none does.
    IF EXISTS (SELECT 1 FROM workhorse.job_dependency e WHERE e.prerequisite_id = ANY (v_ids)) THEN
      PERFORM workhorse.settle_dependents(
        ARRAY(SELECT o.job_id FROM workhorse.job_outcome o WHERE o.job_id = ANY (v_ids) AND o.finished_at = v_now
              ORDER BY o.job_id),
        v_now);
    END IF;
  END IF;

  IF p_limit = 0 THEN
    RETURN;
  END IF;

  -- ---- claim ----
  IF current_setting('transaction_isolation') NOT IN ('read committed', 'read uncommitted') THEN
    RAISE EXCEPTION USING ERRCODE = 'P1004',
      MESSAGE = 'claims must run at READ COMMITTED isolation, not ' || current_setting('transaction_isolation');
  END IF;
  IF v_ids IS NULL THEN
    -- (A round with completions checked the worker id already.)
    PERFORM workhorse.check_worker(p_worker_id);
  END IF;
  v_lease := workhorse.check_lease(p_lease_ms);
  IF p_queues IS NULL OR cardinality(p_queues) = 0 OR cardinality(p_queues) > 100 THEN
    PERFORM workhorse.raise_invalid('queues', 'must list 1 to 100 queue names');
  END IF;
  FOR v_i IN 1 .. cardinality(p_queues) LOOP
    IF NOT workhorse.is_valid_name(p_queues[v_i]) THEN
      PERFORM workhorse.raise_invalid(format('queues[%s]', v_i - 1), 'is not a valid queue name');
    END IF;
  END LOOP;
  v_queues := CASE WHEN cardinality(p_queues) = 1 THEN p_queues ELSE ARRAY(SELECT DISTINCT q FROM unnest(p_queues) AS q) END;
  -- A queue with a flow-control policy gives at most its allowance; a queue without one costs
  -- this one probe. The claim's time is read after the policies are locked (see 042).
  v_limited := ARRAY(SELECT p.queue FROM workhorse.queue_policy p WHERE p.queue = ANY (v_queues));
  IF cardinality(v_limited) = 0 THEN
    v_limited := NULL;
    v_now := clock_timestamp();
  ELSE
    -- (No row comes back for a policy removed meanwhile: its queue is claimed as unlimited.)
    SELECT array_agg(a.queue), array_agg(a.allowance), max(a.at) INTO v_limited, v_allowed, v_now
    FROM workhorse.claim_allowances(v_limited, p_limit) AS a;
    v_now := coalesce(v_now, clock_timestamp());
  END IF;
  v_ids := '{}';
  v_before := '{}';
  FOREACH v_queue IN ARRAY v_queues LOOP
    v_take := p_limit;
    IF v_limited IS NOT NULL THEN
      v_take := coalesce(v_allowed[array_position(v_limited, v_queue)], p_limit);
      CONTINUE WHEN v_take = 0;
    END IF;
    SELECT coalesce(array_agg(x.job_id), '{}'), coalesce(array_agg(x.job_id) FILTER (WHERE x.fence_token IS NOT NULL), '{}')
      INTO v_picked, v_picked_before
    FROM (
      SELECT r.job_id, r.fence_token
      FROM workhorse.job_runtime r
      WHERE r.state = 'ready' AND r.queue = v_queue
        -- A job past its deadline is never started; maintenance fails it.
        AND (r.deadline IS NULL OR r.deadline > v_now)
        -- A paused queue gives nothing (one primary-key probe, evaluated once).
        AND NOT EXISTS (SELECT 1 FROM workhorse.queue_control qc WHERE qc.queue = v_queue AND qc.paused)
      ORDER BY r.priority DESC, r.seq
      LIMIT v_take
      FOR UPDATE SKIP LOCKED) AS x;
    v_ids := v_ids || v_picked;
    v_before := v_before || v_picked_before;
  END LOOP;
  IF cardinality(v_queues) > 1 AND cardinality(v_ids) > p_limit THEN
    v_ids := ARRAY(SELECT r.job_id FROM workhorse.job_runtime r WHERE r.job_id = ANY (v_ids)
                   ORDER BY r.priority DESC, r.seq LIMIT p_limit);
  END IF;
  IF cardinality(v_ids) = 0 THEN
    RETURN;
  END IF;
  IF v_limited IS NOT NULL THEN
    PERFORM workhorse.record_rate_claims(v_limited, v_ids, v_now);
  END IF;

  v_fence := nextval('workhorse.fence_seq');
  v_event_id := nextval('workhorse.history_seq');
  RETURN QUERY
  WITH claimed AS (
    UPDATE workhorse.job_runtime r
       SET state = 'active',
           current_attempt = r.current_attempt + CASE WHEN r.resuming THEN 0 ELSE 1 END,
           fence_token = v_fence + u.ord - 1,
           worker_id = p_worker_id,
           lease_expires_at = v_now + v_lease,
           heartbeat_at = v_now,
           attempt_started_at = v_now,
           attempt_deadline = v_now + r.execution_timeout_ms * interval '1 millisecond'
      FROM unnest(v_ids) WITH ORDINALITY AS u (job_id, ord)
     WHERE r.job_id = u.job_id
    RETURNING r.job_id, r.queue, r.priority, r.seq, r.current_attempt, r.max_attempts, r.fence_token, r.lease_expires_at,
              r.execution_timeout_ms, r.resuming, u.ord
  ),
  ev AS (
    INSERT INTO workhorse.job_event (id, job_id, at, kind, attempt, worker_id, fence_token, data)
    SELECT v_event_id + c.ord - 1, c.job_id, v_now, 'claimed', c.current_attempt, p_worker_id, c.fence_token,
           CASE WHEN c.resuming THEN '{"resumed": true}'::jsonb END
    FROM claimed c
  )
  SELECT c.job_id, 'claimed'::text, c.queue, j.type, j.payload, c.current_attempt, c.max_attempts, c.fence_token,
         c.lease_expires_at, c.execution_timeout_ms,
         -- Each value travels wrapped: [] for a stage that returned nothing, [value] otherwise.
         CASE WHEN c.job_id = ANY (v_before) THEN
           (SELECT jsonb_object_agg(k.name, CASE WHEN k.value IS NULL THEN '[]'::jsonb ELSE jsonb_build_array(k.value) END)
            FROM workhorse.job_checkpoint k WHERE k.job_id = c.job_id)
         END,
         CASE WHEN c.job_id = ANY (v_before) THEN
           (SELECT jsonb_object_agg(w.name, w.wake_at) FROM workhorse.job_wait w WHERE w.job_id = c.job_id)
         END,
         j.trace_context
  FROM claimed c
  JOIN workhorse.job j ON j.id = c.job_id
  ORDER BY c.priority DESC, c.seq;
END
$$;

-- Moves on blocked jobs whose count of live prerequisites reached zero (their rows locked by
-- the caller). A parked parent becomes `ready` to replay its attempt; a job enqueued with
-- dependsOn becomes `ready` or `scheduled` (its runAt), or ends by its policies: `failed` with a
-- DependencyFailed error or `canceled` with a DependencyCanceled one when a prerequisite failed or
-- was canceled under policy `fail` / `cancel` (`fail` first, then `cancel`; earliest prerequisite
-- in dependsOn order). Returns the jobs it ended, whose own dependents the caller settles next.
CREATE OR REPLACE FUNCTION workhorse.settle_blocked(p_ids uuid[], p_now timestamptz)
RETURNS uuid[]
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_ended uuid[] := '{}';
  v_verdict record;
  v_state text;
  v_queues text[] := '{}';
  v_queue text;
BEGIN
  FOR r IN SELECT * FROM workhorse.job_runtime x WHERE x.job_id = ANY (p_ids) AND x.state = 'blocked' AND x.blockers = 0
           ORDER BY x.job_id LOOP
    IF r.resuming THEN
      UPDATE workhorse.job_runtime
         SET state = 'ready', seq = nextval('workhorse.job_seq'), run_at = p_now, blockers = NULL
       WHERE job_id = r.job_id;
      PERFORM workhorse.write_event(r.job_id, 'unblocked', p_now, r.current_attempt, '{"state": "ready", "replay": true}');
      v_queues := v_queues || r.queue;
      CONTINUE;
    END IF;
    SELECT o.state, o.job_id AS prerequisite_id,
           CASE o.state WHEN 'failed' THEN e.on_failed ELSE e.on_canceled END AS policy
      INTO v_verdict
    FROM workhorse.job_dependency e
    JOIN workhorse.job_outcome o ON o.job_id = e.prerequisite_id
    WHERE e.dependent_id = r.job_id AND e.kind = 'dependency' AND o.state <> 'succeeded'
      AND CASE o.state WHEN 'failed' THEN e.on_failed ELSE e.on_canceled END <> 'run'
    ORDER BY CASE o.state WHEN 'failed' THEN e.on_failed ELSE e.on_canceled END = 'fail' DESC, e.ordinal
    LIMIT 1;
    IF FOUND THEN
      PERFORM workhorse.finish_job(r, CASE v_verdict.policy WHEN 'fail' THEN 'failed' ELSE 'canceled' END, NULL,
        jsonb_build_object(
          'name', CASE v_verdict.state WHEN 'failed' THEN 'DependencyFailed' ELSE 'DependencyCanceled' END,
          'message', format('prerequisite %s ended %s (policy: %s)', v_verdict.prerequisite_id, v_verdict.state,
                            v_verdict.policy),
          'prerequisiteId', v_verdict.prerequisite_id, 'prerequisiteState', v_verdict.state),
        'canceled', p_now, false);
      v_ended := v_ended || r.job_id;
      CONTINUE;
    END IF;
    v_state := CASE WHEN r.run_at <= p_now THEN 'ready' ELSE 'scheduled' END;
    UPDATE workhorse.job_runtime
       SET state = v_state, seq = CASE WHEN v_state = 'ready' THEN nextval('workhorse.job_seq') ELSE seq END,
           blockers = NULL
     WHERE job_id = r.job_id;
    PERFORM workhorse.write_event(r.job_id, 'unblocked', p_now, r.current_attempt,
      jsonb_build_object('state', v_state, 'runAt', greatest(r.run_at, p_now)));
    IF v_state = 'ready' THEN
      v_queues := v_queues || r.queue;
    END IF;
  END LOOP;
  FOR v_queue IN SELECT DISTINCT q FROM unnest(v_queues) AS q LOOP
    PERFORM pg_notify('workhorse_jobs', v_queue);
  END LOOP;
  RETURN v_ended;
END
$$;

-- Ends the live children of a parent that ended: a running child is asked to cancel (its worker
-- stops it on its next heartbeat), any other ends `canceled` at once (and its own children in
-- turn).
CREATE OR REPLACE FUNCTION workhorse.cancel_children(p_parent_id uuid, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  c workhorse.job_runtime;
  v_reason text := format('its parent %s ended', p_parent_id);
BEGIN
  FOR c IN
    SELECT r.* FROM workhorse.job_runtime r
    WHERE r.job_id IN (SELECT e.prerequisite_id FROM workhorse.job_dependency e
                       WHERE e.dependent_id = p_parent_id AND e.kind = 'child')
    ORDER BY r.job_id FOR UPDATE
  LOOP
    IF c.state = 'active' THEN
      IF c.cancel_requested_at IS NULL THEN
        UPDATE workhorse.job_runtime SET cancel_requested_at = p_now, cancel_reason = v_reason WHERE job_id = c.job_id;
        PERFORM workhorse.write_event(c.job_id, 'cancel_requested', p_now, c.current_attempt,
          jsonb_build_object('reason', v_reason, 'parentId', p_parent_id), c.worker_id, c.fence_token);
      END IF;
    ELSE
      PERFORM workhorse.finish_job(c, 'canceled', NULL,
        workhorse.cancel_error(v_reason) || jsonb_build_object('parentId', p_parent_id), 'canceled', p_now);
    END IF;
  END LOOP;
END
$$;

-- Starts child jobs under p_key for the running job, or finds the ones an earlier run started,
-- and answers:
-- * `parked`: some child is live; the job is now `blocked` until every child ends (its attempt
--   stays open, its worker lets go, and it replays from the top once they have ended). One row.
-- * `settled`: every child has ended; one row per child (in request order) with its outcome.
-- * `canceled`: a cancel request was pending; the job ended `canceled`. One row.
-- * `stale`: this worker no longer owns the job; nothing written. One row.
-- p_requests is an array of 1 to 1000 enqueue requests (as enqueue_many_v1) without dependency
-- options: a child runs when its parent starts it, so no child can wait for its parent, an
-- ancestor or anything that waits for them (no cycle can be built). A child's idempotency key is
-- its parent's (see claim_idempotency_keys): the same key under two parents makes two children.
-- A job starts at most 10000 children in all. A key reused for a different request raises P1021.
-- What a worker may enqueue this way, and why, is in docs/security.md.
CREATE OR REPLACE FUNCTION workhorse.run_children_v1(p_job_id uuid, p_worker_id text, p_fence bigint, p_key text, p_requests jsonb)
RETURNS TABLE (status text, child_id uuid, state text, result jsonb, error jsonb)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_call workhorse.job_child_call;
  v_ids uuid[];
  v_live integer;
BEGIN
  IF p_key IS NULL OR length(p_key) NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid('key', 'must be a string of 1 to 200 characters');
  END IF;
  IF jsonb_typeof(p_requests) IS DISTINCT FROM 'array' OR jsonb_array_length(p_requests) NOT BETWEEN 1 AND 1000 THEN
    PERFORM workhorse.raise_invalid('children', 'must be an array of 1 to 1000 child job requests');
  END IF;
  PERFORM workhorse.check_child_requests(p_requests);
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN QUERY SELECT 'stale'::text, NULL::uuid, NULL::text, NULL::jsonb, NULL::jsonb;
    RETURN;
  END IF;
  v_now := clock_timestamp();
  SELECT * INTO v_call FROM workhorse.job_child_call c WHERE c.parent_id = p_job_id AND c.key = p_key;
  IF FOUND THEN
    -- The same children: the same types and payloads in the same order (options such as a
    -- runAt computed from the clock may differ between runs).
    IF (SELECT jsonb_agg(jsonb_build_array(e -> 'type', e -> 'payload') ORDER BY o) FROM jsonb_array_elements(v_call.request) WITH ORDINALITY AS x (e, o))
       IS DISTINCT FROM
       (SELECT jsonb_agg(jsonb_build_array(e -> 'type', e -> 'payload') ORDER BY o) FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, o)) THEN
      RAISE EXCEPTION USING ERRCODE = 'P1021', COLUMN = 'key',
        MESSAGE = format('key: "%s" already started other child jobs (%s) in an earlier run of job %s',
                         p_key, array_to_string(v_call.child_ids, ', '), p_job_id),
        DETAIL = jsonb_build_object('key', p_key, 'childIds', to_jsonb(v_call.child_ids))::text;
    END IF;
    v_ids := v_call.child_ids;
  ELSE
    PERFORM workhorse.check_children_count(p_job_id, jsonb_array_length(p_requests));
    SELECT array_agg(e.job_id) INTO v_ids FROM workhorse.enqueue_batch(p_requests, p_job_id) AS e;
    PERFORM workhorse.check_child_ids(p_job_id, v_ids, p_requests);
    INSERT INTO workhorse.job_child_call (parent_id, key, request, child_ids, created_at)
    VALUES (p_job_id, p_key, p_requests, v_ids, v_now);
    INSERT INTO workhorse.job_dependency (prerequisite_id, dependent_id, kind, ordinal)
    SELECT u.id, p_job_id, 'child', (u.ord - 1)::integer FROM unnest(v_ids) WITH ORDINALITY AS u (id, ord)
    ON CONFLICT DO NOTHING;
    PERFORM workhorse.write_events(v_ids, array_fill('child_of'::text, ARRAY[cardinality(v_ids)]), v_now,
      array_fill(0, ARRAY[cardinality(v_ids)]),
      array_fill(jsonb_build_object('parentId', p_job_id, 'key', p_key), ARRAY[cardinality(v_ids)]));
  END IF;
  SELECT count(*) INTO v_live FROM workhorse.job_runtime x WHERE x.job_id = ANY (v_ids);
  IF v_live = 0 THEN
    RETURN QUERY
    SELECT 'settled'::text, o.job_id, o.state, o.result, o.error
    FROM unnest(v_ids) WITH ORDINALITY AS u (id, ord) JOIN workhorse.job_outcome o ON o.job_id = u.id
    ORDER BY u.ord;
    RETURN;
  END IF;
  IF r.cancel_requested_at IS NOT NULL THEN
    PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', v_now);
    RETURN QUERY SELECT 'canceled'::text, NULL::uuid, NULL::text, NULL::jsonb, NULL::jsonb;
    RETURN;
  END IF;
  -- Parked like a durable sleep (the attempt stays open; the sleep columns keep who ran it).
  UPDATE workhorse.job_runtime x
     SET state = 'blocked', blockers = v_live, resuming = true,
         sleep_worker_id = x.worker_id, sleep_attempt_started_at = x.attempt_started_at,
         worker_id = NULL, lease_expires_at = NULL, heartbeat_at = NULL, attempt_started_at = NULL,
         attempt_deadline = NULL
   WHERE x.job_id = p_job_id;
  PERFORM workhorse.write_event(p_job_id, 'blocked', v_now, r.current_attempt,
    jsonb_build_object('key', p_key, 'children', to_jsonb(v_ids), 'live', v_live), p_worker_id, p_fence);
  RETURN QUERY SELECT 'parked'::text, NULL::uuid, NULL::text, NULL::jsonb, NULL::jsonb;
END
$$;

-- Parks the owner's job (locked by the caller) until something external wakes it: `blocked`,
-- or `scheduled` until p_timeout_at. The attempt stays open, as for a durable sleep.
CREATE OR REPLACE FUNCTION workhorse.park_job(r workhorse.job_runtime, p_timeout_at timestamptz, p_now timestamptz, p_data jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM workhorse.requeue_job(r.job_id, coalesce(p_timeout_at, 'infinity'), p_now, NULL, 0, true);
  IF p_timeout_at IS NULL THEN
    UPDATE workhorse.job_runtime SET state = 'blocked', run_at = p_now WHERE job_id = r.job_id;
  END IF;
  PERFORM workhorse.write_event(r.job_id, 'waiting', p_now, r.current_attempt,
    p_data || jsonb_build_object('timeoutAt', p_timeout_at, 'state', CASE WHEN p_timeout_at IS NULL THEN 'blocked' ELSE 'scheduled' END),
    r.worker_id, r.fence_token);
END
$$;

-- The owner's wait for signal p_name (its p_seq-th in this run of the handler). Returns
-- `delivered` with the signal's payload (now, or by an earlier run), `timed_out`, `waiting` (the
-- job is parked: the worker lets go of it), `canceled` (a cancel was pending: the job ended) or
-- `stale`. The timeout is fixed the first time the wait is reached.
CREATE OR REPLACE FUNCTION workhorse.wait_signal_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_seq integer, p_timeout_ms bigint)
RETURNS TABLE (status text, payload jsonb, timeout_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r workhorse.job_runtime;
  w workhorse.job_signal_wait;
  v_now timestamptz;
  v_signal workhorse.job_signal;
BEGIN
  PERFORM workhorse.check_wait_name(p_name);
  PERFORM workhorse.check_wait_timeout(p_timeout_ms);
  IF p_seq IS NULL OR p_seq < 1 THEN
    PERFORM workhorse.raise_invalid('seq', 'must be a positive integer');
  END IF;
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN QUERY SELECT 'stale'::text, NULL::jsonb, NULL::timestamptz;
    RETURN;
  END IF;
  v_now := clock_timestamp();
  INSERT INTO workhorse.job_signal_wait (job_id, name, seq, status, timeout_at, attempt, created_at)
  VALUES (p_job_id, p_name, p_seq, 'open', v_now + p_timeout_ms * interval '1 millisecond', r.current_attempt, v_now)
  ON CONFLICT (job_id, name, seq) DO NOTHING;
  SELECT * INTO w FROM workhorse.job_signal_wait x WHERE x.job_id = p_job_id AND x.name = p_name AND x.seq = p_seq;
  IF w.status = 'open' THEN
    -- The oldest signal of this name no wait has consumed (sent before the wait, or while the
    -- job was parked on it) answers it, if it was sent before the wait's timeout: the deadline
    -- is the server's, and a later signal stays buffered for the next wait of that name.
    SELECT * INTO v_signal FROM workhorse.job_signal s
     WHERE s.job_id = p_job_id AND s.name = p_name AND s.wait_seq IS NULL
       AND (w.timeout_at IS NULL OR s.sent_at < w.timeout_at)
     ORDER BY s.id LIMIT 1;
    IF v_signal.id IS NOT NULL THEN
      UPDATE workhorse.job_signal SET wait_seq = p_seq WHERE id = v_signal.id;
      UPDATE workhorse.job_signal_wait x SET status = 'delivered', signal_id = v_signal.id, resolved_at = v_now
       WHERE x.job_id = p_job_id AND x.name = p_name AND x.seq = p_seq;
      PERFORM workhorse.write_event(p_job_id, 'signal_consumed', v_now, r.current_attempt,
        jsonb_build_object('name', p_name, 'signalId', v_signal.id), p_worker_id, p_fence);
      RETURN QUERY SELECT 'delivered'::text, v_signal.payload, w.timeout_at;
      RETURN;
    END IF;
    IF w.timeout_at IS NOT NULL AND w.timeout_at <= v_now THEN
      UPDATE workhorse.job_signal_wait x SET status = 'timed_out', resolved_at = v_now
       WHERE x.job_id = p_job_id AND x.name = p_name AND x.seq = p_seq;
      PERFORM workhorse.write_event(p_job_id, 'wait_timed_out', v_now, r.current_attempt,
        jsonb_build_object('waitFor', 'signal', 'name', p_name), p_worker_id, p_fence);
      RETURN QUERY SELECT 'timed_out'::text, NULL::jsonb, w.timeout_at;
      RETURN;
    END IF;
    IF r.cancel_requested_at IS NOT NULL THEN
      PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', v_now);
      RETURN QUERY SELECT 'canceled'::text, NULL::jsonb, w.timeout_at;
      RETURN;
    END IF;
    PERFORM workhorse.park_job(r, w.timeout_at, v_now, jsonb_build_object('waitFor', 'signal', 'name', p_name));
    RETURN QUERY SELECT 'waiting'::text, NULL::jsonb, w.timeout_at;
    RETURN;
  END IF;
  IF w.status = 'delivered' THEN
    RETURN QUERY SELECT 'delivered'::text, s.payload, w.timeout_at FROM workhorse.job_signal s WHERE s.id = w.signal_id;
    RETURN;
  END IF;
  RETURN QUERY SELECT 'timed_out'::text, NULL::jsonb, w.timeout_at;
END
$$;

-- Sends signal p_name to a job, in the caller's transaction. Returns `delivered` (the job was
-- parked on a wait for it: the wait has its value and the job is `ready`), `buffered` (the job
-- is live but not waiting for it, or its wait's timeout has passed: the signal is kept and the
-- next wait for p_name consumes it),
-- `duplicate` (a signal with this idempotency key was sent before: nothing written),
-- `not_found` or `finished` (the job has ended: nothing written). The job's row is locked first,
-- so a send and the job parking never miss each other.
CREATE OR REPLACE FUNCTION workhorse.send_signal_v1(p_job_id uuid, p_name text, p_payload jsonb, p_idempotency_key text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_id bigint;
  v_seq integer;
  v_timeout_at timestamptz;
BEGIN
  PERFORM workhorse.check_wait_target(p_job_id, p_name);
  PERFORM workhorse.check_json_size(p_payload, 'payload');
  PERFORM workhorse.check_wait_key(p_idempotency_key);
  SELECT * INTO r FROM workhorse.job_runtime x WHERE x.job_id = p_job_id FOR UPDATE;
  IF p_idempotency_key IS NOT NULL AND EXISTS (
       SELECT 1 FROM workhorse.job_signal s
        WHERE s.job_id = p_job_id AND s.name = p_name AND s.idempotency_key = p_idempotency_key) THEN
    RETURN 'duplicate';
  END IF;
  IF r.job_id IS NULL THEN
    IF EXISTS (SELECT 1 FROM workhorse.job_outcome o WHERE o.job_id = p_job_id) THEN
      RETURN 'finished';
    END IF;
    RETURN 'not_found';
  END IF;
  v_now := clock_timestamp();
  INSERT INTO workhorse.job_signal (job_id, name, payload, idempotency_key, sent_at)
  VALUES (p_job_id, p_name, p_payload, p_idempotency_key, v_now)
  ON CONFLICT (job_id, name, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
  RETURNING id INTO v_id;
  IF v_id IS NULL THEN
    RETURN 'duplicate';
  END IF;
  -- Parked on a wait for this name whose timeout has not passed: the wait takes the signal now.
  -- Past the timeout the wait has timed out, whether or not the job woke yet (the deadline is
  -- the server's): the signal is buffered.
  SELECT w.seq, w.timeout_at INTO v_seq, v_timeout_at FROM workhorse.job_signal_wait w
   WHERE w.job_id = p_job_id AND w.name = p_name AND w.status = 'open'
   ORDER BY w.seq LIMIT 1;
  IF v_seq IS NOT NULL AND r.state IN ('blocked', 'scheduled') AND r.resuming
     AND (v_timeout_at IS NULL OR v_timeout_at > v_now) THEN
    UPDATE workhorse.job_signal SET wait_seq = v_seq WHERE id = v_id;
    UPDATE workhorse.job_signal_wait w SET status = 'delivered', signal_id = v_id, resolved_at = v_now
     WHERE w.job_id = p_job_id AND w.name = p_name AND w.seq = v_seq;
    PERFORM workhorse.wake_parked_job(r, v_now);
    PERFORM workhorse.write_event(p_job_id, 'signal_delivered', v_now, r.current_attempt,
      jsonb_build_object('name', p_name, 'signalId', v_id, 'payload', p_payload));
    RETURN 'delivered';
  END IF;
  PERFORM workhorse.write_event(p_job_id, 'signal_buffered', v_now, r.current_attempt,
    jsonb_build_object('name', p_name, 'signalId', v_id, 'payload', p_payload));
  RETURN 'buffered';
END
$$;

-- The owner's wait for the human decision p_name. The first time it is reached the wait opens
-- with p_context (what the person deciding needs to see, JSON up to 1 MiB), p_choices (null, or
-- 1 to 50 distinct strings the decision must be one of) and its timeout; later runs get the same
-- wait whatever they pass. Returns `decided` with the decision, actor, reason and time,
-- `timed_out`, `waiting` (the job is parked), `canceled` or `stale`.
CREATE OR REPLACE FUNCTION workhorse.wait_human_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_context jsonb, p_choices jsonb, p_timeout_ms bigint)
RETURNS TABLE (status text, decision jsonb, actor text, reason text, decided_at timestamptz, timeout_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r workhorse.job_runtime;
  w workhorse.job_human_wait;
  v_now timestamptz;
BEGIN
  PERFORM workhorse.check_wait_name(p_name);
  PERFORM workhorse.check_wait_timeout(p_timeout_ms);
  PERFORM workhorse.check_json_size(p_context, 'context');
  PERFORM workhorse.check_choices(p_choices);
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN QUERY SELECT 'stale'::text, NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  v_now := clock_timestamp();
  INSERT INTO workhorse.job_human_wait (job_id, name, status, context, choices, timeout_at, attempt, created_at)
  VALUES (p_job_id, p_name, 'open', p_context, p_choices, v_now + p_timeout_ms * interval '1 millisecond',
          r.current_attempt, v_now)
  ON CONFLICT (job_id, name) DO NOTHING;
  SELECT * INTO w FROM workhorse.job_human_wait x WHERE x.job_id = p_job_id AND x.name = p_name;
  IF w.status = 'open' AND w.timeout_at IS NOT NULL AND w.timeout_at <= v_now THEN
    UPDATE workhorse.job_human_wait x SET status = 'timed_out', decided_at = v_now WHERE x.id = w.id;
    PERFORM workhorse.write_event(p_job_id, 'wait_timed_out', v_now, r.current_attempt,
      jsonb_build_object('waitFor', 'human', 'name', p_name), p_worker_id, p_fence);
    w.status := 'timed_out';
  END IF;
  IF w.status = 'open' THEN
    IF r.cancel_requested_at IS NOT NULL THEN
      PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', v_now);
      RETURN QUERY SELECT 'canceled'::text, NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, w.timeout_at;
      RETURN;
    END IF;
    PERFORM workhorse.park_job(r, w.timeout_at, v_now,
      jsonb_build_object('waitFor', 'human', 'name', p_name, 'context', w.context, 'choices', w.choices));
    RETURN QUERY SELECT 'waiting'::text, NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, w.timeout_at;
    RETURN;
  END IF;
  RETURN QUERY SELECT w.status, w.decision, w.actor, w.reason, w.decided_at, w.timeout_at;
END
$$;

-- Records the decision for the open human wait p_name of a job, in the caller's transaction, and
-- wakes the job. p_actor (who decided, 1 to 200 characters) and p_reason (at most 1000) are kept
-- with the decision and in the timeline. A decision outside the wait's choices is refused
-- (SQLSTATE P1030, nothing written). Returns `completed`, `duplicate` (the wait was decided
-- with this idempotency key before: nothing written), `already_decided` (decided otherwise:
-- nothing written), `timed_out` (the wait's timeout has passed, whether or not the job woke to
-- see it yet: the deadline is the server's, nothing written), `not_waiting` (the job is live but
-- has no wait of that name yet), `not_found` or `finished`.
CREATE OR REPLACE FUNCTION workhorse.complete_human_wait_v1(
  p_job_id uuid, p_name text, p_decision jsonb, p_actor text, p_reason text DEFAULT NULL,
  p_idempotency_key text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  w workhorse.job_human_wait;
  v_now timestamptz;
BEGIN
  PERFORM workhorse.check_wait_target(p_job_id, p_name);
  IF p_decision IS NULL THEN
    PERFORM workhorse.raise_invalid('decision', 'must be a JSON value (not undefined)');
  END IF;
  PERFORM workhorse.check_json_size(p_decision, 'decision', 65536);
  IF p_actor IS NULL OR length(p_actor) NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid('actor', 'must be a string of 1 to 200 characters');
  END IF;
  PERFORM workhorse.check_actor(p_actor, p_reason);
  PERFORM workhorse.check_wait_key(p_idempotency_key);
  SELECT * INTO r FROM workhorse.job_runtime x WHERE x.job_id = p_job_id FOR UPDATE;
  SELECT * INTO w FROM workhorse.job_human_wait x WHERE x.job_id = p_job_id AND x.name = p_name FOR UPDATE;
  IF w.id IS NOT NULL AND w.choices IS NOT NULL AND NOT (w.choices @> jsonb_build_array(p_decision)
                                                         AND jsonb_typeof(p_decision) = 'string') THEN
    RAISE EXCEPTION USING ERRCODE = 'P1030', COLUMN = 'decision',
      MESSAGE = format('decision: must be one of the wait''s choices (%s)', w.choices::text),
      DETAIL = jsonb_build_object('choices', w.choices)::text;
  END IF;
  IF w.status = 'timed_out' THEN
    RETURN 'timed_out';
  END IF;
  IF w.id IS NOT NULL AND w.status <> 'open' THEN
    IF p_idempotency_key IS NOT NULL AND w.idempotency_key = p_idempotency_key THEN
      RETURN 'duplicate';
    END IF;
    RETURN 'already_decided';
  END IF;
  IF r.job_id IS NULL THEN
    IF EXISTS (SELECT 1 FROM workhorse.job_outcome o WHERE o.job_id = p_job_id) THEN
      RETURN 'finished';
    END IF;
    RETURN 'not_found';
  END IF;
  IF w.id IS NULL THEN
    RETURN 'not_waiting';
  END IF;
  v_now := clock_timestamp();
  IF w.timeout_at IS NOT NULL AND w.timeout_at <= v_now THEN
    RETURN 'timed_out';
  END IF;
  UPDATE workhorse.job_human_wait x
     SET status = 'decided', decision = p_decision, actor = p_actor, reason = p_reason,
         idempotency_key = p_idempotency_key, decided_at = v_now
   WHERE x.id = w.id;
  PERFORM workhorse.wake_parked_job(r, v_now);
  PERFORM workhorse.write_event(p_job_id, 'human_decided', v_now, r.current_attempt,
    jsonb_build_object('name', p_name, 'context', w.context, 'decision', p_decision, 'actor', p_actor, 'reason', p_reason));
  RETURN 'completed';
END
$$;

-- Moves up to p_limit due `scheduled` jobs to `ready` (behind the jobs already waiting) and
-- notifies their queues. Returns how many moved.
--
-- Jobs that became due together keep their order: they are taken by (run_at, seq), an index
-- walk of job_runtime_scheduled_idx that stops after each block, and given new `seq` values
-- in that order (the claim serves a priority in seq order). A block is at most 1000 jobs, so it
-- takes one block of job_seq values (see 010_tables.sql); p_limit (up to 100,000) bounds how
-- many blocks one call moves.
CREATE OR REPLACE FUNCTION workhorse.promote_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
-- The update finds its rows by primary key (a nested loop over the block), whatever the block's
-- size: a custom plan for 1000 ids chose a hash join over a scan of the whole table.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_total integer := 0;
  v_block integer;
  v_ids uuid[];
  v_seq bigint;
  v_event_id bigint;
  v_moved_queues text[];
  v_moved uuid[];
  v_kinds text[];
  v_attempts integer[];
  v_event_ids bigint[];
  v_queues text[] := '{}';
  v_queue text;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 100000');
  END IF;
  LOOP
    v_block := least(1000, p_limit - v_total);
    SELECT coalesce(array_agg(d.job_id ORDER BY d.run_at, d.seq), '{}') INTO v_ids
    FROM (SELECT r.job_id, r.run_at, r.seq FROM workhorse.job_runtime r
          WHERE r.state = 'scheduled' AND r.run_at <= v_now
          ORDER BY r.run_at, r.seq
          LIMIT v_block
          FOR UPDATE SKIP LOCKED) AS d;
    EXIT WHEN cardinality(v_ids) = 0;
    -- One block of each sequence (see 010_tables.sql): row k of the block gets base + k - 1.
    v_seq := nextval('workhorse.job_seq');
    v_event_id := nextval('workhorse.history_seq');
    WITH moved AS (
      UPDATE workhorse.job_runtime r
         SET state = 'ready', seq = v_seq + u.ord - 1
        FROM unnest(v_ids) WITH ORDINALITY AS u (job_id, ord)
       WHERE r.job_id = u.job_id
      RETURNING r.job_id, r.queue, r.current_attempt, r.resuming, u.ord
    )
    SELECT array_agg(DISTINCT m.queue), array_agg(m.job_id), array_agg(CASE WHEN m.resuming THEN 'woke' ELSE 'promoted' END),
           array_agg(m.current_attempt), array_agg(v_event_id + m.ord - 1)
      INTO v_moved_queues, v_moved, v_kinds, v_attempts, v_event_ids
    FROM moved m;
    PERFORM workhorse.write_events(v_moved, v_kinds, v_now, v_attempts, p_ids => v_event_ids);
    v_total := v_total + cardinality(v_ids);
    v_queues := v_queues || v_moved_queues;
    EXIT WHEN cardinality(v_ids) < v_block OR v_total >= p_limit;
  END LOOP;
  FOR v_queue IN SELECT DISTINCT q FROM unnest(v_queues) AS q LOOP
    PERFORM pg_notify('workhorse_jobs', v_queue);
  END LOOP;
  RETURN v_total;
END
$$;

-- Recovers up to p_limit active jobs whose lease ran out (their worker crashed, hung or lost its
-- connection) or whose attempt outlived its execution timeout. Whichever of the two ran out
-- first ended the attempt: it closes as `expired` or `timeout` (a handler that hangs past its
-- timeout also stops being renewed, but its attempt stays a `timeout`). Then, as when a worker
-- reports a failure: a job past its deadline fails with DeadlineExceeded (the deadline wins, as
-- everywhere); a pending cancel ends the job `canceled`; otherwise the retry policy (the job's, else the handler's as registered for
-- the job's queue and type, else the default) sets the next attempt's time, counted from the
-- moment the attempt ended, and the job fails for good if no attempt remains or the next one
-- could not start before its deadline. Returns how many jobs it recovered.
CREATE OR REPLACE FUNCTION workhorse.recover_expired_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_count integer := 0;
  v_error jsonb;
  v_timeout boolean;
  v_outcome text;
  v_ended timestamptz;
  v_policy jsonb;
  v_source text;
  v_delay bigint;
  v_next timestamptz;
  v_state text;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 100000');
  END IF;
  FOR r IN
    SELECT * FROM workhorse.job_runtime
    WHERE state = 'active' AND (lease_expires_at <= clock_timestamp() OR attempt_deadline <= clock_timestamp())
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  LOOP
    v_now := clock_timestamp();
    v_timeout := r.attempt_deadline IS NOT NULL AND r.attempt_deadline <= least(r.lease_expires_at, v_now);
    v_ended := CASE WHEN v_timeout THEN r.attempt_deadline ELSE r.lease_expires_at END;
    v_outcome := CASE WHEN v_timeout THEN 'timeout' ELSE 'expired' END;
    v_error := CASE WHEN v_timeout
      THEN jsonb_build_object('name', 'ExecutionTimeout',
             'message', format('attempt %s ran longer than its execution timeout of %s ms', r.current_attempt, r.execution_timeout_ms))
      ELSE jsonb_build_object('name', 'LeaseExpired',
             'message', format('worker %s stopped renewing its lease (it crashed, hung or lost its connection)', r.worker_id))
      END;
    IF r.deadline IS NOT NULL AND r.deadline <= v_now THEN
      PERFORM workhorse.fail_past_deadline(r, v_now);
    ELSIF r.cancel_requested_at IS NOT NULL THEN
      PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), v_outcome, v_now);
    ELSE
      SELECT p.policy, p.source, workhorse.retry_delay_ms(p.policy, p.counted) INTO v_policy, v_source, v_delay
      FROM workhorse.retry_policy_of(r, NULL) AS p;
      v_next := v_ended + v_delay * interval '1 millisecond';
      IF r.current_attempt >= r.max_attempts OR (r.deadline IS NOT NULL AND greatest(v_next, v_now) >= r.deadline) THEN
        PERFORM workhorse.finish_job(r, 'failed', NULL, v_error, v_outcome, v_now);
      ELSE
        INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
        VALUES (r.job_id, r.current_attempt, v_outcome, r.worker_id, r.fence_token, r.attempt_started_at, v_now, v_error);
        v_state := workhorse.requeue_job(r.job_id, v_next, v_now, v_error, 0);
        PERFORM workhorse.write_event(r.job_id, CASE WHEN v_timeout THEN 'timed_out' ELSE 'lease_expired' END, v_now,
          r.current_attempt,
          jsonb_build_object('error', v_error, 'state', v_state, 'delayMs', v_delay, 'delaySource', v_source,
                             'runAt', greatest(v_next, v_now)),
          r.worker_id, r.fence_token);
        IF v_state = 'ready' THEN
          PERFORM pg_notify('workhorse_jobs', r.queue);
        END IF;
      END IF;
    END IF;
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

-- Cancels a job. A job that is not running ends `canceled` at once; for a running job the
-- request is recorded and its worker is told on its next heartbeat (it stops the handler and
-- acknowledges). A job whose deadline has passed is failed with DeadlineExceeded instead (as
-- maintenance would) and answers `already_terminal`. Returns `canceled`, `cancel_requested`,
-- `already_terminal` or `not_found`. p_actor (who asked, e.g. an operator of the dashboard) is
-- recorded with the reason: in the `cancel_requested` event of a running job, in the
-- cancellation envelope of any other.
CREATE OR REPLACE FUNCTION workhorse.cancel_v1(p_job_id uuid, p_reason text DEFAULT NULL, p_actor text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
BEGIN
  IF p_reason IS NOT NULL AND length(p_reason) > 1000 THEN
    PERFORM workhorse.raise_invalid('reason', 'must be at most 1000 characters');
  END IF;
  IF p_actor IS NOT NULL AND length(p_actor) > 200 THEN
    PERFORM workhorse.raise_invalid('actor', 'must be at most 200 characters');
  END IF;
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

-- Records a running job's progress (any JSON, at most 64 KiB). Fenced like every owner write:
-- `saved` or `stale`. The last value is kept on the outcome when the job ends.
CREATE OR REPLACE FUNCTION workhorse.set_progress_v1(p_job_id uuid, p_worker_id text, p_fence bigint, p_progress jsonb)
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

-- Redrives a dead letter (the work of redrive_v1 and redrive_many_v1, whose arguments are
-- checked): a new job with the same definition (type, queue, payload, priority, attempts, retry
-- policy, tags, execution timeout; not the deadline, which has passed), starting at attempt 1
-- with no checkpoints. The source outcome never changes; the lineage is recorded in job_redrive
-- and in both timelines. Idempotent per p_request_id. A dead letter is redriven once: unless
-- p_again, a dead letter redriven before (by any request) gives the job its first redrive
-- created. Returns the job and the request id of the lineage row it comes from.
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
  PERFORM workhorse.write_events(ARRAY[p_job_id, v_new], ARRAY['redriven', 'redriven_from'], v_now,
    p_data => ARRAY[
      jsonb_build_object('newJobId', v_new, 'requestId', p_request_id, 'actor', p_actor, 'reason', p_reason)
        || CASE WHEN v_redrive.again THEN '{"again": true}'::jsonb ELSE '{}'::jsonb END,
      jsonb_build_object('sourceJobId', p_job_id, 'requestId', p_request_id, 'actor', p_actor, 'reason', p_reason)
        || CASE WHEN v_redrive.again THEN '{"again": true}'::jsonb ELSE '{}'::jsonb END]);
  RETURN v_redrive;
END
$$;

-- Enqueues the job of one occurrence (the schedule row is locked by the caller) and marks the
-- occurrence fired, or skipped as `overlap` while the schedule's previous job is still live.
-- Returns the new job's id, or null when skipped.
CREATE OR REPLACE FUNCTION workhorse.fire_occurrence(s workhorse.schedule, p_at timestamptz, p_now timestamptz)
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

-- Enqueues the schedule's job now, outside its cron occurrences (whatever its overlap rule, and
-- also while it is paused); refused for a disabled schedule. Recorded in its history; the job
-- becomes the schedule's last job. Returns the job's id.
CREATE OR REPLACE FUNCTION workhorse.trigger_schedule_v1(p_namespace text, p_key text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
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

-- Protocol functions keep the rights and search path installation gives them (CREATE OR
-- REPLACE resets both); the new internal helpers are executable by the owner alone.
DO $rights$
DECLARE
  v_function regprocedure;
BEGIN
  FOR v_function IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'workhorse'::regnamespace
      AND p.proname IN ('acknowledge_cancel_v1', 'cancel_v1', 'complete_and_claim_v1', 'complete_human_wait_v1', 'fail_v1', 'promote_v1', 'recover_expired_v1', 'release_v1', 'run_children_v1', 'save_checkpoint_v1', 'send_signal_v1', 'set_progress_v1', 'sleep_v1', 'trigger_schedule_v1', 'wait_human_v1', 'wait_signal_v1')
  LOOP
    EXECUTE format('ALTER FUNCTION %s SECURITY DEFINER SET search_path = pg_catalog, pg_temp', v_function);
  END LOOP;
  FOR v_function IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'workhorse'::regnamespace
      AND p.proname IN ('lock_owned', 'write_event', 'write_events')
  LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_function);
  END LOOP;
END
$rights$;
