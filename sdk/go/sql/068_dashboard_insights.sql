-- Operator reads for the dashboard in an incident: finding jobs by tag, payload and error
-- (find_jobs_v1), the run and wait times of a page of jobs (job_durations_v1), timing
-- percentiles per queue or type (job_timings_v1) and failures grouped by error
-- (error_groups_v1). Each is bounded: by a scan limit, a page of ids, a window and a sample.

-- True when workhorse.job has a valid GIN index on `payload` (jsonb_ops or jsonb_path_ops),
-- which serves `payload @> ...`: find_jobs_v1 then asks the index instead of walking jobs.
CREATE FUNCTION workhorse.job_payload_indexed()
RETURNS boolean
LANGUAGE sql STABLE AS $$
  SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
    JOIN pg_catalog.pg_am am ON am.oid = c.relam
    JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
    WHERE i.indrelid = 'workhorse.job'::regclass AND am.amname = 'gin' AND a.attname = 'payload'
      AND i.indisvalid AND i.indpred IS NULL AND i.indnatts = 1)
$$;

-- Jobs newest first (creation order) whose tags hold p_tag, whose payload contains p_payload
-- (`payload @> p_payload`, a JSON object), and whose error (the terminal one, or the last
-- attempt's while a retry waits) has the name p_error or a message containing it (any case).
-- At least one filter is given. Rows and paging as list_jobs_v2: at most p_limit jobs, then,
-- when the search goes on, one row whose `id` is null and whose `seq` is the next p_before_seq.
-- Without an index that serves the filter, one call examines at most p_scan_limit jobs (newest
-- first, from p_before_seq). With a GIN index on workhorse.job (payload), a payload filter
-- reads the index and finds matches however far back they are (no scan limit applies).
CREATE FUNCTION workhorse.find_jobs_page(
  p_tag text, p_payload jsonb, p_error text, p_limit integer, p_before_seq bigint, p_scan_limit integer)
RETURNS SETOF workhorse.job_snapshot
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_filter text := 'true';
  v_source text;
  v_row workhorse.job_snapshot;
  v_count integer := 0;
  v_last bigint;
  v_scanned integer;
  v_oldest bigint;
  v_indexed boolean := false;
  v_like text;
BEGIN
  IF p_tag IS NULL AND p_payload IS NULL AND p_error IS NULL THEN
    PERFORM workhorse.raise_invalid('filter', 'give a tag, a payload or an error to search by');
  END IF;
  IF p_tag IS NOT NULL AND (length(p_tag) < 1 OR length(p_tag) > 200) THEN
    PERFORM workhorse.raise_invalid('tag', 'must be 1 to 200 characters');
  END IF;
  IF p_payload IS NOT NULL AND (jsonb_typeof(p_payload) <> 'object' OR p_payload = '{}'::jsonb) THEN
    PERFORM workhorse.raise_invalid('payload', 'must be a JSON object with at least one field, such as {"orderId": 42}');
  END IF;
  IF p_payload IS NOT NULL AND octet_length(p_payload::text) > 4096 THEN
    PERFORM workhorse.raise_invalid('payload', 'must be at most 4096 bytes of JSON');
  END IF;
  IF p_error IS NOT NULL AND (length(p_error) < 1 OR length(p_error) > 200) THEN
    PERFORM workhorse.raise_invalid('error', 'must be 1 to 200 characters');
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  IF p_scan_limit IS NULL OR p_scan_limit < 1 OR p_scan_limit > 1000000 THEN
    PERFORM workhorse.raise_invalid('scanLimit', 'must be an integer from 1 to 1000000');
  END IF;
  IF p_tag IS NOT NULL THEN v_filter := v_filter || ' AND j.tags @> ARRAY[$1]'; END IF;
  IF p_payload IS NOT NULL THEN v_filter := v_filter || ' AND j.payload @> $2'; END IF;
  IF p_error IS NOT NULL THEN
    -- The text is matched literally: LIKE's wildcards in it are escaped.
    v_like := '%' || replace(replace(replace(p_error, '\', '\\'), '%', '\%'), '_', '\_') || '%';
    v_filter := v_filter || ' AND EXISTS (SELECT 1 FROM (SELECT coalesce('
      || '(SELECT o.error FROM workhorse.job_outcome o WHERE o.job_id = j.id),'
      || ' (SELECT r.last_error FROM workhorse.job_runtime r WHERE r.job_id = j.id)) AS e) x'
      || ' WHERE x.e ->> ''name'' = $3 OR x.e ->> ''message'' ILIKE $8)';
  END IF;
  v_indexed := p_payload IS NOT NULL AND workhorse.job_payload_indexed();
  IF v_indexed THEN
    -- The GIN index finds the matching jobs; the newest come first.
    v_source := 'SELECT j.seq, j.id FROM workhorse.job j WHERE ' || v_filter
      || CASE WHEN p_before_seq IS NOT NULL THEN ' AND j.seq < $5' ELSE '' END
      || ' ORDER BY j.seq DESC LIMIT $4 + 1';
  ELSE
    -- A bounded walk of creation order (job_query's primary key), then the filters.
    v_source := 'SELECT w.seq, j.id FROM (SELECT q.seq, q.job_id FROM workhorse.job_query q'
      || CASE WHEN p_before_seq IS NOT NULL THEN ' WHERE q.seq < $5' ELSE '' END
      || ' ORDER BY q.seq DESC LIMIT $6) w JOIN workhorse.job j ON j.id = w.job_id WHERE ' || v_filter
      || ' ORDER BY w.seq DESC LIMIT $4 + 1';
  END IF;
  FOR v_row IN EXECUTE
    'SELECT s.* FROM (' || v_source || ') m JOIN workhorse.job_snapshot s ON s.id = m.id ORDER BY m.seq DESC'
  USING p_tag, p_payload, p_error, p_limit, p_before_seq, p_scan_limit, NULL::text, v_like
  LOOP
    v_count := v_count + 1;
    IF v_count > p_limit THEN
      RETURN NEXT jsonb_populate_record(NULL::workhorse.job_snapshot, jsonb_build_object('seq', v_last));
      RETURN;
    END IF;
    v_last := v_row.seq;
    RETURN NEXT v_row;
  END LOOP;
  IF NOT v_indexed THEN
    -- Did the walk stop at its limit with jobs left? One entry further tells.
    EXECUTE 'SELECT count(*), min(w.seq) FROM (SELECT q.seq FROM workhorse.job_query q'
      || CASE WHEN p_before_seq IS NOT NULL THEN ' WHERE q.seq < $1' ELSE '' END
      || ' ORDER BY q.seq DESC LIMIT $2 + 1) w'
    INTO v_scanned, v_oldest
    USING p_before_seq, p_scan_limit;
    IF v_scanned > p_scan_limit THEN
      RETURN NEXT jsonb_populate_record(NULL::workhorse.job_snapshot, jsonb_build_object('seq', v_oldest + 1));
    END IF;
  END IF;
END
$$;

-- The protocol's search (the dashboard's search box, Admin.findJobs): find_jobs_page's rows,
-- then, when the search goes on, one row whose columns are all NULL but next_cursor, a cursor
-- this function makes (make_cursor) and accepts back; any other cursor is refused with P1001
-- naming `cursor`.
CREATE FUNCTION workhorse.find_jobs_v1(
  p_tag text DEFAULT NULL, p_payload jsonb DEFAULT NULL, p_error text DEFAULT NULL,
  p_limit integer DEFAULT 50, p_cursor text DEFAULT NULL, p_scan_limit integer DEFAULT 10000)
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
  RETURN QUERY
  SELECT x.id, x.queue, x.type, x.payload, x.priority, x.max_attempts, x.retry_policy, x.tags,
         x.state, x.current_attempt, x.run_at, x.created_at, x.finished_at, x.result, x.error,
         x.worker_id, x.lease_expires_at, x.cancel_requested_at, x.progress, x.redriven_from,
         x.redriven_to, CASE WHEN x.id IS NOT NULL THEN x.seq END, x.deadline, x.execution_timeout_ms, x.next_cursor
  FROM (
    SELECT f.*, CASE WHEN f.id IS NULL THEN workhorse.make_cursor('find', f.seq::text) END AS next_cursor
    FROM workhorse.find_jobs_page(p_tag, p_payload, p_error, p_limit, workhorse.cursor_bigint('find', p_cursor), p_scan_limit)
      WITH ORDINALITY AS f
  ) AS x
  ORDER BY x.ordinality;
END
$$;

-- The timings of a page of jobs (1 to 1000 ids; unknown ids give no row): when the latest
-- attempt started, how long it ran (until now while it runs), and how long the job waited from
-- the time it was due (its run_at, the enqueue for a job without a delay) to its first start.
-- Null where the job has not started.
CREATE FUNCTION workhorse.job_durations_v1(p_job_ids uuid[])
RETURNS TABLE (job_id uuid, started_at timestamptz, run_ms bigint, wait_ms bigint)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  IF p_job_ids IS NULL OR cardinality(p_job_ids) > 1000 THEN
    PERFORM workhorse.raise_invalid('jobIds', 'must be a list of at most 1000 job ids');
  END IF;
  RETURN QUERY
  SELECT j.id,
         coalesce(r.attempt_started_at, l.started_at),
         (extract(epoch FROM CASE WHEN r.attempt_started_at IS NOT NULL THEN clock_timestamp() - r.attempt_started_at
                                  ELSE l.finished_at - l.started_at END) * 1000)::bigint,
         CASE WHEN coalesce(f.started_at, r.attempt_started_at) IS NOT NULL
              THEN (extract(epoch FROM greatest(coalesce(f.started_at, r.attempt_started_at) - j.run_at, interval '0')) * 1000)::bigint END
  FROM (SELECT DISTINCT unnest(p_job_ids) AS id) i
  JOIN workhorse.job j ON j.id = i.id
  LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
  LEFT JOIN LATERAL (SELECT h.started_at, h.finished_at FROM workhorse.attempt_history h
                     WHERE h.job_id = j.id ORDER BY h.id DESC LIMIT 1) l ON true
  LEFT JOIN LATERAL (SELECT h.started_at FROM workhorse.attempt_history h
                     WHERE h.job_id = j.id ORDER BY h.id LIMIT 1) f ON true;
END
$$;

-- Percentiles (50th, 90th, 99th, in ms) of run time (each closed attempt: start to end) and of
-- wait time (a first attempt's start minus the job's run_at) per queue (p_group 'queue') or per
-- job type ('type'), over the attempts that closed since p_since (within the last 7 days).
-- Bounded: at most p_sample attempts of the window are read (1 to 100000; `sampled` tells
-- whether the window held more), through the day partitions of attempt_history the window
-- covers, each attempt's job by primary key.
CREATE FUNCTION workhorse.job_timings_v1(p_since timestamptz, p_group text DEFAULT 'queue', p_sample integer DEFAULT 20000)
RETURNS TABLE (name text, attempts bigint, run_p50_ms double precision, run_p90_ms double precision,
               run_p99_ms double precision, wait_p50_ms double precision, wait_p90_ms double precision,
               wait_p99_ms double precision, sampled boolean)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  IF p_since IS NULL OR p_since < clock_timestamp() - interval '7 days 1 minute' THEN
    PERFORM workhorse.raise_invalid('since', 'must be a time within the last 7 days');
  END IF;
  IF p_group IS NULL OR p_group NOT IN ('queue', 'type') THEN
    PERFORM workhorse.raise_invalid('group', 'must be queue or type');
  END IF;
  IF p_sample IS NULL OR p_sample < 1 OR p_sample > 100000 THEN
    PERFORM workhorse.raise_invalid('sample', 'must be an integer from 1 to 100000');
  END IF;
  RETURN QUERY
  WITH window_attempts AS MATERIALIZED (
    SELECT h.job_id, h.attempt, extract(epoch FROM h.finished_at - h.started_at) * 1000 AS run_ms, h.started_at
    FROM workhorse.attempt_history h
    WHERE h.finished_at >= p_since
    LIMIT p_sample + 1)
  SELECT CASE WHEN p_group = 'queue' THEN j.queue ELSE j.type END,
         count(*),
         percentile_cont(0.5) WITHIN GROUP (ORDER BY s.run_ms),
         percentile_cont(0.9) WITHIN GROUP (ORDER BY s.run_ms),
         percentile_cont(0.99) WITHIN GROUP (ORDER BY s.run_ms),
         percentile_cont(0.5) WITHIN GROUP (ORDER BY greatest(extract(epoch FROM s.started_at - j.run_at) * 1000, 0)) FILTER (WHERE s.attempt = 1),
         percentile_cont(0.9) WITHIN GROUP (ORDER BY greatest(extract(epoch FROM s.started_at - j.run_at) * 1000, 0)) FILTER (WHERE s.attempt = 1),
         percentile_cont(0.99) WITHIN GROUP (ORDER BY greatest(extract(epoch FROM s.started_at - j.run_at) * 1000, 0)) FILTER (WHERE s.attempt = 1),
         (SELECT count(*) FROM window_attempts) > p_sample
  FROM (SELECT * FROM window_attempts LIMIT p_sample) s
  JOIN workhorse.job j ON j.id = s.job_id
  GROUP BY 1
  ORDER BY 1;
END
$$;

-- Failed jobs that finished since p_since (within the last 7 days), grouped by their error's
-- name and message (its first 200 characters), most frequent first: how many, the queues they
-- failed in, and when the first and the last of them finished. At most p_limit groups (1 to
-- 200). Reads job_outcome through its BRIN index on finished_at: the cost of the window's
-- outcomes, not of the table.
CREATE FUNCTION workhorse.error_groups_v1(p_since timestamptz, p_limit integer DEFAULT 20)
RETURNS TABLE (error_name text, message text, failures bigint, queues text[], first_seen timestamptz, last_seen timestamptz)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
BEGIN
  IF p_since IS NULL OR p_since < clock_timestamp() - interval '7 days 1 minute' THEN
    PERFORM workhorse.raise_invalid('since', 'must be a time within the last 7 days');
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 200 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 200');
  END IF;
  RETURN QUERY
  SELECT coalesce(o.error ->> 'name', 'Error'), left(coalesce(o.error ->> 'message', ''), 200),
         count(*), array_agg(DISTINCT o.queue ORDER BY o.queue), min(o.finished_at), max(o.finished_at)
  FROM workhorse.job_outcome o
  WHERE o.finished_at >= p_since AND o.state = 'failed'
  GROUP BY 1, 2
  ORDER BY 3 DESC, 1, 2
  LIMIT p_limit;
END
$$;
