-- Internal helpers shared by the protocol functions. Not part of the versioned API: no
-- application role may execute them, the SECURITY DEFINER protocol functions call them. Input
-- checks (raise_invalid, check_*), the ownership rule (owns) and the preamble of every owner
-- write (lock_owned), the writer of job_event (write_events; every function but the hot path,
-- complete_and_claim_v1, which writes its events itself), and the ways a live job ends
-- (finish_job) or goes back to waiting (requeue_job).

-- Refuses input with SQLSTATE P1001; the offending field travels in the error's COLUMN field so
-- clients can name it without parsing the message.
CREATE FUNCTION workhorse.raise_invalid(p_field text, p_message text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'P1001', MESSAGE = p_field || ': ' || p_message, COLUMN = p_field;
END
$$;

-- The capability's refusal (SQLSTATE P1040): a worker reached for a job it does not hold under a
-- live fence, or for a registry row that is not its own. Nothing was read or written.
CREATE FUNCTION workhorse.raise_not_yours(p_field text, p_message text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'P1040', MESSAGE = p_field || ': ' || p_message, COLUMN = p_field;
END
$$;

-- Names: a letter or digit first, then letters, digits and . _ : / -, at most 128 characters.
CREATE FUNCTION workhorse.is_valid_name(p_value text)
RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT p_value IS NOT NULL AND length(p_value) <= 128 AND p_value ~ '^[A-Za-z0-9][A-Za-z0-9._:/-]*$'
$$;

CREATE FUNCTION workhorse.check_name(p_value jsonb, p_field text)
RETURNS text
LANGUAGE plpgsql AS $$
BEGIN
  IF jsonb_typeof(p_value) IS DISTINCT FROM 'string' THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be a string');
  END IF;
  IF NOT workhorse.is_valid_name(p_value #>> '{}') THEN
    PERFORM workhorse.raise_invalid(p_field,
      'must be 1 to 128 characters: a letter or digit, then letters, digits or . _ : / -');
  END IF;
  RETURN p_value #>> '{}';
END
$$;

-- An integer in [p_min, p_max], given as a JSON number.
CREATE FUNCTION workhorse.check_int(p_value jsonb, p_field text, p_min bigint, p_max bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v numeric;
BEGIN
  IF jsonb_typeof(p_value) IS DISTINCT FROM 'number' THEN
    PERFORM workhorse.raise_invalid(p_field, format('must be an integer from %s to %s', p_min, p_max));
  END IF;
  v := (p_value #>> '{}')::numeric;
  IF v <> trunc(v) OR v < p_min OR v > p_max THEN
    PERFORM workhorse.raise_invalid(p_field, format('must be an integer from %s to %s', p_min, p_max));
  END IF;
  RETURN v::bigint;
END
$$;

CREATE FUNCTION workhorse.check_uuid(p_value jsonb, p_field text)
RETURNS uuid
LANGUAGE plpgsql AS $$
BEGIN
  IF jsonb_typeof(p_value) IS DISTINCT FROM 'string'
     OR (p_value #>> '{}') !~* '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$' THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be a job id (a UUID string)');
  END IF;
  RETURN (p_value #>> '{}')::uuid;
END
$$;

-- The size of a JSON value as compact JSON text (the measure clients use: JSON.stringify),
-- exact once it is over p_limit, and no more than that at or under it. PostgreSQL renders jsonb
-- with a space after each `,` and `:`; those are not counted (the count of ", " and ": " pairs
-- may include some inside strings, which only errs towards accepting).
CREATE FUNCTION workhorse.json_text_bytes(p_value jsonb, p_limit bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
  v_text text := p_value::text;
  v_bytes bigint := octet_length(v_text);
BEGIN
  IF v_bytes > p_limit THEN
    v_bytes := v_bytes - (length(v_text) - length(replace(v_text, ', ', ',')))
                       - (length(v_text) - length(replace(v_text, '": ', '":')));
  END IF;
  IF v_bytes > p_limit THEN
    -- jsonb writes numbers out in full (1e308 as 309 digits); count each as its shortest form,
    -- as JSON.stringify does.
    SELECT v_bytes - coalesce(sum(length(n.v::text) - length(((n.v::text)::numeric::float8)::text)), 0)
      INTO v_bytes
    FROM jsonb_path_query(p_value, 'lax $.**') AS n (v)
    WHERE jsonb_typeof(n.v) = 'number'
      -- Only numbers a double can hold (those a JavaScript client can send at all).
      AND abs((n.v::text)::numeric) <= 1.7976931348623157e308
      AND (abs((n.v::text)::numeric) >= 4.9e-324 OR (n.v::text)::numeric = 0);
  END IF;
  RETURN v_bytes;
END
$$;

-- JSON values stored for users (payloads, results, checkpoint values, errors): at most 1 MiB of
-- compact JSON text (json_text_bytes).
CREATE FUNCTION workhorse.check_json_size(p_value jsonb, p_field text, p_limit integer DEFAULT 1048576)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_value IS NOT NULL AND workhorse.json_text_bytes(p_value, p_limit) > p_limit THEN
    PERFORM workhorse.raise_invalid(p_field, format('is larger than the %s limit (%s bytes of JSON)',
      CASE WHEN p_limit = 1048576 THEN '1 MiB' ELSE (p_limit / 1024) || ' KiB' END, p_limit));
  END IF;
END
$$;

-- Page cursors are made and read here, for every listing: opaque text, the base64url (no
-- padding) of `<kind>:<position>`, the kind naming the listing that made it. (The encoding the
-- SDKs used before they left it to the database, so a cursor of either pages on.)
CREATE FUNCTION workhorse.make_cursor(p_kind text, p_position text)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT rtrim(translate(encode(convert_to(p_kind || ':' || p_position, 'UTF8'), 'base64'), E'+/\n', '-_'), '=')
$$;

-- The position of a cursor that the listing p_kind made (NULL for no cursor), matching
-- p_pattern. Anything else (not base64url, another listing's cursor, a forged position) is
-- refused with P1001 naming `cursor`.
CREATE FUNCTION workhorse.cursor_position(p_kind text, p_cursor text, p_pattern text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_text text;
BEGIN
  IF p_cursor IS NULL THEN
    RETURN NULL;
  END IF;
  IF p_cursor ~ '^[A-Za-z0-9_-]+$' AND length(p_cursor) <= 400 AND length(p_cursor) % 4 <> 1 THEN
    BEGIN
      v_text := convert_from(decode(translate(p_cursor, '-_', '+/') || repeat('=', (4 - length(p_cursor) % 4) % 4), 'base64'), 'UTF8');
    EXCEPTION WHEN OTHERS THEN
      v_text := NULL; -- not UTF-8 text: not a cursor
    END;
  END IF;
  IF v_text IS NULL OR v_text !~ ('^' || p_kind || ':(' || p_pattern || ')$') THEN
    PERFORM workhorse.raise_invalid('cursor', 'is not a cursor returned by this API');
  END IF;
  RETURN substr(v_text, length(p_kind) + 2);
END
$$;

-- The bigint position of a cursor of p_kind (jobs, timeline, waits); NULL for no cursor.
CREATE FUNCTION workhorse.cursor_bigint(p_kind text, p_cursor text)
RETURNS bigint
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_position text := workhorse.cursor_position(p_kind, p_cursor, '[0-9]{1,19}');
BEGIN
  IF v_position::numeric > 9223372036854775807 THEN
    PERFORM workhorse.raise_invalid('cursor', 'is not a cursor returned by this API');
  END IF;
  RETURN v_position::bigint;
END
$$;

-- A timestamp given as ISO 8601 text with a time zone, checked field by field so that a bad
-- value is refused with P1001 instead of failing the cast (no exception block: those open a
-- subtransaction per call).
CREATE FUNCTION workhorse.check_timestamp(p_value jsonb, p_field text)
RETURNS timestamptz
LANGUAGE plpgsql AS $$
DECLARE
  v_parts text[];
  v_year integer;
  v_month integer;
  v_day integer;
BEGIN
  IF jsonb_typeof(p_value) IS DISTINCT FROM 'string' THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be an ISO 8601 timestamp with a time zone, such as 2030-01-01T00:00:00Z');
  END IF;
  v_parts := regexp_match(p_value #>> '{}',
    '^(\d{4})-(\d{2})-(\d{2})[T ]([01]\d|2[0-3]):[0-5]\d(:[0-5]\d(\.\d{1,6})?)?(Z|[+-](0\d|1[0-5])(:?[0-5]\d)?)$');
  IF v_parts IS NULL THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be an ISO 8601 timestamp with a time zone, such as 2030-01-01T00:00:00Z');
  END IF;
  v_year := v_parts[1]::integer;
  v_month := v_parts[2]::integer;
  v_day := v_parts[3]::integer;
  IF v_year < 1 OR v_month NOT BETWEEN 1 AND 12 OR v_day < 1
     OR v_day > extract(day FROM make_date(v_year, v_month, 1) + interval '1 month - 1 day') THEN
    PERFORM workhorse.raise_invalid(p_field, 'is not a calendar date');
  END IF;
  RETURN (p_value #>> '{}')::timestamptz;
END
$$;

-- A listing's optional filter of a name (a queue, a type): NULL is no filter; anything else is a
-- name (check_name), so a filter no job can match is refused rather than answered with nothing.
CREATE FUNCTION workhorse.check_filter_name(p_value text, p_field text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_value IS NOT NULL THEN
    PERFORM workhorse.check_name(to_jsonb(p_value), p_field);
  END IF;
END
$$;

-- A time given as a timestamptz parameter (a listing's filter): NULL, or within the years 1970 to
-- 9999 (UTC), the range of every time the protocol stores or compares (limits.json `dates`).
CREATE FUNCTION workhorse.check_time(p_value timestamptz, p_field text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_value < '1970-01-01T00:00:00Z' OR p_value >= '10000-01-01T00:00:00Z' THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be a time between the years 1970 and 9999');
  END IF;
END
$$;

-- Worker identity and lease length, shared by every owner-side function.
CREATE FUNCTION workhorse.check_worker(p_worker_id text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_worker_id IS NULL OR length(p_worker_id) = 0 OR length(p_worker_id) > 200 THEN
    PERFORM workhorse.raise_invalid('workerId', 'must be a string of 1 to 200 characters');
  END IF;
END
$$;

CREATE FUNCTION workhorse.check_lease(p_lease_ms integer)
RETURNS interval
LANGUAGE plpgsql AS $$
BEGIN
  IF p_lease_ms IS NULL OR p_lease_ms < 1000 OR p_lease_ms > 86400000 THEN
    PERFORM workhorse.raise_invalid('leaseMs', 'must be an integer from 1000 to 86400000');
  END IF;
  RETURN p_lease_ms * interval '1 millisecond';
END
$$;

-- Normalises a retry policy, filling defaults. Exponential with jitter is the default:
-- 1 s, doubling, capped at 1 hour, each delay drawn from [50%, 100%] of its nominal value.
CREATE FUNCTION workhorse.normalize_retry_policy(p_policy jsonb, p_field text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_kind text;
  v_key text;
  v_out jsonb;
BEGIN
  IF p_policy IS NULL OR p_policy = 'null'::jsonb THEN
    RETURN '{"kind":"exponential","initialMs":1000,"multiplier":2,"maxMs":3600000,"jitter":true}'::jsonb;
  END IF;
  IF jsonb_typeof(p_policy) <> 'object' THEN
    PERFORM workhorse.raise_invalid(p_field, 'must be an object such as {"kind":"exponential"} or {"kind":"fixed","delayMs":5000}');
  END IF;
  v_kind := p_policy ->> 'kind';
  IF v_kind = 'fixed' THEN
    FOR v_key IN SELECT jsonb_object_keys(p_policy) LOOP
      IF v_key NOT IN ('kind', 'delayMs') THEN
        PERFORM workhorse.raise_invalid(p_field || '.' || v_key, 'is not an option of a fixed retry policy (kind, delayMs)');
      END IF;
    END LOOP;
    v_out := jsonb_build_object('kind', 'fixed', 'delayMs',
      CASE WHEN p_policy ? 'delayMs'
           THEN workhorse.check_int(p_policy -> 'delayMs', p_field || '.delayMs', 0, 604800000)
           ELSE 1000 END);
  ELSIF v_kind = 'exponential' THEN
    FOR v_key IN SELECT jsonb_object_keys(p_policy) LOOP
      IF v_key NOT IN ('kind', 'initialMs', 'multiplier', 'maxMs', 'jitter') THEN
        PERFORM workhorse.raise_invalid(p_field || '.' || v_key,
          'is not an option of an exponential retry policy (kind, initialMs, multiplier, maxMs, jitter)');
      END IF;
    END LOOP;
    IF p_policy ? 'multiplier' AND (jsonb_typeof(p_policy -> 'multiplier') <> 'number'
        OR (p_policy ->> 'multiplier')::numeric < 1 OR (p_policy ->> 'multiplier')::numeric > 10) THEN
      PERFORM workhorse.raise_invalid(p_field || '.multiplier', 'must be a number from 1 to 10');
    END IF;
    IF p_policy ? 'jitter' AND jsonb_typeof(p_policy -> 'jitter') <> 'boolean' THEN
      PERFORM workhorse.raise_invalid(p_field || '.jitter', 'must be true or false');
    END IF;
    v_out := jsonb_build_object(
      'kind', 'exponential',
      'initialMs', CASE WHEN p_policy ? 'initialMs'
                        THEN workhorse.check_int(p_policy -> 'initialMs', p_field || '.initialMs', 0, 604800000)
                        ELSE 1000 END,
      'multiplier', coalesce(p_policy -> 'multiplier', '2'::jsonb),
      'maxMs', CASE WHEN p_policy ? 'maxMs'
                    THEN workhorse.check_int(p_policy -> 'maxMs', p_field || '.maxMs', 0, 604800000)
                    ELSE 3600000 END,
      'jitter', coalesce(p_policy -> 'jitter', 'true'::jsonb));
    IF (v_out ->> 'maxMs')::bigint < (v_out ->> 'initialMs')::bigint THEN
      PERFORM workhorse.raise_invalid(p_field || '.maxMs', 'must not be smaller than initialMs');
    END IF;
  ELSE
    PERFORM workhorse.raise_invalid(p_field || '.kind', 'must be "exponential" or "fixed"');
  END IF;
  RETURN v_out;
END
$$;

-- The delay before the next attempt after attempt number p_attempt failed.
CREATE FUNCTION workhorse.retry_delay_ms(p_policy jsonb, p_attempt integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
  v_delay numeric;
BEGIN
  IF p_policy ->> 'kind' = 'fixed' THEN
    RETURN (p_policy ->> 'delayMs')::bigint;
  END IF;
  v_delay := least((p_policy ->> 'maxMs')::numeric,
                   (p_policy ->> 'initialMs')::numeric
                     * power((p_policy ->> 'multiplier')::numeric, least(greatest(p_attempt - 1, 0), 60)));
  IF (p_policy ->> 'jitter')::boolean THEN
    v_delay := v_delay * (0.5 + random() * 0.5);
  END IF;
  RETURN round(v_delay)::bigint;
END
$$;

-- The ownership rule: the row is active, worker id and fence token match, and neither the lease,
-- nor the attempt's execution timeout, nor the job's deadline has run out at p_now. Past its
-- deadline a job is over for its worker, as for the claim (which never starts it): a late write
-- changes nothing and maintenance fails the job with DeadlineExceeded.
CREATE FUNCTION workhorse.owns(r workhorse.job_runtime, p_worker_id text, p_fence bigint, p_now timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT r.state = 'active' AND r.worker_id = p_worker_id AND r.fence_token = p_fence
         AND r.lease_expires_at > p_now AND (r.attempt_deadline IS NULL OR r.attempt_deadline > p_now)
         AND (r.deadline IS NULL OR r.deadline > p_now)
$$;

-- The preamble of every owner write on one job, after the function's own input checks: checks
-- the worker id, locks the job's runtime row and returns it only if the caller still owns the
-- job (see owns); for a null row the caller answers `stale` and writes nothing. The clock is read
-- after the lock is granted, so a lease that ran out while we waited counts as lost.
-- p_past_timeout lets the owner report its own timed-out attempt (the worker aborts the handler at
-- the execution timeout, so its report necessarily arrives just after it) while the lease holds,
-- the job's deadline has not passed and recovery has not taken the job. p_lock false reads the row
-- without locking it (a transactional handler's checkpoint: see save_checkpoint_v2).
CREATE FUNCTION workhorse.lock_owned(
  p_job_id uuid, p_worker_id text, p_fence bigint, p_past_timeout boolean DEFAULT false, p_lock boolean DEFAULT true)
RETURNS workhorse.job_runtime
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_now timestamptz;
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  IF p_lock THEN
    SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id FOR UPDATE;
  ELSE
    SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id;
  END IF;
  v_now := clock_timestamp();
  IF NOT FOUND OR NOT (CASE WHEN p_past_timeout
                            THEN r.state = 'active' AND r.worker_id = p_worker_id AND r.fence_token = p_fence
                                 AND r.lease_expires_at > v_now AND (r.deadline IS NULL OR r.deadline > v_now)
                            ELSE workhorse.owns(r, p_worker_id, p_fence, v_now) END) THEN
    RETURN NULL;
  END IF;
  RETURN r;
END
$$;

-- The writer of job_event for every function but complete_and_claim_v1: row k is the event of kind p_kinds[k] for job p_job_ids[k] at
-- p_at. The other arrays may be null (no worker, no fence, no data; ids from history_seq), or
-- carry ids a caller took as one block of history_seq (see 010_tables.sql). login_role is
-- the column's default, the session's login role (a SECURITY DEFINER function does not change
-- it); an `actor` travels in p_data. One statement for a whole batch, not one per job.
CREATE FUNCTION workhorse.write_events(
  p_job_ids uuid[], p_kinds text[], p_at timestamptz, p_attempts integer[] DEFAULT NULL, p_data jsonb[] DEFAULT NULL,
  p_worker_ids text[] DEFAULT NULL, p_fences bigint[] DEFAULT NULL, p_ids bigint[] DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO workhorse.job_event (id, job_id, at, kind, attempt, worker_id, fence_token, data)
  SELECT coalesce(e.id, nextval('workhorse.history_seq')), e.job_id, p_at, e.kind, e.attempt, e.worker_id, e.fence, e.data
  FROM unnest(p_job_ids, p_kinds, p_attempts, p_data, p_worker_ids, p_fences, p_ids)
       AS e (job_id, kind, attempt, data, worker_id, fence, id);
END
$$;

-- One event (see write_events).
CREATE FUNCTION workhorse.write_event(
  p_job_id uuid, p_kind text, p_at timestamptz, p_attempt integer DEFAULT NULL, p_data jsonb DEFAULT NULL,
  p_worker_id text DEFAULT NULL, p_fence bigint DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM workhorse.write_events(ARRAY[p_job_id], ARRAY[p_kind], p_at, ARRAY[p_attempt], ARRAY[p_data],
                                 ARRAY[p_worker_id], ARRAY[p_fence]);
END
$$;

-- Ends a live job: deletes its runtime row and writes its outcome, the closing row of its open
-- attempt (with outcome p_attempt_outcome) and the terminal event, all in the caller's
-- transaction. An attempt is open while a worker runs it (`active`) and while the job sleeps
-- (`resuming` outside `active`: the sleep columns say who ran it last and since when); every
-- other live job has closed all the attempts it started.
-- Then (unless p_follow is false: settle_blocked, which settles in a loop of its own) the jobs
-- that wait on this one are counted down (settle_dependents) and its live children are
-- canceled (cancel_children); each costs one index probe for a job that has none.
CREATE FUNCTION workhorse.finish_job(
  r workhorse.job_runtime, p_state text, p_result jsonb, p_error jsonb, p_attempt_outcome text, p_now timestamptz,
  p_follow boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM workhorse.job_runtime WHERE job_id = r.job_id;
  INSERT INTO workhorse.job_outcome (job_id, queue, state, result, error, final_attempt, fence_token, worker_id, finished_at, progress)
  VALUES (r.job_id, r.queue, p_state, p_result, p_error, r.current_attempt, r.fence_token, r.worker_id, p_now, r.progress);
  IF r.state = 'active' OR r.resuming THEN
    INSERT INTO workhorse.attempt_history (job_id, attempt, outcome, worker_id, fence_token, started_at, finished_at, error)
    VALUES (r.job_id, r.current_attempt, p_attempt_outcome, coalesce(r.worker_id, r.sleep_worker_id), r.fence_token,
            coalesce(r.attempt_started_at, r.sleep_attempt_started_at), p_now,
            CASE WHEN p_attempt_outcome <> 'succeeded' THEN p_error END);
  END IF;
  PERFORM workhorse.write_event(r.job_id, p_state, p_now, r.current_attempt,
    CASE WHEN p_error IS NOT NULL THEN jsonb_build_object('error', p_error) END, r.worker_id, r.fence_token);
  IF p_follow THEN
    IF EXISTS (SELECT 1 FROM workhorse.job_dependency e WHERE e.prerequisite_id = r.job_id) THEN
      PERFORM workhorse.settle_dependents(ARRAY[r.job_id], p_now);
    END IF;
    IF EXISTS (SELECT 1 FROM workhorse.job_dependency e WHERE e.dependent_id = r.job_id AND e.kind = 'child') THEN
      PERFORM workhorse.cancel_children(r.job_id, p_now);
    END IF;
  END IF;
  -- Its waiters (await_results_v1) are woken; one probe of an empty table when nobody waits.
  IF EXISTS (SELECT 1 FROM workhorse.result_waiter) THEN
    PERFORM workhorse.notify_results(ARRAY[r.job_id]);
  END IF;
END
$$;

-- Wakes the waiters (see result_waiter in 010_tables.sql) of those of p_job_ids that have ended:
-- their rows are removed and their ids notified on `workhorse_results` at commit, at most 200
-- ids (comma-separated) per notification, so a payload stays under PostgreSQL's 8000 bytes.
CREATE FUNCTION workhorse.notify_results(p_job_ids uuid[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_ended text[];
  v_i integer;
BEGIN
  WITH gone AS (
    DELETE FROM workhorse.result_waiter w
     WHERE w.job_id = ANY (p_job_ids) AND EXISTS (SELECT 1 FROM workhorse.job_outcome o WHERE o.job_id = w.job_id)
    RETURNING w.job_id)
  SELECT array_agg(g.job_id::text ORDER BY g.job_id) INTO v_ended FROM gone g;
  FOR v_i IN 1 .. coalesce(cardinality(v_ended), 0) BY 200 LOOP
    PERFORM pg_notify('workhorse_results', array_to_string(v_ended[v_i : v_i + 199], ','));
  END LOOP;
END
$$;

-- One part of an error envelope as it is stored: at most p_max characters; a longer part is cut
-- and says so.
CREATE FUNCTION workhorse.bounded_error_part(p_text text, p_max integer)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN length(p_text) <= p_max THEN p_text
              ELSE left(p_text, p_max) || format('… [truncated: %s of %s characters kept]', p_max, length(p_text)) END
$$;

-- The one bound of every stored error envelope, whoever sends or makes it (fail_v1, release_v1,
-- cancellations): {"name", "message", "stack"?}, the name at most 200 characters, the message
-- and the stack at most 32,768 each (characters are Unicode code points, the same for every
-- SDK); a longer part ends with `… [truncated: n of m characters kept]`. A part that is not a
-- string is kept as its JSON text, a missing or null name reads "Error", a missing message "", a
-- null stack is left out, other keys are dropped. So a stored envelope is at most about 400 KB
-- of JSON, whatever the parts held, and a failure is never refused for its size.
CREATE FUNCTION workhorse.bounded_error(p_error jsonb)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_build_object(
           'name', workhorse.bounded_error_part(coalesce(p_error ->> 'name', 'Error'), 200),
           'message', workhorse.bounded_error_part(coalesce(p_error ->> 'message', ''), 32768))
         || CASE WHEN p_error ->> 'stack' IS NULL THEN '{}'::jsonb
                 ELSE jsonb_build_object('stack', workhorse.bounded_error_part(p_error ->> 'stack', 32768)) END
$$;

-- The error envelope of a job ended by a cancel request.
CREATE FUNCTION workhorse.cancel_error(p_reason text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT workhorse.bounded_error(jsonb_build_object('name', 'Canceled', 'message', coalesce(p_reason, 'canceled on request')))
$$;

-- Fails a live job whose deadline has passed, whatever its state, with DeadlineExceeded and no
-- retry; an open attempt closes as `deadline`. Every function that finds a job past its
-- deadline ends it this way, so the outcome is the same whoever gets there first.
CREATE FUNCTION workhorse.fail_past_deadline(r workhorse.job_runtime, p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  PERFORM workhorse.finish_job(r, 'failed', NULL,
    jsonb_build_object('name', 'DeadlineExceeded',
      'message', format('the job did not finish by its deadline (%s)',
                        to_char(r.deadline AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))),
    'deadline', p_now);
END
$$;

-- Moves a live job back to waiting: ready now (behind the jobs already waiting) or scheduled
-- for later. The owner columns are cleared. p_resuming: the attempt stays open and the next
-- claim continues it (a durable sleep); the sleep columns keep who ran it and since when.
-- p_extra_attempts grows the job's attempt budget (by one for an attempt given back by a release).
CREATE FUNCTION workhorse.requeue_job(
  p_job_id uuid, p_run_at timestamptz, p_now timestamptz, p_last_error jsonb, p_extra_attempts integer,
  p_resuming boolean DEFAULT false)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_state text := CASE WHEN p_run_at <= p_now THEN 'ready' ELSE 'scheduled' END;
BEGIN
  -- (Every right-hand side reads the row as it was: the sleep columns get the old owner.)
  UPDATE workhorse.job_runtime
     SET state = v_state,
         seq = CASE WHEN v_state = 'ready' THEN nextval('workhorse.job_seq') ELSE seq END,
         run_at = greatest(p_run_at, p_now),
         max_attempts = max_attempts + p_extra_attempts,
         resuming = p_resuming,
         sleep_worker_id = CASE WHEN p_resuming THEN worker_id END,
         sleep_attempt_started_at = CASE WHEN p_resuming THEN attempt_started_at END,
         worker_id = NULL, lease_expires_at = NULL, heartbeat_at = NULL, attempt_started_at = NULL,
         attempt_deadline = NULL, cancel_requested_at = NULL, cancel_reason = NULL,
         last_error = coalesce(p_last_error, last_error)
   WHERE job_id = p_job_id;
  RETURN v_state;
END
$$;

-- The retry policy for a failed attempt of a job, and where it comes from: the job's own, else
-- the handler's (p_handler_policy, as the worker that reports the failure gave it, else the one
-- registered for the job's queue and type: see handler_policy), else the default. `counted` is
-- the number of attempts that count against the job's budget so far (released ones do not),
-- which sets an exponential delay.
CREATE FUNCTION workhorse.retry_policy_of(
  r workhorse.job_runtime, p_handler_policy jsonb, OUT policy jsonb, OUT source text, OUT counted integer)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  SELECT coalesce(j.retry_policy, p_handler_policy, h.retry_policy),
         CASE WHEN j.retry_policy IS NOT NULL THEN 'job'
              WHEN coalesce(p_handler_policy, h.retry_policy) IS NOT NULL THEN 'handler'
              ELSE 'default' END,
         r.current_attempt - (r.max_attempts - j.max_attempts)
    INTO policy, source, counted
  FROM workhorse.job j
  LEFT JOIN workhorse.handler_policy h ON h.queue = j.queue AND h.type = j.type
  WHERE j.id = r.job_id;
  policy := coalesce(policy, workhorse.normalize_retry_policy(NULL, 'retryPolicy'));
END
$$;
