-- Step 15 -> 16: awaiting a job's result across processes (waitForResult). Jobs someone
-- awaits are registered in result_waiter (await_results_v1, granted to the producer capability);
-- a job's end notifies `workhorse_results` with its id while it is registered. The two writers of
-- job ends learn it: finish_job (fail, cancel, expiry, operator paths) and complete_and_claim_v1
-- (one probe of the empty table per batch when nobody waits).
-- Locks: none of an existing table (a table and functions added, two functions replaced).

-- Jobs someone awaits (waitForResult, await_results_v1). A job's end notifies the channel
-- `workhorse_results` (payload: the ended ids, comma-separated) only while its id is here, so a
-- job nobody awaits pays one probe of this (then empty) table per batch of ends and nothing more.
-- A waiter refreshes its rows while it waits; the rows of a waiter that went away expire
-- (expires_at) and are dropped by the next registration; a job's end removes its row.
CREATE TABLE workhorse.result_waiter (
  job_id uuid PRIMARY KEY,
  expires_at timestamptz NOT NULL
);

CREATE OR REPLACE FUNCTION workhorse.notify_results(p_job_ids uuid[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_ended text[];
  v_i integer;
BEGIN
  WITH gone AS (
    DELETE FROM workhorse.result_waiter w
     WHERE w.job_id = ANY (p_job_ids) AND EXISTS (SELECT 1 FROM workhorse.job_outcome o WHERE o.job_id = w.job_id)
    RETURNING w.job_id)
  SELECT array_agg(g.job_id::text ORDER BY g.job_id) INTO v_ended FROM gone g;
  FOR v_i IN 1 .. coalesce(cardinality(v_ended), 0) BY 200 LOOP
    PERFORM pg_notify('workhorse_results', array_to_string(v_ended[v_i : v_i + 199], ','));
  END LOOP;
END
$$;

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
  -- Its waiters (await_results_v1) are woken; one probe of an empty table when nobody waits.
  IF EXISTS (SELECT 1 FROM workhorse.result_waiter) THEN
    PERFORM workhorse.notify_results(ARRAY[r.job_id]);
  END IF;
END
$$;

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

CREATE OR REPLACE FUNCTION workhorse.await_results_v1(p_job_ids uuid[], p_ttl_seconds integer DEFAULT 60)
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

INSERT INTO workhorse.protocol_function (name, capabilities) VALUES
  ('await_results_v1', '{producer}');
REVOKE ALL ON FUNCTION workhorse.notify_results(uuid[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.await_results_v1(uuid[], integer) FROM PUBLIC;
ALTER FUNCTION workhorse.await_results_v1(uuid[], integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
-- CREATE OR REPLACE resets what 990_privileges.sql set at installation.
ALTER FUNCTION workhorse.complete_and_claim_v1(text, jsonb, text[], integer, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Roles granted before this step may call the new function at once.
SELECT workhorse.regrant_capabilities();
