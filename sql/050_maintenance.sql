-- Maintenance: promotion of due delayed jobs, recovery of expired leases, partition preparation.

-- Moves up to p_limit due `scheduled` jobs to `ready` (behind the jobs already waiting) and
-- notifies their queues. Returns how many moved.
CREATE FUNCTION workhorse.promote_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_count integer;
  v_queues text[];
  v_queue text;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 100000');
  END IF;
  WITH due AS (
    SELECT r.job_id FROM workhorse.job_runtime r
    WHERE r.state = 'scheduled' AND r.run_at <= v_now
    ORDER BY r.run_at
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  ),
  moved AS (
    UPDATE workhorse.job_runtime r
       SET state = 'ready', seq = nextval('workhorse.job_seq')
      FROM due
     WHERE r.job_id = due.job_id
    RETURNING r.job_id, r.queue, r.current_attempt, r.resuming
  ),
  ev AS (
    INSERT INTO workhorse.job_event (job_id, at, kind, attempt)
    SELECT m.job_id, v_now, CASE WHEN m.resuming THEN 'woke' ELSE 'promoted' END, m.current_attempt FROM moved m
  )
  SELECT count(*), array_agg(DISTINCT m.queue) INTO v_count, v_queues FROM moved m;
  FOREACH v_queue IN ARRAY coalesce(v_queues, '{}') LOOP
    PERFORM pg_notify('workhorse_jobs', v_queue);
  END LOOP;
  RETURN v_count;
END
$$;

-- Recovers up to p_limit active jobs whose lease ran out (their worker crashed, hung or lost its
-- connection) or whose attempt outlived its execution timeout. The attempt is closed as
-- `expired` or `timeout`; the job becomes ready again (at once after an expiry, after the retry
-- delay of the job's policy or the default after a timeout) if attempts remain, fails if not,
-- or ends canceled if a cancel was pending. Returns how many jobs it recovered.
CREATE FUNCTION workhorse.recover_expired_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_count integer := 0;
  v_error jsonb;
  v_timeout boolean;
  v_delay bigint;
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
    v_timeout := r.attempt_deadline IS NOT NULL AND r.attempt_deadline <= v_now;
    v_error := CASE WHEN v_timeout
      THEN jsonb_build_object('name', 'ExecutionTimeout',
             'message', format('attempt %s ran longer than its execution timeout of %s ms', r.current_attempt, r.execution_timeout_ms))
      ELSE jsonb_build_object('name', 'LeaseExpired',
             'message', format('worker %s stopped renewing its lease (it crashed, hung or lost its connection)', r.worker_id))
      END;
    IF r.cancel_requested_at IS NOT NULL THEN
      PERFORM workhorse.finish_job(r, 'canceled', NULL,
        jsonb_build_object('name', 'Canceled', 'message', coalesce(r.cancel_reason, 'canceled on request')),
        CASE WHEN v_timeout THEN 'timeout' ELSE 'expired' END, v_now);
    ELSIF r.current_attempt >= r.max_attempts THEN
      PERFORM workhorse.finish_job(r, 'failed', NULL, v_error, CASE WHEN v_timeout THEN 'timeout' ELSE 'expired' END, v_now);
    ELSE
      v_delay := 0;
      IF v_timeout THEN
        SELECT workhorse.retry_delay_ms(coalesce(j.retry_policy, workhorse.normalize_retry_policy(NULL, 'retryPolicy')),
                                        r.current_attempt)
          INTO v_delay FROM workhorse.job j WHERE j.id = r.job_id;
      END IF;
      INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
      VALUES (r.job_id, r.current_attempt, CASE WHEN v_timeout THEN 'timeout' ELSE 'expired' END,
              r.worker_id, r.fence_token, r.attempt_started_at, v_now, v_error);
      v_state := workhorse.requeue_job(r.job_id, v_now + v_delay * interval '1 millisecond', v_now, v_error, 0);
      INSERT INTO workhorse.job_event (job_id, at, kind, attempt, worker_id, fence_token, data)
      VALUES (r.job_id, v_now, CASE WHEN v_timeout THEN 'timed_out' ELSE 'lease_expired' END, r.current_attempt,
              r.worker_id, r.fence_token, jsonb_build_object('error', v_error, 'state', v_state, 'delayMs', v_delay));
      IF v_state = 'ready' THEN
        PERFORM pg_notify('workhorse_jobs', r.queue);
      END IF;
    END IF;
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

-- Fails up to p_limit live jobs whose deadline passed, whatever their state, with
-- DeadlineExceeded and no retry. A running attempt is closed as `deadline`; its worker's next
-- heartbeat or completion is stale. Returns how many jobs it failed.
CREATE FUNCTION workhorse.expire_deadlines_v1(p_limit integer DEFAULT 1000)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_count integer := 0;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 100000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 100000');
  END IF;
  FOR r IN
    SELECT * FROM workhorse.job_runtime
    WHERE deadline IS NOT NULL AND deadline <= clock_timestamp()
    ORDER BY deadline
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  LOOP
    PERFORM workhorse.finish_job(r, 'failed', NULL,
      jsonb_build_object('name', 'DeadlineExceeded',
        'message', format('the job did not finish by its deadline (%s)', to_char(r.deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))),
      CASE WHEN r.state = 'active' THEN 'deadline' END, clock_timestamp());
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;

-- One maintenance pass: deadlines, promotion, recovery, due schedule occurrences (sql/085_schedules.sql),
-- and (when the prepared days run short) partition preparation. Every worker offers a tick about
-- once a second; a try-lock lets one caller work at a time and makes the others return at once
-- with {"skipped": true}. Either answer says in `schedulesToPlan` whether a schedule's plan of
-- occurrences runs short, for a TypeScript caller to top it up (lib/core/tick.ts); other callers
-- may ignore it.
CREATE FUNCTION workhorse.tick_v1()
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_promoted integer;
  v_recovered integer;
  v_expired integer;
  v_fired integer;
  v_created integer := 0;
  v_horizon date := (clock_timestamp() AT TIME ZONE 'UTC')::date + 2;
BEGIN
  IF NOT pg_try_advisory_xact_lock(7362515002) THEN
    RETURN jsonb_build_object('skipped', true, 'schedulesToPlan', workhorse.schedules_need_plan());
  END IF;
  v_expired := workhorse.expire_deadlines_v1(1000);
  v_promoted := workhorse.promote_v1(1000);
  v_recovered := workhorse.recover_expired_v1(1000);
  v_fired := workhorse.fire_due_schedules(100);
  DELETE FROM workhorse.enqueue_idempotency
  WHERE ctid = ANY (ARRAY(SELECT ctid FROM workhorse.enqueue_idempotency WHERE expires_at <= clock_timestamp() LIMIT 1000));
  IF to_regclass('workhorse.job_event_p' || to_char(v_horizon, 'YYYYMMDD')) IS NULL
     OR to_regclass('workhorse.attempt_history_p' || to_char(v_horizon, 'YYYYMMDD')) IS NULL THEN
    BEGIN
      -- Creating a partition briefly locks the parent: give up rather than stall writers, and
      -- try again on a later tick.
      PERFORM set_config('lock_timeout', '2000', true);
      v_created := workhorse.prepare_partitions_v1(7);
    EXCEPTION WHEN lock_not_available THEN
      v_created := 0;
    END;
  END IF;
  RETURN jsonb_build_object('skipped', false, 'promoted', v_promoted, 'recovered', v_recovered,
                            'deadlinesExpired', v_expired, 'partitionsCreated', v_created,
                            'schedulesFired', v_fired, 'schedulesToPlan', workhorse.schedules_need_plan());
END
$$;
