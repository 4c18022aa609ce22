-- Cron expressions, evaluated by the server (internal: only the schedule functions call these,
-- with the schema owner's rights; no application role executes them). One reading of an
-- expression for every client: sync_schedules_v1 checks it with cron_parse, and the tick plans
-- its occurrences with cron_next (sql/085_schedules.sql), whatever language the workers are in.
--
-- The syntax is the one docs/schedules.md documents (the one croner read when the TypeScript
-- client planned; test/core/cron.test.ts checks the two agree on sdk/protocol/cron-vectors.json
-- and on random expressions):
--   5 fields `minute hour day-of-month month day-of-week` (seconds 0) or 6 (seconds first);
--   `*`, `?` (as `*`), numbers, lists, ranges `a-b`, steps `*/n` and `a-b/n` (a step needs `*` or
--   a range before it); names JAN-DEC and SUN-SAT (any case); day of week 0-7 (0 and 7 Sunday);
--   `L` as its own item in day of month (the last day); in day of week `5L` (the last Friday) and
--   `5#2` (the second Friday; `#L` as `L`). Macros @yearly @annually @monthly @weekly @daily
--   @midnight @hourly. When both day fields are restricted (neither is `*`), a day matches if
--   either matches. Refused: 7 fields (years), `W`, `LW`, `+` (croner extensions the docs never
--   listed; see docs/decisions.md).
-- Time zones: occurrences are wall-clock times in an IANA zone. A time that a spring-forward
-- gap removes is skipped, and one that a fall-back repeats occurs twice, except for a fixed time
-- (one value each for seconds, minutes and hours, written without `*` or `/`): it runs at the
-- end of the gap (if that is still the same day), and once, at the first, in a repeated hour.

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
