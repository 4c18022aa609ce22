-- Handler policies: what the server needs to know about a worker's handlers to close attempts
-- the way a worker would.

-- Registers the retry policies of a worker's handlers for the queues it claims from, so that the
-- attempts the server closes itself (execution timeouts and expired leases, which no worker
-- reports) follow the handler's policy as the failures a worker reports do. A worker calls it
-- when it starts. p_handlers: [{"type": name, "retryPolicy": policy or null}], null (or no key)
-- for a handler without a policy of its own. Each (queue, type) keeps the last registration,
-- whichever worker made it (see docs/decisions.md). Returns how many (queue, type) rows it wrote.
CREATE FUNCTION workhorse.register_handlers_v1(p_worker_id text, p_queues text[], p_handlers jsonb)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_item jsonb;
  v_key text;
  v_i integer := 0;
  v_types text[] := '{}';
  v_policies jsonb[] := '{}';
  v_count integer;
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  IF p_queues IS NULL OR cardinality(p_queues) = 0 OR cardinality(p_queues) > 100 THEN
    PERFORM workhorse.raise_invalid('queues', 'must list 1 to 100 queue names');
  END IF;
  FOR v_i IN 1 .. cardinality(p_queues) LOOP
    PERFORM workhorse.check_name(to_jsonb(p_queues[v_i]), format('queues[%s]', v_i - 1));
  END LOOP;
  IF jsonb_typeof(p_handlers) IS DISTINCT FROM 'array' OR jsonb_array_length(p_handlers) > 1000 THEN
    PERFORM workhorse.raise_invalid('handlers', 'must be an array of at most 1000 {"type", "retryPolicy"} objects');
  END IF;
  v_i := 0;
  FOR v_item IN SELECT value FROM jsonb_array_elements(p_handlers) LOOP
    IF jsonb_typeof(v_item) IS DISTINCT FROM 'object' THEN
      PERFORM workhorse.raise_invalid(format('handlers[%s]', v_i), 'must be an object {"type", "retryPolicy"}');
    END IF;
    FOR v_key IN SELECT jsonb_object_keys(v_item) LOOP
      IF v_key NOT IN ('type', 'retryPolicy') THEN
        PERFORM workhorse.raise_invalid(format('handlers[%s].%s', v_i, v_key), 'is not a handler field (type, retryPolicy)');
      END IF;
    END LOOP;
    v_types := v_types || workhorse.check_name(v_item -> 'type', format('handlers[%s].type', v_i));
    v_policies := v_policies || CASE WHEN v_item -> 'retryPolicy' IS NOT NULL AND v_item -> 'retryPolicy' <> 'null'::jsonb
      THEN workhorse.normalize_retry_policy(v_item -> 'retryPolicy', format('handlers[%s].retryPolicy', v_i)) END;
    v_i := v_i + 1;
  END LOOP;
  IF cardinality(v_types) <> (SELECT count(DISTINCT t) FROM unnest(v_types) AS t) THEN
    PERFORM workhorse.raise_invalid('handlers', 'names the same type more than once');
  END IF;
  -- Rows are written in key order, so two workers registering at once lock them in the same
  -- order and never deadlock.
  INSERT INTO workhorse.handler_policy AS p (queue, type, retry_policy, worker_id, registered_at)
  SELECT q.queue, h.type, h.policy, p_worker_id, v_now
  FROM (SELECT DISTINCT unnest(p_queues) AS queue) AS q
  CROSS JOIN unnest(v_types, v_policies) AS h (type, policy)
  ORDER BY q.queue, h.type
  ON CONFLICT (queue, type) DO UPDATE
    SET retry_policy = EXCLUDED.retry_policy, worker_id = EXCLUDED.worker_id, registered_at = EXCLUDED.registered_at;
  GET DIAGNOSTICS v_count = ROW_COUNT;
  RETURN v_count;
END
$$;
