-- Step 15 -> 16 (issue 34 item 1): per-key concurrency. An enqueue option concurrencyKey
-- (stored with the job: job.concurrency_key, copied to job_runtime) and a queue policy
-- perKey: {concurrency: n} (queue_policy.per_key_concurrency): at most n active jobs per key of
-- the queue, enforced by the claim (claim_per_key, 042_flow_control.sql). The policy's input
-- checks stay in set_queue_policy_v1 (same signature; perKey is a new field of its JSON).
-- * job_snapshot (get_job_v1, list_jobs_v1/v2, list_dead_letters_v1) ends with concurrency_key.
-- * list_queues_v3: list_queues_v2 with per_key_concurrency; v2 stays for the previous release.
-- * redrive_job (redrive_v1, redrive_many_v1) copies the key to the new job.
-- * complete_and_claim_v1 calls claim_per_key for a queue whose policy has a per-key limit; a
--   queue without one claims as before.
--
-- Locks: ADD COLUMN without a default on job, job_runtime and queue_policy (catalog changes
-- only); two partial indexes on job_runtime, built under a SHARE lock (writes to job_runtime
-- wait while the build reads the table; no row is in them yet).

ALTER TABLE workhorse.job ADD COLUMN concurrency_key text;
ALTER TABLE workhorse.job_runtime ADD COLUMN concurrency_key text;
ALTER TABLE workhorse.queue_policy
  ADD COLUMN per_key_concurrency integer CHECK (per_key_concurrency BETWEEN 1 AND 100000),
  ADD COLUMN key_cursor text,
  DROP CONSTRAINT queue_policy_limit_check,
  ADD CONSTRAINT queue_policy_any_limit_check
    CHECK (concurrency IS NOT NULL OR rate_limit IS NOT NULL OR per_key_concurrency IS NOT NULL);

CREATE INDEX job_runtime_key_ready_idx ON workhorse.job_runtime (queue, concurrency_key, priority DESC, seq)
  WHERE state = 'ready' AND concurrency_key IS NOT NULL;
CREATE INDEX job_runtime_key_active_idx ON workhorse.job_runtime (queue, concurrency_key)
  WHERE state = 'active' AND concurrency_key IS NOT NULL;

CREATE OR REPLACE VIEW workhorse.job_snapshot AS
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

DROP FUNCTION workhorse.queue_policy_json(text, integer, integer, integer);
CREATE FUNCTION workhorse.queue_policy_json(p_queue text, p_concurrency integer, p_rate_limit integer,
                                            p_rate_interval_ms integer, p_per_key_concurrency integer)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
    'queue', p_queue,
    'concurrency', p_concurrency,
    'rateLimit', CASE WHEN p_rate_limit IS NOT NULL
                      THEN jsonb_build_object('limit', p_rate_limit, 'intervalMs', p_rate_interval_ms) END,
    'perKey', CASE WHEN p_per_key_concurrency IS NOT NULL
                   THEN jsonb_build_object('concurrency', p_per_key_concurrency) END)
$$;
CREATE OR REPLACE FUNCTION workhorse.set_queue_policy_v1(p_queue text, p_policy jsonb, p_actor text DEFAULT NULL,
                                              p_reason text DEFAULT NULL)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
  v_concurrency integer;
  v_rate jsonb;
  v_limit integer;
  v_interval integer;
  v_per_key jsonb;
  v_per_key_n integer;
  v_changed integer;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_queue), 'queue');
  PERFORM workhorse.check_actor(p_actor, p_reason);
  IF p_policy IS NOT NULL AND p_policy <> 'null'::jsonb THEN
    IF jsonb_typeof(p_policy) <> 'object' THEN
      PERFORM workhorse.raise_invalid('policy', 'must be an object {"concurrency"?, "rateLimit"?, "perKey"?} or null');
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(p_policy) LOOP
      IF v_key NOT IN ('concurrency', 'rateLimit', 'perKey') THEN
        PERFORM workhorse.raise_invalid(v_key, 'is not a queue policy field (concurrency, rateLimit, perKey)');
      END IF;
    END LOOP;
    IF p_policy -> 'concurrency' <> 'null'::jsonb THEN
      v_concurrency := workhorse.check_int(p_policy -> 'concurrency', 'concurrency', 1, 100000);
    END IF;
    v_rate := p_policy -> 'rateLimit';
    IF v_rate <> 'null'::jsonb THEN
      IF jsonb_typeof(v_rate) <> 'object' THEN
        PERFORM workhorse.raise_invalid('rateLimit', 'must be an object {"limit", "intervalMs"} or null');
      END IF;
      FOR v_key IN SELECT jsonb_object_keys(v_rate) LOOP
        IF v_key NOT IN ('limit', 'intervalMs') THEN
          PERFORM workhorse.raise_invalid('rateLimit.' || v_key, 'is not a rate limit field (limit, intervalMs)');
        END IF;
      END LOOP;
      v_limit := workhorse.check_int(v_rate -> 'limit', 'rateLimit.limit', 1, 100000);
      v_interval := workhorse.check_int(v_rate -> 'intervalMs', 'rateLimit.intervalMs', 1, 86400000);
    END IF;
    v_per_key := p_policy -> 'perKey';
    IF v_per_key <> 'null'::jsonb THEN
      IF jsonb_typeof(v_per_key) <> 'object' THEN
        PERFORM workhorse.raise_invalid('perKey', 'must be an object {"concurrency"} or null');
      END IF;
      FOR v_key IN SELECT jsonb_object_keys(v_per_key) LOOP
        IF v_key NOT IN ('concurrency') THEN
          PERFORM workhorse.raise_invalid('perKey.' || v_key, 'is not a per-key limit field (concurrency)');
        END IF;
      END LOOP;
      v_per_key_n := workhorse.check_int(v_per_key -> 'concurrency', 'perKey.concurrency', 1, 100000);
    END IF;
  END IF;

  IF v_concurrency IS NULL AND v_limit IS NULL AND v_per_key_n IS NULL THEN
    DELETE FROM workhorse.queue_policy WHERE queue = p_queue;
    GET DIAGNOSTICS v_changed = ROW_COUNT;
  ELSE
    INSERT INTO workhorse.queue_policy AS p
      (queue, concurrency, rate_limit, rate_interval_ms, per_key_concurrency, changed_at, changed_by, reason, login_role)
    VALUES (p_queue, v_concurrency, v_limit, v_interval, v_per_key_n, clock_timestamp(), p_actor, p_reason, session_user)
    ON CONFLICT (queue) DO UPDATE
      SET concurrency = EXCLUDED.concurrency, rate_limit = EXCLUDED.rate_limit,
          rate_interval_ms = EXCLUDED.rate_interval_ms, per_key_concurrency = EXCLUDED.per_key_concurrency,
          window_at = CASE WHEN EXCLUDED.rate_limit IS NULL THEN '{}' ELSE p.window_at END,
          window_n = CASE WHEN EXCLUDED.rate_limit IS NULL THEN '{}' ELSE p.window_n END,
          changed_at = EXCLUDED.changed_at, changed_by = EXCLUDED.changed_by, reason = EXCLUDED.reason,
          login_role = EXCLUDED.login_role
      -- Setting the policy a queue has changes nothing (an application setting it at each start).
      WHERE (p.concurrency, p.rate_limit, p.rate_interval_ms, p.per_key_concurrency)
            IS DISTINCT FROM (EXCLUDED.concurrency, EXCLUDED.rate_limit, EXCLUDED.rate_interval_ms, EXCLUDED.per_key_concurrency);
    GET DIAGNOSTICS v_changed = ROW_COUNT;
  END IF;
  IF v_changed > 0 THEN
    PERFORM workhorse.record_operator_change('queue_policy_set', p_queue, p_actor, p_reason,
                                             workhorse.queue_policy_json(p_queue, v_concurrency, v_limit, v_interval, v_per_key_n));
  END IF;
  PERFORM pg_notify('workhorse_jobs', p_queue);
  RETURN workhorse.queue_policy_json(p_queue, v_concurrency, v_limit, v_interval, v_per_key_n);
END
$$;
CREATE FUNCTION workhorse.claim_per_key(p_queue text, p_limit integer, p_now timestamptz)
RETURNS TABLE (ids uuid[], before uuid[])
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_n integer;
  v_cursor text;
  v_start text;
  v_key text;
  v_wrapped boolean := false;
  v_free integer;
  v_picked uuid[];
  v_picked_before uuid[];
  v_last text;
  v_visits integer := 0;
BEGIN
  ids := '{}';
  before := '{}';
  SELECT p.per_key_concurrency, p.key_cursor INTO v_n, v_cursor FROM workhorse.queue_policy p WHERE p.queue = p_queue;
  IF v_n IS NULL OR EXISTS (SELECT 1 FROM workhorse.queue_control qc WHERE qc.queue = p_queue AND qc.paused) THEN
    RETURN NEXT;
    RETURN;
  END IF;
  -- Jobs without a key: among the queue's first p_limit + 100 ready jobs in claim order (a
  -- bounded look, so a large keyed backlog ahead of them is never walked; docs/decisions.md).
  SELECT coalesce(array_agg(x.job_id), '{}'), coalesce(array_agg(x.job_id) FILTER (WHERE x.fence_token IS NOT NULL), '{}')
    INTO ids, before
  FROM (
    SELECT r.job_id, r.fence_token
    FROM workhorse.job_runtime r
    WHERE r.job_id IN (SELECT h.job_id
                       FROM (SELECT q.job_id, q.concurrency_key FROM workhorse.job_runtime q
                             WHERE q.state = 'ready' AND q.queue = p_queue
                             ORDER BY q.priority DESC, q.seq
                             LIMIT p_limit + 100) AS h
                       WHERE h.concurrency_key IS NULL)
      AND r.state = 'ready' AND r.concurrency_key IS NULL AND (r.deadline IS NULL OR r.deadline > p_now)
    ORDER BY r.priority DESC, r.seq
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED) AS x;
  v_start := coalesce(v_cursor, '');
  v_key := v_start;
  -- One descent of job_runtime_key_ready_idx per key visited; at most p_limit + 1000 keys a claim.
  WHILE cardinality(ids) < p_limit AND v_visits < p_limit + 1000 LOOP
    v_key := (SELECT min(r.concurrency_key) FROM workhorse.job_runtime r
              WHERE r.state = 'ready' AND r.queue = p_queue AND r.concurrency_key IS NOT NULL
                AND r.concurrency_key > v_key
                AND (NOT v_wrapped OR r.concurrency_key <= v_start));
    IF v_key IS NULL THEN
      EXIT WHEN v_wrapped OR v_start = '';
      v_wrapped := true;
      v_key := '';
      CONTINUE;
    END IF;
    v_visits := v_visits + 1;
    -- The cursor moves past every key visited, so a claim that stops at its bound of visits
    -- (behind many saturated keys) lets the next one go on from there.
    v_last := v_key;
    v_free := v_n - (SELECT count(*) FROM (
                       SELECT 1 FROM workhorse.job_runtime r
                       WHERE r.state = 'active' AND r.queue = p_queue AND r.concurrency_key = v_key
                       LIMIT v_n) AS a)::integer;
    CONTINUE WHEN v_free <= 0;
    SELECT coalesce(array_agg(x.job_id), '{}'), coalesce(array_agg(x.job_id) FILTER (WHERE x.fence_token IS NOT NULL), '{}')
      INTO v_picked, v_picked_before
    FROM (
      SELECT r.job_id, r.fence_token
      FROM workhorse.job_runtime r
      WHERE r.state = 'ready' AND r.queue = p_queue AND r.concurrency_key = v_key
        AND (r.deadline IS NULL OR r.deadline > p_now)
      ORDER BY r.priority DESC, r.seq
      LIMIT least(v_free, p_limit - cardinality(ids))
      FOR UPDATE SKIP LOCKED) AS x;
    ids := ids || v_picked;
    before := before || v_picked_before;
  END LOOP;
  IF v_last IS DISTINCT FROM v_cursor AND v_last IS NOT NULL THEN
    UPDATE workhorse.queue_policy p SET key_cursor = v_last WHERE p.queue = p_queue;
  END IF;
  RETURN NEXT;
END
$$;
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
CREATE OR REPLACE FUNCTION workhorse.enqueue_batch(p_requests jsonb, p_parent_id uuid)
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
-- A redriven copy keeps the dead letter's concurrency key.
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

-- As sql/990_privileges.sql does at installation: internal helpers are nobody's but the owner's;
-- protocol functions get their capability and are SECURITY DEFINER with a pinned search_path (a
-- replaced function is set so again).
INSERT INTO workhorse.protocol_function (name, capabilities) VALUES
  ('list_queues_v3', '{operator}');
REVOKE ALL ON FUNCTION workhorse.queue_policy_json(text, integer, integer, integer, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.claim_per_key(text, integer, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.list_queues_v3() FROM PUBLIC;
ALTER FUNCTION workhorse.set_queue_policy_v1(text, jsonb, text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.complete_and_claim_v1(text, jsonb, text[], integer, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.list_queues_v3() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Roles granted before this step may call the new function at once.
SELECT workhorse.regrant_capabilities();
