-- Orchestration: dependencies (fan-in) and child jobs. Both park a job in `blocked` until other
-- jobs end, with one mechanism: an edge per (prerequisite, dependent) in job_dependency and a
-- count of the dependent's live prerequisites in its runtime row (`blockers`). Every terminal
-- transition goes through finish_job (or, on the worker's hot path, complete_and_claim_v1),
-- and both hand the jobs they ended to settle_dependents, in the same transaction: it counts
-- them off their dependents and moves each dependent whose count reached zero on.
--
-- Lock order: a job's runtime row is always locked before the rows of the jobs that wait on it
-- (prerequisite before dependent, child before parent). A prerequisite's end locks its dependents
-- in id order; cancel_v1 locks a parent's live descendants, deepest first, before the parent.

-- Blocked jobs only: how many of the jobs this one waits on are still live. Null otherwise.
ALTER TABLE workhorse.job_runtime ADD COLUMN blockers integer;

-- (Per-key concurrency, 042_flow_control.sql; added here, after `blockers`, in the order an
-- upgrade adds the columns.) The job's concurrency key, copied from `job` (never changes), so
-- the claim never joins it; and a key's ready jobs in claim order and its active jobs to count.
-- Only jobs with a key are in these indexes, so a job without one writes neither.
ALTER TABLE workhorse.job_runtime ADD COLUMN concurrency_key text;
CREATE INDEX job_runtime_key_ready_idx ON workhorse.job_runtime (queue, concurrency_key, priority DESC, seq)
  WHERE state = 'ready' AND concurrency_key IS NOT NULL;
CREATE INDEX job_runtime_key_active_idx ON workhorse.job_runtime (queue, concurrency_key)
  WHERE state = 'active' AND concurrency_key IS NOT NULL;

-- One row per (prerequisite, dependent): written when the dependent is enqueued (kind
-- `dependency`, with its policies) or when a parent starts a child (kind `child`). Never
-- changed; the lineage and ctx.dependencies() read it.
CREATE TABLE workhorse.job_dependency (
  prerequisite_id uuid NOT NULL,
  dependent_id uuid NOT NULL,
  kind text NOT NULL CHECK (kind IN ('dependency', 'child')),
  -- What the dependent does when this prerequisite ends `failed` / `canceled` (kind `dependency`).
  on_failed text CHECK (on_failed IN ('fail', 'cancel', 'run')),
  on_canceled text CHECK (on_canceled IN ('fail', 'cancel', 'run')),
  -- The order of the prerequisite in the dependent's dependsOn, or of the child in its call.
  ordinal integer NOT NULL,
  PRIMARY KEY (prerequisite_id, dependent_id)
);
CREATE INDEX job_dependency_dependent_idx ON workhorse.job_dependency (dependent_id, kind, ordinal);

-- The children a parent started under a key (ctx.runChild / ctx.runChildren): a replay of the
-- handler finds them here instead of starting them again. `request` is what was asked for, to
-- tell a replay from a different call under the same key.
CREATE TABLE workhorse.job_child_call (
  parent_id uuid NOT NULL REFERENCES workhorse.job (id),
  key text NOT NULL,
  request jsonb NOT NULL,
  child_ids uuid[] NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (parent_id, key)
);

-- The dependency options of one enqueue request (dependsOn, onDependencyFailed,
-- onDependencyCanceled), checked without reading any table. A dependsOn entry is a job id, or in
-- a batch the index of an earlier request of the same batch.
CREATE FUNCTION workhorse.validate_dependency_options(p_req jsonb, p_path text, p_index integer)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
  v_entry jsonb;
  v_i integer := 0;
BEGIN
  FOREACH v_key IN ARRAY ARRAY['onDependencyFailed', 'onDependencyCanceled'] LOOP
    IF p_req ? v_key THEN
      IF NOT p_req ? 'dependsOn' THEN
        PERFORM workhorse.raise_invalid(p_path || '.' || v_key, 'needs dependsOn');
      END IF;
      IF jsonb_typeof(p_req -> v_key) IS DISTINCT FROM 'string' OR p_req ->> v_key NOT IN ('fail', 'cancel', 'run') THEN
        PERFORM workhorse.raise_invalid(p_path || '.' || v_key, 'must be "fail", "cancel" or "run"');
      END IF;
    END IF;
  END LOOP;
  IF NOT p_req ? 'dependsOn' THEN
    RETURN;
  END IF;
  IF jsonb_typeof(p_req -> 'dependsOn') IS DISTINCT FROM 'array'
     OR jsonb_array_length(p_req -> 'dependsOn') NOT BETWEEN 1 AND 1000 THEN
    PERFORM workhorse.raise_invalid(p_path || '.dependsOn', 'must be an array of 1 to 1000 job ids');
  END IF;
  FOR v_entry IN SELECT value FROM jsonb_array_elements(p_req -> 'dependsOn') LOOP
    IF jsonb_typeof(v_entry) = 'number' THEN
      IF v_entry::text !~ '^\d+$' OR v_entry::text::numeric >= p_index THEN
        PERFORM workhorse.raise_invalid(format('%s.dependsOn[%s]', p_path, v_i),
          format('must name a job id, or the index of an earlier request of the batch (0 to %s)', p_index - 1));
      END IF;
    ELSE
      PERFORM workhorse.check_uuid(v_entry, format('%s.dependsOn[%s]', p_path, v_i));
    END IF;
    v_i := v_i + 1;
  END LOOP;
  -- The first entry that repeats an earlier one.
  SELECT format('%s.dependsOn[%s]', p_path, d.ord - 1) INTO v_key
  FROM (SELECT x.ord, row_number() OVER (PARTITION BY lower(x.v #>> '{}') ORDER BY x.ord) AS k
        FROM jsonb_array_elements(p_req -> 'dependsOn') WITH ORDINALITY AS x (v, ord)) AS d
  WHERE d.k > 1
  ORDER BY d.ord
  LIMIT 1;
  IF v_key IS NOT NULL THEN
    PERFORM workhorse.raise_invalid(v_key, 'names a job that dependsOn already names');
  END IF;
END
$$;

-- The dependency edges of a batch as [{"p": prerequisite, "d": dependent, "f": on failed,
-- "c": on canceled, "o": ordinal}], with batch indexes resolved to the batch's ids. Refuses
-- (P1020) a prerequisite that is no job this transaction can see, before anything is written;
-- locks the ones it found.
CREATE FUNCTION workhorse.batch_dependencies(p_requests jsonb, p_ids uuid[], p_replay boolean[])
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_edges jsonb;
  v_missing record;
BEGIN
  SELECT jsonb_agg(jsonb_build_object(
           'p', CASE WHEN jsonb_typeof(d.v) = 'number' THEN p_ids[(d.v::text)::integer + 1]::text ELSE lower(d.v #>> '{}') END,
           'd', p_ids[x.ord], 'f', coalesce(x.e ->> 'onDependencyFailed', 'fail'),
           'c', coalesce(x.e ->> 'onDependencyCanceled', 'cancel'), 'o', d.ord - 1,
           'field', format('requests[%s].dependsOn[%s]', x.ord - 1, d.ord - 1)))
    INTO v_edges
  FROM jsonb_array_elements(p_requests) WITH ORDINALITY AS x (e, ord)
  CROSS JOIN LATERAL jsonb_array_elements(x.e -> 'dependsOn') WITH ORDINALITY AS d (v, ord)
  WHERE x.e ? 'dependsOn' AND NOT coalesce(p_replay[x.ord::integer], false);
  -- The earlier jobs named are locked (FOR KEY SHARE of their rows) until the caller commits:
  -- retention, which locks a job's row FOR UPDATE SKIP LOCKED before removing it, leaves them
  -- be, and finds the edges once they committed. One it removed meanwhile is found missing below.
  PERFORM 1 FROM workhorse.job j
  WHERE j.id IN (SELECT (b ->> 'p')::uuid FROM jsonb_array_elements(v_edges) AS b) AND j.id <> ALL (p_ids)
  ORDER BY j.id FOR KEY SHARE;
  SELECT b ->> 'field' AS field, b ->> 'p' AS id INTO v_missing
  FROM jsonb_array_elements(v_edges) AS b
  WHERE NOT (b ->> 'p')::uuid = ANY (p_ids)
    AND NOT EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = (b ->> 'p')::uuid)
  LIMIT 1;
  IF FOUND THEN
    RAISE EXCEPTION USING ERRCODE = 'P1020', COLUMN = v_missing.field,
      MESSAGE = format('%s: no job has the id %s', v_missing.field, v_missing.id),
      DETAIL = jsonb_build_object('jobId', v_missing.id)::text;
  END IF;
  RETURN coalesce(v_edges, '[]'::jsonb);
END
$$;

-- Writes the edges of jobs just enqueued `blocked` and sets each one's count of live
-- prerequisites. The live prerequisites are locked (FOR SHARE) until the caller commits, so none
-- can end unseen: its end waits for this transaction and then finds the edge. A dependent none
-- of whose prerequisites is live settles at once, by its policies.
CREATE FUNCTION workhorse.link_dependencies(p_edges jsonb, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_ready uuid[];
  v_ended uuid[];
BEGIN
  INSERT INTO workhorse.job_dependency (prerequisite_id, dependent_id, kind, on_failed, on_canceled, ordinal)
  SELECT (e ->> 'p')::uuid, (e ->> 'd')::uuid, 'dependency', e ->> 'f', e ->> 'c', (e ->> 'o')::integer
  FROM jsonb_array_elements(p_edges) AS e;
  PERFORM 1 FROM workhorse.job_runtime r
  WHERE r.job_id IN (SELECT (e ->> 'p')::uuid FROM jsonb_array_elements(p_edges) AS e)
  ORDER BY r.job_id FOR SHARE;
  WITH counted AS (
    SELECT (e ->> 'd')::uuid AS dependent_id,
           count(*) FILTER (WHERE EXISTS (SELECT 1 FROM workhorse.job_runtime r WHERE r.job_id = (e ->> 'p')::uuid)) AS live
    FROM jsonb_array_elements(p_edges) AS e
    GROUP BY 1
  ),
  set_count AS (
    UPDATE workhorse.job_runtime r SET blockers = c.live FROM counted c WHERE r.job_id = c.dependent_id
    RETURNING r.job_id, r.blockers
  )
  SELECT array_agg(s.job_id ORDER BY s.job_id) INTO v_ready FROM set_count s WHERE s.blockers = 0;
  IF v_ready IS NOT NULL THEN
    v_ended := workhorse.settle_blocked(v_ready, p_now);
    IF cardinality(v_ended) > 0 THEN
      PERFORM workhorse.settle_dependents(v_ended, p_now);
    END IF;
  END IF;
END
$$;

-- Moves on blocked jobs whose count of live prerequisites reached zero (their rows locked by
-- the caller). A parked parent becomes `ready` to replay its attempt; a job enqueued with
-- dependsOn becomes `ready` or `scheduled` (its runAt), or ends by its policies: `failed` with a
-- DependencyFailed error or `canceled` with a DependencyCanceled one when a prerequisite failed or
-- was canceled under policy `fail` / `cancel` (`fail` first, then `cancel`; earliest prerequisite
-- in dependsOn order). Returns the jobs it ended, whose own dependents the caller settles next.
CREATE FUNCTION workhorse.settle_blocked(p_ids uuid[], p_now timestamptz)
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

-- Counts jobs that just ended off the jobs waiting on them, and settles every dependent whose
-- count reached zero; jobs those settle ended (by policy) are counted off in turn, in a loop
-- rather than by recursion, so a chain of any length resolves in this transaction. The
-- dependents are locked in id order before any is changed, so two transactions ending
-- prerequisites of the same dependents at once wait for each other instead of deadlocking, and
-- each sees the other's count: the one that brings a count to zero settles the dependent.
CREATE FUNCTION workhorse.settle_dependents(p_ended uuid[], p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_ended uuid[] := p_ended;
  v_zero uuid[];
BEGIN
  WHILE cardinality(v_ended) > 0 LOOP
    PERFORM 1 FROM workhorse.job_runtime r
    WHERE r.job_id IN (SELECT e.dependent_id FROM workhorse.job_dependency e WHERE e.prerequisite_id = ANY (v_ended))
      AND r.state = 'blocked'
    ORDER BY r.job_id FOR UPDATE;
    WITH counted AS (
      SELECT e.dependent_id, count(*) AS n FROM workhorse.job_dependency e
      WHERE e.prerequisite_id = ANY (v_ended) GROUP BY e.dependent_id
    ),
    lowered AS (
      UPDATE workhorse.job_runtime r SET blockers = r.blockers - c.n
        FROM counted c
       WHERE r.job_id = c.dependent_id AND r.state = 'blocked'
      RETURNING r.job_id, r.blockers
    )
    SELECT array_agg(l.job_id ORDER BY l.job_id) INTO v_zero FROM lowered l WHERE l.blockers = 0;
    EXIT WHEN v_zero IS NULL;
    v_ended := workhorse.settle_blocked(v_zero, p_now);
  END LOOP;
END
$$;

-- Ends the live children of a parent that ended: a running child is asked to cancel (its worker
-- stops it on its next heartbeat), any other ends `canceled` at once (and its own children in
-- turn).
CREATE FUNCTION workhorse.cancel_children(p_parent_id uuid, p_now timestamptz)
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

-- Locks the live descendants of a job (children, their children...), deepest first, so that
-- cancelling it takes the locks in the order every child's own end takes them (child before
-- parent). One index probe for a job without children.
CREATE FUNCTION workhorse.lock_descendants(p_job_id uuid)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM workhorse.job_dependency e WHERE e.dependent_id = p_job_id AND e.kind = 'child') THEN
    RETURN;
  END IF;
  PERFORM 1 FROM workhorse.job_runtime r
  JOIN (WITH RECURSIVE tree (job_id, depth) AS (
          SELECT e.prerequisite_id, 1 FROM workhorse.job_dependency e WHERE e.dependent_id = p_job_id AND e.kind = 'child'
          UNION
          SELECT e.prerequisite_id, t.depth + 1 FROM tree t
          JOIN workhorse.job_dependency e ON e.dependent_id = t.job_id AND e.kind = 'child'
          WHERE t.depth < 100)
        SELECT t.job_id, max(t.depth) AS depth FROM tree t GROUP BY t.job_id) AS d ON d.job_id = r.job_id
  ORDER BY d.depth DESC, r.job_id
  FOR UPDATE OF r;
END
$$;

-- As lock_descendants, without waiting: locks the live descendants of a job that no other
-- transaction holds, and answers whether it got all of them (true for a job without children).
-- For maintenance, which holds many rows: a job one of whose descendants is ending now (that
-- transaction locks the parent next) is left for a later pass rather than waited for.
CREATE FUNCTION workhorse.try_lock_descendants(p_job_id uuid)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_tree uuid[];
  v_live integer;
  v_locked integer;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM workhorse.job_dependency e WHERE e.dependent_id = p_job_id AND e.kind = 'child') THEN
    RETURN true;
  END IF;
  v_tree := ARRAY(WITH RECURSIVE tree (job_id, depth) AS (
                    SELECT e.prerequisite_id, 1 FROM workhorse.job_dependency e WHERE e.dependent_id = p_job_id AND e.kind = 'child'
                    UNION
                    SELECT e.prerequisite_id, t.depth + 1 FROM tree t
                    JOIN workhorse.job_dependency e ON e.dependent_id = t.job_id AND e.kind = 'child'
                    WHERE t.depth < 100)
                  SELECT DISTINCT t.job_id FROM tree t);
  SELECT count(*) INTO v_live FROM workhorse.job_runtime r WHERE r.job_id = ANY (v_tree);
  SELECT count(*) INTO v_locked
  FROM (SELECT 1 FROM workhorse.job_runtime r WHERE r.job_id = ANY (v_tree) ORDER BY r.job_id FOR UPDATE SKIP LOCKED) AS l;
  RETURN v_locked = v_live;
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
CREATE FUNCTION workhorse.run_children_v1(p_job_id uuid, p_worker_id text, p_fence bigint, p_key text, p_requests jsonb)
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

-- The child requests of a run_children_v1 call carry no dependency options (P1001 naming the
-- first): a child that waited for other jobs could wait for its parent or an ancestor, and
-- parent and child would wait for each other forever. Checked before anything is written.
CREATE FUNCTION workhorse.check_child_requests(p_requests jsonb)
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

-- A job starts at most 10000 children over all its run_children_v1 calls (P1001 otherwise).
CREATE FUNCTION workhorse.check_children_count(p_parent_id uuid, p_more integer)
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

-- The children a call resolved are neither the parent itself nor a job that waits for it (an
-- ancestor, or a dependent of either): such a child would make parent and child wait for each
-- other. Only a child found by its idempotency key can be an existing job, so only calls with
-- keys look (P1001 naming the request; the raise undoes the enqueue).
CREATE FUNCTION workhorse.check_child_ids(p_parent_id uuid, p_ids uuid[], p_requests jsonb)
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

-- The prerequisites of a job (dependsOn order) with their state and, once ended, result or
-- error: what ctx.dependencies() gives a handler. Only for the job's holder: the caller's worker
-- id and fence must own the job under a live lease (workhorse.owns), or the call is refused
-- (P1040) and reads nothing. Operators read a job's links with job_links_v1.
CREATE FUNCTION workhorse.dependencies_v2(p_job_id uuid, p_worker_id text, p_fence bigint)
RETURNS TABLE (job_id uuid, state text, result jsonb, error jsonb)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM workhorse.job_runtime r
                 WHERE r.job_id = p_job_id AND workhorse.owns(r, p_worker_id, p_fence, clock_timestamp())) THEN
    PERFORM workhorse.raise_not_yours('jobId',
      format('job %s is not held by worker %s under fence %s: a worker reads only the dependencies of a job it holds', p_job_id, p_worker_id, p_fence));
  END IF;
  RETURN QUERY
  SELECT e.prerequisite_id, coalesce(r.state, o.state), o.result, o.error
  FROM workhorse.job_dependency e
  LEFT JOIN workhorse.job_runtime r ON r.job_id = e.prerequisite_id
  LEFT JOIN workhorse.job_outcome o ON o.job_id = e.prerequisite_id
  WHERE e.dependent_id = p_job_id AND e.kind = 'dependency'
  ORDER BY e.ordinal;
END
$$;

-- The previous release's ctx.dependencies(), kept for rolling deploys (docs/protocol.md) and
-- restricted: it names no worker, so it answers only for a job that is active under a live lease
-- (one a worker holds now) and refuses any other (P1040). Retired with the previous release.
CREATE FUNCTION workhorse.dependencies_v1(p_job_id uuid)
RETURNS TABLE (job_id uuid, state text, result jsonb, error jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  r workhorse.job_runtime;
BEGIN
  SELECT * INTO r FROM workhorse.job_runtime x WHERE x.job_id = p_job_id;
  IF NOT FOUND OR NOT workhorse.owns(r, r.worker_id, r.fence_token, clock_timestamp()) THEN
    PERFORM workhorse.raise_not_yours('jobId',
      format('job %s is not held by a worker under a live lease: a worker reads only the dependencies of a job it holds', p_job_id));
  END IF;
  RETURN QUERY SELECT d.job_id, d.state, d.result, d.error FROM workhorse.dependencies_v2(p_job_id, r.worker_id, r.fence_token) d;
END
$$;

-- A job's lineage for operators: its prerequisites (`dependency`), its parent (`parent`) and its
-- children (`child`), each with its current state and, for a child, the key it was started
-- under.
CREATE FUNCTION workhorse.job_links_v1(p_job_id uuid)
RETURNS TABLE (relation text, job_id uuid, state text, key text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT l.relation, l.job_id, coalesce(r.state, o.state), l.key
  FROM (
    SELECT 'dependency'::text AS relation, e.prerequisite_id AS job_id, NULL::text AS key, 0 AS grp, e.ordinal, NULL::timestamptz AS at
    FROM workhorse.job_dependency e WHERE e.dependent_id = p_job_id AND e.kind = 'dependency'
    UNION ALL
    SELECT 'parent', e.dependent_id, NULL, 1, 0, NULL
    FROM workhorse.job_dependency e WHERE e.prerequisite_id = p_job_id AND e.kind = 'child'
    UNION ALL
    SELECT 'child', u.id, c.key, 2, u.ord::integer, c.created_at
    FROM workhorse.job_child_call c CROSS JOIN LATERAL unnest(c.child_ids) WITH ORDINALITY AS u (id, ord)
    WHERE c.parent_id = p_job_id
  ) AS l
  LEFT JOIN workhorse.job_runtime r ON r.job_id = l.job_id
  LEFT JOIN workhorse.job_outcome o ON o.job_id = l.job_id
  ORDER BY l.grp, l.at, l.key, l.ordinal;
END
$$;

-- The children of a job, in the order they were started (admin.listJobs({ parentId })).
-- `ordinal` numbers them from 1 (a listing's cursor).
CREATE FUNCTION workhorse.list_children_v1(p_parent_id uuid)
RETURNS TABLE (job_id uuid, ordinal bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT x.id, row_number() OVER (ORDER BY x.created_at, x.key, x.ord)
  FROM (SELECT u.id, c.created_at, c.key, u.ord
        FROM workhorse.job_child_call c CROSS JOIN LATERAL unnest(c.child_ids) WITH ORDINALITY AS u (id, ord)
        WHERE c.parent_id = p_parent_id) AS x
  ORDER BY 2;
END
$$;

-- The children of a job in the order they were started, as snapshots, filtered by queue, type,
-- states and creation time, a page at a time (admin.listJobs({ parentId })): p_cursor is the
-- next_cursor of the previous page (NULL for the first), refused with P1001 naming `cursor` when
-- this listing did not make it. Returns the children (next_cursor NULL), then, when another one
-- follows, one row whose columns are all NULL but next_cursor.
CREATE FUNCTION workhorse.list_children_v2(
  p_parent_id uuid, p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_states text[] DEFAULT NULL,
  p_created_after timestamptz DEFAULT NULL, p_created_before timestamptz DEFAULT NULL,
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
  v_after bigint := coalesce(workhorse.cursor_bigint('children', p_cursor), 0);
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  PERFORM workhorse.check_filter_name(p_queue, 'queue');
  PERFORM workhorse.check_filter_name(p_type, 'type');
  PERFORM workhorse.check_time(p_created_after, 'createdAfter');
  PERFORM workhorse.check_time(p_created_before, 'createdBefore');
  RETURN QUERY
  WITH page AS MATERIALIZED (
    SELECT s.*, c.ordinal AS position
    FROM workhorse.list_children_v1(p_parent_id) c CROSS JOIN LATERAL workhorse.get_job_v1(c.job_id) s
    WHERE c.ordinal > v_after AND (p_queue IS NULL OR s.queue = p_queue) AND (p_type IS NULL OR s.type = p_type)
      AND (p_states IS NULL OR s.state = ANY (p_states)) AND (p_created_after IS NULL OR s.created_at >= p_created_after)
      AND (p_created_before IS NULL OR s.created_at < p_created_before)
    ORDER BY c.ordinal
    LIMIT p_limit + 1
  ),
  numbered AS (SELECT p.*, row_number() OVER (ORDER BY p.position) AS n FROM page p),
  more AS (
    SELECT workhorse.make_cursor('children', x.position::text) AS next_cursor
    FROM numbered x
    WHERE x.n = p_limit AND EXISTS (SELECT 1 FROM numbered y WHERE y.n = p_limit + 1)
  )
  SELECT x.id, x.queue, x.type, x.payload, x.priority, x.max_attempts, x.retry_policy, x.tags,
         x.state, x.current_attempt, x.run_at, x.created_at, x.finished_at, x.result, x.error,
         x.worker_id, x.lease_expires_at, x.cancel_requested_at, x.progress, x.redriven_from,
         x.redriven_to, x.seq, x.deadline, x.execution_timeout_ms, x.next_cursor
  FROM (
    SELECT n.*, NULL::text AS next_cursor FROM numbered n WHERE n.n <= p_limit
    UNION ALL
    SELECT n.*, m.next_cursor FROM more m LEFT JOIN numbered n ON false
  ) AS x
  ORDER BY x.n NULLS LAST;
END
$$;
