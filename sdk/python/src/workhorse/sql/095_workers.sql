-- Live workers: each running worker reports itself every `period` (its heartbeat interval), and
-- an operator may ask one to drain (stop claiming, finish what it holds). The registry is for
-- operators only: no claim, completion or lease reads it, so a worker that cannot report still
-- runs its jobs, and a registry row never decides who owns a job (leases and fences do).
--
-- Application roles get nothing on these tables: the protocol functions here are listed in
-- sql/990_privileges.sql, which makes them SECURITY DEFINER like every other.

CREATE TABLE workhorse.worker_registry (
  worker_id text PRIMARY KEY,
  host text NOT NULL,
  pid integer NOT NULL,
  queues text[] NOT NULL,
  concurrency integer NOT NULL,
  -- Jobs it held at its last report.
  in_flight integer NOT NULL,
  version text NOT NULL,
  started_at timestamptz NOT NULL,
  last_seen_at timestamptz NOT NULL,
  -- How often it reports; it counts as gone after three missed reports.
  period_ms integer NOT NULL,
  drain_requested_at timestamptz,
  drain_requested_by text,
  drain_reason text
);

-- A worker counts as gone once three reports in a row are missing (one late report is noise:
-- a pause of the event loop, a slow statement).
CREATE FUNCTION workhorse.worker_is_gone(p_last_seen_at timestamptz, p_period_ms integer, p_now timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_last_seen_at + 3 * p_period_ms * interval '1 millisecond' < p_now
$$;

-- A worker's report: who it is, what it runs, how many jobs it holds. Answers whether an
-- operator asked it to drain. A worker that starts again under the same id (a fixed workerId)
-- starts a new life: a drain asked of the previous one does not carry over. Rows of workers gone
-- for over a day are removed here (a few per report), so the registry does not grow with every
-- restart.
CREATE FUNCTION workhorse.report_worker_v1(p_worker_id text, p_info jsonb, p_in_flight integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  v_started timestamptz;
  v_drain boolean;
BEGIN
  IF p_worker_id IS NULL OR length(p_worker_id) = 0 OR length(p_worker_id) > 200 THEN
    PERFORM workhorse.raise_invalid('workerId', 'must be text of 1 to 200 characters');
  END IF;
  IF p_info IS NULL OR jsonb_typeof(p_info) <> 'object' THEN
    PERFORM workhorse.raise_invalid('info', 'must be a JSON object');
  END IF;
  v_started := (p_info ->> 'startedAt')::timestamptz;
  INSERT INTO workhorse.worker_registry AS w
    (worker_id, host, pid, queues, concurrency, in_flight, version, started_at, last_seen_at, period_ms)
  VALUES (p_worker_id, p_info ->> 'host', (p_info ->> 'pid')::integer,
          ARRAY(SELECT jsonb_array_elements_text(p_info -> 'queues')), (p_info ->> 'concurrency')::integer,
          coalesce(p_in_flight, 0), p_info ->> 'version', v_started, v_now, (p_info ->> 'periodMs')::integer)
  ON CONFLICT (worker_id) DO UPDATE
    SET host = EXCLUDED.host, pid = EXCLUDED.pid, queues = EXCLUDED.queues, concurrency = EXCLUDED.concurrency,
        in_flight = EXCLUDED.in_flight, version = EXCLUDED.version, started_at = EXCLUDED.started_at,
        last_seen_at = EXCLUDED.last_seen_at, period_ms = EXCLUDED.period_ms,
        drain_requested_at = CASE WHEN w.started_at = EXCLUDED.started_at THEN w.drain_requested_at END,
        drain_requested_by = CASE WHEN w.started_at = EXCLUDED.started_at THEN w.drain_requested_by END,
        drain_reason = CASE WHEN w.started_at = EXCLUDED.started_at THEN w.drain_reason END
  RETURNING w.drain_requested_at IS NOT NULL INTO v_drain;
  DELETE FROM workhorse.worker_registry
  WHERE worker_id = ANY (ARRAY(
    SELECT worker_id FROM workhorse.worker_registry
    WHERE last_seen_at < v_now - interval '1 day' LIMIT 10));
  RETURN v_drain;
END
$$;

-- A worker that stopped cleanly leaves the registry at once.
CREATE FUNCTION workhorse.unregister_worker_v1(p_worker_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM workhorse.worker_registry WHERE worker_id = p_worker_id;
  RETURN FOUND;
END
$$;

-- The registered workers, newest first, with their status: `running`, `draining` (asked to
-- drain, still holding jobs), `drained` (asked to drain, holding none) or `gone` (three reports
-- missed: it crashed, hung or lost its connection; its jobs come back when their leases expire).
CREATE FUNCTION workhorse.list_workers_v1()
RETURNS TABLE (worker_id text, status text, host text, pid integer, queues text[], concurrency integer,
               in_flight integer, version text, started_at timestamptz, last_seen_at timestamptz,
               drain_requested_at timestamptz, drain_requested_by text, drain_reason text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT w.worker_id,
         CASE WHEN workhorse.worker_is_gone(w.last_seen_at, w.period_ms, clock_timestamp()) THEN 'gone'
              WHEN w.drain_requested_at IS NULL THEN 'running'
              WHEN w.in_flight > 0 THEN 'draining'
              ELSE 'drained' END,
         w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.version, w.started_at, w.last_seen_at,
         w.drain_requested_at, w.drain_requested_by, w.drain_reason
  FROM workhorse.worker_registry w
  ORDER BY w.started_at DESC, w.worker_id;
END
$$;

-- Asks a worker to drain: at its next report it stops claiming and finishes the jobs it holds.
-- Answers `requested`, `already_requested` (the first request keeps its time, actor and reason)
-- or `not_found`.
CREATE FUNCTION workhorse.drain_worker_v1(p_worker_id text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_before timestamptz;
BEGIN
  SELECT drain_requested_at INTO v_before FROM workhorse.worker_registry WHERE worker_id = p_worker_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'not_found';
  END IF;
  IF v_before IS NOT NULL THEN
    RETURN 'already_requested';
  END IF;
  UPDATE workhorse.worker_registry
     SET drain_requested_at = clock_timestamp(), drain_requested_by = p_actor, drain_reason = p_reason
   WHERE worker_id = p_worker_id;
  RETURN 'requested';
END
$$;
