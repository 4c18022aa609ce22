-- External signals and human decisions: a handler waits for something from outside the job.
--
-- Both park the job the way a durable sleep does (see sleep_v1): the worker lets go of it, the
-- attempt stays open and is not consumed, and the next claim continues it, the handler running
-- again from the top (checkpoints replay, and a wait already answered returns its answer at
-- once). A parked job is `blocked` while it waits for something external with no timeout, and
-- `scheduled` until the timeout when it has one (promotion then wakes it, and the wait answers
-- `timed_out`). A send or a decision makes a parked job `ready` in the caller's transaction.
--
-- Fencing: only the owner (worker id and fence token, see owns) can open a wait, consume a
-- signal or park; a stale worker's call changes nothing and reports `stale`.

-- Signals sent to a job, kept in send order. A signal is consumed by at most one wait
-- (wait_seq); until then it is buffered and the next wait for its name consumes it.
CREATE TABLE workhorse.job_signal (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_id uuid NOT NULL REFERENCES workhorse.job (id),
  name text NOT NULL,
  payload jsonb,
  idempotency_key text,
  sent_at timestamptz NOT NULL,
  -- The wait that consumed it (its number among the job's waits for this name), or null.
  wait_seq integer
);
CREATE INDEX job_signal_job_idx ON workhorse.job_signal (job_id, name, id);
CREATE UNIQUE INDEX job_signal_key_idx ON workhorse.job_signal (job_id, name, idempotency_key)
  WHERE idempotency_key IS NOT NULL;

-- The waits for signals a handler reached: the n-th call of waitForSignal(name) in a run is wait
-- (name, n), so a replay meets the same waits in the same order and gets the same answers.
CREATE TABLE workhorse.job_signal_wait (
  job_id uuid NOT NULL REFERENCES workhorse.job (id),
  name text NOT NULL,
  seq integer NOT NULL,
  status text NOT NULL CHECK (status IN ('open', 'delivered', 'timed_out')),
  timeout_at timestamptz,
  signal_id bigint,
  attempt integer NOT NULL,
  created_at timestamptz NOT NULL,
  resolved_at timestamptz,
  PRIMARY KEY (job_id, name, seq)
);

-- Human decisions: one row per (job, name), opened the first time the handler reaches the wait.
CREATE TABLE workhorse.job_human_wait (
  id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  job_id uuid NOT NULL REFERENCES workhorse.job (id),
  name text NOT NULL,
  status text NOT NULL CHECK (status IN ('open', 'decided', 'timed_out')),
  context jsonb,
  -- Null: any JSON decision; otherwise the decision must be one of these strings.
  choices jsonb,
  timeout_at timestamptz,
  decision jsonb,
  actor text,
  reason text,
  idempotency_key text,
  attempt integer NOT NULL,
  created_at timestamptz NOT NULL,
  decided_at timestamptz,
  PRIMARY KEY (job_id, name)
);
-- Operators page the open ones (list_human_waits_v1), oldest first.
CREATE INDEX job_human_wait_open_idx ON workhorse.job_human_wait (id) WHERE status = 'open';

-- A wait's name: 1 to 200 characters, no NUL (text cannot hold one anyway; JSON can).
CREATE FUNCTION workhorse.check_wait_name(p_name text, p_field text DEFAULT 'name')
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_name IS NULL OR length(p_name) NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be a string of 1 to 200 characters');
  END IF;
END
$$;

-- The job and wait name a send or a decision is for: a job id, and a name as check_wait_name.
CREATE FUNCTION workhorse.check_wait_target(p_job_id uuid, p_name text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_job_id IS NULL THEN
    PERFORM workhorse.raise_invalid('jobId', 'must be a job id (a UUID string)');
  END IF;
  PERFORM workhorse.check_wait_name(p_name);
END
$$;

-- An idempotency key of a send or a decision: null (none) or 1 to 200 characters.
CREATE FUNCTION workhorse.check_wait_key(p_key text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_key IS NOT NULL AND length(p_key) NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid('idempotencyKey', 'must be a string of 1 to 200 characters');
  END IF;
END
$$;

-- A wait's timeout in milliseconds: null (none) or 1 ms to one year.
CREATE FUNCTION workhorse.check_wait_timeout(p_timeout_ms bigint)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_timeout_ms IS NOT NULL AND (p_timeout_ms < 1 OR p_timeout_ms > 31536000000) THEN
    PERFORM workhorse.raise_invalid('timeoutMs', 'must be an integer from 1 to 31536000000 (one year)');
  END IF;
END
$$;

-- Parks the owner's job (locked by the caller) until something external wakes it: `blocked`,
-- or `scheduled` until p_timeout_at. The attempt stays open, as for a durable sleep.
CREATE FUNCTION workhorse.park_job(r workhorse.job_runtime, p_timeout_at timestamptz, p_now timestamptz, p_data jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM workhorse.requeue_job(r.job_id, coalesce(p_timeout_at, 'infinity'), p_now, NULL, 0, true);
  IF p_timeout_at IS NULL THEN
    UPDATE workhorse.job_runtime SET state = 'blocked', run_at = p_now WHERE job_id = r.job_id;
  END IF;
  INSERT INTO workhorse.job_event (job_id, at, kind, attempt, worker_id, fence_token, data)
  VALUES (r.job_id, p_now, 'waiting', r.current_attempt, r.worker_id, r.fence_token,
          p_data || jsonb_build_object('timeoutAt', p_timeout_at, 'state', CASE WHEN p_timeout_at IS NULL THEN 'blocked' ELSE 'scheduled' END));
END
$$;

-- Wakes a job parked on a wait (locked by the caller) now: it becomes `ready`, behind the jobs
-- already waiting, and its next claim continues the open attempt. A job that is not parked
-- (running, or ready already) is left as it is.
CREATE FUNCTION workhorse.wake_parked_job(r workhorse.job_runtime, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF r.state IN ('blocked', 'scheduled') AND r.resuming THEN
    UPDATE workhorse.job_runtime
       SET state = 'ready', seq = nextval('workhorse.job_seq'), run_at = p_now
     WHERE job_id = r.job_id;
    PERFORM pg_notify('workhorse_jobs', r.queue);
  END IF;
END
$$;

-- The owner's wait for signal p_name (its p_seq-th in this run of the handler). Returns
-- `delivered` with the signal's payload (now, or by an earlier run), `timed_out`, `waiting` (the
-- job is parked: the worker lets go of it), `canceled` (a cancel was pending: the job ended) or
-- `stale`. The timeout is fixed the first time the wait is reached.
CREATE FUNCTION workhorse.wait_signal_v1(
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
    -- job was parked on it) answers it.
    SELECT * INTO v_signal FROM workhorse.job_signal s
     WHERE s.job_id = p_job_id AND s.name = p_name AND s.wait_seq IS NULL
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

-- Sends signal p_name to a job, in the caller's transaction. Returns `delivered` (the job was
-- parked on a wait for it: the wait has its value and the job is `ready`), `buffered` (the job
-- is live but not waiting for it: the signal is kept and the next wait for p_name consumes it),
-- `duplicate` (a signal with this idempotency key was sent before: nothing written),
-- `not_found` or `finished` (the job has ended: nothing written). The job's row is locked first,
-- so a send and the job parking never miss each other.
CREATE FUNCTION workhorse.send_signal_v1(p_job_id uuid, p_name text, p_payload jsonb, p_idempotency_key text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
  v_id bigint;
  v_seq integer;
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
  -- Parked on a wait for this name: the wait takes the signal now.
  SELECT w.seq INTO v_seq FROM workhorse.job_signal_wait w
   WHERE w.job_id = p_job_id AND w.name = p_name AND w.status = 'open'
   ORDER BY w.seq LIMIT 1;
  IF v_seq IS NOT NULL AND r.state IN ('blocked', 'scheduled') AND r.resuming THEN
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

-- The owner's wait for the human decision p_name. The first time it is reached the wait opens
-- with p_context (what the person deciding needs to see, JSON up to 1 MiB), p_choices (null, or
-- 1 to 50 distinct strings the decision must be one of) and its timeout; later runs get the same
-- wait whatever they pass. Returns `decided` with the decision, actor, reason and time,
-- `timed_out`, `waiting` (the job is parked), `canceled` or `stale`.
CREATE FUNCTION workhorse.wait_human_v1(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_name text, p_context jsonb, p_choices jsonb, p_timeout_ms bigint)
RETURNS TABLE (status text, decision jsonb, actor text, reason text, decided_at timestamptz, timeout_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  r workhorse.job_runtime;
  w workhorse.job_human_wait;
  v_now timestamptz;
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  PERFORM workhorse.check_wait_name(p_name);
  PERFORM workhorse.check_wait_timeout(p_timeout_ms);
  PERFORM workhorse.check_json_size(p_context, 'context');
  PERFORM workhorse.check_choices(p_choices);
  r := workhorse.lock_owned(p_job_id, p_worker_id, p_fence);
  IF r.job_id IS NULL THEN
    RETURN QUERY SELECT 'stale'::text, NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, NULL::timestamptz;
    RETURN;
  END IF;
  v_now := clock_timestamp();
  INSERT INTO workhorse.job_human_wait (job_id, name, status, context, choices, timeout_at, attempt, created_at)
  VALUES (p_job_id, p_name, 'open', p_context, p_choices, v_now + p_timeout_ms * interval '1 millisecond',
          r.current_attempt, v_now)
  ON CONFLICT (job_id, name) DO NOTHING;
  SELECT * INTO w FROM workhorse.job_human_wait x WHERE x.job_id = p_job_id AND x.name = p_name;
  IF w.status = 'open' AND w.timeout_at IS NOT NULL AND w.timeout_at <= v_now THEN
    UPDATE workhorse.job_human_wait x SET status = 'timed_out', decided_at = v_now WHERE x.id = w.id;
    INSERT INTO workhorse.job_event (job_id, at, kind, attempt, worker_id, fence_token, data)
    VALUES (p_job_id, v_now, 'wait_timed_out', r.current_attempt, p_worker_id, p_fence,
            jsonb_build_object('waitFor', 'human', 'name', p_name));
    w.status := 'timed_out';
  END IF;
  IF w.status = 'open' THEN
    IF r.cancel_requested_at IS NOT NULL THEN
      PERFORM workhorse.finish_job(r, 'canceled', NULL, workhorse.cancel_error(r.cancel_reason), 'canceled', v_now);
      RETURN QUERY SELECT 'canceled'::text, NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, w.timeout_at;
      RETURN;
    END IF;
    PERFORM workhorse.park_job(r, w.timeout_at, v_now,
      jsonb_build_object('waitFor', 'human', 'name', p_name, 'context', w.context, 'choices', w.choices));
    RETURN QUERY SELECT 'waiting'::text, NULL::jsonb, NULL::text, NULL::text, NULL::timestamptz, w.timeout_at;
    RETURN;
  END IF;
  RETURN QUERY SELECT w.status, w.decision, w.actor, w.reason, w.decided_at, w.timeout_at;
END
$$;

-- Choices of a human wait: null, or an array of 1 to 50 distinct strings of 1 to 200 characters.
CREATE FUNCTION workhorse.check_choices(p_choices jsonb)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_choices IS NULL THEN
    RETURN;
  END IF;
  IF jsonb_typeof(p_choices) <> 'array' OR jsonb_array_length(p_choices) NOT BETWEEN 1 AND 50
     OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_choices) AS c (v)
                WHERE jsonb_typeof(c.v) <> 'string' OR length(c.v #>> '{}') NOT BETWEEN 1 AND 200)
     OR (SELECT count(DISTINCT c.v) FROM jsonb_array_elements(p_choices) AS c (v)) <> jsonb_array_length(p_choices) THEN
    PERFORM workhorse.raise_invalid('choices', 'must be an array of 1 to 50 distinct strings of 1 to 200 characters');
  END IF;
END
$$;

-- Records the decision for the open human wait p_name of a job, in the caller's transaction, and
-- wakes the job. p_actor (who decided, 1 to 200 characters) and p_reason (at most 1000) are kept
-- with the decision and in the timeline. A decision outside the wait's choices is refused
-- (SQLSTATE P1021, nothing written). Returns `completed`, `duplicate` (the wait was decided
-- with this idempotency key before: nothing written), `already_decided` (decided otherwise, or
-- timed out: nothing written), `not_waiting` (the job is live but has no wait of that name yet),
-- `not_found` or `finished`.
CREATE FUNCTION workhorse.complete_human_wait_v1(
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
    RAISE EXCEPTION USING ERRCODE = 'P1021', COLUMN = 'decision',
      MESSAGE = format('decision: must be one of the wait''s choices (%s)', w.choices::text),
      DETAIL = jsonb_build_object('choices', w.choices)::text;
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

-- The open human waits, oldest first, a page at a time (after the wait id p_after_id), filtered
-- by queue, job type, wait name and job id (each optional).
CREATE FUNCTION workhorse.list_human_waits_v1(
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
  WHERE w.status = 'open' AND w.id > coalesce(p_after_id, 0)
    AND (p_queue IS NULL OR j.queue = p_queue) AND (p_type IS NULL OR j.type = p_type)
    AND (p_name IS NULL OR w.name = p_name) AND (p_job_id IS NULL OR w.job_id = p_job_id)
    -- Only jobs still live: a job that ended (canceled, past its deadline) waits no more.
    AND EXISTS (SELECT 1 FROM workhorse.job_runtime x WHERE x.job_id = w.job_id)
  ORDER BY w.id
  LIMIT p_limit;
END
$$;
