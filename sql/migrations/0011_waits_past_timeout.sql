-- Step 10 -> 11: a wait past its timeout reads `timed_out` in job_waits_v1 (Admin.listJobWaits,
-- the dashboard's job page), by the database's clock, also before its job woke to record it; the
-- dashboard then offers no decision for it (complete_human_wait_v1 would answer `timed_out`).
-- Locks: none of a table (one function replaced).
CREATE OR REPLACE FUNCTION workhorse.job_waits_v1(p_job_id uuid, p_limit integer DEFAULT 100)
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
ALTER FUNCTION workhorse.job_waits_v1(uuid, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
