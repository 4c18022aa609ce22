-- Retention: history and finished jobs are removed once they are older than the policy's
-- windows, by the maintenance tick (tick_v1 calls retention_run_v1 with a small budget) or by an
-- operator (`workhorse retention run`). Live jobs are never touched, nor finished jobs that a live
-- job still references (see retention_referenced: a redrive source, a prerequisite, a child).
-- See docs/operations.md#retention.
--
-- Application roles get nothing on these tables: the protocol functions here are listed in
-- sql/990_privileges.sql, which makes them SECURITY DEFINER like every other.

-- The policy (one row). History goes by whole UTC days (a day's partition is dropped once the
-- day is older than its window); finished jobs go one by one, with their outcome, query row,
-- checkpoints, waits and redrive lineage, once they finished longer ago than their window.
CREATE TABLE workhorse.retention_policy (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  enabled boolean NOT NULL DEFAULT true,
  job_event_days integer NOT NULL DEFAULT 14 CHECK (job_event_days BETWEEN 1 AND 36500),
  attempt_history_days integer NOT NULL DEFAULT 14 CHECK (attempt_history_days BETWEEN 1 AND 36500),
  finished_job_ms bigint NOT NULL DEFAULT 2592000000 CHECK (finished_job_ms BETWEEN 1000 AND 3153600000000),
  changed_at timestamptz,
  changed_by text,
  -- The login role (session_user) of the last change, next to changed_by; null before the schema
  -- recorded it (every change is also in workhorse.operator_change).
  login_role text
);
INSERT INTO workhorse.retention_policy DEFAULT VALUES;

-- How far retention got (one row). Finished jobs are found by walking `job` in id order: ids are
-- time-ordered (UUID version 7, see new_job_id), so every job created before the window's start
-- lies below one id, and the walk needs no index beyond the primary key (an index on
-- job_outcome.finished_at would cost every completion an insert). The watermark is the last id
-- looked at; jobs it passed that could not go yet (still live, finished too recently, or still
-- referenced) wait in retention_deferred for their own time.
CREATE TABLE workhorse.retention_state (
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
  job_watermark uuid NOT NULL DEFAULT '00000000-0000-0000-0000-000000000000',
  -- Every job created before this time was looked at (the watermark, as a time).
  covered_until timestamptz,
  last_run_at timestamptz,
  last_partition_check_at timestamptz,
  -- The last pass removed something or stopped at its budget: the next tick runs one at once.
  last_more boolean NOT NULL DEFAULT true,
  jobs_purged bigint NOT NULL DEFAULT 0,
  partitions_dropped bigint NOT NULL DEFAULT 0,
  -- Partition drops that gave up waiting for their lock (tried again later).
  lock_timeouts bigint NOT NULL DEFAULT 0
);
INSERT INTO workhorse.retention_state DEFAULT VALUES;

CREATE TABLE workhorse.retention_deferred (
  job_id uuid PRIMARY KEY,
  recheck_at timestamptz NOT NULL
);
CREATE INDEX retention_deferred_recheck_idx ON workhorse.retention_deferred (recheck_at);

-- The smallest job id created at or after p_at (UUID version 7: 48 bits of Unix milliseconds first).
CREATE FUNCTION workhorse.job_id_floor(p_at timestamptz)
RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
  SELECT (lpad(to_hex(floor(extract(epoch FROM p_at) * 1000)::bigint), 12, '0') || '00000000000000000000')::uuid
$$;

-- The time a job id was created at.
CREATE FUNCTION workhorse.job_id_time(p_id uuid)
RETURNS timestamptz
LANGUAGE sql IMMUTABLE AS $$
  SELECT to_timestamp(('x' || lpad(left(replace(p_id::text, '-', ''), 12), 16, '0'))::bit(64)::bigint / 1000.0)
$$;

-- Which of p_ids a live job still references, so retention keeps them: the source of a redrive
-- whose new job is live (its lineage stays readable while the redriven job runs). Every kind of
-- reference between jobs is one more UNION arm here (parents of child jobs, prerequisites).
CREATE FUNCTION workhorse.retention_referenced(p_ids uuid[])
RETURNS TABLE (job_id uuid)
LANGUAGE sql STABLE AS $$
  SELECT r.source_job_id
  FROM workhorse.job_redrive r
  JOIN workhorse.job_runtime live ON live.job_id = r.new_job_id
  WHERE r.source_job_id = ANY (p_ids)
  UNION
  -- A prerequisite or child of a live job: the live job reads its result or error when it runs
  -- (ctx.dependencies, ctx.runChild on replay).
  SELECT d.prerequisite_id
  FROM workhorse.job_dependency d
  JOIN workhorse.job_runtime live ON live.job_id = d.dependent_id
  WHERE d.prerequisite_id = ANY (p_ids)
$$;

-- Removes finished jobs (p_ids, with their job_query seqs p_seqs) and every row that belongs to
-- them: outcome, query row, checkpoints, sleeps, signals and waits, dependency edges and redrive
-- lineage. The caller has locked their job rows and checked that no live job references them
-- (retention_purge, delete_job_v1). A redrive source kept for one of them is looked at again by
-- retention now. Their history (job_event, attempt_history) goes with its day's partition.
CREATE FUNCTION workhorse.remove_finished_jobs(p_ids uuid[], p_seqs bigint[], p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_gone uuid[] := p_ids;
  v_seqs bigint[] := p_seqs;
BEGIN
  DELETE FROM workhorse.retention_deferred WHERE job_id = ANY (v_gone);
  -- A redrive source that was kept for the job now removed may go in its turn: look at it again now.
  INSERT INTO workhorse.retention_deferred (job_id, recheck_at)
  SELECT r.source_job_id, p_now FROM workhorse.job_redrive r
  WHERE r.new_job_id = ANY (v_gone) AND r.source_job_id <> ALL (v_gone)
  ON CONFLICT (job_id) DO UPDATE SET recheck_at = EXCLUDED.recheck_at;
  DELETE FROM workhorse.job_redrive WHERE source_job_id = ANY (v_gone) OR new_job_id = ANY (v_gone);
  DELETE FROM workhorse.job_dependency WHERE dependent_id = ANY (v_gone) OR prerequisite_id = ANY (v_gone);
  DELETE FROM workhorse.job_child_call WHERE parent_id = ANY (v_gone);
  DELETE FROM workhorse.job_signal WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_signal_wait WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_human_wait WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_checkpoint WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_wait WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job_query WHERE seq = ANY (v_seqs);
  DELETE FROM workhorse.job_outcome WHERE job_id = ANY (v_gone);
  DELETE FROM workhorse.job WHERE id = ANY (v_gone);
END
$$;

-- Removes finished jobs (all their rows) among p_ids; ids that cannot go yet are deferred: a live
-- job for a day, a job finished within the window until the window has passed, a referenced one
-- for an hour (or for the window, when it is shorter). Returns how many jobs it removed.
CREATE FUNCTION workhorse.retention_purge(p_ids uuid[], p_cutoff timestamptz, p_window_ms bigint, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_gone uuid[];
  v_seqs bigint[];
BEGIN
  -- Locked, skipping any a concurrent writer holds (a redrive's foreign-key check): those are
  -- deferred and looked at again later.
  SELECT coalesce(array_agg(g.id), '{}'), coalesce(array_agg(g.seq), '{}') INTO v_gone, v_seqs
  FROM (SELECT j.id, j.seq
        FROM workhorse.job j
        JOIN workhorse.job_outcome o ON o.job_id = j.id
        WHERE j.id = ANY (p_ids) AND o.finished_at < p_cutoff
          AND j.id NOT IN (SELECT x.job_id FROM workhorse.retention_referenced(p_ids) x)
        FOR UPDATE OF j SKIP LOCKED) g;
  -- An enqueue naming one of them as a prerequisite locks its row until it commits (see
  -- batch_dependencies): one that committed after this statement's snapshot but before its lock
  -- is seen by a new statement, so the references are looked at again under the locks.
  IF cardinality(v_gone) > 0 THEN
    SELECT coalesce(array_agg(j.id), '{}'), coalesce(array_agg(j.seq), '{}') INTO v_gone, v_seqs
    FROM workhorse.job j
    WHERE j.id = ANY (v_gone) AND j.id NOT IN (SELECT x.job_id FROM workhorse.retention_referenced(v_gone) x);
  END IF;
  INSERT INTO workhorse.retention_deferred (job_id, recheck_at)
  SELECT i.id,
         CASE WHEN o.job_id IS NULL THEN p_now + least(interval '1 day', p_window_ms * interval '1 millisecond')
              WHEN o.finished_at >= p_cutoff THEN o.finished_at + p_window_ms * interval '1 millisecond'
              ELSE p_now + least(interval '1 hour', p_window_ms * interval '1 millisecond') END
  FROM unnest(p_ids) AS i (id)
  LEFT JOIN workhorse.job_outcome o ON o.job_id = i.id
  WHERE i.id <> ALL (v_gone)
  ON CONFLICT (job_id) DO UPDATE SET recheck_at = EXCLUDED.recheck_at;
  IF cardinality(v_gone) = 0 THEN
    RETURN 0;
  END IF;
  PERFORM workhorse.remove_finished_jobs(v_gone, v_seqs, p_now);
  RETURN cardinality(v_gone);
END
$$;

-- The daily partitions of the history tables: table, partition name and day.
CREATE FUNCTION workhorse.history_partitions()
RETURNS TABLE (tbl text, part text, day date)
LANGUAGE sql STABLE AS $$
  SELECT p.relname::text, c.relname::text, to_date(right(c.relname, 8), 'YYYYMMDD')
  FROM pg_catalog.pg_inherits i
  JOIN pg_catalog.pg_class c ON c.oid = i.inhrelid
  JOIN pg_catalog.pg_class p ON p.oid = i.inhparent
  JOIN pg_catalog.pg_namespace n ON n.oid = p.relnamespace
  WHERE n.nspname = 'workhorse' AND p.relname IN ('job_event', 'attempt_history') AND c.relname ~ '_p[0-9]{8}$'
$$;

-- Drops the daily partitions of one history table whose day ended more than p_days days ago
-- (oldest first, at most p_max), each waiting at most p_lock_ms for its lock: dropping a
-- partition locks the parent table, and a drop stuck behind a long transaction would make every
-- writer of the history queue behind it. A drop that gives up is tried again at a later run.
-- Rows of those days in the default partition are deleted as well. Returns (dropped, timed out).
CREATE FUNCTION workhorse.retention_drop_partitions(p_table text, p_column text, p_days integer, p_max integer, p_lock_ms integer,
                                                    OUT dropped integer, OUT timed_out integer)
LANGUAGE plpgsql AS $$
DECLARE
  v_cut date := (clock_timestamp() AT TIME ZONE 'UTC')::date - p_days;
  v_part text;
  v_lock text := current_setting('lock_timeout');
BEGIN
  dropped := 0;
  timed_out := 0;
  FOR v_part IN
    SELECT h.part FROM workhorse.history_partitions() h
    WHERE h.tbl = p_table AND h.day < v_cut
    ORDER BY h.day
    LIMIT p_max
  LOOP
    BEGIN
      PERFORM set_config('lock_timeout', p_lock_ms::text, true);
      EXECUTE format('DROP TABLE workhorse.%I', v_part);
      dropped := dropped + 1;
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
      timed_out := timed_out + 1;
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', v_lock, true);
  EXECUTE format('DELETE FROM workhorse.%I WHERE ctid = ANY (ARRAY(SELECT ctid FROM workhorse.%I WHERE %I < $1 LIMIT 10000))',
                 p_table || '_default', p_table || '_default', p_column)
    USING v_cut::timestamp AT TIME ZONE 'UTC';
END
$$;

-- One retention pass, unless another runs (a try-lock on the row of retention_state: the caller
-- is answered at once with {"skipped": true}) or the policy is disabled: an expired history
-- partition is dropped (looked for at most once a minute, unless p_force; a pass that drops one
-- does nothing else), or up to p_budget jobs are looked at in blocks of 1000 (the
-- deferred ones that are due first, then the next ones past the watermark), removing those that
-- finished before the window. Each block is a few index lookups per job, so a pass holds no lock
-- that a claim or a completion waits for: claims take `ready` runtime rows, and retention
-- touches only finished jobs' rows. `more` says the budget ran out with work left.
CREATE FUNCTION workhorse.retention_run_v1(p_budget integer DEFAULT 1000, p_force boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  p workhorse.retention_policy;
  s workhorse.retention_state;
  v_cutoff timestamptz;
  v_floor uuid;
  v_ids uuid[];
  v_block integer;
  v_seen integer := 0;
  v_purged integer := 0;
  v_dropped integer := 0;
  v_timeouts integer := 0;
  v_more boolean := false;
  d record;
BEGIN
  IF p_budget IS NULL OR p_budget < 1 OR p_budget > 1000000 THEN
    PERFORM workhorse.raise_invalid('budget', 'must be an integer from 1 to 1000000');
  END IF;
  -- From the tick: a pass that found nothing to do waits 10 s before the next one, checked
  -- without a lock or a write, so an idle retention costs a tick one row read.
  IF NOT p_force AND EXISTS (SELECT 1 FROM workhorse.retention_state
                             WHERE last_run_at > v_now - interval '10 seconds' AND NOT last_more) THEN
    RETURN jsonb_build_object('skipped', true);
  END IF;
  -- One pass at a time: the row of retention_state, which no application role can lock (an
  -- advisory lock could be taken by any role, and stop retention).
  SELECT * INTO s FROM workhorse.retention_state FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('skipped', true);
  END IF;
  SELECT * INTO p FROM workhorse.retention_policy;
  IF NOT p.enabled THEN
    RETURN jsonb_build_object('skipped', true, 'disabled', true);
  END IF;
  -- At most one partition per pass, and then nothing else: the drop holds its lock on the
  -- parent table until the pass's transaction ends, and every writer of the history waits for it
  -- meanwhile. The next pass (at once: `more`) looks for the next one.
  IF p_force OR s.last_partition_check_at IS NULL OR s.last_partition_check_at < v_now - interval '1 minute' THEN
    d := workhorse.retention_drop_partitions('job_event', 'at', p.job_event_days, 1, 100);
    v_dropped := d.dropped;
    v_timeouts := d.timed_out;
    IF v_dropped = 0 THEN
      d := workhorse.retention_drop_partitions('attempt_history', 'finished_at', p.attempt_history_days, 1, 100);
      v_dropped := d.dropped;
      v_timeouts := v_timeouts + d.timed_out;
    END IF;
    IF v_dropped = 0 THEN
      s.last_partition_check_at := v_now;
    END IF;
  END IF;
  IF v_dropped > 0 THEN
    UPDATE workhorse.retention_state
       SET last_run_at = v_now, partitions_dropped = partitions_dropped + v_dropped,
           lock_timeouts = lock_timeouts + v_timeouts, last_more = true;
    RETURN jsonb_build_object('skipped', false, 'jobsPurged', 0, 'jobsExamined', 0,
                              'partitionsDropped', v_dropped, 'lockTimeouts', v_timeouts, 'more', true);
  END IF;
  v_cutoff := v_now - p.finished_job_ms * interval '1 millisecond';
  v_floor := workhorse.job_id_floor(v_cutoff);
  LOOP
    v_block := least(1000, p_budget - v_seen);
    EXIT WHEN v_block <= 0;
    SELECT coalesce(array_agg(x.job_id), '{}') INTO v_ids
    FROM (SELECT r.job_id FROM workhorse.retention_deferred r WHERE r.recheck_at <= v_now ORDER BY r.recheck_at LIMIT v_block) x;
    IF cardinality(v_ids) = 0 THEN
      SELECT coalesce(array_agg(x.id ORDER BY x.id), '{}') INTO v_ids
      FROM (SELECT j.id FROM workhorse.job j WHERE j.id > s.job_watermark AND j.id < v_floor ORDER BY j.id LIMIT v_block) x;
      IF cardinality(v_ids) < v_block THEN
        -- Every job created before the window's start has been looked at.
        s.job_watermark := greatest(s.job_watermark, v_floor);
        s.covered_until := greatest(s.covered_until, v_cutoff);
      ELSE
        s.job_watermark := v_ids[cardinality(v_ids)];
        s.covered_until := workhorse.job_id_time(s.job_watermark);
      END IF;
    END IF;
    EXIT WHEN cardinality(v_ids) = 0;
    v_seen := v_seen + cardinality(v_ids);
    v_purged := v_purged + workhorse.retention_purge(v_ids, v_cutoff, p.finished_job_ms, v_now);
    IF cardinality(v_ids) < v_block THEN
      CONTINUE;
    END IF;
    v_more := v_seen >= p_budget;
  END LOOP;
  UPDATE workhorse.retention_state
     SET job_watermark = s.job_watermark, covered_until = s.covered_until, last_run_at = v_now,
         last_partition_check_at = s.last_partition_check_at,
         jobs_purged = jobs_purged + v_purged, partitions_dropped = partitions_dropped + v_dropped,
         lock_timeouts = lock_timeouts + v_timeouts, last_more = v_purged > 0 OR v_dropped > 0 OR v_more;
  RETURN jsonb_build_object('skipped', false, 'jobsPurged', v_purged, 'jobsExamined', v_seen,
                            'partitionsDropped', v_dropped, 'lockTimeouts', v_timeouts, 'more', v_more);
END
$$;

-- Sets the policy; fields left out keep their values. Names the first bad field. Records the
-- caller-chosen actor and the login role (session_user) on the policy and in
-- workhorse.operator_change (with the settings given).
CREATE FUNCTION workhorse.set_retention_v1(p_policy jsonb, p_actor text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
BEGIN
  PERFORM workhorse.check_actor(p_actor, NULL);
  IF p_policy IS NULL OR jsonb_typeof(p_policy) <> 'object' THEN
    PERFORM workhorse.raise_invalid('policy', 'must be an object');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_policy) LOOP
    IF v_key NOT IN ('enabled', 'jobEventDays', 'attemptHistoryDays', 'finishedJobMs') THEN
      PERFORM workhorse.raise_invalid(v_key, 'is not a retention setting (enabled, jobEventDays, attemptHistoryDays, finishedJobMs)');
    END IF;
  END LOOP;
  IF p_policy ? 'enabled' AND jsonb_typeof(p_policy -> 'enabled') <> 'boolean' THEN
    PERFORM workhorse.raise_invalid('enabled', 'must be a boolean');
  END IF;
  UPDATE workhorse.retention_policy
     SET enabled = coalesce((p_policy ->> 'enabled')::boolean, enabled),
         job_event_days = CASE WHEN p_policy ? 'jobEventDays' THEN workhorse.check_int(p_policy -> 'jobEventDays', 'jobEventDays', 1, 36500)::integer ELSE job_event_days END,
         attempt_history_days = CASE WHEN p_policy ? 'attemptHistoryDays' THEN workhorse.check_int(p_policy -> 'attemptHistoryDays', 'attemptHistoryDays', 1, 36500)::integer ELSE attempt_history_days END,
         finished_job_ms = CASE WHEN p_policy ? 'finishedJobMs' THEN workhorse.check_int(p_policy -> 'finishedJobMs', 'finishedJobMs', 1000, 3153600000000) ELSE finished_job_ms END,
         changed_at = clock_timestamp(), changed_by = p_actor, login_role = session_user;
  PERFORM workhorse.record_operator_change('retention_set', NULL, p_actor, NULL, p_policy);
END
$$;

-- The policy and how far retention got: when it last ran, the time up to which finished jobs
-- were looked at and how far that is behind the window (lag), jobs waiting to be looked at again,
-- the oldest history day kept and the days past their window still there, totals. The policy
-- says who changed it last: changedBy (the caller-chosen actor) and loginRole (session_user).
CREATE FUNCTION workhorse.retention_status_v2()
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
  WITH parts AS (SELECT h.tbl, h.day FROM workhorse.history_partitions() h),
  today AS (SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date AS d)
  SELECT jsonb_build_object(
    'policy', jsonb_build_object('enabled', pol.enabled, 'jobEventDays', pol.job_event_days,
                                 'attemptHistoryDays', pol.attempt_history_days, 'finishedJobMs', pol.finished_job_ms,
                                 'changedAt', pol.changed_at, 'changedBy', pol.changed_by, 'loginRole', pol.login_role),
    'lastRunAt', st.last_run_at,
    'coveredUntil', st.covered_until,
    'lagMs', CASE WHEN st.covered_until IS NULL THEN NULL
                  ELSE greatest(0, floor(extract(epoch FROM (clock_timestamp() - pol.finished_job_ms * interval '1 millisecond') - st.covered_until) * 1000))::bigint END,
    'deferredJobs', (SELECT count(*) FROM workhorse.retention_deferred),
    'jobsPurged', st.jobs_purged,
    'partitionsDropped', st.partitions_dropped,
    'lockTimeouts', st.lock_timeouts,
    'oldestJobEventDay', (SELECT min(day) FROM parts WHERE tbl = 'job_event'),
    'oldestAttemptHistoryDay', (SELECT min(day) FROM parts WHERE tbl = 'attempt_history'),
    'expiredPartitions', (SELECT count(*) FROM parts, today
                          WHERE day < today.d - CASE WHEN tbl = 'job_event' THEN pol.job_event_days ELSE pol.attempt_history_days END))
  FROM workhorse.retention_policy pol, workhorse.retention_state st
  );
END
$$;

-- The previous release's read (deprecated, docs/protocol.md): retention_status_v2 without the
-- policy's login role.
CREATE FUNCTION workhorse.retention_status_v1()
RETURNS jsonb
LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN workhorse.retention_status_v2() #- '{policy,loginRole}';
END
$$;
