-- Operator actions on jobs: run now, reschedule, delete, and cancel / run now / delete over a
-- filter with a dry run. See docs/operations.md#operator-actions-on-jobs.
--
-- Each action refuses a job whose state it does not apply to with SQLSTATE P1050 (the job's
-- state travels in the detail, raise_job_state) and records who asked and why (check_actor) in a
-- job_event of the job: `run_now`, `rescheduled`, `deleted` (a deleted job's events stay in the
-- history until retention drops their day), and a cancel as cancel_v1 records it.
--
-- Workers: every action locks the job's runtime row, the row a worker's owner writes lock too
-- (lock_owned), and the live actions apply to jobs no worker holds (run now and reschedule never
-- touch an `active` job; a cancel of one goes through cancel_v1, which asks its worker). A bulk
-- action takes rows with SKIP LOCKED and re-reads each one's state under its lock: a job a worker
-- is writing just then, or that changed state since it was listed, is skipped and counted
-- (`busy`); it is still listed by the next call when it still matches.
--
-- Nothing here is on the hot path: no column, index or trigger of the claim or the completion.

-- The action's refusal of a job in a state it does not apply to: SQLSTATE P1050 on `jobId`, the
-- detail {"jobId", "action", "state"} (state as job_action_state names it).
CREATE FUNCTION workhorse.raise_job_state(p_job_id uuid, p_action text, p_state text, p_message text)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION USING ERRCODE = 'P1050', COLUMN = 'jobId',
    MESSAGE = 'jobId: ' || p_message,
    DETAIL = jsonb_build_object('jobId', p_job_id, 'action', p_action, 'state', p_state)::text;
END
$$;

-- What a live job is doing, as the actions tell states apart: `active` (a worker holds it),
-- `canceling` (active, its cancel asked for), `ready`, `scheduled` (not started yet), `retrying`
-- (scheduled after a failed or released attempt), `sleeping` (a durable sleep), `waiting` (for a
-- signal or a human decision, with or without a timeout) and `blocked` (on prerequisites or
-- children).
CREATE FUNCTION workhorse.job_action_state(r workhorse.job_runtime)
RETURNS text
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF r.state = 'active' THEN
    RETURN CASE WHEN r.cancel_requested_at IS NULL THEN 'active' ELSE 'canceling' END;
  ELSIF r.state = 'ready' THEN
    RETURN 'ready';
  ELSIF r.resuming AND (EXISTS (SELECT 1 FROM workhorse.job_signal_wait w WHERE w.job_id = r.job_id AND w.status = 'open')
                        OR EXISTS (SELECT 1 FROM workhorse.job_human_wait h WHERE h.job_id = r.job_id AND h.status = 'open')) THEN
    RETURN 'waiting';
  ELSIF r.state = 'blocked' THEN
    RETURN 'blocked';
  ELSIF r.resuming THEN
    RETURN 'sleeping';
  ELSIF r.current_attempt > 0 THEN
    RETURN 'retrying';
  END IF;
  RETURN 'scheduled';
END
$$;

-- Who asked and why, as an event's data carries it (keys left out when not given).
CREATE FUNCTION workhorse.actor_data(p_actor text, p_reason text)
RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
  SELECT jsonb_strip_nulls(jsonb_build_object('actor', p_actor, 'reason', p_reason))
$$;

-- Makes a scheduled, retrying or sleeping job ready now (behind the jobs already waiting); a
-- sleeping job's pending sleeps end now, so its handler goes on past them. p_wait: wait for the
-- row's lock (one job) or skip a locked row (`busy`, a bulk action). Answers `ready`,
-- `already_ready`, `not_found`, `busy`, or the state that refuses it (job_action_state, or the
-- terminal state of a finished job).
CREATE FUNCTION workhorse.run_job_now(p_job_id uuid, p_actor text, p_reason text, p_wait boolean)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_state text;
  v_now timestamptz;
BEGIN
  IF p_wait THEN
    SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id FOR UPDATE;
  ELSE
    SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id FOR UPDATE SKIP LOCKED;
  END IF;
  IF NOT FOUND THEN
    SELECT o.state INTO v_state FROM workhorse.job_outcome o WHERE o.job_id = p_job_id;
    IF FOUND THEN
      RETURN v_state;
    END IF;
    RETURN CASE WHEN EXISTS (SELECT 1 FROM workhorse.job_runtime x WHERE x.job_id = p_job_id) THEN 'busy' ELSE 'not_found' END;
  END IF;
  v_state := workhorse.job_action_state(r);
  IF v_state = 'ready' THEN
    RETURN 'already_ready';
  ELSIF v_state NOT IN ('scheduled', 'retrying', 'sleeping') THEN
    RETURN v_state;
  END IF;
  v_now := clock_timestamp();
  UPDATE workhorse.job_runtime SET state = 'ready', seq = nextval('workhorse.job_seq'), run_at = v_now
   WHERE job_id = p_job_id;
  IF v_state = 'sleeping' THEN
    UPDATE workhorse.job_wait SET wake_at = v_now WHERE job_id = p_job_id AND wake_at > v_now;
  END IF;
  PERFORM workhorse.write_event(p_job_id, 'run_now', v_now, r.current_attempt,
    jsonb_build_object('from', v_state, 'runAt', r.run_at) || workhorse.actor_data(p_actor, p_reason));
  PERFORM pg_notify('workhorse_jobs', r.queue);
  RETURN 'ready';
END
$$;

-- Deletes a finished job and what references it (the rows retention removes with it:
-- remove_finished_jobs), never a live job nor one a live job still references (a prerequisite, a
-- child, a redrive source of a live job: retention_referenced; a parent of a live child). p_wait
-- as run_job_now. Records a `deleted` event with who asked and why. Answers `deleted`,
-- `not_found`, `busy`, `referenced`, or the live state that refuses it (job_action_state).
CREATE FUNCTION workhorse.delete_finished_job(p_job_id uuid, p_actor text, p_reason text, p_wait boolean)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_seq bigint;
  v_state text;
  r workhorse.job_runtime;
  v_now timestamptz;
BEGIN
  -- The job's row, as retention locks it: an enqueue naming it as a prerequisite, or a redrive of
  -- it, holds a lock on it until it commits.
  IF p_wait THEN
    SELECT j.seq INTO v_seq FROM workhorse.job j WHERE j.id = p_job_id FOR UPDATE;
  ELSE
    SELECT j.seq INTO v_seq FROM workhorse.job j WHERE j.id = p_job_id FOR UPDATE SKIP LOCKED;
  END IF;
  IF NOT FOUND THEN
    RETURN CASE WHEN EXISTS (SELECT 1 FROM workhorse.job x WHERE x.id = p_job_id) THEN 'busy' ELSE 'not_found' END;
  END IF;
  -- (A new statement: it sees what committed while this one waited for the lock.)
  SELECT o.state INTO v_state FROM workhorse.job_outcome o WHERE o.job_id = p_job_id;
  IF NOT FOUND THEN
    SELECT * INTO r FROM workhorse.job_runtime x WHERE x.job_id = p_job_id;
    RETURN workhorse.job_action_state(r);
  END IF;
  IF EXISTS (SELECT 1 FROM workhorse.retention_referenced(ARRAY[p_job_id]))
     OR EXISTS (SELECT 1 FROM workhorse.job_dependency d
                JOIN workhorse.job_runtime live ON live.job_id = d.prerequisite_id
                WHERE d.dependent_id = p_job_id AND d.kind = 'child') THEN
    RETURN 'referenced';
  END IF;
  v_now := clock_timestamp();
  PERFORM workhorse.write_event(p_job_id, 'deleted', v_now, NULL,
    jsonb_build_object('state', v_state) || workhorse.actor_data(p_actor, p_reason));
  PERFORM workhorse.remove_finished_jobs(ARRAY[p_job_id], ARRAY[v_seq], v_now);
  RETURN 'deleted';
END
$$;

-- Runs a scheduled, retrying or sleeping job now: `ready`, `already_ready` (nothing written) or
-- `not_found`; a job in any other state is refused (P1050, naming it). Records a `run_now` event
-- with p_actor and p_reason.
CREATE FUNCTION workhorse.run_now_v1(p_job_id uuid, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_result text;
BEGIN
  IF p_job_id IS NULL THEN
    PERFORM workhorse.raise_invalid('jobId', 'must be a job id (a UUID string)');
  END IF;
  PERFORM workhorse.check_actor(p_actor, p_reason);
  v_result := workhorse.run_job_now(p_job_id, p_actor, p_reason, true);
  IF v_result NOT IN ('ready', 'already_ready', 'not_found') THEN
    PERFORM workhorse.raise_job_state(p_job_id, 'run_now', v_result,
      format('is %s; only a scheduled, retrying or sleeping job can be run now', v_result));
  END IF;
  RETURN v_result;
END
$$;

-- Gives a job that has not started yet (scheduled, ready or retrying) a new run time and/or
-- priority (0 to 100): a run time now or past makes it ready (behind the jobs already waiting), a
-- later one scheduled; a ready job whose run time is kept keeps its place among its priority.
-- `rescheduled` or `not_found`; any other state is refused (P1050). Records a `rescheduled`
-- event with what changed, p_actor and p_reason.
CREATE FUNCTION workhorse.reschedule_v1(p_job_id uuid, p_run_at timestamptz DEFAULT NULL, p_priority integer DEFAULT NULL,
                                        p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  r workhorse.job_runtime;
  v_state text;
  v_now timestamptz;
  v_new_state text;
BEGIN
  IF p_job_id IS NULL THEN
    PERFORM workhorse.raise_invalid('jobId', 'must be a job id (a UUID string)');
  END IF;
  IF p_run_at IS NULL AND p_priority IS NULL THEN
    PERFORM workhorse.raise_invalid('runAt', 'give a new run time, a new priority or both');
  END IF;
  IF p_run_at < '1970-01-01T00:00:00Z' OR p_run_at >= '10000-01-01T00:00:00Z' OR p_run_at IN ('infinity', '-infinity') THEN
    PERFORM workhorse.raise_invalid('runAt', 'must be a time between the years 1970 and 9999');
  END IF;
  IF p_priority NOT BETWEEN 0 AND 100 THEN
    PERFORM workhorse.raise_invalid('priority', 'must be an integer from 0 to 100');
  END IF;
  PERFORM workhorse.check_actor(p_actor, p_reason);
  SELECT * INTO r FROM workhorse.job_runtime WHERE job_id = p_job_id FOR UPDATE;
  IF NOT FOUND THEN
    SELECT o.state INTO v_state FROM workhorse.job_outcome o WHERE o.job_id = p_job_id;
    IF NOT FOUND THEN
      RETURN 'not_found';
    END IF;
  ELSE
    v_state := workhorse.job_action_state(r);
  END IF;
  IF v_state NOT IN ('scheduled', 'ready', 'retrying') THEN
    PERFORM workhorse.raise_job_state(p_job_id, 'reschedule', v_state,
      format('is %s; only a job that has not started (scheduled, ready or retrying) can be rescheduled', v_state));
  END IF;
  v_now := clock_timestamp();
  v_new_state := CASE WHEN p_run_at IS NULL THEN r.state WHEN p_run_at <= v_now THEN 'ready' ELSE 'scheduled' END;
  UPDATE workhorse.job_runtime
     SET state = v_new_state,
         run_at = CASE WHEN p_run_at IS NULL THEN run_at ELSE greatest(p_run_at, v_now) END,
         seq = CASE WHEN v_new_state = 'ready' AND (r.state <> 'ready' OR p_run_at IS NOT NULL) THEN nextval('workhorse.job_seq') ELSE seq END,
         priority = coalesce(p_priority, priority)
   WHERE job_id = p_job_id;
  -- The definition's priority too, which every read of the job shows (and a redrive copies).
  IF p_priority IS NOT NULL THEN
    UPDATE workhorse.job SET priority = p_priority WHERE id = p_job_id AND priority <> p_priority;
  END IF;
  PERFORM workhorse.write_event(p_job_id, 'rescheduled', v_now, r.current_attempt,
    jsonb_strip_nulls(jsonb_build_object(
      'from', v_state, 'state', v_new_state,
      'runAt', CASE WHEN p_run_at IS NOT NULL THEN greatest(p_run_at, v_now) END,
      'previousRunAt', CASE WHEN p_run_at IS NOT NULL THEN r.run_at END,
      'priority', p_priority,
      'previousPriority', CASE WHEN p_priority IS NOT NULL THEN r.priority END))
    || workhorse.actor_data(p_actor, p_reason));
  IF v_new_state = 'ready' THEN
    PERFORM pg_notify('workhorse_jobs', r.queue);
  END IF;
  RETURN 'rescheduled';
END
$$;

-- Deletes a finished job (succeeded, failed or canceled) and what references it, as retention
-- would: `deleted` or `not_found`. A live job, and a finished one a live job still references (a
-- prerequisite, a child or parent, a redrive source), is refused (P1050; state `referenced` for
-- the latter). Records a `deleted` event with p_actor and p_reason.
CREATE FUNCTION workhorse.delete_job_v1(p_job_id uuid, p_actor text DEFAULT NULL, p_reason text DEFAULT NULL)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  v_result text;
BEGIN
  IF p_job_id IS NULL THEN
    PERFORM workhorse.raise_invalid('jobId', 'must be a job id (a UUID string)');
  END IF;
  PERFORM workhorse.check_actor(p_actor, p_reason);
  v_result := workhorse.delete_finished_job(p_job_id, p_actor, p_reason, true);
  IF v_result = 'referenced' THEN
    PERFORM workhorse.raise_job_state(p_job_id, 'delete', v_result,
      'is referenced by a live job (its prerequisite, child, parent or redrive source); delete it once that job ended');
  ELSIF v_result NOT IN ('deleted', 'not_found') THEN
    PERFORM workhorse.raise_job_state(p_job_id, 'delete', v_result,
      format('is %s; only a finished job (succeeded, failed or canceled) can be deleted', v_result));
  END IF;
  RETURN v_result;
END
$$;

-- The filter of a bulk action, checked: an object of queue, type, states (JobState names),
-- tag, createdAfter / createdBefore, finishedAfter / finishedBefore (delete only: live jobs
-- have not finished) and jobIds (1 to 1000 ids: a selection). Returns it with the times
-- normalised. Names the first bad field (`filter.<key>`).
-- TODO(per-key concurrency): a `concurrencyKey` filter once job has the concurrency key column
-- (issue 34 item 1); until then the key is refused as unknown.
CREATE FUNCTION workhorse.check_job_filter(p_filter jsonb, p_action text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
  v_out jsonb := '{}';
  v_item jsonb;
BEGIN
  IF jsonb_typeof(p_filter) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid('filter', 'must be an object ({} for every job)');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_filter) LOOP
    IF v_key NOT IN ('queue', 'type', 'states', 'tag', 'createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore', 'jobIds') THEN
      PERFORM workhorse.raise_invalid('filter.' || v_key,
        'is not a job filter (queue, type, states, tag, createdAfter, createdBefore, finishedAfter, finishedBefore, jobIds)');
    END IF;
    IF v_key IN ('finishedAfter', 'finishedBefore') AND p_action <> 'delete' THEN
      PERFORM workhorse.raise_invalid('filter.' || v_key, 'applies to finished jobs only (delete); a live job has not finished');
    END IF;
  END LOOP;
  IF p_filter ? 'queue' THEN
    v_out := v_out || jsonb_build_object('queue', workhorse.check_name(p_filter -> 'queue', 'filter.queue'));
  END IF;
  IF p_filter ? 'type' THEN
    v_out := v_out || jsonb_build_object('type', workhorse.check_name(p_filter -> 'type', 'filter.type'));
  END IF;
  IF p_filter ? 'tag' THEN
    IF jsonb_typeof(p_filter -> 'tag') IS DISTINCT FROM 'string' OR length(p_filter ->> 'tag') NOT BETWEEN 1 AND 200 THEN
      PERFORM workhorse.raise_invalid('filter.tag', 'must be a string of 1 to 200 characters');
    END IF;
    v_out := v_out || jsonb_build_object('tag', p_filter -> 'tag');
  END IF;
  IF p_filter ? 'states' THEN
    IF jsonb_typeof(p_filter -> 'states') IS DISTINCT FROM 'array' OR jsonb_array_length(p_filter -> 'states') = 0
       OR EXISTS (SELECT 1 FROM jsonb_array_elements(p_filter -> 'states') s
                  WHERE jsonb_typeof(s) IS DISTINCT FROM 'string'
                     OR s #>> '{}' NOT IN ('blocked', 'scheduled', 'ready', 'active', 'succeeded', 'failed', 'canceled')) THEN
      PERFORM workhorse.raise_invalid('filter.states',
        'must be a non-empty array of blocked, scheduled, ready, active, succeeded, failed, canceled');
    END IF;
    v_out := v_out || jsonb_build_object('states', p_filter -> 'states');
  END IF;
  IF p_filter ? 'jobIds' THEN
    IF jsonb_typeof(p_filter -> 'jobIds') IS DISTINCT FROM 'array' OR jsonb_array_length(p_filter -> 'jobIds') NOT BETWEEN 1 AND 1000 THEN
      PERFORM workhorse.raise_invalid('filter.jobIds', 'must be an array of 1 to 1000 job ids');
    END IF;
    FOR v_item IN SELECT jsonb_array_elements(p_filter -> 'jobIds') LOOP
      PERFORM workhorse.check_uuid(v_item, 'filter.jobIds');
    END LOOP;
    v_out := v_out || jsonb_build_object('jobIds', p_filter -> 'jobIds');
  END IF;
  FOREACH v_key IN ARRAY ARRAY['createdAfter', 'createdBefore', 'finishedAfter', 'finishedBefore'] LOOP
    IF p_filter ? v_key THEN
      v_out := v_out || jsonb_build_object(v_key, workhorse.check_timestamp(p_filter -> v_key, 'filter.' || v_key));
    END IF;
  END LOOP;
  RETURN v_out;
END
$$;

-- The jobs a checked filter matches, in creation order (job id), each with its state as the
-- actions name it: live jobs (job_action_state), then, for delete, finished ones (their terminal
-- state, or `referenced` while a live job references them), at most p_limit in all. `eligible`:
-- the action applies (cancel: a live job whose cancel was not asked for yet; run now: scheduled,
-- retrying or sleeping; delete: finished and not referenced); p_eligible_only: only those.
CREATE FUNCTION workhorse.job_action_matches(p_action text, p_filter jsonb, p_limit integer, p_eligible_only boolean)
RETURNS TABLE (job_id uuid, queue text, type text, state text, created_at timestamptz, eligible boolean)
LANGUAGE plpgsql STABLE AS $$
#variable_conflict use_column
DECLARE
  v_queue text := p_filter ->> 'queue';
  v_type text := p_filter ->> 'type';
  v_tag text := p_filter ->> 'tag';
  v_states text[] := CASE WHEN p_filter ? 'states' THEN ARRAY(SELECT jsonb_array_elements_text(p_filter -> 'states')) END;
  v_ids uuid[] := CASE WHEN p_filter ? 'jobIds' THEN ARRAY(SELECT jsonb_array_elements_text(p_filter -> 'jobIds'))::uuid[] END;
  v_created_after timestamptz := (p_filter ->> 'createdAfter')::timestamptz;
  v_created_before timestamptz := (p_filter ->> 'createdBefore')::timestamptz;
  v_finished_after timestamptz := (p_filter ->> 'finishedAfter')::timestamptz;
  v_finished_before timestamptz := (p_filter ->> 'finishedBefore')::timestamptz;
BEGIN
  RETURN QUERY
  SELECT e.job_id, e.queue, e.type, e.state, e.created_at, e.eligible
  FROM (
  SELECT m.job_id, m.queue, m.type, m.state, m.created_at,
         CASE p_action WHEN 'cancel' THEN m.state <> 'canceling'
                       WHEN 'run_now' THEN m.state IN ('scheduled', 'retrying', 'sleeping')
                       ELSE m.state IN ('succeeded', 'failed', 'canceled') END AS eligible
  FROM (
    SELECT r.job_id, r.queue, j.type, workhorse.job_action_state(r) AS state, j.created_at
    FROM workhorse.job_runtime r
    JOIN workhorse.job j ON j.id = r.job_id
    WHERE v_finished_after IS NULL AND v_finished_before IS NULL
      AND (v_queue IS NULL OR r.queue = v_queue) AND (v_type IS NULL OR j.type = v_type)
      AND (v_states IS NULL OR r.state = ANY (v_states)) AND (v_tag IS NULL OR j.tags @> ARRAY[v_tag])
      AND (v_ids IS NULL OR r.job_id = ANY (v_ids))
      AND (v_created_after IS NULL OR j.created_at >= v_created_after)
      AND (v_created_before IS NULL OR j.created_at < v_created_before)
    UNION ALL
    SELECT o.job_id, o.queue, j.type,
           CASE WHEN EXISTS (SELECT 1 FROM workhorse.retention_referenced(ARRAY[o.job_id]))
                  OR EXISTS (SELECT 1 FROM workhorse.job_dependency d
                             JOIN workhorse.job_runtime live ON live.job_id = d.prerequisite_id
                             WHERE d.dependent_id = o.job_id AND d.kind = 'child')
                THEN 'referenced' ELSE o.state END,
           j.created_at
    FROM workhorse.job_outcome o
    JOIN workhorse.job j ON j.id = o.job_id
    WHERE p_action = 'delete'
      AND (v_queue IS NULL OR o.queue = v_queue) AND (v_type IS NULL OR j.type = v_type)
      AND (v_states IS NULL OR o.state = ANY (v_states)) AND (v_tag IS NULL OR j.tags @> ARRAY[v_tag])
      AND (v_ids IS NULL OR o.job_id = ANY (v_ids))
      AND (v_created_after IS NULL OR j.created_at >= v_created_after)
      AND (v_created_before IS NULL OR j.created_at < v_created_before)
      AND (v_finished_after IS NULL OR o.finished_at >= v_finished_after)
      AND (v_finished_before IS NULL OR o.finished_at < v_finished_before)
  ) AS m
  ) AS e
  WHERE e.eligible OR NOT p_eligible_only
  ORDER BY e.job_id
  LIMIT p_limit;
END
$$;

-- One bulk action (`cancel`, `run_now` or `delete`) over a filter (check_job_filter), at most
-- p_limit (1 to 1000) jobs a call, oldest first: the caller pages by calling again while `more`.
-- With p_dry_run nothing is written: `matched` counts the jobs the action would change (counting
-- stops at 100,000: `capped`), `sample` shows the first 10, `skipped` counts by state the jobs the
-- filter matches that the action leaves alone (e.g. `active` for run now and delete). Otherwise up
-- to p_limit matching jobs are changed, each with p_actor and p_reason recorded as the single
-- action records them: `changed` and `jobIds` say which, `outcomes` counts each one's answer
-- (cancel: `canceled`, or `cancel_requested` for a running job, whose worker is told), `skipped`
-- counts the jobs left alone by state, and `busy` the ones a worker was writing or that changed
-- state since they were listed (a later call looks at them again). `more`: matching jobs remain.
CREATE FUNCTION workhorse.bulk_job_action(p_action text, p_filter jsonb, p_dry_run boolean, p_actor text, p_reason text,
                                          p_limit integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_filter jsonb;
  v_cap constant integer := 100000;
  v_matched integer;
  v_skipped jsonb;
  v_sample jsonb;
  v_id uuid;
  v_result text;
  v_changed uuid[] := '{}';
  v_outcomes jsonb := '{}';
  v_busy integer := 0;
BEGIN
  IF p_dry_run IS NULL THEN
    PERFORM workhorse.raise_invalid('dryRun', 'must be true or false');
  END IF;
  IF p_limit IS NULL OR p_limit < 1 OR p_limit > 1000 THEN
    PERFORM workhorse.raise_invalid('limit', 'must be an integer from 1 to 1000');
  END IF;
  v_filter := workhorse.check_job_filter(p_filter, p_action);
  PERFORM workhorse.check_actor(p_actor, p_reason);
  IF p_dry_run THEN
    SELECT count(*) INTO v_matched FROM workhorse.job_action_matches(p_action, v_filter, v_cap + 1, true);
    SELECT coalesce(jsonb_object_agg(s.state, s.n), '{}') INTO v_skipped
    FROM (SELECT m.state, count(*) AS n FROM workhorse.job_action_matches(p_action, v_filter, v_cap, false) m
          WHERE NOT m.eligible GROUP BY m.state) s;
    SELECT coalesce(jsonb_agg(jsonb_build_object('id', x.job_id, 'queue', x.queue, 'type', x.type, 'state', x.state,
                                                 'createdAt', x.created_at) ORDER BY x.job_id), '[]')
      INTO v_sample
    FROM workhorse.job_action_matches(p_action, v_filter, 10, true) x;
    RETURN jsonb_build_object('action', p_action, 'dryRun', true, 'matched', least(v_matched, v_cap),
                              'capped', v_matched > v_cap, 'changed', 0, 'jobIds', '[]'::jsonb, 'outcomes', '{}'::jsonb,
                              'skipped', v_skipped, 'busy', 0, 'sample', v_sample, 'more', v_matched > p_limit);
  END IF;
  v_matched := 0;
  FOR v_id IN SELECT m.job_id FROM workhorse.job_action_matches(p_action, v_filter, p_limit, true) m LOOP
    v_matched := v_matched + 1;
    IF p_action = 'cancel' THEN
      -- The one cancel path: a running job's worker is asked (cancel_requested), any other ends now.
      v_result := workhorse.cancel_v1(v_id, p_reason, p_actor);
      IF v_result NOT IN ('canceled', 'cancel_requested') THEN
        v_result := 'busy';
      END IF;
    ELSIF p_action = 'run_now' THEN
      v_result := workhorse.run_job_now(v_id, p_actor, p_reason, false);
      IF v_result <> 'ready' THEN
        v_result := 'busy';
      END IF;
    ELSE
      v_result := workhorse.delete_finished_job(v_id, p_actor, p_reason, false);
      IF v_result <> 'deleted' THEN
        v_result := 'busy';
      END IF;
    END IF;
    IF v_result = 'busy' THEN
      v_busy := v_busy + 1;
    ELSE
      v_changed := v_changed || v_id;
      v_outcomes := v_outcomes || jsonb_build_object(v_result, coalesce((v_outcomes ->> v_result)::integer, 0) + 1);
    END IF;
  END LOOP;
  -- What is left, read after the changes (a new statement sees them): the jobs left alone, by
  -- state (counted among the first 100,000 matches), and whether any the action applies to remain.
  SELECT coalesce(jsonb_object_agg(s.state, s.n), '{}') INTO v_skipped
  FROM (SELECT m.state, count(*) AS n FROM workhorse.job_action_matches(p_action, v_filter, v_cap, false) m
        WHERE NOT m.eligible GROUP BY m.state) s;
  RETURN jsonb_build_object('action', p_action, 'dryRun', false, 'matched', v_matched, 'capped', false,
                            'changed', cardinality(v_changed), 'jobIds', to_jsonb(v_changed), 'outcomes', v_outcomes,
                            'skipped', v_skipped, 'busy', v_busy, 'sample', '[]'::jsonb,
                            'more', EXISTS (SELECT 1 FROM workhorse.job_action_matches(p_action, v_filter, 1, true)));
END
$$;

-- Cancels up to p_limit jobs matching p_filter (bulk_job_action): each as cancel_v1 does (a
-- running job's worker is asked to stop). With p_dry_run, counts and samples them instead.
CREATE FUNCTION workhorse.cancel_matching_v1(p_filter jsonb, p_dry_run boolean DEFAULT false, p_actor text DEFAULT NULL,
                                             p_reason text DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
  RETURN workhorse.bulk_job_action('cancel', p_filter, p_dry_run, p_actor, p_reason, p_limit);
END
$$;

-- Runs up to p_limit scheduled, retrying or sleeping jobs matching p_filter now
-- (bulk_job_action); running jobs and the others are skipped and counted.
CREATE FUNCTION workhorse.run_now_matching_v1(p_filter jsonb, p_dry_run boolean DEFAULT false, p_actor text DEFAULT NULL,
                                              p_reason text DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
  RETURN workhorse.bulk_job_action('run_now', p_filter, p_dry_run, p_actor, p_reason, p_limit);
END
$$;

-- Deletes up to p_limit finished jobs matching p_filter (bulk_job_action, delete_job_v1's
-- rules); live and referenced jobs are skipped and counted.
CREATE FUNCTION workhorse.delete_matching_v1(p_filter jsonb, p_dry_run boolean DEFAULT false, p_actor text DEFAULT NULL,
                                             p_reason text DEFAULT NULL, p_limit integer DEFAULT 1000)
RETURNS jsonb
LANGUAGE plpgsql AS $$
BEGIN
  RETURN workhorse.bulk_job_action('delete', p_filter, p_dry_run, p_actor, p_reason, p_limit);
END
$$;
