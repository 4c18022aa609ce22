-- Step 7 -> 8: the rules of child jobs and waits (issue 30).
-- * A child's idempotency key is its parent's: claim_idempotency_keys hashes a child's key with
--   its parent's id (it gains p_parent_id), enqueue_many_v1's work moves to enqueue_batch so
--   run_children_v1 can pass the parent, and run_children_v1 refuses dependency options on a
--   child, a child that is the job itself or waits for it, and more than 10000 children per job.
-- * The deadline of a wait is the server's: complete_human_wait_v1 answers `timed_out` after a
--   wait's timeout, list_human_waits_v1 no longer lists such a wait, and a signal sent after a
--   wait's timeout is buffered for the next wait (send_signal_v1, wait_signal_v1).
-- Locks: replaces functions only; touches no table.
DROP FUNCTION workhorse.claim_idempotency_keys(jsonb, timestamptz);

CREATE OR REPLACE FUNCTION workhorse.claim_idempotency_keys(p_requests jsonb, p_now timestamptz, p_parent_id uuid)
RETURNS TABLE (ids uuid[], replay boolean[])
LANGUAGE plpgsql AS $$
DECLARE
  v_n integer := jsonb_array_length(p_requests);
  v_req jsonb;
  v_ord integer := 0;
  v_fields jsonb;
  v_scope text;
  v_hash bytea;
  v_new uuid;
  v_taken uuid;
  v_existing workhorse.enqueue_idempotency;
  v_diff text[];
BEGIN
  ids := array_fill(NULL::uuid, ARRAY[v_n]);
  replay := array_fill(false, ARRAY[v_n]);
  FOR v_req IN SELECT value FROM jsonb_array_elements(p_requests) LOOP
    v_ord := v_ord + 1;
    CONTINUE WHEN NOT v_req ? 'idempotencyKey';
    -- Compared with defaults filled in, so leaving an option out equals giving its default.
    v_fields := jsonb_strip_nulls(jsonb_build_object(
                  'type', v_req -> 'type',
                  'queue', coalesce(v_req -> 'queue', '"default"'),
                  'priority', coalesce(v_req -> 'priority', '0'),
                  'maxAttempts', coalesce(v_req -> 'maxAttempts', '25'),
                  'tags', coalesce(v_req -> 'tags', '[]'),
                  'retryPolicy', CASE WHEN v_req -> 'retryPolicy' <> 'null'::jsonb
                                      THEN workhorse.normalize_retry_policy(v_req -> 'retryPolicy', 'retryPolicy') END,
                  'runAt', v_req -> 'runAt',
                  'deadline', v_req -> 'deadline',
                  'executionTimeoutMs', v_req -> 'executionTimeoutMs'))
                || jsonb_build_object('payload', v_req -> 'payload');
    v_scope := coalesce(v_req ->> 'idempotencyScope', v_req ->> 'queue', 'default');
    v_hash := CASE WHEN p_parent_id IS NULL THEN sha256(convert_to(v_req ->> 'idempotencyKey', 'UTF8'))
                   ELSE sha256(uuid_send(p_parent_id) || '\x00'::bytea || convert_to(v_req ->> 'idempotencyKey', 'UTF8')) END;
    v_new := workhorse.new_job_id();
    v_taken := NULL;
    INSERT INTO workhorse.enqueue_idempotency AS i (scope, key_hash, request, job_id, created_at, expires_at)
    VALUES (v_scope, v_hash, v_fields, v_new, p_now,
            p_now + coalesce((v_req ->> 'idempotencyTtlMs')::numeric::bigint, 86400000) * interval '1 millisecond')
    ON CONFLICT (scope, key_hash) DO UPDATE
      SET request = EXCLUDED.request, job_id = EXCLUDED.job_id, created_at = EXCLUDED.created_at,
          expires_at = EXCLUDED.expires_at
      WHERE i.expires_at <= p_now
    RETURNING i.job_id INTO v_taken;
    IF v_taken IS NOT NULL THEN
      ids[v_ord] := v_taken;
      CONTINUE;
    END IF;
    SELECT * INTO v_existing FROM workhorse.enqueue_idempotency WHERE scope = v_scope AND key_hash = v_hash;
    SELECT array_agg(k ORDER BY k) INTO v_diff
    FROM (SELECT jsonb_object_keys(v_fields) UNION SELECT jsonb_object_keys(v_existing.request)) AS f (k)
    WHERE v_fields -> k IS DISTINCT FROM v_existing.request -> k;
    IF v_diff IS NOT NULL THEN
      RAISE EXCEPTION USING ERRCODE = 'P1005', COLUMN = format('requests[%s].idempotencyKey', v_ord - 1),
        MESSAGE = format('requests[%s].idempotencyKey: was already used in scope "%s" for job %s with a different request (differs in: %s)',
                         v_ord - 1, v_scope, v_existing.job_id, array_to_string(v_diff, ', ')),
        DETAIL = jsonb_build_object('existingJobId', v_existing.job_id, 'fields', to_jsonb(v_diff), 'scope', v_scope)::text;
    END IF;
    ids[v_ord] := v_existing.job_id;
    replay[v_ord] := true;
  END LOOP;
  RETURN NEXT;
END
$$;
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
  RETURN QUERY
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
  ),
  ins_event AS (
    INSERT INTO workhorse.job_event (id, job_id, at, kind, attempt, data)
    -- A job due now is ready with runAt = the event's own time: stored as null data and shown as
    -- {"state": "ready", "runAt": at} by get_timeline_v1 (formatting the timestamp per row costs
    -- about 6% of a batch enqueue).
    SELECT v_event_id + ord - 1, id, v_now, 'enqueued', 0,
           CASE WHEN blocked THEN jsonb_build_object('state', 'blocked', 'runAt', run_at)
                WHEN run_at > v_now THEN jsonb_build_object('state', 'scheduled', 'runAt', run_at) END
    FROM input
  )
  SELECT coalesce(input.id, v_ids[x.ord])
  FROM generate_series(1, jsonb_array_length(p_requests)) AS x (ord)
  LEFT JOIN input ON input.ord = x.ord
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
CREATE OR REPLACE FUNCTION workhorse.enqueue_many_v1(p_requests jsonb)
RETURNS TABLE (job_id uuid)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT b.job_id FROM workhorse.enqueue_batch(p_requests, NULL) AS b;
END
$$;
CREATE OR REPLACE FUNCTION workhorse.check_child_requests(p_requests jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_field text;
BEGIN
  SELECT format('children[%s].%s', x.ord - 1, k.key) INTO v_field
  FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
  CROSS JOIN LATERAL unnest(ARRAY['dependsOn', 'onDependencyFailed', 'onDependencyCanceled']) WITH ORDINALITY AS k (key, n)
  WHERE jsonb_typeof(x.e) = 'object' AND x.e ? k.key
  ORDER BY x.ord, k.n
  LIMIT 1;
  IF v_field IS NOT NULL THEN
    PERFORM workhorse.raise_invalid(v_field,
      'is not an option of a child job: a child runs when its parent starts it and waits for nothing');
  END IF;
END
$$;
CREATE OR REPLACE FUNCTION workhorse.check_children_count(p_parent_id uuid, p_more integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_started bigint;
BEGIN
  SELECT coalesce(sum(cardinality(c.child_ids)), 0) INTO v_started
  FROM workhorse.job_child_call c WHERE c.parent_id = p_parent_id;
  IF v_started + p_more > 10000 THEN
    PERFORM workhorse.raise_invalid('children',
      format('a job starts at most 10000 child jobs in all: it started %s, and this call asks for %s more', v_started, p_more));
  END IF;
END
$$;
CREATE OR REPLACE FUNCTION workhorse.check_child_ids(p_parent_id uuid, p_ids uuid[], p_requests jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_bad record;
BEGIN
  IF NOT jsonb_path_exists(p_requests, '$[*].idempotencyKey') THEN
    RETURN;
  END IF;
  SELECT u.ord - 1 AS i, u.id INTO v_bad
  FROM unnest(p_ids) WITH ORDINALITY AS u (id, ord)
  WHERE u.id IN (WITH RECURSIVE waiting (job_id) AS (
                   SELECT p_parent_id
                   UNION
                   SELECT e.dependent_id FROM waiting w
                   JOIN workhorse.job_dependency e ON e.prerequisite_id = w.job_id
                   JOIN workhorse.job_runtime x ON x.job_id = e.dependent_id)
                 SELECT w.job_id FROM waiting w)
  ORDER BY u.ord
  LIMIT 1;
  IF FOUND THEN
    PERFORM workhorse.raise_invalid(format('children[%s].idempotencyKey', v_bad.i),
      format('names job %s, which is this job or waits for it: a child cannot be its own parent or ancestor', v_bad.id));
  END IF;
END
$$;
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
  PERFORM workhorse.check_worker(p_worker_id);
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
    INSERT INTO workhorse.job_event (job_id, at, kind, attempt, data)
    SELECT u.id, v_now, 'child_of', 0, jsonb_build_object('parentId', p_job_id, 'key', p_key)
    FROM unnest(v_ids) AS u (id);
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
  INSERT INTO workhorse.job_event (job_id, at, kind, attempt, worker_id, fence_token, data)
  VALUES (p_job_id, v_now, 'blocked', r.current_attempt, p_worker_id, p_fence,
          jsonb_build_object('key', p_key, 'children', to_jsonb(v_ids), 'live', v_live));
  RETURN QUERY SELECT 'parked'::text, NULL::uuid, NULL::text, NULL::jsonb, NULL::jsonb;
END
$$;
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
  PERFORM workhorse.check_worker(p_worker_id);
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
      INSERT INTO workhorse.job_event (job_id, at, kind, attempt, worker_id, fence_token, data)
      VALUES (p_job_id, v_now, 'signal_consumed', r.current_attempt, p_worker_id, p_fence,
              jsonb_build_object('name', p_name, 'signalId', v_signal.id));
      RETURN QUERY SELECT 'delivered'::text, v_signal.payload, w.timeout_at;
      RETURN;
    END IF;
    IF w.timeout_at IS NOT NULL AND w.timeout_at <= v_now THEN
      UPDATE workhorse.job_signal_wait x SET status = 'timed_out', resolved_at = v_now
       WHERE x.job_id = p_job_id AND x.name = p_name AND x.seq = p_seq;
      INSERT INTO workhorse.job_event (job_id, at, kind, attempt, worker_id, fence_token, data)
      VALUES (p_job_id, v_now, 'wait_timed_out', r.current_attempt, p_worker_id, p_fence,
              jsonb_build_object('waitFor', 'signal', 'name', p_name));
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
    INSERT INTO workhorse.job_event (job_id, at, kind, attempt, data)
    VALUES (p_job_id, v_now, 'signal_delivered', r.current_attempt,
            jsonb_build_object('name', p_name, 'signalId', v_id, 'payload', p_payload));
    RETURN 'delivered';
  END IF;
  INSERT INTO workhorse.job_event (job_id, at, kind, attempt, data)
  VALUES (p_job_id, v_now, 'signal_buffered', r.current_attempt,
          jsonb_build_object('name', p_name, 'signalId', v_id, 'payload', p_payload));
  RETURN 'buffered';
END
$$;
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
  INSERT INTO workhorse.job_event (job_id, at, kind, attempt, data)
  VALUES (p_job_id, v_now, 'human_decided', r.current_attempt,
          jsonb_build_object('name', p_name, 'context', w.context, 'decision', p_decision, 'actor', p_actor, 'reason', p_reason));
  RETURN 'completed';
END
$$;
CREATE OR REPLACE FUNCTION workhorse.list_human_waits_v1(
  p_queue text, p_type text, p_name text, p_job_id uuid, p_limit integer, p_after_id bigint DEFAULT 0)
RETURNS TABLE (id bigint, job_id uuid, queue text, type text, name text, context jsonb, choices jsonb,
               timeout_at timestamptz, attempt integer, created_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  RETURN QUERY
  SELECT w.id, w.job_id, j.queue, j.type, w.name, w.context, w.choices, w.timeout_at, w.attempt, w.created_at
  FROM workhorse.job_human_wait w
  JOIN workhorse.job j ON j.id = w.job_id
  WHERE w.status = 'open' AND (w.timeout_at IS NULL OR w.timeout_at > clock_timestamp()) AND w.id > coalesce(p_after_id, 0)
    AND (p_queue IS NULL OR j.queue = p_queue) AND (p_type IS NULL OR j.type = p_type)
    AND (p_name IS NULL OR w.name = p_name) AND (p_job_id IS NULL OR w.job_id = p_job_id)
    -- Only jobs still live: a job that ended (canceled, past its deadline) waits no more.
    AND EXISTS (SELECT 1 FROM workhorse.job_runtime x WHERE x.job_id = w.job_id)
  ORDER BY w.id
  LIMIT p_limit;
END
$$;
-- As sql/990_privileges.sql does at installation: helpers are the owner's alone, and the
-- protocol functions replaced above run with the owner's rights and a pinned search_path again.
REVOKE ALL ON FUNCTION workhorse.claim_idempotency_keys(jsonb, timestamptz, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.enqueue_batch(jsonb, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.check_child_requests(jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.check_children_count(uuid, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.check_child_ids(uuid, uuid[], jsonb) FROM PUBLIC;
ALTER FUNCTION workhorse.enqueue_many_v1(jsonb) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.run_children_v1(uuid, text, bigint, text, jsonb) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.wait_signal_v1(uuid, text, bigint, text, integer, bigint) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.send_signal_v1(uuid, text, jsonb, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.complete_human_wait_v1(uuid, text, jsonb, text, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_human_waits_v1(text, text, text, uuid, integer, bigint) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
