-- Maintenance: promotion of due delayed jobs, recovery of expired leases, partition preparation.

-- Moves up to p_limit due `scheduled` jobs to `ready` (behind the jobs already waiting) and
-- notifies their queues. Returns how many moved.
--
-- Jobs that became due together keep their order: they are taken by (run_at, seq), an index
-- walk of job_runtime_scheduled_idx that stops after each block, and given new `seq` values
-- in that order (the claim serves a priority in seq order). A block is at most 1000 jobs, so it
-- takes one block of job_seq values (see 010_tables.sql); p_limit (up to 100,000) bounds how
-- many blocks one call moves.
CREATE FUNCTION workhorse.promote_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql
-- The update finds its rows by primary key (a nested loop over the block), whatever the block's
-- size: a custom plan for 1000 ids chose a hash join over a scan of the whole table.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_total integer := 0;
  v_block integer;
  v_ids uuid[];
  v_seq bigint;
  v_event_id bigint;
  v_moved_queues text[];
  v_moved uuid[];
  v_kinds text[];
  v_attempts integer[];
  v_event_ids bigint[];
  v_queues text[] := '{}';
  v_queue text;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 100000');
  END IF;
  LOOP
    v_block := least(1000, p_limit - v_total);
    SELECT coalesce(array_agg(d.job_id ORDER BY d.run_at, d.seq), '{}') INTO v_ids
    FROM (SELECT r.job_id, r.run_at, r.seq FROM workhorse.job_runtime r
          WHERE r.state = 'scheduled' AND r.run_at <= v_now
          ORDER BY r.run_at, r.seq
          LIMIT v_block
          FOR UPDATE SKIP LOCKED) AS d;
    EXIT WHEN cardinality(v_ids) = 0;
    -- One block of each sequence (see 010_tables.sql): row k of the block gets base + k - 1.
    v_seq := nextval('workhorse.job_seq');
    v_event_id := nextval('workhorse.history_seq');
    WITH moved AS (
      UPDATE workhorse.job_runtime r
         SET state = 'ready', seq = v_seq + u.ord - 1
        FROM unnest(v_ids) WITH ORDINALITY AS u (job_id, ord)
       WHERE r.job_id = u.job_id
      RETURNING r.job_id, r.queue, r.current_attempt, r.resuming, u.ord
    )
    SELECT array_agg(DISTINCT m.queue), array_agg(m.job_id), array_agg(CASE WHEN m.resuming THEN 'woke' ELSE 'promoted' END),
           array_agg(m.current_attempt), array_agg(v_event_id + m.ord - 1)
      INTO v_moved_queues, v_moved, v_kinds, v_attempts, v_event_ids
    FROM moved m;
    PERFORM workhorse.write_events(v_moved, v_kinds, v_now, v_attempts, p_ids => v_event_ids);
    v_total := v_total + cardinality(v_ids);
    v_queues := v_queues || v_moved_queues;
    EXIT WHEN cardinality(v_ids) < v_block OR v_total >= p_limit;
  END LOOP;
  FOR v_queue IN SELECT DISTINCT q FROM unnest(v_queues) AS q LOOP
    PERFORM pg_notify('workhorse_jobs', v_queue);
  END LOOP;
  RETURN v_total;
END
$$;

-- Recovers up to p_limit active jobs whose lease ran out (their worker crashed, hung or lost its
-- connection) or whose attempt outlived its execution timeout. Whichever of the two ran out
-- first ended the attempt: it closes as `expired` or `timeout` (a handler that hangs past its
-- timeout also stops being renewed, but its attempt stays a `timeout`). Then, as when a worker
-- reports a failure: a job past its deadline fails with DeadlineExceeded (the deadline wins, as
-- everywhere); a pending cancel ends the job `canceled`; otherwise the retry policy (the job's, else the handler's as registered for
-- the job's queue and type, else the default) sets the next attempt's time, counted from the
-- moment the attempt ended, and the job fails for good if no attempt remains or the next one
-- could not start before its deadline. Returns how many jobs it recovered.
CREATE FUNCTION workhorse.recover_expired_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_count integer := 0;
  v_error jsonb;
  v_timeout boolean;
  v_outcome text;
  v_ended timestamptz;
  v_policy jsonb;
  v_source text;
  v_delay bigint;
  v_next timestamptz;
  v_state text;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 100000');
  END IF;
  FOR r IN
    SELECT * FROM workhorse.job_runtime
    WHERE state = 'active' AND (lease_expires_at <= clock_timestamp() OR attempt_deadline <= clock_timestamp())
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  LOOP
    v_now := clock_timestamp();
    v_timeout := r.attempt_deadline IS NOT NULL AND r.attempt_deadline <= least(r.lease_expires_at, v_now);
    v_ended := CASE WHEN v_timeout THEN r.attempt_deadline ELSE r.lease_expires_at END;
    v_outcome := CASE WHEN v_timeout THEN 'timeout' ELSE 'expired' END;
    v_error := CASE WHEN v_timeout
      THEN jsonb_build_object('name', 'ExecutionTimeout',
             'message', format('attempt %s ran longer than its execution timeout of %s ms', r.current_attempt, r.execution_timeout_ms))
      ELSE jsonb_build_object('name', 'LeaseExpired',
             'message', format('worker %s stopped renewing its lease (it crashed, hung or lost its connection)', r.worker_id))
      END;
    IF r.deadline IS NOT NULL AND r.deadline <= v_now THEN
      PERFORM workhorse.fail_past_deadline(r, v_now);
    ELSIF r.cancel_requested_at IS NOT NULL THEN
      PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), v_outcome, v_now);
    ELSE
      SELECT p.policy, p.source, workhorse.retry_delay_ms(p.policy, p.counted) INTO v_policy, v_source, v_delay
      FROM workhorse.retry_policy_of(r, NULL) AS p;
      v_next := v_ended + v_delay * interval '1 millisecond';
      IF r.current_attempt >= r.max_attempts OR (r.deadline IS NOT NULL AND greatest(v_next, v_now) >= r.deadline) THEN
        PERFORM workhorse.finish_job(r, 'failed', NULL, v_error, v_outcome, v_now);
      ELSE
        INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
        VALUES (r.job_id, r.current_attempt, v_outcome, r.worker_id, r.fence_token, r.attempt_started_at, v_now, v_error);
        v_state := workhorse.requeue_job(r.job_id, v_next, v_now, v_error, 0);
        PERFORM workhorse.write_event(r.job_id, CASE WHEN v_timeout THEN 'timed_out' ELSE 'lease_expired' END, v_now,
          r.current_attempt,
          jsonb_build_object('error', v_error, 'state', v_state, 'delayMs', v_delay, 'delaySource', v_source,
                             'runAt', greatest(v_next, v_now)),
          r.worker_id, r.fence_token);
        IF v_state = 'ready' THEN
          PERFORM pg_notify('workhorse_jobs', r.queue);
        END IF;
      END IF;
    END IF;
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

-- Fails up to p_limit live jobs whose deadline passed, whatever their state, with
-- DeadlineExceeded and no retry (fail_past_deadline). An open attempt (running, or asleep) is
-- closed as `deadline`; a running job's worker already finds its writes stale since the deadline
-- (see owns). Returns how many jobs it failed.
-- It never waits for a job it would fail or for one of its descendants: maintenance holds every
-- row it changed until it commits, and a child ending now holds the child and then locks its
-- parent, so waiting could close a cycle (a deadlock).
CREATE FUNCTION workhorse.expire_deadlines_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_id uuid;
  v_count integer := 0;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 100000');
  END IF;
  FOR v_id IN
    SELECT job_id FROM workhorse.job_runtime
    WHERE deadline IS NOT NULL AND deadline <= clock_timestamp()
    ORDER BY deadline
    LIMIT p_limit
  LOOP
    -- A parent's live descendants before the parent, in the order their own ends lock them
    -- (child before parent, 046_orchestration.sql), and never waiting: a job whose row or a
    -- descendant's another transaction holds is left to a later pass.
    CONTINUE WHEN NOT workhorse.try_lock_descendants(v_id);
    SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = v_id FOR UPDATE SKIP LOCKED;
    CONTINUE WHEN NOT FOUND;
    PERFORM workhorse.fail_past_deadline(r, clock_timestamp());
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

-- The serialisation points of maintenance, one row each (`tick`), and when each last did its
-- work. A row lock, not an advisory lock: PostgreSQL has no privilege on advisory locks, so any
-- connecting role could take a key and stop maintenance; this table grants nothing to any
-- application role, so only the schema owner's functions can lock its rows (docs/security.md).
CREATE TABLE workhorse.maintenance_lock (
  name text PRIMARY KEY,
  -- When a caller last held the row and did the work; null: never since it was created.
  last_run_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO workhorse.maintenance_lock (name) VALUES ('tick');

-- One maintenance pass: deadlines, promotion, recovery, expiry of idempotency and dedupe keys, due schedule
-- occurrences (planned first, then fired: sql/085_schedules.sql), and (when the prepared days
-- run short) partition preparation. Every worker offers a tick about once a second; the `tick`
-- row of maintenance_lock (FOR UPDATE SKIP LOCKED) lets one caller work at a time and makes the
-- others return at once with {"skipped": true}; the pass records its time there (health_v1
-- reads it). `schedulesToPlan` is for the previous release's TypeScript workers (they plan
-- through plan_schedule_v1 when it is true: only while more schedules were due than one tick plans).
-- Each part does a bounded amount of work: promotion up to 10,000 jobs (about a fifth of a
-- second here), schedules up to 500 planned and 100 fired, the others up to 1000 rows. `more` says that some part
-- stopped at its bound: the caller should tick again at once rather than after its interval, so
-- a backlog (100,000 delayed jobs due together) is worked off in a series of short transactions,
-- each of whose jobs can be claimed as soon as it commits, faster than a worker drains them.
CREATE FUNCTION workhorse.tick_v1()
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
