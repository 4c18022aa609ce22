-- Queue flow control: a global concurrency limit and a rate limit per queue, applied inside the
-- claim (complete_and_claim_v1), so they hold across any number of workers and hosts.
--
-- * Concurrency N: at most N of the queue's jobs are active at once.
-- * Rate N per I ms: at most N of the queue's jobs are claimed in any window of I ms (a sliding
--   window: a claim at time t counts the claims in (t - I, t]). The policy row keeps the recent
--   claims (when, how many) it needs to know that, at most one entry per claim statement.
--
-- A claim takes from a limited queue only while it holds the queue's policy row (FOR UPDATE,
-- until it commits), and reads the clock and counts active jobs after taking it. Claims of one
-- limited queue therefore follow one another: each sees every earlier claim committed, and their
-- claim times increase in lock order. A policy row another claim holds is skipped, never waited
-- for: that queue gives nothing this round, and the worker's other queues are claimed as usual.
-- A queue without a policy has no row here; the claim pays one probe of this (small) table.
--
-- * Per key N (perKey.concurrency): at most N active jobs per concurrency key (the enqueue
--   option concurrencyKey) in the queue; jobs without a key are not limited by it. The claim of
--   such a queue (claim_per_key) holds the policy row as above, so it sees every active job of
--   every key; it counts a key's active jobs in job_runtime_key_active_idx (at most N rows) and
--   takes its ready jobs from job_runtime_key_ready_idx, visiting the keys that have ready jobs
--   in key order from where the previous claim stopped (key_cursor), one index descent per key:
--   the keys take turns, and a key's backlog is never walked. A saturated key costs one descent
--   and a count; there are at most (active jobs / N) of them.

CREATE TABLE workhorse.queue_policy (
  queue text PRIMARY KEY,
  concurrency integer CHECK (concurrency BETWEEN 1 AND 100000),
  rate_limit integer CHECK (rate_limit BETWEEN 1 AND 100000),
  rate_interval_ms integer CHECK (rate_interval_ms BETWEEN 1 AND 86400000),
  -- The claims of the current rate window, oldest first: claim time and jobs claimed.
  window_at timestamptz[] NOT NULL DEFAULT '{}',
  window_n integer[] NOT NULL DEFAULT '{}',
  changed_at timestamptz NOT NULL,
  changed_by text,
  reason text,
  CONSTRAINT queue_policy_rate_check CHECK ((rate_limit IS NULL) = (rate_interval_ms IS NULL)),
  -- The login role (session_user) that set the policy, next to changed_by; null for a policy set
  -- before the schema recorded it. Every change is also in workhorse.operator_change.
  login_role text,
  -- At most this many active jobs per concurrency key (null: no per-key limit).
  per_key_concurrency integer CHECK (per_key_concurrency BETWEEN 1 AND 100000),
  -- The last key a per-key claim visited: the next claim starts after it.
  key_cursor text,
  CONSTRAINT queue_policy_any_limit_check
    CHECK (concurrency IS NOT NULL OR rate_limit IS NOT NULL OR per_key_concurrency IS NOT NULL)
);

-- A queue's policy as the API shows it.
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

-- Sets a queue's flow-control policy, replacing the one it had. p_policy:
-- {"concurrency"?: 1..100000 | null, "rateLimit"?: {"limit": 1..100000, "intervalMs": 1..86400000} | null,
--  "perKey"?: {"concurrency": 1..100000} | null};
-- a limit left out or null is not applied, and a policy with neither (or a null p_policy) removes
-- the queue's policy. The rate window's recent claims are kept across a change, so a new rate
-- counts the claims already made. Setting the same limits again changes nothing (the first
-- setting keeps its time, actor, login role and reason); every change is recorded in
-- workhorse.operator_change with the login role (session_user). Wakes the queue's workers (a raised limit may let
-- them claim).
-- Returns {"queue", "concurrency", "rateLimit", "perKey"} as now in force.
CREATE FUNCTION workhorse.set_queue_policy_v1(p_queue text, p_policy jsonb, p_actor text DEFAULT NULL,
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

-- For the claim: locks the policies of p_queues (queues that have one), skipping a policy another
-- claim holds, and returns, per queue, how many of its jobs this claim may take (0 for a skipped
-- policy) and the time of the claim. The active jobs are counted after the lock is taken and the
-- clock is read after that, so a job another claim or completion committed is seen, and an
-- attempt that ended before this claim counted has a finish time before this claim's time: in
-- attempt_history no more than `concurrency` attempts of the queue ever overlap.
CREATE FUNCTION workhorse.claim_allowances(p_queues text[], p_limit integer)
RETURNS TABLE (queue text, allowance integer, at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  v_locked text[];
  v_active bigint[];
  v_now timestamptz;
BEGIN
  -- In queue order, so two claims over the same limited queues cannot deadlock (the lock is not
  -- waited for anyway). The reads below are later statements: they see every claim that
  -- committed before the lock was taken.
  v_locked := ARRAY(SELECT p.queue FROM workhorse.queue_policy p WHERE p.queue = ANY (p_queues)
                    ORDER BY p.queue FOR UPDATE SKIP LOCKED);
  v_active := ARRAY(SELECT CASE WHEN p.concurrency IS NOT NULL THEN
                             (SELECT count(*) FROM workhorse.job_runtime r WHERE r.queue = p.queue AND r.state = 'active') END
                    FROM unnest(v_locked) WITH ORDINALITY AS l (q, o)
                    JOIN workhorse.queue_policy p ON p.queue = l.q
                    ORDER BY l.o);
  v_now := clock_timestamp();
  RETURN QUERY
  SELECT p.queue,
         CASE WHEN p.queue = ANY (v_locked) THEN
           greatest(0, least(
             p_limit,
             p.concurrency - v_active[array_position(v_locked, p.queue)]::integer,
             CASE WHEN p.rate_limit IS NOT NULL THEN
               p.rate_limit - (SELECT coalesce(sum(w.n), 0) FROM unnest(p.window_at, p.window_n) AS w (at, n)
                               WHERE w.at > v_now - p.rate_interval_ms * interval '1 millisecond')::integer END))
         ELSE 0 END,
         v_now
  FROM workhorse.queue_policy p
  WHERE p.queue = ANY (p_queues);
END
$$;

-- For the claim: adds the jobs p_ids it is claiming (at p_at) to the rate windows of the
-- rate-limited queues among p_queues, whose policy rows it holds, and drops claims that have left
-- the window.
CREATE FUNCTION workhorse.record_rate_claims(p_queues text[], p_ids uuid[], p_at timestamptz)
RETURNS void
LANGUAGE sql AS $$
  UPDATE workhorse.queue_policy p
     SET (window_at, window_n) = (
       SELECT coalesce(array_agg(w.at ORDER BY w.o), '{}') || p_at, coalesce(array_agg(w.n ORDER BY w.o), '{}') || c.n
       FROM unnest(p.window_at, p.window_n) WITH ORDINALITY AS w (at, n, o)
       WHERE w.at > p_at - p.rate_interval_ms * interval '1 millisecond')
    FROM (SELECT r.queue, count(*)::integer AS n
          FROM workhorse.job_runtime r
          WHERE r.job_id = ANY (p_ids) AND r.queue = ANY (p_queues)
          GROUP BY r.queue) AS c
   WHERE p.queue = c.queue AND p.rate_limit IS NOT NULL
$$;

-- For the claim of a queue with a per-key limit, whose policy row the claim holds (see the top of
-- this file): up to p_limit of p_queue's ready jobs, locked, such that no key ends with more than
-- per_key_concurrency active jobs; and, of those, the ones claimed before (for their checkpoints
-- and sleeps). Jobs without a key come first in (priority DESC, FIFO) order, as in any queue;
-- then the keys take turns: in key order after the last key visited, wrapping around, each key
-- gives its best ready jobs up to its free slots. The cursor moves to the last key visited.
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
