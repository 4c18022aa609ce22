-- Enqueue: runs in the caller's transaction and never commits, so a job exists exactly when the
-- caller's business write does.

-- True for a W3C trace context as the protocol stores it: {"traceparent"} or {"traceparent",
-- "tracestate"}, traceparent of version 00 with a trace id and a span id that are not all zeros,
-- tracestate printable ASCII of at most 512 characters. Each CASE guards what follows it.
CREATE FUNCTION workhorse.is_valid_trace_context(p_value jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN jsonb_typeof(p_value) = 'object' AND (p_value - ARRAY['traceparent', 'tracestate']) = '{}'::jsonb
                   AND jsonb_typeof(p_value -> 'traceparent') = 'string'
              THEN (p_value ->> 'traceparent') ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
                   AND substr(p_value ->> 'traceparent', 4, 32) <> repeat('0', 32)
                   AND substr(p_value ->> 'traceparent', 37, 16) <> repeat('0', 16)
                   AND CASE WHEN NOT p_value ? 'tracestate' THEN true
                            WHEN jsonb_typeof(p_value -> 'tracestate') = 'string'
                            -- (A regular expression counts to 255 at most.)
                            THEN length(p_value ->> 'tracestate') <= 512 AND (p_value ->> 'tracestate') ~ '^[\x20-\x7e]+$'
                            ELSE false END
              ELSE false END
$$;

-- Validates one enqueue request (a JSON object) and raises P1001 naming the first bad field.
CREATE FUNCTION workhorse.validate_enqueue_request(p_req jsonb, p_path text)
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
                     'dependsOn', 'onDependencyFailed', 'onDependencyCanceled', 'traceContext', 'dedupe',
                     'concurrencyKey') THEN
      PERFORM workhorse.raise_invalid(p_path || '.' || v_key,
        'is not an enqueue option (type, payload, queue, priority, runAt, maxAttempts, retryPolicy, tags, deadline, '
        || 'executionTimeoutMs, idempotencyKey, idempotencyScope, idempotencyTtlMs, dependsOn, onDependencyFailed, '
        || 'onDependencyCanceled, traceContext, dedupe, concurrencyKey)');
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
  -- (null: none, as when the key is absent.)
  IF p_req ? 'concurrencyKey' AND p_req -> 'concurrencyKey' <> 'null'::jsonb
     AND (jsonb_typeof(p_req -> 'concurrencyKey') <> 'string' OR length(p_req ->> 'concurrencyKey') NOT BETWEEN 1 AND 256) THEN
    PERFORM workhorse.raise_invalid(p_path || '.concurrencyKey', 'must be a string of 1 to 256 characters');
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

-- True for a request that is certainly valid and uses only the common fields (type, payload,
-- queue, priority, maxAttempts, traceContext): such requests, the bulk of any batch, are checked in one
-- set-based pass; every other request goes through validate_enqueue_request, which names the
-- first bad field. Each CASE guards the cast that follows it.
CREATE FUNCTION workhorse.is_plain_request(e jsonb)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN jsonb_typeof(e) = 'object'
                   AND (e - ARRAY['type', 'payload', 'queue', 'priority', 'maxAttempts', 'traceContext']) = '{}'::jsonb
                   AND e ? 'payload' AND jsonb_typeof(e -> 'type') = 'string'
              THEN workhorse.is_valid_name(e ->> 'type')
                   AND octet_length((e -> 'payload')::text) <= 1048576
                   AND CASE WHEN NOT e ? 'queue' THEN true
                            WHEN jsonb_typeof(e -> 'queue') = 'string' THEN workhorse.is_valid_name(e ->> 'queue')
                            ELSE false END
                   AND CASE WHEN NOT e ? 'priority' THEN true
                            WHEN jsonb_typeof(e -> 'priority') = 'number'
                            THEN (e ->> 'priority')::numeric BETWEEN 0 AND 100
                                 AND (e ->> 'priority')::numeric = trunc((e ->> 'priority')::numeric)
                            ELSE false END
                   AND CASE WHEN NOT e ? 'maxAttempts' THEN true
                            WHEN jsonb_typeof(e -> 'maxAttempts') = 'number'
                            THEN (e ->> 'maxAttempts')::numeric BETWEEN 1 AND 100
                                 AND (e ->> 'maxAttempts')::numeric = trunc((e ->> 'maxAttempts')::numeric)
                            ELSE false END
                   AND (NOT e ? 'traceContext' OR workhorse.is_valid_trace_context(e -> 'traceContext'))
              ELSE false END
$$;

-- Takes the idempotency keys of a batch, in input order. For each keyed request it either
-- reserves the key for a new job id, or finds a live reservation: an exact repeat (the same
-- fields, defaults filled in) becomes a replay of that job, anything else raises P1005 naming the differing
-- fields, which rolls back the whole batch. Two transactions racing for one key serialise on
-- the primary key: the second waits, then sees the first's row (or takes the key if the first
-- rolled back). An expired reservation is taken over. Keys are stored as SHA-256 hashes. The
-- keys of child jobs (p_parent_id not null, from run_children_v1) live in their parent's key
-- space: their hash covers the parent's id and a NUL byte before the key, which no key given as
-- text can spell, so the same key under two parents makes two children, and no enqueue outside
-- that parent's calls can reach a child's key.
CREATE FUNCTION workhorse.claim_idempotency_keys(p_requests jsonb, p_now timestamptz, p_parent_id uuid)
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

-- Enqueues up to 1000 requests (at most 16 MiB of JSON in all), all or nothing, and returns
-- the new job ids in input order.
-- Each request: {"type", "payload", "queue"?, "priority"?, "runAt"?, "maxAttempts"?,
-- "retryPolicy"?, "tags"?, "deadline"?, "executionTimeoutMs"?, "idempotencyKey"?,
-- "idempotencyScope"? (default: the queue), "idempotencyTtlMs"? (default 24 h), "traceContext"?
-- (the enqueuer's W3C trace context, stored with the job; not part of an idempotent repeat's
-- comparison), "dedupe"? (a throttle or debounce window, 032_dedup_windows.sql),
-- "concurrencyKey"? (1 to 256 characters; see perKey in 042_flow_control.sql)}. Jobs due now
-- are `ready`, later ones `scheduled`. One statement writes each table, and each queue that
-- gained ready work is notified once (delivered at commit).
CREATE FUNCTION workhorse.enqueue_many_v1(p_requests jsonb)
RETURNS TABLE (job_id uuid)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT b.job_id FROM workhorse.enqueue_batch(p_requests, NULL) AS b;
END
$$;

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
           CASE WHEN jsonb_typeof(x.e -> 'traceContext') = 'object' THEN x.e -> 'traceContext' END AS trace_context,
           x.e ->> 'concurrencyKey' AS concurrency_key
    FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
    -- Exact repeats of an idempotent enqueue write nothing; they return the existing job's id.
    WHERE NOT coalesce(v_replay[x.ord::integer], false)
  ),
  ins_job AS (
    INSERT INTO workhorse.job (id, queue, type, payload, priority, max_attempts, retry_policy, tags, run_at, created_at, seq,
                               deadline, execution_timeout_ms, trace_context, concurrency_key)
    SELECT id, queue, type, payload, priority, max_attempts, retry_policy, tags, run_at, v_now, seq,
           deadline, execution_timeout_ms, trace_context, concurrency_key
    FROM input
  ),
  ins_runtime AS (
    INSERT INTO workhorse.job_runtime (job_id, queue, priority, state, seq, run_at, max_attempts, deadline, execution_timeout_ms,
                                       concurrency_key)
    SELECT id, queue, priority, CASE WHEN blocked THEN 'blocked' WHEN run_at <= v_now THEN 'ready' ELSE 'scheduled' END,
           seq, run_at, max_attempts,
           deadline, execution_timeout_ms, concurrency_key
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
