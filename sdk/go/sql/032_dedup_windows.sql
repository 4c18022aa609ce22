-- Deduplication windows: enqueue's `dedupe` option, {"key", "windowMs", "mode", "replace"?}.
-- For one (queue, type, mode, key):
-- * throttle: the first enqueue of a window makes the job and opens the window (windowMs long);
--   every later enqueue inside it writes nothing and answers that job (`throttled`).
-- * debounce: the first enqueue makes a job that runs once the window has passed; while that job
--   has not started (scheduled or ready, never attempted), a later enqueue replaces its payload
--   and/or pushes its run time to now + windowMs (`replace`: payload, runAt or both, default
--   both) and answers it (`debounced`): the last call wins and the job runs once.
-- Unlike an idempotency key (030_enqueue.sql: the same request gives the same job as long as
-- the key lives, a different one is refused), a dedupe key compares nothing: it only says which
-- enqueues share a job. Enqueues of one key serialise on its enqueue_dedupe row (the second
-- waits for the first to commit or roll back), so across every process a window has one job.
-- A request without `dedupe` never reaches this file (enqueue_batch tests the batch once).

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
