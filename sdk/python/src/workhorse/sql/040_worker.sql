-- The worker side of the protocol: claim, heartbeat, complete, fail, release, checkpoints and
-- cancellation acknowledgement. Every owner write carries the worker id and the fence token it
-- was given at claim time; a write from a worker that no longer owns the job changes nothing and
-- reports `stale` (lock_owned, 020_helpers.sql, is that check for the writes on one job). The hot
-- path, complete_and_claim_v1 at the end of this file, stays one function (see there).

-- Claims up to p_limit ready jobs from p_queues for one worker, in (priority DESC, FIFO) order,
-- and returns everything the worker needs (type, payload, attempt, fence, lease, the enqueuer's
-- trace context and, for a job claimed before, its stored checkpoints and sleeps). The work is
-- done by complete_and_claim_v1 (the worker's hot path) with no completions; see there for the
-- shape.
CREATE FUNCTION workhorse.claim_many_v1(p_queues text[], p_worker_id text, p_limit integer, p_lease_ms integer)
RETURNS TABLE (
  job_id uuid, queue text, type text, payload jsonb, attempt integer, max_attempts integer,
  fence_token bigint, lease_expires_at timestamptz, execution_timeout_ms integer, checkpoints jsonb, waits jsonb,
  trace_context jsonb)
LANGUAGE plpgsql AS $$
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  RETURN QUERY
  SELECT c.job_id, c.queue, c.type, c.payload, c.attempt, c.max_attempts, c.fence_token, c.lease_expires_at,
         c.execution_timeout_ms, c.checkpoints, c.waits, c.trace_context
  FROM workhorse.complete_and_claim_v1(p_worker_id, '[]'::jsonb, p_queues, p_limit, p_lease_ms) AS c;
END
$$;

-- Parses [{"jobId": uuid, "fence": bigint, ...}] for the batched owner functions.
CREATE FUNCTION workhorse.parse_leases(p_items jsonb, p_field text, p_max integer)
RETURNS TABLE (ord bigint, job_id uuid, fence bigint, item jsonb)
LANGUAGE plpgsql AS $$
DECLARE
  v_item jsonb;
  v_i integer := 0;
BEGIN
  IF jsonb_typeof(p_items) IS DISTINCT FROM 'array' OR jsonb_array_length(p_items) > p_max THEN
    PERFORM workhorse.raise_invalid(p_field, format('must be an array of at most %s {"jobId", "fence"} objects', p_max));
  END IF;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_items) LOOP
    IF jsonb_typeof(v_item) IS DISTINCT FROM 'object' THEN
      PERFORM workhorse.raise_invalid(format('%s[%s]', p_field, v_i), 'must be an object with "jobId" and "fence"');
    END IF;
    ord := v_i;
    job_id := workhorse.check_uuid(v_item -> 'jobId', format('%s[%s].jobId', p_field, v_i));
    fence := workhorse.check_int(v_item -> 'fence', format('%s[%s].fence', p_field, v_i), 1, 9223372036854775807);
    item := v_item;
    RETURN NEXT;
    v_i := v_i + 1;
  END LOOP;
END
$$;

-- Renews the leases of one worker's running jobs in one statement. Per lease: `accepted`,
-- `cancel_requested` (renewed; the owner should stop and acknowledge), `busy` (not renewed this
-- round: another transaction holds the row, e.g. an owner write under way; try again next
-- round) or `stale` (the worker lost the job and must stop writing
-- for it). Only lease columns change, and they are in no index, so each renewal is a HOT update.
CREATE FUNCTION workhorse.heartbeat_many_v1(p_worker_id text, p_leases jsonb, p_lease_ms integer)
RETURNS TABLE (job_id uuid, status text, lease_expires_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_lease interval := workhorse.check_lease(p_lease_ms);
  v_ids uuid[];
  v_fences bigint[];
  v_locked uuid[];
  v_now timestamptz;
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  SELECT array_agg(l.job_id ORDER BY l.ord), array_agg(l.fence ORDER BY l.ord) INTO v_ids, v_fences
  FROM workhorse.parse_leases(p_leases, 'leases', 1000) AS l;
  IF v_ids IS NULL THEN
    RETURN;
  END IF;
  -- Rows another transaction holds are skipped, never waited for: one busy row must not delay
  -- the renewal of every other lease in the batch.
  v_locked := ARRAY(SELECT r.job_id FROM workhorse.job_runtime r WHERE r.job_id = ANY (v_ids)
                    ORDER BY r.job_id FOR UPDATE SKIP LOCKED);
  v_now := clock_timestamp();
  RETURN QUERY
  WITH input AS (
    SELECT i.job_id, i.fence, i.ord FROM unnest(v_ids, v_fences) WITH ORDINALITY AS i (job_id, fence, ord)
  ),
  renewed AS (
    UPDATE workhorse.job_runtime r
       SET lease_expires_at = v_now + v_lease, heartbeat_at = v_now
      FROM input i
     WHERE r.job_id = i.job_id AND r.job_id = ANY (v_locked) AND workhorse.owns(r, p_worker_id, i.fence, v_now)
    RETURNING r.job_id, r.cancel_requested_at IS NOT NULL AS cancel, r.lease_expires_at
  )
  SELECT i.job_id,
         CASE WHEN n.job_id IS NOT NULL THEN CASE WHEN n.cancel THEN 'cancel_requested' ELSE 'accepted' END
              WHEN NOT i.job_id = ANY (v_locked)
                   AND EXISTS (SELECT 1 FROM workhorse.job_runtime x
                               WHERE x.job_id = i.job_id AND workhorse.owns(x, p_worker_id, i.fence, v_now)) THEN 'busy'
              ELSE 'stale' END,
         n.lease_expires_at
  FROM input i LEFT JOIN renewed n ON n.job_id = i.job_id
  ORDER BY i.ord;
END
$$;

-- Records success for a batch of one worker's jobs: [{"jobId", "fence", "result"}]. Per job:
-- `succeeded` (also for a repeat of this worker's own committed completion, which writes nothing),
-- `canceled` (a cancel was requested first: the result is refused and the job ends canceled) or
-- `stale` (nothing written). The work is done by complete_and_claim_v1 with no claim.
CREATE FUNCTION workhorse.complete_many_v1(p_worker_id text, p_items jsonb)
RETURNS TABLE (job_id uuid, status text)
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  IF p_items IS NULL THEN
    PERFORM workhorse.raise_invalid('items', 'must be an array of at most 1000 {"jobId", "fence"} objects');
  END IF;
  RETURN QUERY
  SELECT c.job_id, c.status FROM workhorse.complete_and_claim_v1(p_worker_id, p_items, NULL, 0, NULL) AS c;
END
$$;

-- Records success for one job. Returns `succeeded`, `canceled` or `stale`, as complete_many_v1.
-- (PL/pgSQL rather than SQL, as every protocol function that is not trivial: a SECURITY DEFINER
-- SQL function is never inlined, and before PostgreSQL 18 it is planned again on every call.)
CREATE FUNCTION workhorse.complete_v1(p_job_id uuid, p_worker_id text, p_fence bigint, p_result jsonb)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT c.status
          FROM workhorse.complete_many_v1(
            p_worker_id,
            jsonb_build_array(jsonb_build_object('jobId', p_job_id, 'fence', p_fence, 'result', p_result))) AS c);
END
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
CREATE FUNCTION workhorse.fail_v1(
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

-- Hands a job back without counting an attempt, for a worker that cannot run it (it has no
-- handler for the job's type); it may be claimed again after p_delay_ms. Attempt numbers are
-- never used twice, so the history stays unambiguous (one closing row per attempt number):
-- * a claim that opened attempt N closes it as `released` (the handler never ran) and gives its
--   place back: the job's attempt budget (max_attempts) grows by one, and the next claim opens
--   attempt N + 1;
-- * a claim that continued a slept attempt hands it back still open, as the sleep left it: no
--   row, and the next claim continues it.
-- Returns `released`, `canceled` (a cancel had been requested) or `stale`.
CREATE FUNCTION workhorse.release_v1(
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

-- The owning worker confirms that it stopped a job whose cancellation was requested.
-- Returns `canceled`, `not_requested` (no cancel is pending; nothing changes) or `stale`.
CREATE FUNCTION workhorse.acknowledge_cancel_v1(p_job_id uuid, p_worker_id text, p_fence bigint)
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
CREATE FUNCTION workhorse.save_checkpoint_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_value jsonb, p_in_transaction boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  RETURN (SELECT c.status FROM workhorse.save_checkpoint_v2(p_job_id, p_worker_id, p_fence, p_name, p_value, p_in_transaction) c);
END
$$;

-- The stored checkpoints of a job, oldest first.
CREATE FUNCTION workhorse.read_checkpoints_v1(p_job_id uuid)
RETURNS TABLE (name text, value jsonb, attempt integer, fence_token bigint, worker_id text, created_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT k.name, k.value, k.attempt, k.fence_token, k.worker_id, k.created_at
  FROM workhorse.job_checkpoint k
  WHERE k.job_id = p_job_id
  ORDER BY k.created_at, k.name;
END
$$;

-- A durable sleep. The first time a job reaches the sleep named p_name, its wake time is fixed
-- (p_until, or the database clock plus p_delay_ms) and kept: later runs of the handler reach the
-- same wake time. If it is still ahead, the job becomes `scheduled` until then and the worker
-- lets go of it; the attempt is not consumed (the next claim continues it), and the handler
-- starts again from the top when the job wakes (checkpoints replay). Returns `sleeping`,
-- `elapsed` (the wake time has passed: go on), `canceled` (a cancel was pending) or `stale`,
-- with the wake time.
CREATE FUNCTION workhorse.sleep_v1(
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
CREATE FUNCTION workhorse.complete_and_claim_v1(
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
  -- A per-key claim took jobs: the claim's time is read again after its counts of active jobs.
  v_keyed boolean := false;
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
    -- Waiters of the jobs that ended are woken (notify_results); one probe of an empty table per
    -- batch when nobody waits.
    IF EXISTS (SELECT 1 FROM workhorse.result_waiter) THEN
      PERFORM workhorse.notify_results(v_ids);
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
      -- A per-key limit (042_flow_control.sql): the keys take turns; jobs without a key as below.
      IF v_queue = ANY (v_limited)
         AND EXISTS (SELECT 1 FROM workhorse.queue_policy p WHERE p.queue = v_queue AND p.per_key_concurrency IS NOT NULL) THEN
        SELECT k.ids, k.before INTO v_picked, v_picked_before FROM workhorse.claim_per_key(v_queue, v_take, v_now) AS k;
        v_ids := v_ids || v_picked;
        v_before := v_before || v_picked_before;
        v_keyed := v_keyed OR cardinality(v_picked) > 0;
        CONTINUE;
      END IF;
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
  IF v_keyed THEN
    -- (So an attempt that ended before a key's count was taken ends before this claim's time:
    -- in attempt_history no more than the limit of a key's attempts ever overlap.)
    v_now := clock_timestamp();
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
