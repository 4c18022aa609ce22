-- Step 15 -> 16: deduplication windows on enqueue (sql/032_dedup_windows.sql): the `dedupe`
-- option (throttle or debounce per queue, type and key), the table of keys
-- (workhorse.enqueue_dedupe, expired by tick_v1), and enqueue_many_v2, which answers each job's
-- outcome (created, duplicate, throttled, debounced) next to its id; enqueue_many_v1 answers as
-- before. enqueue_batch gains the outcome column (dropped and created again: its result type
-- changes); validate_enqueue_request, check_child_requests and tick_v1 are redefined whole.
-- Locks: none of an existing table (a table and functions added, functions replaced).

-- Deduplication windows (enqueue's `dedupe` option, claim_dedupe_keys in 030_enqueue.sql): one
-- row per (queue, type, mode, hashed key), naming the job that holds the key. A throttle key is
-- held until `expires_at` (the end of its window); a debounce key while its job has not started
-- (`expires_at` is then the job's run time). tick_v1 deletes rows that hold nothing any more.
CREATE TABLE workhorse.enqueue_dedupe (
  queue text NOT NULL,
  type text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('throttle', 'debounce')),
  key_hash bytea NOT NULL,
  job_id uuid NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (queue, type, mode, key_hash)
);
CREATE INDEX enqueue_dedupe_expiry_idx ON workhorse.enqueue_dedupe (expires_at);

-- Checks a request's `dedupe` option (P1001 naming the field).
CREATE FUNCTION workhorse.validate_dedupe_option(p_req jsonb, p_path text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_opt jsonb := p_req -> 'dedupe';
  v_path text := p_path || '.dedupe';
  v_key text;
BEGIN
  IF jsonb_typeof(v_opt) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid(v_path,
      'must be an object {"key", "windowMs", "mode": "throttle" or "debounce", "replace"?: "payload", "runAt" or "both"}');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(v_opt) LOOP
    IF v_key NOT IN ('key', 'windowMs', 'mode', 'replace') THEN
      PERFORM workhorse.raise_invalid(v_path || '.' || v_key, 'is not a dedupe option (key, windowMs, mode, replace)');
    END IF;
  END LOOP;
  IF jsonb_typeof(v_opt -> 'key') IS DISTINCT FROM 'string' OR length(v_opt ->> 'key') NOT BETWEEN 1 AND 512 THEN
    PERFORM workhorse.raise_invalid(v_path || '.key', 'must be a string of 1 to 512 characters');
  END IF;
  PERFORM workhorse.check_int(v_opt -> 'windowMs', v_path || '.windowMs', 100, 2592000000);
  IF jsonb_typeof(v_opt -> 'mode') IS DISTINCT FROM 'string' OR v_opt ->> 'mode' NOT IN ('throttle', 'debounce') THEN
    PERFORM workhorse.raise_invalid(v_path || '.mode', 'must be "throttle" or "debounce"');
  END IF;
  IF v_opt ? 'replace' THEN
    IF v_opt ->> 'mode' <> 'debounce' THEN
      PERFORM workhorse.raise_invalid(v_path || '.replace', 'applies to mode "debounce" only (a throttle keeps the first job as it is)');
    END IF;
    IF jsonb_typeof(v_opt -> 'replace') IS DISTINCT FROM 'string' OR v_opt ->> 'replace' NOT IN ('payload', 'runAt', 'both') THEN
      PERFORM workhorse.raise_invalid(v_path || '.replace', 'must be "payload", "runAt" or "both"');
    END IF;
  END IF;
  IF p_req ? 'idempotencyKey' THEN
    PERFORM workhorse.raise_invalid(v_path,
      'cannot be combined with idempotencyKey: an idempotent request always answers its first job, a dedupe key only within its window');
  END IF;
  IF v_opt ->> 'mode' = 'debounce' AND p_req ? 'runAt' THEN
    PERFORM workhorse.raise_invalid(p_path || '.runAt', 'cannot be given with a debounce: the job runs when its window has passed');
  END IF;
  IF v_opt ->> 'mode' = 'debounce' AND p_req ? 'dependsOn' THEN
    PERFORM workhorse.raise_invalid(p_path || '.dependsOn', 'cannot be given with a debounce: a debounced job waits for its window only');
  END IF;
END
$$;

-- Takes the dedupe keys of a batch (valid requests), in input order; p_new_ids are the ids
-- enqueue_batch gives the jobs it writes. Answers, per request: `ids` (the key's job, for a
-- request that writes no job of its own; else null), `skip` (true for those) and `outcomes`
-- (`created`, `throttled` or `debounced`; null without `dedupe`), and `requests`: the batch with
-- the run time of each new debounced job set (now + windowMs) and what later requests of the
-- batch debounced into earlier ones applied (two requests of one key in a batch act as two
-- enqueues in that order). A debounce of a job written earlier replaces its payload and/or run
-- time here and records a `debounced` event.
CREATE FUNCTION workhorse.claim_dedupe_keys(p_requests jsonb, p_now timestamptz, p_new_ids uuid[])
RETURNS TABLE (requests jsonb, ids uuid[], skip boolean[], outcomes text[])
LANGUAGE plpgsql AS $$
DECLARE
  v_n integer := jsonb_array_length(p_requests);
  v_req jsonb;
  v_ord integer := 0;
  v_mode text;
  v_replace text;
  v_queue text;
  v_type text;
  v_hash bytea;
  v_run_at timestamptz;
  v_row workhorse.enqueue_dedupe;
  v_earlier integer;
BEGIN
  requests := p_requests;
  ids := array_fill(NULL::uuid, ARRAY[v_n]);
  skip := array_fill(false, ARRAY[v_n]);
  outcomes := array_fill(NULL::text, ARRAY[v_n]);
  FOR v_req IN SELECT value FROM jsonb_array_elements(p_requests) LOOP
    v_ord := v_ord + 1;
    CONTINUE WHEN NOT v_req ? 'dedupe';
    v_mode := v_req -> 'dedupe' ->> 'mode';
    v_replace := coalesce(v_req -> 'dedupe' ->> 'replace', 'both');
    v_queue := coalesce(v_req ->> 'queue', 'default');
    v_type := v_req ->> 'type';
    v_hash := sha256(convert_to(v_req -> 'dedupe' ->> 'key', 'UTF8'));
    -- The end of the window this request opens (or pushes a debounce to).
    v_run_at := p_now + (v_req -> 'dedupe' ->> 'windowMs')::numeric::bigint * interval '1 millisecond';
    IF v_mode = 'debounce' THEN
      requests := jsonb_set(requests, ARRAY[(v_ord - 1)::text, 'runAt'], to_jsonb(v_run_at));
    END IF;
    outcomes[v_ord] := 'created';
    LOOP
      INSERT INTO workhorse.enqueue_dedupe (queue, type, mode, key_hash, job_id, created_at, expires_at)
      VALUES (v_queue, v_type, v_mode, v_hash, p_new_ids[v_ord], p_now, v_run_at)
      ON CONFLICT DO NOTHING;
      EXIT WHEN FOUND;
      -- Held: wait for the transaction that holds it, then read its latest row (if it was
      -- deleted meanwhile, by expiry or a rollback of its insert, try to take the key again).
      SELECT * INTO v_row FROM workhorse.enqueue_dedupe d
      WHERE d.queue = v_queue AND d.type = v_type AND d.mode = v_mode AND d.key_hash = v_hash
      FOR UPDATE;
      CONTINUE WHEN NOT FOUND;
      v_earlier := array_position(p_new_ids[1:v_ord - 1], v_row.job_id);
      IF v_mode = 'throttle' AND v_row.expires_at > p_now THEN
        ids[v_ord] := v_row.job_id;
        skip[v_ord] := true;
        outcomes[v_ord] := 'throttled';
        EXIT;
      END IF;
      IF v_mode = 'debounce' AND v_earlier IS NOT NULL THEN
        -- An earlier request of this batch made the job: it takes this request's changes.
        IF v_replace IN ('payload', 'both') THEN
          requests := jsonb_set(requests, ARRAY[(v_earlier - 1)::text, 'payload'], v_req -> 'payload');
        END IF;
        IF v_replace IN ('runAt', 'both') THEN
          requests := jsonb_set(requests, ARRAY[(v_earlier - 1)::text, 'runAt'], to_jsonb(v_run_at));
          UPDATE workhorse.enqueue_dedupe d SET expires_at = v_run_at
          WHERE d.queue = v_queue AND d.type = v_type AND d.mode = v_mode AND d.key_hash = v_hash;
        END IF;
        ids[v_ord] := v_row.job_id;
        skip[v_ord] := true;
        outcomes[v_ord] := 'debounced';
        EXIT;
      END IF;
      IF v_mode = 'debounce' THEN
        -- Not started: never attempted, and no worker holds it (the lock makes a claim that
        -- comes now skip it; a claim that came first is waited for and then seen as active).
        PERFORM 1 FROM workhorse.job_runtime r
        WHERE r.job_id = v_row.job_id AND r.state IN ('scheduled', 'ready') AND r.current_attempt = 0
        FOR UPDATE;
        IF FOUND THEN
          IF v_replace IN ('payload', 'both') THEN
            UPDATE workhorse.job j SET payload = v_req -> 'payload' WHERE j.id = v_row.job_id;
          END IF;
          IF v_replace IN ('runAt', 'both') THEN
            UPDATE workhorse.job j SET run_at = v_run_at WHERE j.id = v_row.job_id;
            UPDATE workhorse.job_runtime r SET run_at = v_run_at, state = 'scheduled' WHERE r.job_id = v_row.job_id;
            UPDATE workhorse.enqueue_dedupe d SET expires_at = v_run_at
            WHERE d.queue = v_queue AND d.type = v_type AND d.mode = v_mode AND d.key_hash = v_hash;
          END IF;
          PERFORM workhorse.write_event(v_row.job_id, 'debounced', p_now, 0, jsonb_build_object(
            'payloadReplaced', v_replace IN ('payload', 'both'),
            'runAt', CASE WHEN v_replace IN ('runAt', 'both') THEN v_run_at END));
          ids[v_ord] := v_row.job_id;
          skip[v_ord] := true;
          outcomes[v_ord] := 'debounced';
          EXIT;
        END IF;
      END IF;
      -- Free (the throttle window passed, the debounced job started or is gone): this request's
      -- job takes the key.
      UPDATE workhorse.enqueue_dedupe d
         SET job_id = p_new_ids[v_ord], created_at = p_now, expires_at = v_run_at
       WHERE d.queue = v_queue AND d.type = v_type AND d.mode = v_mode AND d.key_hash = v_hash;
      EXIT;
    END LOOP;
  END LOOP;
  RETURN NEXT;
END
$$;

-- Deletes up to p_limit keys that hold nothing any more (tick_v1): throttle keys whose window
-- has passed, debounce keys whose job has started or is gone. Returns how many.
CREATE FUNCTION workhorse.expire_dedupe_keys(p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_count integer;
BEGIN
  DELETE FROM workhorse.enqueue_dedupe
  WHERE ctid = ANY (ARRAY(
    SELECT d.ctid FROM workhorse.enqueue_dedupe d
    WHERE d.expires_at <= clock_timestamp()
      AND (d.mode = 'throttle'
           OR NOT EXISTS (SELECT 1 FROM workhorse.job_runtime r
                          WHERE r.job_id = d.job_id AND r.state IN ('scheduled', 'ready') AND r.current_attempt = 0))
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED));
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_count;
END
$$;

-- enqueue_many_v1 that also says, per request, what happened: `created` (a job was written),
-- `throttled` or `debounced` (a dedupe key's job, see above) or `duplicate` (an exact repeat of
-- an idempotent enqueue). Same requests, same checks, same rows as enqueue_many_v1.
CREATE FUNCTION workhorse.enqueue_many_v2(p_requests jsonb)
RETURNS TABLE (job_id uuid, outcome text)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT b.job_id, b.outcome FROM workhorse.enqueue_batch(p_requests, NULL) AS b;
END
$$;

-- (030_enqueue.sql) `dedupe` is an enqueue option.
CREATE OR REPLACE FUNCTION workhorse.validate_enqueue_request(p_req jsonb, p_path text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
  v_tag jsonb;
  v_i integer := 0;
BEGIN
  IF jsonb_typeof(p_req) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid(p_path, 'must be an object with at least "type" and "payload"');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_req) LOOP
    IF v_key NOT IN ('type', 'payload', 'queue', 'priority', 'runAt', 'maxAttempts', 'retryPolicy', 'tags',
                     'deadline', 'executionTimeoutMs', 'idempotencyKey', 'idempotencyScope', 'idempotencyTtlMs',
                     'dependsOn', 'onDependencyFailed', 'onDependencyCanceled', 'traceContext', 'dedupe') THEN
      PERFORM workhorse.raise_invalid(p_path || '.' || v_key,
        'is not an enqueue option (type, payload, queue, priority, runAt, maxAttempts, retryPolicy, tags, deadline, '
        || 'executionTimeoutMs, idempotencyKey, idempotencyScope, idempotencyTtlMs, dependsOn, onDependencyFailed, '
        || 'onDependencyCanceled, traceContext, dedupe)');
    END IF;
  END LOOP;
  PERFORM workhorse.check_name(p_req -> 'type', p_path || '.type');
  IF NOT p_req ? 'payload' THEN
    PERFORM workhorse.raise_invalid(p_path || '.payload', 'is required (use null for no payload)');
  END IF;
  PERFORM workhorse.check_json_size(p_req -> 'payload', p_path || '.payload');
  IF p_req ? 'queue' THEN
    PERFORM workhorse.check_name(p_req -> 'queue', p_path || '.queue');
  END IF;
  IF p_req ? 'priority' THEN
    PERFORM workhorse.check_int(p_req -> 'priority', p_path || '.priority', 0, 100);
  END IF;
  IF p_req ? 'maxAttempts' THEN
    PERFORM workhorse.check_int(p_req -> 'maxAttempts', p_path || '.maxAttempts', 1, 100);
  END IF;
  IF p_req ? 'runAt' THEN
    PERFORM workhorse.check_timestamp(p_req -> 'runAt', p_path || '.runAt');
  END IF;
  IF p_req ? 'deadline' THEN
    PERFORM workhorse.check_timestamp(p_req -> 'deadline', p_path || '.deadline');
  END IF;
  IF p_req ? 'idempotencyKey' AND (jsonb_typeof(p_req -> 'idempotencyKey') <> 'string'
      OR length(p_req ->> 'idempotencyKey') NOT BETWEEN 1 AND 512) THEN
    PERFORM workhorse.raise_invalid(p_path || '.idempotencyKey', 'must be a string of 1 to 512 characters');
  END IF;
  IF p_req ? 'idempotencyScope' THEN
    IF NOT p_req ? 'idempotencyKey' THEN
      PERFORM workhorse.raise_invalid(p_path || '.idempotencyScope', 'needs an idempotencyKey');
    END IF;
    PERFORM workhorse.check_name(p_req -> 'idempotencyScope', p_path || '.idempotencyScope');
  END IF;
  IF p_req ? 'idempotencyTtlMs' THEN
    IF NOT p_req ? 'idempotencyKey' THEN
      PERFORM workhorse.raise_invalid(p_path || '.idempotencyTtlMs', 'needs an idempotencyKey');
    END IF;
    PERFORM workhorse.check_int(p_req -> 'idempotencyTtlMs', p_path || '.idempotencyTtlMs', 1000, 2592000000);
  END IF;
  IF p_req ? 'executionTimeoutMs' THEN
    PERFORM workhorse.check_int(p_req -> 'executionTimeoutMs', p_path || '.executionTimeoutMs', 1000, 86400000);
  END IF;
  -- (null: none, as when the key is absent.)
  IF p_req ? 'traceContext' AND p_req -> 'traceContext' <> 'null'::jsonb
     AND NOT workhorse.is_valid_trace_context(p_req -> 'traceContext') THEN
    PERFORM workhorse.raise_invalid(p_path || '.traceContext',
      'must be {"traceparent": W3C version 00 with non-zero trace and span ids, "tracestate"?: 1 to 512 printable ASCII characters}');
  END IF;
  IF p_req ? 'retryPolicy' AND p_req -> 'retryPolicy' <> 'null'::jsonb THEN
    PERFORM workhorse.normalize_retry_policy(p_req -> 'retryPolicy', p_path || '.retryPolicy');
  END IF;
  -- (032_dedup_windows.sql.)
  IF p_req ? 'dedupe' THEN
    PERFORM workhorse.validate_dedupe_option(p_req, p_path);
  END IF;
  -- (046_orchestration.sql; the index of this request in its batch bounds references to earlier ones.)
  PERFORM workhorse.validate_dependency_options(p_req, p_path,
    coalesce(substring(p_path FROM '^requests\[(\d+)\]$')::integer, 0));
  IF p_req ? 'tags' THEN
    IF jsonb_typeof(p_req -> 'tags') <> 'array' OR jsonb_array_length(p_req -> 'tags') > 20 THEN
      PERFORM workhorse.raise_invalid(p_path || '.tags', 'must be an array of at most 20 strings');
    END IF;
    FOR v_tag IN SELECT value FROM jsonb_array_elements(p_req -> 'tags') LOOP
      IF jsonb_typeof(v_tag) <> 'string' OR length(v_tag #>> '{}') NOT BETWEEN 1 AND 64 THEN
        PERFORM workhorse.raise_invalid(format('%s.tags[%s]', p_path, v_i), 'must be a string of 1 to 64 characters');
      END IF;
      v_i := v_i + 1;
    END LOOP;
  END IF;
END
$$;

-- (030_enqueue.sql) The outcome of each request; the dedupe keys.
DROP FUNCTION workhorse.enqueue_batch(jsonb, uuid);
-- enqueue_many_v1's work. p_parent_id: null for an enqueue; the parent job for the children
-- run_children_v1 starts (their idempotency keys are the parent's, see claim_idempotency_keys).
-- Answers each request's job and its outcome (`created`, `duplicate`, `throttled` or
-- `debounced`: enqueue_many_v2 in 032_dedup_windows.sql).
CREATE FUNCTION workhorse.enqueue_batch(p_requests jsonb, p_parent_id uuid)
RETURNS TABLE (job_id uuid, outcome text)
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
  -- Deduplication windows (032_dedup_windows.sql): each request's outcome, null without dedupe.
  v_dedupe record;
  v_outcomes text[];
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
  -- Deduplication windows (032_dedup_windows.sql; never with an idempotency key, nor in a child
  -- job). A batch without `dedupe` pays this one test. A throttled or debounced request writes
  -- no job, as an idempotent repeat: it answers the key's job. A debounce may have rewritten the
  -- batch (the run time of a new debounced job, what a later request of the key changed).
  IF jsonb_path_exists(p_requests, '$[*].dedupe') THEN
    SELECT d.requests, d.ids, d.skip, d.outcomes INTO v_dedupe
    FROM workhorse.claim_dedupe_keys(p_requests, v_now,
           ARRAY(SELECT (v_id_prefix || lpad(to_hex((v_id_low + o) & 281474976710655), 12, '0'))::uuid
                 FROM generate_series(1, jsonb_array_length(p_requests)) AS o)) AS d;
    p_requests := v_dedupe.requests;
    v_outcomes := v_dedupe.outcomes;
    v_ids := ARRAY(SELECT coalesce(v_dedupe.ids[o], v_ids[o]) FROM generate_series(1, jsonb_array_length(p_requests)) AS o);
    v_replay := ARRAY(SELECT v_dedupe.skip[o] OR coalesce(v_replay[o], false) FROM generate_series(1, jsonb_array_length(p_requests)) AS o);
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
  -- Request k's job: the one written for it, else the existing one an exact repeat (or a dedupe
  -- key) names.
  RETURN QUERY
  SELECT coalesce(v_ids[x.ord], (v_id_prefix || lpad(to_hex((v_id_low + x.ord) & 281474976710655), 12, '0'))::uuid),
         coalesce(v_outcomes[x.ord], CASE WHEN v_replay[x.ord] THEN 'duplicate' ELSE 'created' END)
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

-- (046_orchestration.sql) A child job takes no dedupe key.
CREATE OR REPLACE FUNCTION workhorse.check_child_requests(p_requests jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_field text;
BEGIN
  SELECT format('children[%s].%s', x.ord - 1, k.key) INTO v_field
  FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
  CROSS JOIN LATERAL unnest(ARRAY['dependsOn', 'onDependencyFailed', 'onDependencyCanceled', 'dedupe']) WITH ORDINALITY AS k (key, n)
  WHERE jsonb_typeof(x.e) = 'object' AND x.e ? k.key
  ORDER BY x.ord, k.n
  LIMIT 1;
  IF v_field IS NOT NULL THEN
    PERFORM workhorse.raise_invalid(v_field,
      'is not an option of a child job: a child runs when its parent starts it and waits for nothing');
  END IF;
END
$$;

-- (050_maintenance.sql) Expires dedupe keys.
CREATE OR REPLACE FUNCTION workhorse.tick_v1()
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_promoted integer;
  v_recovered integer;
  v_expired integer;
  v_fired integer;
  v_planned integer;
  v_keys integer;
  v_dedupe_keys integer;
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
  v_planned := workhorse.plan_due_schedules(500);
  v_fired := workhorse.fire_due_schedules(100);
  DELETE FROM workhorse.enqueue_idempotency
  WHERE ctid = ANY (ARRAY(SELECT ctid FROM workhorse.enqueue_idempotency WHERE expires_at <= clock_timestamp() LIMIT 1000));
  GET DIAGNOSTICS v_keys = ROW_COUNT;
  -- Deduplication keys that hold nothing any more (032_dedup_windows.sql).
  v_dedupe_keys := workhorse.expire_dedupe_keys(1000);
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
                            'schedulesPlanned', v_planned, 'schedulesFired', v_fired,
                            'schedulesToPlan', workhorse.schedules_need_plan(),
                            'more', v_expired = 1000 OR v_promoted = 10000 OR v_recovered = 1000 OR v_keys = 1000 OR v_dedupe_keys = 1000
                                    OR v_fired >= 100 OR v_planned = 500);
END
$$;

-- As sql/990_privileges.sql does at installation: the new protocol function gets its
-- capability, nothing is left to PUBLIC, and it is SECURITY DEFINER with a pinned search_path.
INSERT INTO workhorse.protocol_function (name, capabilities) VALUES
  ('enqueue_many_v2', '{producer}');
REVOKE ALL ON FUNCTION workhorse.validate_dedupe_option(jsonb, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.claim_dedupe_keys(jsonb, timestamptz, uuid[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.expire_dedupe_keys(integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.enqueue_batch(jsonb, uuid) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.enqueue_many_v2(jsonb) FROM PUBLIC;
ALTER FUNCTION workhorse.enqueue_many_v2(jsonb) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
-- (CREATE OR REPLACE reset what 990_privileges.sql set on tick_v1.)
ALTER FUNCTION workhorse.tick_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Roles granted before this step may call the new function at once.
SELECT workhorse.regrant_capabilities();
