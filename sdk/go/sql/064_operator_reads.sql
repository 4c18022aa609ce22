-- Operator reads that stay cheap on a large history: job listings bounded by creation time and
-- by how many jobs one call may examine, and finished jobs per queue over time. The dashboard
-- reads through these (Admin.listJobs, Admin.queueActivity).

-- The position in creation order of the first job created at or after p_at: the smallest `seq`
-- of job_query whose `created_at` is not before p_at, or one past the largest `seq` when every
-- job is older. A binary search over job_query's primary key (about 30 index probes for a
-- billion seq values) instead of an index on `created_at`, which every enqueue would pay for.
-- `seq` and `created_at` grow together (enqueue_many_v1 reads the clock and draws `seq` in the
-- same call), up to the microseconds by which two concurrent calls may interleave the two.
CREATE FUNCTION workhorse.job_seq_at(p_at timestamptz)
RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_low bigint;
  v_high bigint;
  v_middle bigint;
  v_created timestamptz;
BEGIN
  SELECT min(seq), max(seq) + 1 INTO v_low, v_high FROM workhorse.job_query;
  IF v_low IS NULL THEN
    RETURN 0;
  END IF;
  -- Invariant: the answer lies in [v_low, v_high]; v_high = max + 1 stands for "after every job".
  WHILE v_low < v_high LOOP
    v_middle := v_low + (v_high - v_low) / 2;
    SELECT q.created_at INTO v_created FROM workhorse.job_query q WHERE q.seq >= v_middle ORDER BY q.seq LIMIT 1;
    IF v_created >= p_at THEN
      v_high := v_middle;
    ELSE
      v_low := v_middle + 1;
    END IF;
  END LOOP;
  RETURN coalesce((SELECT q.seq FROM workhorse.job_query q WHERE q.seq >= v_low ORDER BY q.seq LIMIT 1), v_low);
END
$$;

-- Pages through jobs newest first in creation order, as list_jobs_v1 does, with two additions:
--  * p_created_after (inclusive) and p_created_before (exclusive) bound the creation time; they
--    become `seq` bounds (job_seq_at), so a window far back costs what one at the head costs.
--  * p_scan_limit bounds how many jobs one call examines: the queue's (or the type's, or all)
--    in creation order, through the index that serves that filter, before the filters no index
--    serves (the type when a queue is given too, the states) are applied. A filter that rarely
--    matches then answers in bounded time with fewer rows instead of walking the whole history.
-- Returns at most p_limit jobs, then, when the listing goes on, one more row whose `id` is null
-- and whose `seq` is the p_before_seq of the next call: after a full page when another match
-- exists, or after a partial one when the walk reached its limit with jobs left to examine. No
-- such row: the listing is complete.
CREATE FUNCTION workhorse.list_jobs_v2(
  p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_states text[] DEFAULT NULL,
  p_limit integer DEFAULT 50, p_before_seq bigint DEFAULT NULL,
  p_created_after timestamptz DEFAULT NULL, p_created_before timestamptz DEFAULT NULL,
  p_scan_limit integer DEFAULT NULL)
RETURNS SETOF workhorse.job_snapshot
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_before bigint := p_before_seq;
  v_after bigint;
  v_walk text := 'true';
  v_filter text := 'true';
  v_source text;
  v_probe text;
  v_row workhorse.job_snapshot;
  v_count integer := 0;
  v_last bigint;
  v_scanned integer;
  v_oldest bigint;
BEGIN
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  IF p_scan_limit IS NOT NULL AND (p_scan_limit < 1 OR p_scan_limit > 1000000) THEN
    PERFORM workhorse.raise_invalid('scanLimit', 'must be an integer from 1 to 1000000');
  END IF;
  IF p_states IS NOT NULL AND NOT p_states <@ ARRAY['blocked', 'scheduled', 'ready', 'active', 'succeeded', 'failed', 'canceled'] THEN
    PERFORM workhorse.raise_invalid('states', 'must list states among blocked, scheduled, ready, active, succeeded, failed, canceled');
  END IF;
  IF p_created_before IS NOT NULL THEN
    v_before := least(v_before, workhorse.job_seq_at(p_created_before));
  END IF;
  IF p_created_after IS NOT NULL THEN
    v_after := workhorse.job_seq_at(p_created_after);
  END IF;
  -- Built per call so the planner sees which filters are present and walks the matching index:
  -- the queue's, else the type's, else the primary key, newest first.
  IF p_queue IS NOT NULL THEN
    v_walk := v_walk || ' AND q.queue = $1';
    IF p_type IS NOT NULL THEN v_filter := v_filter || ' AND q.type = $2'; END IF;
  ELSIF p_type IS NOT NULL THEN
    v_walk := v_walk || ' AND q.type = $2';
  END IF;
  IF v_before IS NOT NULL THEN v_walk := v_walk || ' AND q.seq < $5'; END IF;
  IF v_after IS NOT NULL THEN v_walk := v_walk || ' AND q.seq >= $6'; END IF;
  -- The state by primary-key probes of the live and the terminal row (a subquery per row, so
  -- the planner cannot turn the walk into a join over the whole job table); the full snapshot
  -- is built only for the rows returned.
  IF p_states IS NOT NULL THEN
    v_filter := v_filter || ' AND coalesce((SELECT r.state FROM workhorse.job_runtime r WHERE r.job_id = q.job_id),'
                         || ' (SELECT o.state FROM workhorse.job_outcome o WHERE o.job_id = q.job_id)) = ANY ($3)';
  END IF;
  v_source := 'SELECT q.seq, q.job_id, q.type FROM workhorse.job_query q WHERE ' || v_walk;
  IF p_scan_limit IS NOT NULL THEN
    -- A subquery with a LIMIT keeps the other filters out of the bounded walk.
    v_source := v_source || ' ORDER BY q.seq DESC LIMIT $7';
    v_probe := 'SELECT q.seq FROM workhorse.job_query q WHERE ' || v_walk || ' ORDER BY q.seq DESC LIMIT $7 + 1';
  END IF;
  FOR v_row IN EXECUTE
    'SELECT s.* FROM (SELECT q.seq, q.job_id FROM (' || v_source || ') q WHERE ' || v_filter
    || ' ORDER BY q.seq DESC LIMIT $4 + 1) m JOIN workhorse.job_snapshot s ON s.id = m.job_id ORDER BY m.seq DESC'
  USING p_queue, p_type, p_states, p_limit, v_before, v_after, p_scan_limit
  LOOP
    v_count := v_count + 1;
    IF v_count > p_limit THEN
      RETURN NEXT jsonb_populate_record(NULL::workhorse.job_snapshot, jsonb_build_object('seq', v_last));
      RETURN;
    END IF;
    v_last := v_row.seq;
    RETURN NEXT v_row;
  END LOOP;
  IF p_scan_limit IS NOT NULL THEN
    -- Did the walk stop at its limit with jobs left? One index entry further tells; the next
    -- call starts at that job (p_before_seq is exclusive).
    EXECUTE 'SELECT count(*), min(q.seq) FROM (' || v_probe || ') q'
    INTO v_scanned, v_oldest
    USING p_queue, p_type, p_states, p_limit, v_before, v_after, p_scan_limit;
    IF v_scanned > p_scan_limit THEN
      RETURN NEXT jsonb_populate_record(NULL::workhorse.job_snapshot, jsonb_build_object('seq', v_oldest + 1));
    END IF;
  END IF;
END
$$;

-- list_jobs_v2 with an opaque cursor made here (make_cursor): p_cursor is the next_cursor of the
-- previous page (NULL for the first), refused with P1001 naming `cursor` when this listing did
-- not make it. Returns the jobs (next_cursor NULL), then, when the listing goes on, one row
-- whose columns are all NULL but next_cursor.
CREATE FUNCTION workhorse.list_jobs_v3(
  p_queue text DEFAULT NULL, p_type text DEFAULT NULL, p_states text[] DEFAULT NULL,
  p_limit integer DEFAULT 50, p_cursor text DEFAULT NULL,
  p_created_after timestamptz DEFAULT NULL, p_created_before timestamptz DEFAULT NULL,
  p_scan_limit integer DEFAULT NULL)
RETURNS TABLE (
  id uuid, queue text, type text, payload jsonb, priority integer, max_attempts integer,
  retry_policy jsonb, tags text[], state text, current_attempt integer, run_at timestamptz,
  created_at timestamptz, finished_at timestamptz, result jsonb, error jsonb, worker_id text,
  lease_expires_at timestamptz, cancel_requested_at timestamptz, progress jsonb,
  redriven_from uuid, redriven_to uuid[], seq bigint, deadline timestamptz,
  execution_timeout_ms integer, next_cursor text)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  PERFORM workhorse.check_filter_name(p_queue, 'queue');
  PERFORM workhorse.check_filter_name(p_type, 'type');
  PERFORM workhorse.check_time(p_created_after, 'createdAfter');
  PERFORM workhorse.check_time(p_created_before, 'createdBefore');
  RETURN QUERY
  SELECT x.id, x.queue, x.type, x.payload, x.priority, x.max_attempts, x.retry_policy, x.tags,
         x.state, x.current_attempt, x.run_at, x.created_at, x.finished_at, x.result, x.error,
         x.worker_id, x.lease_expires_at, x.cancel_requested_at, x.progress, x.redriven_from,
         x.redriven_to, CASE WHEN x.id IS NOT NULL THEN x.seq END, x.deadline, x.execution_timeout_ms, x.next_cursor
  FROM (
    SELECT s.*, CASE WHEN s.id IS NULL THEN workhorse.make_cursor('jobs', s.seq::text) END AS next_cursor
    FROM workhorse.list_jobs_v2(p_queue, p_type, p_states, p_limit, workhorse.cursor_bigint('jobs', p_cursor),
                                p_created_after, p_created_before, p_scan_limit) WITH ORDINALITY AS s
  ) AS x
  ORDER BY x.ordinality;
END
$$;

-- Finished jobs per queue and time bucket since p_since, by terminal state: what the
-- dashboard's throughput and failure charts draw. Buckets are p_bucket_seconds long and start at
-- p_since; empty buckets are left out. It reads job_outcome through its BRIN index on
-- finished_at, so its cost is that of the outcomes inside the window, not of the whole table.
CREATE FUNCTION workhorse.queue_activity_v1(p_since timestamptz, p_bucket_seconds integer)
RETURNS TABLE (queue text, bucket timestamptz, succeeded bigint, failed bigint, canceled bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  IF p_since IS NULL OR p_since < clock_timestamp() - interval '31 days' THEN
    PERFORM workhorse.raise_invalid('since', 'must be a time within the last 31 days');
  END IF;
  IF p_bucket_seconds IS NULL OR p_bucket_seconds < 1 OR p_bucket_seconds > 86400 THEN
    PERFORM workhorse.raise_invalid('bucketSeconds', 'must be an integer from 1 to 86400');
  END IF;
  RETURN QUERY
  SELECT o.queue, date_bin(make_interval(secs => p_bucket_seconds), o.finished_at, p_since) AS bucket,
         count(*) FILTER (WHERE o.state = 'succeeded'),
         count(*) FILTER (WHERE o.state = 'failed'),
         count(*) FILTER (WHERE o.state = 'canceled')
  FROM workhorse.job_outcome o
  WHERE o.finished_at >= p_since
  GROUP BY 1, 2
  ORDER BY 1, 2;
END
$$;
