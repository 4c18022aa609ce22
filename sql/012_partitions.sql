-- Daily partitions of the history tables (job_event by `at`, attempt_history by `finished_at`).

-- Creates the partition of one history table for one UTC day, unless it exists. Rows that
-- already fell into the default partition for that day are moved into the new partition, so
-- preparation can always catch up after a long pause.
-- Partition DDL needs the schema owner's rights: the protocol functions that reach it
-- (prepare_partitions_v1, tick_v1) run with them, as every protocol function does
-- (sql/990_privileges.sql).
CREATE FUNCTION workhorse.ensure_history_partition(p_table text, p_column text, p_day date)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  v_name text := p_table || '_p' || to_char(p_day, 'YYYYMMDD');
  v_from timestamptz := p_day::timestamp AT TIME ZONE 'UTC';
  v_to timestamptz := (p_day + 1)::timestamp AT TIME ZONE 'UTC';
  v_stray boolean;
BEGIN
  IF to_regclass('workhorse.' || v_name) IS NOT NULL THEN
    RETURN false;
  END IF;
  EXECUTE format('SELECT EXISTS (SELECT 1 FROM workhorse.%I WHERE %I >= $1 AND %I < $2)',
                 p_table || '_default', p_column, p_column)
    INTO v_stray USING v_from, v_to;
  IF v_stray THEN
    EXECUTE format('CREATE TABLE workhorse.%I (LIKE workhorse.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                   v_name, p_table);
    EXECUTE format('WITH moved AS (DELETE FROM workhorse.%I WHERE %I >= $1 AND %I < $2 RETURNING *) '
                   'INSERT INTO workhorse.%I SELECT * FROM moved',
                   p_table || '_default', p_column, p_column, v_name)
      USING v_from, v_to;
    EXECUTE format('ALTER TABLE workhorse.%I ATTACH PARTITION workhorse.%I FOR VALUES FROM (%L) TO (%L)',
                   p_table, v_name, v_from, v_to);
  ELSE
    EXECUTE format('CREATE TABLE workhorse.%I PARTITION OF workhorse.%I FOR VALUES FROM (%L) TO (%L)',
                   v_name, p_table, v_from, v_to);
  END IF;
  RETURN true;
END
$$;

-- Prepares today's partitions and those of the next p_days days (UTC) for both history tables.
-- Returns how many partitions it created.
CREATE FUNCTION workhorse.prepare_partitions_v1(p_days integer DEFAULT 7)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_today date := (clock_timestamp() AT TIME ZONE 'UTC')::date;
  v_created integer := 0;
  v_day date;
BEGIN
  IF p_days IS NULL OR p_days < 0 OR p_days > 60 THEN
    PERFORM workhorse.raise_invalid('days', 'must be an integer from 0 to 60');
  END IF;
  FOR v_day IN SELECT generate_series(v_today, v_today + p_days, interval '1 day')::date LOOP
    IF workhorse.ensure_history_partition('job_event', 'at', v_day) THEN
      v_created := v_created + 1;
    END IF;
    IF workhorse.ensure_history_partition('attempt_history', 'finished_at', v_day) THEN
      v_created := v_created + 1;
    END IF;
  END LOOP;
  RETURN v_created;
END
$$;

-- Retention: drops the daily history partitions that end at or before p_before (rows of those
-- days in the default partition are deleted too). Live jobs are never touched. Returns the
-- number of partitions dropped. The cutoff may not be later than the retention floor: the UTC
-- day that the longer of the policy's history windows (jobEventDays, attemptHistoryDays,
-- sql/097_retention.sql) reaches back to. A later one is refused (P1001 on `before`) with nothing
-- dropped: the history a job's timeline shows, today's included, goes only by the policy
-- (shorten the windows with set_retention_v1 to drop more).
CREATE FUNCTION workhorse.drop_history_before_v1(p_before timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_part record;
  v_dropped integer := 0;
  v_cut date;
  v_floor date;
BEGIN
  IF p_before IS NULL THEN
    PERFORM workhorse.raise_invalid('before', 'must be a timestamp');
  END IF;
  v_cut := (p_before AT TIME ZONE 'UTC')::date;
  SELECT (clock_timestamp() AT TIME ZONE 'UTC')::date - greatest(p.job_event_days, p.attempt_history_days)
    INTO v_floor FROM workhorse.retention_policy p;
  IF v_cut > v_floor THEN
    PERFORM workhorse.raise_invalid('before', format(
      'must be no later than %s (UTC), the retention floor: the history windows keep %s days; shorten them with set_retention_v1 to drop more',
      to_char(v_floor, 'YYYY-MM-DD'), (clock_timestamp() AT TIME ZONE 'UTC')::date - v_floor));
  END IF;
  FOR v_part IN
    SELECT c.relname
    FROM pg_inherits i
    JOIN pg_class c ON c.oid = i.inhrelid
    JOIN pg_class p ON p.oid = i.inhparent
    JOIN pg_namespace n ON n.oid = p.relnamespace
    WHERE n.nspname = 'workhorse' AND p.relname IN ('job_event', 'attempt_history')
      AND c.relname ~ '_p[0-9]{8}$'
      AND to_date(right(c.relname, 8), 'YYYYMMDD') < v_cut
  LOOP
    EXECUTE format('DROP TABLE workhorse.%I', v_part.relname);
    v_dropped := v_dropped + 1;
  END LOOP;
  DELETE FROM workhorse.job_event_default WHERE at < v_cut::timestamp AT TIME ZONE 'UTC';
  DELETE FROM workhorse.attempt_history_default WHERE finished_at < v_cut::timestamp AT TIME ZONE 'UTC';
  RETURN v_dropped;
END
$$;
