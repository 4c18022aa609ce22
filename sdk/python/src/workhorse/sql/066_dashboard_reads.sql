-- Reads of one job's signals and waits, for operators (Admin.listJobSignals, Admin.listJobWaits,
-- and the dashboard's job page). Each returns at most p_limit rows, the newest first, so a
-- handler that waits in a loop cannot make one page read without bound.

-- The arguments of both reads: a job id, and 1 to 1000 rows.
CREATE FUNCTION workhorse.check_job_read(p_job_id uuid, p_limit integer)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF p_job_id IS NULL THEN
    PERFORM workhorse.raise_invalid('jobId', 'must be a job id (a UUID string)');
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
END
$$;

-- The signals sent to a job: `buffered` while no wait has consumed it, `consumed` once the
-- wait numbered wait_seq among the job's waits for that name took it.
CREATE FUNCTION workhorse.job_signals_v1(p_job_id uuid, p_limit integer DEFAULT 100)
RETURNS TABLE (id bigint, name text, payload jsonb, status text, wait_seq integer, sent_at timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  PERFORM workhorse.check_job_read(p_job_id, p_limit);
  RETURN QUERY
  SELECT s.id, s.name, s.payload, CASE WHEN s.wait_seq IS NULL THEN 'buffered' ELSE 'consumed' END, s.wait_seq, s.sent_at
  FROM workhorse.job_signal s
  WHERE s.job_id = p_job_id
  ORDER BY s.id DESC
  LIMIT p_limit;
END
$$;

-- The waits a job's handler reached: for signals (kind `signal`, the seq-th wait for its name;
-- status open, delivered or timed_out) and human decisions (kind `human`, seq 1; status open,
-- decided or timed_out, with context, choices and, once decided, the decision, actor and
-- reason). `resolved_at` is when it was answered or timed out.
CREATE FUNCTION workhorse.job_waits_v1(p_job_id uuid, p_limit integer DEFAULT 100)
RETURNS TABLE (kind text, name text, seq integer, status text, timeout_at timestamptz, attempt integer,
               created_at timestamptz, resolved_at timestamptz, signal_id bigint, context jsonb, choices jsonb,
               decision jsonb, actor text, reason text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  -- A wait past its timeout is over by the database's clock (as complete_human_wait_v1 and
  -- send_signal_v1 judge it), also before its job woke to record that: it reads `timed_out`.
  v_now timestamptz := clock_timestamp();
BEGIN
  PERFORM workhorse.check_job_read(p_job_id, p_limit);
  RETURN QUERY
  SELECT w.kind, w.name, w.seq, w.status, w.timeout_at, w.attempt, w.created_at, w.resolved_at,
         w.signal_id, w.context, w.choices, w.decision, w.actor, w.reason
  FROM (
    (SELECT 'signal'::text AS kind, x.name, x.seq,
            CASE WHEN x.status = 'open' AND x.timeout_at <= v_now THEN 'timed_out' ELSE x.status END, x.timeout_at, x.attempt, x.created_at, x.resolved_at,
            x.signal_id, NULL::jsonb AS context, NULL::jsonb AS choices, NULL::jsonb AS decision, NULL::text AS actor,
            NULL::text AS reason
     FROM workhorse.job_signal_wait x WHERE x.job_id = p_job_id
     ORDER BY x.created_at DESC LIMIT p_limit)
    UNION ALL
    (SELECT 'human'::text, h.name, 1,
            CASE WHEN h.status = 'open' AND h.timeout_at <= v_now THEN 'timed_out' ELSE h.status END, h.timeout_at, h.attempt, h.created_at, h.decided_at,
            NULL::bigint, h.context, h.choices, h.decision, h.actor, h.reason
     FROM workhorse.job_human_wait h WHERE h.job_id = p_job_id
     ORDER BY h.created_at DESC LIMIT p_limit)
  ) AS w
  ORDER BY w.created_at DESC, w.kind, w.name, w.seq DESC
  LIMIT p_limit;
END
$$;
