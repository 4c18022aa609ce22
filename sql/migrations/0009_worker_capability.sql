-- Step 8 -> 9: the worker capability reaches only what the jobs it holds need (issue 30, defect 8).
-- A registry row is bound to its registrant: report_worker_v2 returns a secret at registration
-- (stored as its sha256) that every later report and unregister_worker_v2 present; no report
-- clears an operator's drain. dependencies_v2 answers only the job's holder (worker id + fence
-- under a live lease). The previous release's report_worker_v1, unregister_worker_v1 and
-- dependencies_v1 stay callable and are restricted (see their comments; docs/protocol.md).
-- Locks: adds two nullable columns to workhorse.worker_registry (a catalog change, no rewrite;
-- an ACCESS EXCLUSIVE lock on that small operator-only table for the instant of the change);
-- replaces functions. No job or history table is touched.
ALTER TABLE workhorse.worker_registry ADD COLUMN secret_hash bytea, ADD COLUMN registered_by text;

-- The capability's refusal (SQLSTATE P1040): a worker reached for a job it does not hold under a
-- live fence, or for a registry row that is not its own. Nothing was read or written.
CREATE OR REPLACE FUNCTION workhorse.raise_not_yours(p_field text, p_message text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'P1040', MESSAGE = p_field || ': ' || p_message, COLUMN = p_field;
END
$$;

-- Checks a report's worker id and info (both report versions).
CREATE OR REPLACE FUNCTION workhorse.check_worker_report(p_worker_id text, p_info jsonb)
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
CREATE OR REPLACE FUNCTION workhorse.register_worker_row(p_worker_id text, p_info jsonb, p_in_flight integer, p_secret_hash bytea)
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
CREATE OR REPLACE FUNCTION workhorse.update_worker_row(p_worker_id text, p_info jsonb, p_in_flight integer)
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
CREATE OR REPLACE FUNCTION workhorse.report_worker_v2(p_worker_id text, p_info jsonb, p_in_flight integer, p_secret text)
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
CREATE OR REPLACE FUNCTION workhorse.report_worker_v1(p_worker_id text, p_info jsonb, p_in_flight integer)
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
CREATE OR REPLACE FUNCTION workhorse.unregister_worker_v2(p_worker_id text, p_secret text)
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
CREATE OR REPLACE FUNCTION workhorse.unregister_worker_v1(p_worker_id text)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM workhorse.worker_registry
  WHERE worker_id = p_worker_id AND secret_hash IS NULL AND coalesce(registered_by, session_user::text) = session_user::text;
  RETURN FOUND;
END
$$;

-- The prerequisites of a job (dependsOn order) with their state and, once ended, result or
-- error: what ctx.dependencies() gives a handler. Only for the job's holder: the caller's worker
-- id and fence must own the job under a live lease (workhorse.owns), or the call is refused
-- (P1040) and reads nothing. Operators read a job's links with job_links_v1.
CREATE OR REPLACE FUNCTION workhorse.dependencies_v2(p_job_id uuid, p_worker_id text, p_fence bigint)
RETURNS TABLE (job_id uuid, state text, result jsonb, error jsonb)
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM workhorse.job_runtime r
                 WHERE r.job_id = p_job_id AND workhorse.owns(r, p_worker_id, p_fence, clock_timestamp())) THEN
    PERFORM workhorse.raise_not_yours('jobId',
      format('job %s is not held by worker %s under fence %s: a worker reads only the dependencies of a job it holds', p_job_id, p_worker_id, p_fence));
  END IF;
  RETURN QUERY
  SELECT e.prerequisite_id, coalesce(r.state, o.state), o.result, o.error
  FROM workhorse.job_dependency e
  LEFT JOIN workhorse.job_runtime r ON r.job_id = e.prerequisite_id
  LEFT JOIN workhorse.job_outcome o ON o.job_id = e.prerequisite_id
  WHERE e.dependent_id = p_job_id AND e.kind = 'dependency'
  ORDER BY e.ordinal;
END
$$;

-- The previous release's ctx.dependencies(), kept for rolling deploys (docs/protocol.md) and
-- restricted: it names no worker, so it answers only for a job that is active under a live lease
-- (one a worker holds now) and refuses any other (P1040). Retired with the previous release.
CREATE OR REPLACE FUNCTION workhorse.dependencies_v1(p_job_id uuid)
RETURNS TABLE (job_id uuid, state text, result jsonb, error jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  r workhorse.job_runtime;
BEGIN
  SELECT * INTO r FROM workhorse.job_runtime x WHERE x.job_id = p_job_id;
  IF NOT FOUND OR NOT workhorse.owns(r, r.worker_id, r.fence_token, clock_timestamp()) THEN
    PERFORM workhorse.raise_not_yours('jobId',
      format('job %s is not held by a worker under a live lease: a worker reads only the dependencies of a job it holds', p_job_id));
  END IF;
  RETURN QUERY SELECT d.job_id, d.state, d.result, d.error FROM workhorse.dependencies_v2(p_job_id, r.worker_id, r.fence_token) d;
END
$$;

-- As sql/990_privileges.sql does at installation: the new protocol functions get their
-- capabilities, nothing is left to PUBLIC, and every protocol function replaced above is again
-- SECURITY DEFINER with a pinned search_path (CREATE OR REPLACE resets both).
INSERT INTO workhorse.protocol_function (name, capabilities) VALUES
  ('dependencies_v2',      '{worker}'),
  ('report_worker_v2',     '{worker}'),
  ('unregister_worker_v2', '{worker}');
REVOKE ALL ON FUNCTION workhorse.raise_not_yours(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.check_worker_report(text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.register_worker_row(text, jsonb, integer, bytea) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.update_worker_row(text, jsonb, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.report_worker_v2(text, jsonb, integer, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.unregister_worker_v2(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION workhorse.dependencies_v2(uuid, text, bigint) FROM PUBLIC;
ALTER FUNCTION workhorse.report_worker_v2(text, jsonb, integer, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.report_worker_v1(text, jsonb, integer) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.unregister_worker_v2(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.unregister_worker_v1(text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.dependencies_v2(uuid, text, bigint) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.dependencies_v1(uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Roles granted before this step may call the new functions at once (step 6).
SELECT workhorse.regrant_capabilities();
