-- Health: one snapshot of what an on-call engineer watches, read by one statement (so its parts
-- agree with one another), with a status level and the reasons for it. See docs/operations.md.
--
-- Application roles get nothing on these tables: the protocol functions here are listed in
-- sql/990_privileges.sql, which makes them SECURITY DEFINER like every other.

-- The thresholds, each a level pair {"warn": n, "critical": n} (a null level is never reached),
-- merged over these defaults level by level. Checked here, for every client, before anything is
-- read: an unknown key or level, a level that is not a number of at least 0 or null, and a pair
-- given with its warn above its critical are refused (P1001), naming the field. A level given
-- alone is checked against nothing: {"critical": 0} makes every value critical, as critical is
-- looked at first (see health_level).
CREATE FUNCTION workhorse.health_thresholds(p_thresholds jsonb)
RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_defaults jsonb := jsonb_build_object(
    -- How long the oldest ready job of a queue has waited to be claimed.
    'oldestReadyMs', jsonb_build_object('warn', 60000, 'critical', 600000),
    -- Active jobs whose lease ran out over 10 s ago and that maintenance has not recovered.
    'expiredLeases', jsonb_build_object('warn', 1, 'critical', 100),
    -- Jobs of a queue that failed for good (dead letters) in the last hour.
    'failedLastHour', jsonb_build_object('warn', 10, 'critical', 100),
    -- How far retention is behind its window.
    'retentionLagMs', jsonb_build_object('warn', 86400000, 'critical', 604800000),
    -- Ready jobs while no worker is registered as running (workers of the Python and Go SDKs
    -- do not register: set both levels to null when only they run).
    'readyWithoutWorkers', jsonb_build_object('warn', 1, 'critical', null),
    -- Time since a tick last did its work, and since an enabled retention last ran: sixty ticks
    -- at the default interval of 1 s warn; critical is past the longest tick interval a worker
    -- accepts (10 min, jittered up to 12). Raise it for workers that tick less often.
    'maintenanceStaleMs', jsonb_build_object('warn', 60000, 'critical', 900000));
  v_key text;
  v_pair jsonb;
  v_level text;
  v_merged jsonb;
BEGIN
  IF p_thresholds IS NULL OR jsonb_typeof(p_thresholds) <> 'object' THEN
    PERFORM workhorse.raise_invalid('thresholds', 'must be an object');
  END IF;
  FOR v_key, v_pair IN SELECT e.key, e.value FROM jsonb_each(p_thresholds) AS e ORDER BY e.key LOOP
    IF NOT v_defaults ? v_key THEN
      PERFORM workhorse.raise_invalid('thresholds.' || v_key, format('is not a health threshold (%s)',
        (SELECT string_agg(k, ', ') FROM jsonb_object_keys(v_defaults) AS k)));
    END IF;
    IF jsonb_typeof(v_pair) <> 'object' THEN
      PERFORM workhorse.raise_invalid('thresholds.' || v_key, 'must be an object { warn, critical }');
    END IF;
    FOR v_level IN SELECT jsonb_object_keys(v_pair) LOOP
      IF v_level NOT IN ('warn', 'critical') THEN
        PERFORM workhorse.raise_invalid(format('thresholds.%s.%s', v_key, v_level), 'is not a level (warn, critical)');
      END IF;
      IF jsonb_typeof(v_pair -> v_level) NOT IN ('null', 'number') OR (v_pair ->> v_level)::numeric < 0 THEN
        PERFORM workhorse.raise_invalid(format('thresholds.%s.%s', v_key, v_level), 'must be a number of at least 0, or null (never)');
      END IF;
    END LOOP;
  END LOOP;
  FOR v_key, v_pair IN SELECT e.key, e.value FROM jsonb_each(p_thresholds) AS e ORDER BY e.key LOOP
    IF (v_pair ->> 'warn')::numeric > (v_pair ->> 'critical')::numeric THEN
      PERFORM workhorse.raise_invalid('thresholds.' || v_key,
        format('warn (%s) must not be above critical (%s)', v_pair ->> 'warn', v_pair ->> 'critical'));
    END IF;
  END LOOP;
  SELECT jsonb_object_agg(d.key, d.value || coalesce(p_thresholds -> d.key, '{}')) INTO v_merged
  FROM jsonb_each(v_defaults) AS d;
  RETURN v_merged;
END
$$;

-- The level a value reaches under a threshold pair: 'critical', 'warn' or null.
CREATE FUNCTION workhorse.health_level(p_value numeric, p_pair jsonb)
RETURNS text
LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN p_value >= (p_pair ->> 'critical')::numeric THEN 'critical'
              WHEN p_value >= (p_pair ->> 'warn')::numeric THEN 'warn' END
$$;

-- The snapshot: per queue the live jobs by state, the oldest ready job's wait, expired leases
-- not yet recovered and dead letters of the last hour; live workers; retention lag; missing
-- history partitions (today's and tomorrow's); when maintenance last ran; and `status` (`ok`,
-- `warn`, `critical`: the worst level of its `reasons`). Each reason is {code, level, queue (or
-- null), value, threshold}.
--
-- Cost: the live jobs (job_runtime, one pass), the dead letters of the last hour (a range of
-- job_outcome_dead_letter_idx), the registry and the catalog; never the finished jobs as a whole,
-- so a database holding millions of them answers as fast as an empty one.
CREATE FUNCTION workhorse.health_v1(p_thresholds jsonb DEFAULT '{}')
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
    WITH t AS (SELECT workhorse.health_thresholds(p_thresholds) AS t),
    now AS (SELECT clock_timestamp() AS now),
    live AS (
      SELECT r.queue,
             count(*) FILTER (WHERE r.state = 'blocked') AS blocked,
             count(*) FILTER (WHERE r.state = 'scheduled') AS scheduled,
             count(*) FILTER (WHERE r.state = 'ready') AS ready,
             count(*) FILTER (WHERE r.state = 'active') AS active,
             min(r.run_at) FILTER (WHERE r.state = 'ready') AS oldest_ready,
             count(*) FILTER (WHERE r.state = 'active' AND r.lease_expires_at < now.now - interval '10 seconds') AS expired
      FROM workhorse.job_runtime r, now
      GROUP BY r.queue
    ),
    dead AS (
      SELECT o.queue, count(*) AS failed
      FROM workhorse.job_outcome o, now
      WHERE o.state = 'failed' AND o.finished_at > now.now - interval '1 hour'
      GROUP BY o.queue
    ),
    queues AS (
      SELECT coalesce(l.queue, d.queue) AS queue,
             coalesce(l.blocked, 0) AS blocked, coalesce(l.scheduled, 0) AS scheduled,
             coalesce(l.ready, 0) AS ready, coalesce(l.active, 0) AS active,
             coalesce(floor(extract(epoch FROM now.now - l.oldest_ready) * 1000), 0)::bigint AS oldest_ready_ms,
             coalesce(l.expired, 0) AS expired_leases, coalesce(d.failed, 0) AS failed_last_hour
      FROM live l FULL JOIN dead d ON d.queue = l.queue, now
    ),
    workers AS (
      SELECT count(*) FILTER (WHERE s.status = 'running') AS running,
             count(*) FILTER (WHERE s.status IN ('draining', 'drained')) AS draining,
             count(*) FILTER (WHERE s.status = 'gone') AS gone
      FROM (SELECT CASE WHEN workhorse.worker_is_gone(w.last_seen_at, w.period_ms, now.now) THEN 'gone'
                        WHEN w.drain_requested_at IS NOT NULL THEN 'draining' ELSE 'running' END AS status
            FROM workhorse.worker_registry w, now) s
    ),
    retention AS (
      SELECT pol.enabled,
             CASE WHEN NOT pol.enabled OR st.covered_until IS NULL THEN NULL
                  ELSE greatest(0, floor(extract(epoch FROM (now.now - pol.finished_job_ms * interval '1 millisecond') - st.covered_until) * 1000))::bigint
             END AS lag_ms
      FROM workhorse.retention_policy pol, workhorse.retention_state st, now
    ),
    -- When maintenance last did its work: the tick (maintenance_lock, 050_maintenance.sql), and
    -- retention when enabled. A tick that never ran counts from the row's creation (the
    -- installation or the upgrade), so a new database is not stale at once.
    maintenance AS (
      SELECT m.last_run_at AS tick_at, st.last_run_at AS retention_at,
             floor(extract(epoch FROM now.now - coalesce(m.last_run_at, m.created_at)) * 1000)::bigint AS tick_ms,
             CASE WHEN pol.enabled THEN
               floor(extract(epoch FROM now.now - coalesce(st.last_run_at, m.created_at)) * 1000)::bigint END AS retention_ms
      FROM workhorse.maintenance_lock m, workhorse.retention_policy pol, workhorse.retention_state st, now
      WHERE m.name = 'tick'
    ),
    missing AS (
      SELECT coalesce(jsonb_agg(x.name ORDER BY x.name), '[]') AS names
      FROM (SELECT tbl || '_p' || to_char(day, 'YYYYMMDD') AS name
            FROM unnest(ARRAY['job_event', 'attempt_history']) AS tbl,
                 generate_series(0, 1) AS k,
                 LATERAL (SELECT ((now.now AT TIME ZONE 'UTC')::date + k) AS day FROM now) d) x
      WHERE to_regclass('workhorse.' || x.name) IS NULL
    ),
    reasons AS (
      SELECT q.queue, 'oldest_ready_age' AS code, q.oldest_ready_ms::numeric AS value, t.t -> 'oldestReadyMs' AS pair FROM queues q, t WHERE q.ready > 0
      UNION ALL SELECT q.queue, 'expired_leases', q.expired_leases, t.t -> 'expiredLeases' FROM queues q, t
      UNION ALL SELECT q.queue, 'dead_letters', q.failed_last_hour, t.t -> 'failedLastHour' FROM queues q, t
      UNION ALL SELECT NULL, 'retention_lag', r.lag_ms, t.t -> 'retentionLagMs' FROM retention r, t WHERE r.lag_ms IS NOT NULL
      UNION ALL SELECT NULL, 'ready_without_workers', (SELECT sum(ready) FROM queues), t.t -> 'readyWithoutWorkers'
        FROM workers w, t WHERE w.running = 0
      UNION ALL SELECT NULL, 'maintenance_stale', greatest(m.tick_ms, 0), t.t -> 'maintenanceStaleMs' FROM maintenance m, t
      UNION ALL SELECT NULL, 'retention_stale', greatest(m.retention_ms, 0), t.t -> 'maintenanceStaleMs'
        FROM maintenance m, t WHERE m.retention_ms IS NOT NULL
      UNION ALL SELECT NULL, 'partitions_missing', jsonb_array_length(m.names), '{"warn": 1, "critical": null}'::jsonb
        FROM missing m
    ),
    leveled AS (
      SELECT r.*, workhorse.health_level(r.value, r.pair) AS level FROM reasons r
    )
    SELECT jsonb_build_object(
      'status', (SELECT CASE WHEN bool_or(level = 'critical') THEN 'critical' WHEN bool_or(level = 'warn') THEN 'warn' ELSE 'ok' END
                 FROM leveled),
      'checkedAt', (SELECT now FROM now),
      'reasons', coalesce((SELECT jsonb_agg(jsonb_build_object(
                    'code', l.code, 'level', l.level, 'queue', l.queue, 'value', l.value,
                    'threshold', (l.pair ->> l.level)::numeric)
                    ORDER BY l.level = 'warn', l.code, l.queue)
                  FROM leveled l WHERE l.level IS NOT NULL), '[]'),
      'queues', coalesce((SELECT jsonb_agg(jsonb_build_object(
                    'queue', q.queue, 'blocked', q.blocked, 'scheduled', q.scheduled, 'ready', q.ready, 'active', q.active,
                    'oldestReadyMs', q.oldest_ready_ms, 'expiredLeases', q.expired_leases, 'failedLastHour', q.failed_last_hour)
                    ORDER BY q.queue) FROM queues q), '[]'),
      'workers', (SELECT jsonb_build_object('running', w.running, 'draining', w.draining, 'gone', w.gone) FROM workers w),
      'retention', (SELECT jsonb_build_object('enabled', r.enabled, 'lagMs', r.lag_ms) FROM retention r),
      'missingPartitions', (SELECT names FROM missing),
      'maintenance', coalesce((SELECT jsonb_build_object('tickLastRunAt', m.tick_at, 'retentionLastRunAt', m.retention_at) FROM maintenance m),
                              '{"tickLastRunAt": null, "retentionLastRunAt": null}')
    )
  );
END
$$;
