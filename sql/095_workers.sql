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
  drain_reason text,
  -- The registrant's binding: sha256 of the secret report_worker_v2 returned at registration
  -- (NULL for a row a previous release's report_worker_v1 made), and the login role that made it.
  secret_hash bytea,
  registered_by text,
  -- The login role (session_user) that asked for the drain, next to drain_requested_by; null for
  -- a request made before the schema recorded it (also in workhorse.operator_change).
  drain_login_role text
);

-- A worker counts as gone once three reports in a row are missing (one late report is noise:
-- a pause of the event loop, a slow statement).
CREATE FUNCTION workhorse.worker_is_gone(p_last_seen_at timestamptz, p_period_ms integer, p_now timestamptz)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
  SELECT p_last_seen_at + 3 * p_period_ms * interval '1 millisecond' < p_now
$$;

-- Checks a report's worker id and info (both report versions).
CREATE FUNCTION workhorse.check_worker_report(p_worker_id text, p_info jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  IF p_worker_id IS NULL OR length(p_worker_id) = 0 OR length(p_worker_id) > 200 THEN
    PERFORM workhorse.raise_invalid('workerId', 'must be text of 1 to 200 characters');
  END IF;
  IF p_info IS NULL OR jsonb_typeof(p_info) <> 'object' THEN
    PERFORM workhorse.raise_invalid('info', 'must be a JSON object');
  END IF;
END
$$;

-- Writes a registration: a new row for p_worker_id (replacing a gone one), bound to p_secret_hash
-- (NULL for a previous release's report) and to the login role. A new life: no drain.
CREATE FUNCTION workhorse.register_worker_row(p_worker_id text, p_info jsonb, p_in_flight integer, p_secret_hash bytea)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
BEGIN
  DELETE FROM workhorse.worker_registry WHERE worker_id = p_worker_id;
  INSERT INTO workhorse.worker_registry
    (worker_id, host, pid, queues, concurrency, in_flight, version, started_at, last_seen_at, period_ms, secret_hash, registered_by)
  VALUES (p_worker_id, p_info ->> 'host', (p_info ->> 'pid')::integer,
          ARRAY(SELECT jsonb_array_elements_text(p_info -> 'queues')), (p_info ->> 'concurrency')::integer,
          coalesce(p_in_flight, 0), p_info ->> 'version', (p_info ->> 'startedAt')::timestamptz, v_now,
          (p_info ->> 'periodMs')::integer, p_secret_hash, session_user);
  -- Rows of workers gone for over a day, a few per registration, so the registry does not grow
  -- with every restart.
  DELETE FROM workhorse.worker_registry
  WHERE worker_id = ANY (ARRAY(
    SELECT worker_id FROM workhorse.worker_registry
    WHERE last_seen_at < v_now - interval '1 day' LIMIT 10));
END
$$;

-- Updates a registered row with a report; the drain columns are never touched (only an
-- operator's drain_worker_v1 writes them, and only unregistering clears them). Answers whether
-- an operator asked the worker to drain.
CREATE FUNCTION workhorse.update_worker_row(p_worker_id text, p_info jsonb, p_in_flight integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_drain boolean;
BEGIN
  UPDATE workhorse.worker_registry AS w
     SET host = p_info ->> 'host', pid = (p_info ->> 'pid')::integer,
         queues = ARRAY(SELECT jsonb_array_elements_text(p_info -> 'queues')), concurrency = (p_info ->> 'concurrency')::integer,
         in_flight = coalesce(p_in_flight, 0), version = p_info ->> 'version', last_seen_at = clock_timestamp(),
         period_ms = (p_info ->> 'periodMs')::integer
   WHERE w.worker_id = p_worker_id
  RETURNING w.drain_requested_at IS NOT NULL INTO v_drain;
  RETURN v_drain;
END
$$;

-- A worker's report (this release). The first report registers: p_secret is NULL, and the answer
-- carries a new secret (random, stored only as its sha256) that every later report and the
-- unregistering must present. A registration is refused (P1040) while a live worker holds the
-- id; a gone worker's row (three missed reports) is replaced, a new life without its drain. A
-- report with a secret updates only the row that secret registered, answers whether an operator
-- asked it to drain, and never clears a drain; a wrong secret, or a row that is no longer there,
-- is refused (P1040; the worker registers again).
CREATE FUNCTION workhorse.report_worker_v2(p_worker_id text, p_info jsonb, p_in_flight integer, p_secret text)
RETURNS TABLE (drain boolean, secret text)
LANGUAGE plpgsql AS $$
DECLARE
  w workhorse.worker_registry;
  v_secret text;
BEGIN
  PERFORM workhorse.check_worker_report(p_worker_id, p_info);
  SELECT * INTO w FROM workhorse.worker_registry r WHERE r.worker_id = p_worker_id FOR UPDATE;
  IF p_secret IS NULL THEN
    IF FOUND AND NOT workhorse.worker_is_gone(w.last_seen_at, w.period_ms, clock_timestamp()) THEN
      PERFORM workhorse.raise_not_yours('workerId',
        format('worker %s is registered by a live process; a worker registers only an id no live worker holds', p_worker_id));
    END IF;
    v_secret := replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
    PERFORM workhorse.register_worker_row(p_worker_id, p_info, p_in_flight, sha256(convert_to(v_secret, 'UTF8')));
    RETURN QUERY SELECT false, v_secret;
    RETURN;
  END IF;
  IF NOT FOUND OR w.secret_hash IS NULL OR w.secret_hash <> sha256(convert_to(p_secret, 'UTF8')) THEN
    PERFORM workhorse.raise_not_yours('workerId',
      format('worker %s is not registered with this secret; register again (report without a secret)', p_worker_id));
  END IF;
  RETURN QUERY SELECT workhorse.update_worker_row(p_worker_id, p_info, p_in_flight), NULL::text;
END
$$;

-- A previous release's report, kept for rolling deploys (docs/protocol.md, deprecation window)
-- and restricted: it registers an id no live worker holds, and updates only a row a
-- previous-release report of the same login role made. It never clears a drain (a restart under
-- a fixed id keeps the drain until the row is unregistered or gone), and never touches a row
-- this release's report_worker_v2 registered (P1040).
CREATE FUNCTION workhorse.report_worker_v1(p_worker_id text, p_info jsonb, p_in_flight integer)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  w workhorse.worker_registry;
BEGIN
  PERFORM workhorse.check_worker_report(p_worker_id, p_info);
  SELECT * INTO w FROM workhorse.worker_registry r WHERE r.worker_id = p_worker_id FOR UPDATE;
  IF NOT FOUND OR workhorse.worker_is_gone(w.last_seen_at, w.period_ms, clock_timestamp()) THEN
    PERFORM workhorse.register_worker_row(p_worker_id, p_info, p_in_flight, NULL);
    RETURN false;
  END IF;
  -- A row without a login role was made before this release recorded it: the first
  -- previous-release reporter of it keeps it (a worker that ran through the upgrade).
  IF w.secret_hash IS NOT NULL OR w.registered_by <> session_user::text THEN
    PERFORM workhorse.raise_not_yours('workerId', format('worker %s is registered by another process', p_worker_id));
  END IF;
  IF w.registered_by IS NULL THEN
    UPDATE workhorse.worker_registry SET registered_by = session_user WHERE worker_id = p_worker_id;
  END IF;
  RETURN workhorse.update_worker_row(p_worker_id, p_info, p_in_flight);
END
$$;

-- A worker that stopped cleanly leaves the registry at once, presenting the secret it registered
-- with. Answers false when no such row exists; a row registered with another secret is refused
-- (P1040).
CREATE FUNCTION workhorse.unregister_worker_v2(p_worker_id text, p_secret text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  w workhorse.worker_registry;
BEGIN
  SELECT * INTO w FROM workhorse.worker_registry r WHERE r.worker_id = p_worker_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN false;
  END IF;
  IF p_secret IS NULL OR w.secret_hash IS NULL OR w.secret_hash <> sha256(convert_to(p_secret, 'UTF8')) THEN
    PERFORM workhorse.raise_not_yours('workerId', format('worker %s is not registered with this secret', p_worker_id));
  END IF;
  DELETE FROM workhorse.worker_registry WHERE worker_id = p_worker_id;
  RETURN true;
END
$$;

-- A previous release's unregistering, kept and restricted: it removes only a row a
-- previous-release report of the same login role made (answers false for any other).
CREATE FUNCTION workhorse.unregister_worker_v1(p_worker_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM workhorse.worker_registry
  WHERE worker_id = p_worker_id AND secret_hash IS NULL AND coalesce(registered_by, session_user::text) = session_user::text;
  RETURN FOUND;
END
$$;

-- The registered workers, newest first, with their status: `running`, `draining` (asked to
-- drain, still holding jobs), `drained` (asked to drain, holding none) or `gone` (three reports
-- missed: it crashed, hung or lost its connection; its jobs come back when their leases expire),
-- and who asked for a drain: the caller-chosen actor and the login role (session_user).
CREATE FUNCTION workhorse.list_workers_v2()
RETURNS TABLE (worker_id text, status text, host text, pid integer, queues text[], concurrency integer,
               in_flight integer, version text, started_at timestamptz, last_seen_at timestamptz,
               drain_requested_at timestamptz, drain_requested_by text, drain_reason text, drain_login_role text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT w.worker_id,
         CASE WHEN workhorse.worker_is_gone(w.last_seen_at, w.period_ms, clock_timestamp()) THEN 'gone'
              WHEN w.drain_requested_at IS NULL THEN 'running'
              WHEN w.in_flight > 0 THEN 'draining'
              ELSE 'drained' END,
         w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.version, w.started_at, w.last_seen_at,
         w.drain_requested_at, w.drain_requested_by, w.drain_reason, w.drain_login_role
  FROM workhorse.worker_registry w
  ORDER BY w.started_at DESC, w.worker_id;
END
$$;

-- The previous release's read (deprecated, docs/protocol.md): list_workers_v2 without the login role.
CREATE FUNCTION workhorse.list_workers_v1()
RETURNS TABLE (worker_id text, status text, host text, pid integer, queues text[], concurrency integer,
               in_flight integer, version text, started_at timestamptz, last_seen_at timestamptz,
               drain_requested_at timestamptz, drain_requested_by text, drain_reason text)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN QUERY
  SELECT w.worker_id, w.status, w.host, w.pid, w.queues, w.concurrency, w.in_flight, w.version, w.started_at,
         w.last_seen_at, w.drain_requested_at, w.drain_requested_by, w.drain_reason
  FROM workhorse.list_workers_v2() w
  ORDER BY w.started_at DESC, w.worker_id;
END
$$;

-- Asks a worker to drain: at its next report it stops claiming and finishes the jobs it holds.
-- Answers `requested` (recorded with the login role, also in workhorse.operator_change),
-- `already_requested` (the first request keeps its time, actor, reason and login role) or
-- `not_found`.
CREATE FUNCTION workhorse.drain_worker_v1(p_worker_id text, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_before timestamptz;
BEGIN
  PERFORM workhorse.check_worker(p_worker_id);
  PERFORM workhorse.check_actor(p_actor, p_reason);
  SELECT drain_requested_at INTO v_before FROM workhorse.worker_registry WHERE worker_id = p_worker_id FOR UPDATE;
  IF NOT FOUND THEN
    RETURN 'not_found';
  END IF;
  IF v_before IS NOT NULL THEN
    RETURN 'already_requested';
  END IF;
  UPDATE workhorse.worker_registry
     SET drain_requested_at = clock_timestamp(), drain_requested_by = p_actor, drain_reason = p_reason,
         drain_login_role = session_user
   WHERE worker_id = p_worker_id;
  PERFORM workhorse.record_operator_change('worker_drain_requested', p_worker_id, p_actor, p_reason, NULL);
  RETURN 'requested';
END
$$;
