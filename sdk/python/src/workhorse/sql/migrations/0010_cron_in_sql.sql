-- Step 9 -> 10: cron in SQL (issue 31 item 1, issue 30 defect 2). The server evaluates cron
-- expressions (the type and functions of sql/084_cron.sql, internal: no application role executes
-- them) and plans every schedule inside the tick (plan_due_schedules, before fire_due_schedules);
-- sync_schedules_v1 checks each expression and time zone and plans at once, as a resume does.
-- plan_schedule_v1 no longer takes its caller's plan (a worker role could make a daily schedule
-- enqueue thousands of jobs, or stop its planning with replan_at = NULL): it plans server-side,
-- as the tick would. It and schedules_to_plan_v1 stay for the previous release's workers.
-- Existing schedules whose expression or zone the server does not read (croner extensions such
-- as W or +) are left unplanned with the reason in last_error: a sync with a valid expression
-- plans them again.
-- Locks: creates a type and functions; replaces functions; updates schedule rows only where the
-- expression is refused (none, usually).

-- A parsed expression. The lookup arrays hold, at index v+1 (months: at v), the first allowed
-- value >= v, or -1: the next matching second, minute, hour or month is one subscript away.
CREATE TYPE workhorse.cron_spec AS (
  seconds integer[],
  minutes integer[],
  hours integer[],
  months integer[],
  -- Day of month 1-31 allowed; last_day: `L`.
  days boolean[],
  last_day boolean,
  -- Per weekday (index 1 = Sunday): 0 not allowed, else a mask of the nth occurrences in the
  -- month allowed (1, 2, 4, 8, 16 for the first to fifth; 32 for the last; 63 any).
  weekdays integer[],
  star_dom boolean,
  star_dow boolean,
  fixed_time boolean
);

-- Replaces month or day names in one field by their numbers; a name must stand alone.
CREATE FUNCTION workhorse.cron_replace_names(p_part text, p_names text[], p_values text[], p_field text)
RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_part text := p_part;
  v_at integer;
  v_start integer;
BEGIN
  FOR i IN 1 .. cardinality(p_names) LOOP
    LOOP
      v_at := strpos(lower(v_part), p_names[i]);
      EXIT WHEN v_at = 0;
      v_start := v_at + length(p_names[i]) - 3;
      IF substr(v_part, v_start - 1, 1) ~* '[a-z0-9/#]' OR substr(v_part, v_start + 3, 1) ~* '[a-km-z0-9]' THEN
        PERFORM workhorse.raise_invalid(p_field, format('a month or day name has to stand alone ("%s")', p_part));
      END IF;
      v_part := substr(v_part, 1, v_at - 1) || p_values[i] || substr(v_part, v_at + length(p_names[i]));
    END LOOP;
  END LOOP;
  RETURN v_part;
END
$$;

-- The values one field allows: `*`, a list of numbers, ranges and steps (day of week: each item
-- may end in `#n` or `L`). Returns the allowed values with their nth masks (63 unless `#`/`L`:
-- only day of week uses them). p_min/p_max are the field's range; day of week accepts 7 as 0.
CREATE FUNCTION workhorse.cron_field(p_part text, p_name text, p_min integer, p_max integer, p_field text)
RETURNS TABLE (value integer, nth integer)
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_item text;
  v_body text;
  v_nth text;
  v_mask integer;
  v_from integer;
  v_to integer;
  v_step integer;
  v_parts text[];
  v_size integer := p_max - p_min + 1;
  -- Day of week also reads 7 (Sunday).
  v_top integer := p_max + (p_name = 'day-of-week')::integer;
BEGIN
  IF p_part = '*' THEN
    RETURN QUERY SELECT g, 63 FROM generate_series(p_min, p_max) AS g;
    RETURN;
  END IF;
  FOREACH v_item IN ARRAY string_to_array(p_part, ',') LOOP
    IF v_item = '' THEN
      PERFORM workhorse.raise_invalid(p_field, format('the %s field has an empty item ("%s")', p_name, p_part));
    END IF;
    v_body := v_item;
    v_mask := 63;
    IF strpos(v_item, '#') > 0 OR upper(right(v_item, 1)) = 'L' THEN
      IF p_name <> 'day-of-week' THEN
        PERFORM workhorse.raise_invalid(p_field, format('# and a trailing L are allowed in day of week only ("%s")', v_item));
      END IF;
      IF strpos(v_item, '#') > 0 THEN
        v_parts := string_to_array(v_item, '#');
        IF cardinality(v_parts) <> 2 OR v_parts[2] !~* '^([1-5]|L)$' THEN
          PERFORM workhorse.raise_invalid(p_field, format('the nth weekday must be #1 to #5 or #L ("%s")', v_item));
        END IF;
        v_body := v_parts[1];
        v_nth := upper(v_parts[2]);
      ELSE
        v_body := left(v_item, -1);
        v_nth := 'L';
      END IF;
      v_mask := CASE WHEN v_nth = 'L' THEN 32 ELSE 1 << (v_nth::integer - 1) END;
    END IF;
    IF v_body ~ '^[0-9]+-[0-9]+/[0-9]+$' OR v_body ~ '^[0-9]+-[0-9]+$' THEN
      v_parts := regexp_match(v_body, '^([0-9]+)-([0-9]+)(?:/([0-9]+))?$');
      v_from := v_parts[1]::integer;
      v_to := v_parts[2]::integer;
      v_step := coalesce(v_parts[3]::integer, 1);
      IF v_from > v_to THEN
        PERFORM workhorse.raise_invalid(p_field, format('the range "%s" of the %s field runs backwards', v_item, p_name));
      END IF;
    ELSIF v_body ~ '^\*/[0-9]+$' THEN
      v_from := p_min;
      v_to := p_max;
      v_step := substr(v_body, 3)::integer;
    ELSIF v_body ~ '^[0-9]+$' THEN
      v_from := v_body::integer;
      v_to := v_from;
      v_step := 1;
    ELSIF strpos(v_body, '/') > 0 THEN
      PERFORM workhorse.raise_invalid(p_field,
        format('a step needs * or a range before it ("%s" in the %s field)', v_item, p_name));
    ELSE
      PERFORM workhorse.raise_invalid(p_field, format('"%s" is not a value of the %s field', v_item, p_name));
    END IF;
    IF v_step = 0 OR v_step > v_size THEN
      PERFORM workhorse.raise_invalid(p_field, format('the step of "%s" must be 1 to %s', v_item, v_size));
    END IF;
    IF v_from < p_min OR v_to > v_top THEN
      PERFORM workhorse.raise_invalid(p_field, format('"%s" is out of the %s field''s range %s-%s', v_item, p_name, p_min, v_top));
    END IF;
    RETURN QUERY SELECT CASE WHEN p_name = 'day-of-week' AND g = 7 THEN 0 ELSE g END, v_mask
                 FROM generate_series(v_from, v_to, v_step) AS g;
  END LOOP;
END
$$;

-- The lookup array of a field (see cron_spec): at index v - p_min + 1, the first allowed value >= v, or -1.
CREATE FUNCTION workhorse.cron_lookup(p_values integer[], p_min integer, p_max integer)
RETURNS integer[]
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_allowed boolean[] := array_fill(false, ARRAY[p_max - p_min + 1]);
  v_lookup integer[] := array_fill(-1, ARRAY[p_max - p_min + 1]);
  v_next integer := -1;
  v_value integer;
BEGIN
  FOREACH v_value IN ARRAY p_values LOOP
    v_allowed[v_value - p_min + 1] := true;
  END LOOP;
  FOR v IN REVERSE p_max .. p_min LOOP
    IF v_allowed[v - p_min + 1] THEN
      v_next := v;
    END IF;
    v_lookup[v - p_min + 1] := v_next;
  END LOOP;
  RETURN v_lookup;
END
$$;

-- Parses and checks an expression; refuses it with raise_invalid(p_field, why).
CREATE FUNCTION workhorse.cron_parse(p_expression text, p_field text)
RETURNS workhorse.cron_spec
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_expr text := btrim(coalesce(p_expression, ''), E' \t\n\r');
  v_parts text[];
  v_dom text;
  v_items text[];
  v_spec workhorse.cron_spec;
  v_values integer[];
  r record;
BEGIN
  IF strpos(v_expr, '@') > 0 THEN
    v_expr := CASE lower(v_expr)
                WHEN '@yearly' THEN '0 0 1 1 *' WHEN '@annually' THEN '0 0 1 1 *'
                WHEN '@monthly' THEN '0 0 1 * *' WHEN '@weekly' THEN '0 0 * * 0'
                WHEN '@daily' THEN '0 0 * * *' WHEN '@midnight' THEN '0 0 * * *'
                WHEN '@hourly' THEN '0 * * * *'
                ELSE v_expr END;
    IF strpos(v_expr, '@') > 0 THEN
      PERFORM workhorse.raise_invalid(p_field,
        format('"%s" is not a macro (@yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly)', v_expr));
    END IF;
  END IF;
  v_parts := CASE WHEN v_expr = '' THEN '{}' ELSE regexp_split_to_array(v_expr, '\s+') END;
  IF cardinality(v_parts) NOT IN (5, 6) THEN
    PERFORM workhorse.raise_invalid(p_field,
      format('must have 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), got %s',
             cardinality(v_parts)));
  END IF;
  IF cardinality(v_parts) = 5 THEN
    v_parts := '0'::text || v_parts;
  END IF;
  FOR i IN 1 .. 6 LOOP
    v_parts[i] := replace(v_parts[i], '?', '*');
  END LOOP;

  -- Day of month: `L` items come out first (the last day).
  v_dom := v_parts[4];
  v_spec.last_day := false;
  IF v_dom ~* 'L' THEN
    v_items := string_to_array(v_dom, ',');
    IF EXISTS (SELECT 1 FROM unnest(v_items) AS x WHERE x = '' OR (upper(x) <> 'L' AND x ~* 'L')) THEN
      PERFORM workhorse.raise_invalid(p_field, format('L must be an item of its own in day of month ("%s")', v_dom));
    END IF;
    v_dom := array_to_string(ARRAY(SELECT x FROM unnest(v_items) AS x WHERE upper(x) <> 'L'), ',');
    v_spec.last_day := true;
  END IF;
  v_spec.star_dom := v_dom = '*';
  IF length(v_parts[5]) >= 3 THEN
    v_parts[5] := workhorse.cron_replace_names(v_parts[5],
      '{jan,feb,mar,apr,may,jun,jul,aug,sep,oct,nov,dec}', '{1,2,3,4,5,6,7,8,9,10,11,12}', p_field);
  END IF;
  IF length(v_parts[6]) >= 3 THEN
    v_parts[6] := workhorse.cron_replace_names(v_parts[6], '{-sun,sun,mon,tue,wed,thu,fri,sat}', '{-7,0,1,2,3,4,5,6}', p_field);
  END IF;
  v_spec.star_dow := v_parts[6] = '*';
  FOR i IN 1 .. 6 LOOP
    IF NOT (CASE WHEN i = 4 THEN v_dom ELSE v_parts[i] END)
           ~ (CASE WHEN i = 6 THEN '^[0-9*/,#Ll-]*$' ELSE '^[0-9*/,-]*$' END) THEN
      PERFORM workhorse.raise_invalid(p_field,
        format('the %s field "%s" has characters cron does not read here', (ARRAY['seconds', 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'])[i], v_parts[i]));
    END IF;
    IF coalesce(nullif(CASE WHEN i = 4 THEN v_dom ELSE v_parts[i] END, ''), '?') = '?' AND NOT (i = 4 AND v_spec.last_day) THEN
      PERFORM workhorse.raise_invalid(p_field, format('the %s field is empty', (ARRAY['seconds', 'minute', 'hour', 'day-of-month', 'month', 'day-of-week'])[i]));
    END IF;
  END LOOP;

  SELECT array_agg(DISTINCT f.value) INTO v_values FROM workhorse.cron_field(v_parts[1], 'seconds', 0, 59, p_field) AS f;
  v_spec.seconds := workhorse.cron_lookup(v_values, 0, 59);
  v_spec.fixed_time := v_parts[1] !~ '[*/]' AND cardinality(v_values) = 1;
  SELECT array_agg(DISTINCT f.value) INTO v_values FROM workhorse.cron_field(v_parts[2], 'minute', 0, 59, p_field) AS f;
  v_spec.minutes := workhorse.cron_lookup(v_values, 0, 59);
  v_spec.fixed_time := v_spec.fixed_time AND v_parts[2] !~ '[*/]' AND cardinality(v_values) = 1;
  SELECT array_agg(DISTINCT f.value) INTO v_values FROM workhorse.cron_field(v_parts[3], 'hour', 0, 23, p_field) AS f;
  v_spec.hours := workhorse.cron_lookup(v_values, 0, 23);
  v_spec.fixed_time := v_spec.fixed_time AND v_parts[3] !~ '[*/]' AND cardinality(v_values) = 1;
  IF v_dom = '' THEN
    v_values := '{}';
  ELSE
    SELECT array_agg(DISTINCT f.value) INTO v_values FROM workhorse.cron_field(v_dom, 'day-of-month', 1, 31, p_field) AS f;
  END IF;
  v_spec.days := ARRAY(SELECT g = ANY (v_values) FROM generate_series(1, 31) AS g ORDER BY g);
  SELECT array_agg(DISTINCT f.value) INTO v_values FROM workhorse.cron_field(v_parts[5], 'month', 1, 12, p_field) AS f;
  v_spec.months := workhorse.cron_lookup(v_values, 1, 12);
  -- A plain weekday allows every nth (63); `#n`/`L` items add their bit.
  v_spec.weekdays := array_fill(0, ARRAY[7]);
  FOR r IN SELECT f.value, f.nth FROM workhorse.cron_field(v_parts[6], 'day-of-week', 0, 6, p_field) AS f LOOP
    v_spec.weekdays[r.value + 1] := CASE WHEN r.nth = 63 THEN 63 ELSE v_spec.weekdays[r.value + 1] | r.nth END;
  END LOOP;
  RETURN v_spec;
END
$$;

-- Whether a day matches the day fields (day of month, day of week, with the OR rule).
CREATE FUNCTION workhorse.cron_day_matches(p_spec workhorse.cron_spec, p_year integer, p_month integer, p_day integer)
RETURNS boolean
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_last integer := extract(day FROM make_date(p_year, p_month, 1) + interval '1 month' - interval '1 day');
  v_dom boolean;
  v_mask integer;
  v_dow boolean;
BEGIN
  IF p_day > v_last THEN
    RETURN false;
  END IF;
  v_dom := p_spec.days[p_day] OR (p_spec.last_day AND p_day = v_last);
  IF p_spec.star_dow THEN
    RETURN v_dom;
  END IF;
  v_mask := p_spec.weekdays[extract(dow FROM make_date(p_year, p_month, p_day))::integer + 1];
  v_dow := v_mask <> 0 AND ((v_mask & (1 << ((p_day - 1) / 7))) <> 0 OR ((v_mask & 32) <> 0 AND p_day + 7 > v_last));
  IF p_spec.star_dom THEN
    RETURN v_dow;
  END IF;
  RETURN v_dom OR v_dow;
END
$$;

-- The first wall-clock time at or after p_from (whole seconds) that the expression matches, or
-- null when none within 400 years.
CREATE FUNCTION workhorse.cron_next_local(p_spec workhorse.cron_spec, p_from timestamp)
RETURNS timestamp
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  v_ts timestamp := date_trunc('second', p_from);
  v_end timestamp := date_trunc('second', p_from) + interval '400 years';
  v_year integer;
  v_month integer;
  v_day integer;
  v_hour integer;
  v_minute integer;
  v_second integer;
  v_next integer;
BEGIN
  LOOP
    IF v_ts > v_end THEN
      RETURN NULL;
    END IF;
    v_year := extract(year FROM v_ts);
    v_month := extract(month FROM v_ts);
    v_next := p_spec.months[v_month];
    IF v_next = -1 THEN
      v_ts := make_timestamp(v_year + 1, 1, 1, 0, 0, 0);
      CONTINUE;
    ELSIF v_next <> v_month THEN
      v_ts := make_timestamp(v_year, v_next, 1, 0, 0, 0);
      CONTINUE;
    END IF;
    v_day := extract(day FROM v_ts);
    IF NOT workhorse.cron_day_matches(p_spec, v_year, v_month, v_day) THEN
      v_ts := date_trunc('day', v_ts) + interval '1 day';
      CONTINUE;
    END IF;
    v_hour := extract(hour FROM v_ts);
    v_next := p_spec.hours[v_hour + 1];
    IF v_next = -1 THEN
      v_ts := date_trunc('day', v_ts) + interval '1 day';
      CONTINUE;
    ELSIF v_next <> v_hour THEN
      v_ts := date_trunc('day', v_ts) + v_next * interval '1 hour';
      CONTINUE;
    END IF;
    v_minute := extract(minute FROM v_ts);
    v_next := p_spec.minutes[v_minute + 1];
    IF v_next = -1 THEN
      v_ts := date_trunc('hour', v_ts) + interval '1 hour';
      CONTINUE;
    ELSIF v_next <> v_minute THEN
      v_ts := date_trunc('hour', v_ts) + v_next * interval '1 minute';
      CONTINUE;
    END IF;
    v_second := extract(second FROM v_ts);
    v_next := p_spec.seconds[v_second + 1];
    IF v_next = -1 THEN
      v_ts := date_trunc('minute', v_ts) + interval '1 minute';
      CONTINUE;
    END IF;
    RETURN date_trunc('minute', v_ts) + v_next * interval '1 second';
  END LOOP;
END
$$;

-- The UTC offset of p_zone at an instant (wall clock minus UTC).
CREATE FUNCTION workhorse.cron_offset(p_at timestamptz, p_zone text)
RETURNS interval
LANGUAGE sql STABLE AS $$
  SELECT (p_at AT TIME ZONE p_zone) - (p_at AT TIME ZONE 'UTC')
$$;

-- The first instant (whole seconds) in (p_before, p_after] whose offset differs from p_before's:
-- the moment of a time zone transition between the two.
CREATE FUNCTION workhorse.cron_transition(p_before timestamptz, p_after timestamptz, p_zone text)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_lo timestamptz := p_before;
  v_hi timestamptz := p_after;
  v_mid timestamptz;
  v_offset interval := workhorse.cron_offset(p_before, p_zone);
BEGIN
  WHILE v_hi - v_lo > interval '1 second' LOOP
    v_mid := v_lo + floor(extract(epoch FROM v_hi - v_lo) / 2) * interval '1 second';
    IF workhorse.cron_offset(v_mid, p_zone) = v_offset THEN
      v_lo := v_mid;
    ELSE
      v_hi := v_mid;
    END IF;
  END LOOP;
  RETURN v_hi;
END
$$;

-- The instants at which a matching wall-clock time p_local occurs in p_zone, ascending: one; two
-- in a repeated hour (a fixed time: the first only); none in a gap (a fixed time: the end of the
-- gap, if that is the same day). p_gap_end is set to the gap's end when p_local is in one.
CREATE FUNCTION workhorse.cron_instants(p_spec workhorse.cron_spec, p_local timestamp, p_zone text, OUT instants timestamptz[],
                                        OUT gap_end timestamptz)
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_as_utc timestamptz := p_local AT TIME ZONE 'UTC';
  v_guess timestamptz;
  v_a timestamptz;
  v_b timestamptz;
BEGIN
  v_guess := v_as_utc - workhorse.cron_offset(v_as_utc, p_zone);
  -- The instants 3 hours either side of a first guess cover any daylight-saving shift.
  v_a := v_as_utc - workhorse.cron_offset(v_guess - interval '3 hours', p_zone);
  v_b := v_as_utc - workhorse.cron_offset(v_guess + interval '3 hours', p_zone);
  instants := ARRAY(SELECT DISTINCT c FROM unnest(ARRAY[v_guess, v_a, v_b]) AS c
                    WHERE (c AT TIME ZONE p_zone) = p_local ORDER BY c);
  IF cardinality(instants) > 1 AND p_spec.fixed_time THEN
    instants := instants[1:1];
  ELSIF cardinality(instants) = 0 THEN
    gap_end := workhorse.cron_transition(least(v_a, v_b), greatest(v_a, v_b), p_zone);
    IF p_spec.fixed_time AND (gap_end AT TIME ZONE p_zone)::date = p_local::date THEN
      instants := ARRAY[gap_end];
    END IF;
  END IF;
END
$$;

-- The first matching wall-clock time at or after p_local whose instants include one after
-- p_after: that instant (the earliest such). Times in a gap are passed over from the gap's end.
CREATE FUNCTION workhorse.cron_walk(p_spec workhorse.cron_spec, p_zone text, p_local timestamp, p_after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_local timestamp := p_local;
  v_found timestamptz;
  r record;
BEGIN
  LOOP
    v_local := workhorse.cron_next_local(p_spec, v_local);
    IF v_local IS NULL THEN
      RETURN NULL;
    END IF;
    r := workhorse.cron_instants(p_spec, v_local, p_zone);
    SELECT min(c) INTO v_found FROM unnest(r.instants) AS c WHERE c > p_after;
    IF v_found IS NOT NULL THEN
      RETURN v_found;
    END IF;
    v_local := v_local + interval '1 second';
    IF r.gap_end IS NOT NULL AND NOT p_spec.fixed_time THEN
      v_local := greatest(v_local, r.gap_end AT TIME ZONE p_zone);
    END IF;
  END LOOP;
END
$$;

-- The first occurrence strictly after p_after (in p_zone), or null when there is none within
-- 400 years. The wall clock is walked forward from p_after's own; when the clock is set back
-- before the time found, the repeated stretch is walked as well (from the moment it was set
-- back), and the earlier of the two wins.
CREATE FUNCTION workhorse.cron_next(p_spec workhorse.cron_spec, p_zone text, p_after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_found timestamptz;
  v_back timestamptz;
  v_again timestamptz;
BEGIN
  v_found := workhorse.cron_walk(p_spec, p_zone, date_trunc('second', p_after AT TIME ZONE p_zone) + interval '1 second', p_after);
  IF v_found IS NULL OR p_spec.fixed_time
     OR workhorse.cron_offset(p_after, p_zone) <= workhorse.cron_offset(v_found, p_zone) THEN
    RETURN v_found;
  END IF;
  v_back := workhorse.cron_transition(date_trunc('second', p_after), v_found, p_zone);
  v_again := workhorse.cron_walk(p_spec, p_zone, v_back AT TIME ZONE p_zone, p_after);
  RETURN least(v_found, v_again);
END
$$;

-- The occurrences after p_after and at most p_until, ascending, at most p_limit of them.
CREATE FUNCTION workhorse.cron_occurrences(p_spec workhorse.cron_spec, p_zone text, p_after timestamptz,
                                           p_until timestamptz, p_limit integer)
RETURNS timestamptz[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_at timestamptz := p_after;
  v_all timestamptz[] := '{}';
BEGIN
  WHILE cardinality(v_all) < p_limit LOOP
    v_at := workhorse.cron_next(p_spec, p_zone, v_at);
    EXIT WHEN v_at IS NULL OR v_at > p_until;
    v_all := v_all || v_at;
  END LOOP;
  RETURN v_all;
END
$$;

-- The last p_count occurrences in (p_after, p_until], ascending: windows back from p_until that
-- double until they hold enough (or reach p_after), each read forwards.
CREATE FUNCTION workhorse.cron_latest(p_spec workhorse.cron_spec, p_zone text, p_after timestamptz,
                                      p_until timestamptz, p_count integer)
RETURNS timestamptz[]
LANGUAGE plpgsql STABLE AS $$
DECLARE
  v_window interval := interval '1 minute';
  v_from timestamptz;
  v_all timestamptz[];
BEGIN
  LOOP
    v_from := greatest(p_after, p_until - v_window);
    v_all := '{}';
    LOOP
      v_from := workhorse.cron_next(p_spec, p_zone, v_from);
      EXIT WHEN v_from IS NULL OR v_from > p_until;
      v_all := (v_all || v_from)[greatest(cardinality(v_all) + 2 - p_count, 1):];
    END LOOP;
    IF cardinality(v_all) >= p_count OR p_until - v_window <= p_after THEN
      RETURN v_all;
    END IF;
    v_window := v_window * 2;
  END LOOP;
END
$$;

-- Checks a schedule's time zone: an IANA name PostgreSQL's time zone database holds. CET, EET,
-- MET and WET are refused: PostgreSQL reads those as fixed abbreviations (no daylight saving),
-- where the zones of the same names observe it (use Europe/Paris, Europe/Athens, ...).
CREATE FUNCTION workhorse.check_time_zone(p_zone text, p_field text)
RETURNS void
LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF upper(p_zone) IN ('CET', 'EET', 'MET', 'WET') THEN
    PERFORM workhorse.raise_invalid(p_field,
      format('"%s" is read as a fixed offset by PostgreSQL: name a city zone such as Europe/Paris', p_zone));
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_timezone_names WHERE name = p_zone) THEN
    PERFORM workhorse.raise_invalid(p_field, format('"%s" is not an IANA time zone name (such as Europe/Berlin)', p_zone));
  END IF;
END
$$;

-- Checks a schedule's cron expression: it parses, and it occurs (`0 0 31 2 *` never does).
CREATE FUNCTION workhorse.check_cron(p_expression text, p_field text)
RETURNS void
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF workhorse.cron_next_local(workhorse.cron_parse(p_expression, p_field), timestamp '1970-01-01') IS NULL THEN
    PERFORM workhorse.raise_invalid(p_field, format('"%s" never occurs', p_expression));
  END IF;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.tick_v1()
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_promoted integer;
  v_recovered integer;
  v_expired integer;
  v_fired integer;
  v_planned integer;
  v_keys integer;
  v_created integer := 0;
  v_retention jsonb;
  v_horizon date := (clock_timestamp() AT TIME ZONE 'UTC')::date + 2;
BEGIN
  PERFORM 1 FROM workhorse.maintenance_lock WHERE name = 'tick' FOR UPDATE SKIP LOCKED;
  IF NOT FOUND THEN
    RETURN jsonb_build_object('skipped', true, 'schedulesToPlan', workhorse.schedules_need_plan());
  END IF;
  v_expired := workhorse.expire_deadlines_v1(1000);
  v_promoted := workhorse.promote_v1(10000);
  v_recovered := workhorse.recover_expired_v1(1000);
  v_planned := workhorse.plan_due_schedules(500);
  v_fired := workhorse.fire_due_schedules(100);
  DELETE FROM workhorse.enqueue_idempotency
  WHERE ctid = ANY (ARRAY(SELECT ctid FROM workhorse.enqueue_idempotency WHERE expires_at <= clock_timestamp() LIMIT 1000));
  GET DIAGNOSTICS v_keys = ROW_COUNT;
  IF to_regclass('workhorse.job_event_p' || to_char(v_horizon, 'YYYYMMDD')) IS NULL
     OR to_regclass('workhorse.attempt_history_p' || to_char(v_horizon, 'YYYYMMDD')) IS NULL THEN
    BEGIN
      -- Creating a partition briefly locks the parent: give up rather than stall writers, and
      -- try again on a later tick. The wait is shorter than deadlock_timeout (1 s by default):
      -- this transaction already holds the rows it promoted or recovered, and a writer that
      -- holds the parent and waits for one of those rows would otherwise be a deadlock, which
      -- PostgreSQL could resolve by failing the writer.
      PERFORM set_config('lock_timeout', '200', true);
      v_created := workhorse.prepare_partitions_v1(7);
    EXCEPTION WHEN lock_not_available OR deadlock_detected THEN
      v_created := 0;
    END;
  END IF;
  -- Retention (097_retention.sql): a bounded pass; it never sets `more` (it is background work).
  v_retention := workhorse.retention_run_v1(1000);
  UPDATE workhorse.maintenance_lock SET last_run_at = clock_timestamp() WHERE name = 'tick';
  RETURN jsonb_build_object('skipped', false, 'promoted', v_promoted, 'recovered', v_recovered,
                            'deadlinesExpired', v_expired, 'partitionsCreated', v_created,
                            'jobsPurged', coalesce((v_retention ->> 'jobsPurged')::integer, 0),
                            'schedulesPlanned', v_planned, 'schedulesFired', v_fired,
                            'schedulesToPlan', workhorse.schedules_need_plan(),
                            'more', v_expired = 1000 OR v_promoted = 10000 OR v_recovered = 1000 OR v_keys = 1000
                                    OR v_fired >= 100 OR v_planned = 500);
END
$$;

CREATE OR REPLACE FUNCTION workhorse.normalize_schedule_definition(p_def jsonb, p_path text)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
  v_key text;
  v_options jsonb;
  v_def jsonb;
BEGIN
  IF jsonb_typeof(p_def) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid(p_path, 'must be an object with at least "key", "type" and "cron"');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(p_def) LOOP
    IF v_key NOT IN ('key', 'type', 'cron', 'timezone', 'payload', 'options', 'catchUp', 'catchUpLimit', 'overlap', 'missedAfterMs') THEN
      PERFORM workhorse.raise_invalid(p_path || '.' || v_key,
        'is not a schedule field (key, type, cron, timezone, payload, options, catchUp, catchUpLimit, overlap, missedAfterMs)');
    END IF;
  END LOOP;
  PERFORM workhorse.check_name(p_def -> 'key', p_path || '.key');
  PERFORM workhorse.check_name(p_def -> 'type', p_path || '.type');
  IF jsonb_typeof(p_def -> 'cron') IS DISTINCT FROM 'string' OR length(p_def ->> 'cron') NOT BETWEEN 1 AND 200 THEN
    PERFORM workhorse.raise_invalid(p_path || '.cron', 'must be a cron expression of 1 to 200 characters');
  END IF;
  PERFORM workhorse.check_cron(p_def ->> 'cron', p_path || '.cron');
  IF p_def ? 'timezone' AND (jsonb_typeof(p_def -> 'timezone') IS DISTINCT FROM 'string'
      OR (p_def ->> 'timezone') !~ '^[A-Za-z][A-Za-z0-9/_+-]{0,63}$') THEN
    PERFORM workhorse.raise_invalid(p_path || '.timezone', 'must be an IANA time zone name such as Europe/Berlin');
  END IF;
  v_options := coalesce(p_def -> 'options', '{}'::jsonb);
  IF jsonb_typeof(v_options) IS DISTINCT FROM 'object' THEN
    PERFORM workhorse.raise_invalid(p_path || '.options', 'must be an object of enqueue options');
  END IF;
  FOR v_key IN SELECT jsonb_object_keys(v_options) LOOP
    IF v_key NOT IN ('queue', 'priority', 'maxAttempts', 'retryPolicy', 'tags', 'executionTimeoutMs') THEN
      PERFORM workhorse.raise_invalid(p_path || '.options.' || v_key,
        'is not an option of a scheduled job (queue, priority, maxAttempts, retryPolicy, tags, executionTimeoutMs)');
    END IF;
  END LOOP;
  -- The job each occurrence enqueues must be a valid request now, so that firing never fails on it.
  PERFORM workhorse.validate_enqueue_request(
    v_options || jsonb_build_object('type', p_def -> 'type', 'payload', coalesce(p_def -> 'payload', '{}'::jsonb)),
    p_path || '.options');
  IF p_def ? 'catchUp' AND (p_def ->> 'catchUp') IS DISTINCT FROM 'skip' AND (p_def ->> 'catchUp') IS DISTINCT FROM 'latest'
     AND (p_def ->> 'catchUp') IS DISTINCT FROM 'all' THEN
    PERFORM workhorse.raise_invalid(p_path || '.catchUp', 'must be "skip", "latest" or "all"');
  END IF;
  IF p_def ? 'catchUpLimit' THEN
    PERFORM workhorse.check_int(p_def -> 'catchUpLimit', p_path || '.catchUpLimit', 1, 1000);
  END IF;
  IF p_def ? 'overlap' AND (p_def ->> 'overlap') IS DISTINCT FROM 'allow' AND (p_def ->> 'overlap') IS DISTINCT FROM 'skip' THEN
    PERFORM workhorse.raise_invalid(p_path || '.overlap', 'must be "allow" or "skip"');
  END IF;
  IF p_def ? 'missedAfterMs' THEN
    PERFORM workhorse.check_int(p_def -> 'missedAfterMs', p_path || '.missedAfterMs', 1000, 86400000);
  END IF;
  v_def := jsonb_build_object(
    'type', p_def -> 'type',
    'cron', p_def -> 'cron',
    'timezone', coalesce(p_def -> 'timezone', '"UTC"'::jsonb),
    'payload', coalesce(p_def -> 'payload', '{}'::jsonb),
    'options', v_options,
    'catchUp', coalesce(p_def -> 'catchUp', '"skip"'::jsonb),
    'catchUpLimit', coalesce(p_def -> 'catchUpLimit', '100'::jsonb),
    'overlap', coalesce(p_def -> 'overlap', '"allow"'::jsonb),
    'missedAfterMs', coalesce(p_def -> 'missedAfterMs', '60000'::jsonb));
  RETURN v_def;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.sync_schedules_v1(p_namespace text, p_definitions jsonb, p_actor text DEFAULT NULL)
RETURNS TABLE (key text, change text, revision integer)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  -- Plans start after now, in whole milliseconds (the precision of a JavaScript Date, which the
  -- previous release's planner hands back as p_after of plan_schedule_v1).
  v_now timestamptz := date_trunc('milliseconds', clock_timestamp());
  v_zone text;
  v_zones text[] := '{}';
  v_def jsonb;
  v_norm jsonb;
  v_i integer := 0;
  v_keys text[] := '{}';
  v_key text;
  s workhorse.schedule;
  v_change text;
  v_retimed boolean;
BEGIN
  PERFORM workhorse.check_name(to_jsonb(p_namespace), 'namespace');
  PERFORM workhorse.check_actor(p_actor, NULL);
  IF jsonb_typeof(p_definitions) IS DISTINCT FROM 'array' THEN
    PERFORM workhorse.raise_invalid('definitions', 'must be a JSON array of schedule definitions');
  END IF;
  IF jsonb_array_length(p_definitions) > 1000 THEN
    RAISE EXCEPTION USING ERRCODE = 'P1003', COLUMN = 'definitions',
      MESSAGE = format('definitions: a namespace holds at most 1000 schedules, got %s', jsonb_array_length(p_definitions));
  END IF;
  -- Every definition is checked before anything is written.
  FOR v_def IN SELECT e FROM jsonb_array_elements(p_definitions) AS e LOOP
    v_zone := workhorse.normalize_schedule_definition(v_def, format('definitions[%s]', v_i)) ->> 'timezone';
    IF NOT v_zone = ANY (v_zones) THEN
      PERFORM workhorse.check_time_zone(v_zone, format('definitions[%s].timezone', v_i));
      v_zones := v_zones || v_zone;
    END IF;
    v_key := v_def ->> 'key';
    IF v_key = ANY (v_keys) THEN
      PERFORM workhorse.raise_invalid(format('definitions[%s].key', v_i), format('"%s" is listed twice', v_key));
    END IF;
    v_keys := v_keys || v_key;
    v_i := v_i + 1;
  END LOOP;

  -- Syncs of one namespace take turns on its row of schedule_namespace (created by the first),
  -- which no application role can lock: only a caller of this function holds it.
  INSERT INTO workhorse.schedule_namespace (namespace) VALUES (p_namespace) ON CONFLICT (namespace) DO NOTHING;
  PERFORM 1 FROM workhorse.schedule_namespace WHERE namespace = p_namespace FOR UPDATE;
  v_i := 0;
  FOR v_def IN SELECT e FROM jsonb_array_elements(p_definitions) AS e LOOP
    v_norm := workhorse.normalize_schedule_definition(v_def, format('definitions[%s]', v_i));
    v_key := v_def ->> 'key';
    v_i := v_i + 1;
    SELECT * INTO s FROM workhorse.schedule sc WHERE sc.namespace = p_namespace AND sc.key = v_key FOR UPDATE;
    IF NOT FOUND THEN
      INSERT INTO workhorse.schedule AS sc (namespace, key, definition, enabled, revision, created_at, updated_at,
                                            planned_through, replan_at)
      VALUES (p_namespace, v_key, v_norm, true, 1, v_now, v_now, v_now, '-infinity')
      RETURNING * INTO s;
      PERFORM workhorse.plan_schedule(s, v_now);
      v_change := 'created';
    ELSIF s.enabled AND s.definition = v_norm THEN
      key := v_key; change := 'unchanged'; revision := s.revision;
      RETURN NEXT;
      CONTINUE;
    ELSE
      v_change := CASE WHEN s.enabled THEN 'updated' ELSE 'enabled' END;
      v_retimed := NOT s.enabled OR s.definition -> 'cron' <> v_norm -> 'cron'
                   OR s.definition -> 'timezone' <> v_norm -> 'timezone';
      IF v_retimed THEN
        DELETE FROM workhorse.schedule_occurrence o WHERE o.schedule_id = s.id AND o.state = 'planned' AND o.at > v_now;
      END IF;
      UPDATE workhorse.schedule sc
         SET definition = v_norm, enabled = true, revision = sc.revision + 1, updated_at = v_now,
             planned_through = CASE WHEN v_retimed THEN v_now ELSE sc.planned_through END,
             replan_at = CASE WHEN v_retimed THEN '-infinity' ELSE sc.replan_at END
       WHERE sc.id = s.id
      RETURNING * INTO s;
      IF v_retimed AND s.paused_at IS NULL THEN
        PERFORM workhorse.plan_schedule(s, v_now);
      END IF;
    END IF;
    INSERT INTO workhorse.schedule_history (schedule_id, revision, at, change, definition, actor)
    VALUES (s.id, s.revision, v_now, v_change, v_norm, p_actor);
    key := v_key; change := v_change; revision := s.revision;
    RETURN NEXT;
  END LOOP;

  FOR s IN
    SELECT * FROM workhorse.schedule sc
    WHERE sc.namespace = p_namespace AND sc.enabled AND NOT (sc.key = ANY (v_keys))
    ORDER BY sc.key
    FOR UPDATE
  LOOP
    -- Its plan goes; occurrences already fired or skipped stay as history.
    DELETE FROM workhorse.schedule_occurrence o WHERE o.schedule_id = s.id AND o.state = 'planned';
    UPDATE workhorse.schedule sc
       SET enabled = false, revision = sc.revision + 1, updated_at = v_now, replan_at = NULL
     WHERE sc.id = s.id
    RETURNING * INTO s;
    INSERT INTO workhorse.schedule_history (schedule_id, revision, at, change, actor)
    VALUES (s.id, s.revision, v_now, 'disabled', p_actor);
    key := s.key; change := 'disabled'; revision := s.revision;
    RETURN NEXT;
  END LOOP;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.plan_schedule(s workhorse.schedule, p_now timestamptz)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_spec workhorse.cron_spec := workhorse.cron_parse(s.definition ->> 'cron', 'cron');
  v_zone text := s.definition ->> 'timezone';
  v_boundary timestamptz := p_now - (s.definition ->> 'missedAfterMs')::integer * interval '1 millisecond';
  v_start timestamptz := s.planned_through;
  v_missed timestamptz[] := '{}';
  v_future timestamptz[];
  v_last timestamptz;
  v_next timestamptz;
BEGIN
  IF v_start < v_boundary THEN
    IF s.definition ->> 'catchUp' <> 'skip' THEN
      v_missed := workhorse.cron_latest(v_spec, v_zone, v_start, v_boundary,
        CASE s.definition ->> 'catchUp' WHEN 'latest' THEN 1 ELSE (s.definition ->> 'catchUpLimit')::integer END);
    END IF;
    v_start := v_boundary;
  END IF;
  v_future := workhorse.cron_occurrences(v_spec, v_zone, v_start, p_now + interval '1 minute', 200);
  v_last := v_future[cardinality(v_future)];
  IF v_last IS NULL OR (v_last <= p_now AND cardinality(v_future) < 200) THEN
    v_next := workhorse.cron_next(v_spec, v_zone, coalesce(v_last, v_start));
    IF v_next IS NOT NULL THEN
      v_future := v_future || v_next;
      v_last := v_next;
    END IF;
  END IF;
  INSERT INTO workhorse.schedule_occurrence (schedule_id, at, state)
  SELECT s.id, u.at, 'planned' FROM unnest(v_missed || v_future) AS u (at)
  ON CONFLICT DO NOTHING;
  UPDATE workhorse.schedule
     SET planned_through = greatest(v_start, coalesce(v_last, v_missed[cardinality(v_missed)])), replan_at = v_last
   WHERE id = s.id;
  RETURN cardinality(v_missed) + cardinality(v_future);
END
$$;

CREATE OR REPLACE FUNCTION workhorse.plan_due_schedules(p_limit integer)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_now timestamptz := clock_timestamp();
  s workhorse.schedule;
  v_planned integer := 0;
BEGIN
  FOR s IN
    SELECT * FROM workhorse.schedule sc
    WHERE sc.enabled AND sc.paused_at IS NULL AND sc.replan_at <= v_now
    ORDER BY sc.replan_at
    LIMIT p_limit
    FOR UPDATE SKIP LOCKED
  LOOP
    BEGIN
      PERFORM workhorse.plan_schedule(s, v_now);
      v_planned := v_planned + 1;
    EXCEPTION WHEN OTHERS THEN
      UPDATE workhorse.schedule
         SET replan_at = v_now + interval '1 hour', last_error = 'planning: ' || SQLERRM, last_error_at = v_now
       WHERE id = s.id;
    END;
  END LOOP;
  RETURN v_planned;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.plan_schedule_v1(
  p_schedule_id uuid, p_revision integer, p_after timestamptz, p_occurrences timestamptz[], p_replan_at timestamptz)
RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  s workhorse.schedule;
  v_last timestamptz;
  v_at timestamptz;
  v_now timestamptz := clock_timestamp();
BEGIN
  IF p_after IS NULL THEN
    PERFORM workhorse.raise_invalid('after', 'must be the end of the plan that schedules_to_plan_v1 gave');
  END IF;
  IF p_occurrences IS NULL OR cardinality(p_occurrences) > 2000 THEN
    PERFORM workhorse.raise_invalid('occurrences', 'must be an array of at most 2000 times');
  END IF;
  v_last := p_after;
  FOREACH v_at IN ARRAY p_occurrences LOOP
    IF v_at IS NULL OR v_at <= v_last THEN
      PERFORM workhorse.raise_invalid('occurrences', 'must be ascending times, each after the plan''s end');
    END IF;
    v_last := v_at;
  END LOOP;
  SELECT * INTO s FROM workhorse.schedule WHERE id = p_schedule_id FOR UPDATE;
  IF NOT FOUND OR s.revision <> p_revision OR s.planned_through <> p_after OR NOT s.enabled OR s.paused_at IS NOT NULL
     OR NOT s.replan_at <= v_now THEN
    RETURN 'stale';
  END IF;
  PERFORM workhorse.plan_schedule(s, v_now);
  RETURN 'planned';
END
$$;

CREATE OR REPLACE FUNCTION workhorse.set_schedule_paused(p_namespace text, p_key text, p_pause boolean, p_actor text, p_reason text)
RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
  s workhorse.schedule;
  -- In whole milliseconds, as in sync_schedules_v1 (it may become the plan's end).
  v_now timestamptz := date_trunc('milliseconds', clock_timestamp());
BEGIN
  PERFORM workhorse.check_actor(p_actor, p_reason);
  s := workhorse.lock_schedule(p_namespace, p_key);
  IF (s.paused_at IS NOT NULL) = p_pause THEN
    RETURN false;
  END IF;
  IF NOT p_pause THEN
    UPDATE workhorse.schedule_occurrence
       SET state = 'skipped', reason = 'paused', revision = s.revision, decided_at = v_now
     WHERE schedule_id = s.id AND state = 'planned' AND at <= v_now;
  END IF;
  UPDATE workhorse.schedule
     SET paused_at = CASE WHEN p_pause THEN v_now END,
         paused_by = CASE WHEN p_pause THEN p_actor END,
         pause_reason = CASE WHEN p_pause THEN p_reason END,
         revision = revision + 1, updated_at = v_now,
         planned_through = CASE WHEN p_pause THEN planned_through ELSE greatest(planned_through, v_now) END,
         replan_at = CASE WHEN NOT p_pause AND planned_through <= v_now THEN '-infinity' ELSE replan_at END
   WHERE id = s.id
  RETURNING * INTO s;
  INSERT INTO workhorse.schedule_history (schedule_id, revision, at, change, actor, reason)
  VALUES (s.id, s.revision, v_now, CASE WHEN p_pause THEN 'paused' ELSE 'resumed' END, p_actor, p_reason);
  IF NOT p_pause AND s.replan_at <= v_now THEN
    PERFORM workhorse.plan_schedule(s, v_now);
  END IF;
  RETURN true;
END
$$;

CREATE OR REPLACE FUNCTION workhorse.schedules_need_plan()
RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
DECLARE
  -- A variable, not clock_timestamp() in the condition: a volatile call there keeps the index
  -- out (a scan of every schedule on every tick).
  v_now timestamptz := clock_timestamp();
BEGIN
  RETURN EXISTS (SELECT 1 FROM workhorse.schedule s
                 WHERE s.enabled AND s.paused_at IS NULL AND s.replan_at IS NOT NULL AND s.replan_at <= v_now);
END
$$;

-- Protocol functions keep the rights and search path installation gives them (CREATE OR
-- REPLACE resets both); the new internal helpers are executable by the owner alone.
ALTER FUNCTION workhorse.tick_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.sync_schedules_v1(text, jsonb, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION workhorse.plan_schedule_v1(uuid, integer, timestamptz, timestamptz[], timestamptz) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
DO $revoke$
DECLARE
  v_function regprocedure;
BEGIN
  FOR v_function IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p
    WHERE p.pronamespace = 'workhorse'::regnamespace
      AND p.proname IN ('cron_replace_names', 'cron_field', 'cron_lookup', 'cron_parse', 'cron_day_matches', 'cron_next_local',
                        'cron_offset', 'cron_transition', 'cron_instants', 'cron_walk', 'cron_next', 'cron_occurrences',
                        'cron_latest', 'check_time_zone', 'check_cron', 'plan_schedule', 'plan_due_schedules')
  LOOP
    EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_function);
  END LOOP;
END
$revoke$;

-- Schedules synced by the previous release with an expression or zone the server refuses.
DO $refused$
DECLARE
  s workhorse.schedule;
BEGIN
  FOR s IN SELECT * FROM workhorse.schedule WHERE enabled AND replan_at IS NOT NULL FOR UPDATE LOOP
    BEGIN
      PERFORM workhorse.check_cron(s.definition ->> 'cron', 'cron');
      PERFORM workhorse.check_time_zone(s.definition ->> 'timezone', 'timezone');
    EXCEPTION WHEN SQLSTATE 'P1001' THEN
      UPDATE workhorse.schedule SET replan_at = NULL, last_error = SQLERRM, last_error_at = clock_timestamp() WHERE id = s.id;
    END;
  END LOOP;
END
$refused$;
