package workhorse

import (
	"strings"
	"time"
)

func limitOf(limit, byDefault int) (int, error) {
	if limit == 0 {
		return byDefault, nil
	}
	return limit, checkRange(int64(limit), "limit", 1, 1000)
}

// optionalNames checks a queue and a type filter; "" is no filter (SQL NULL).
func optionalNames(queue, typ string) (any, any, error) {
	var q, t any
	if queue != "" {
		if err := checkName(queue, "queue"); err != nil {
			return nil, nil, err
		}
		q = queue
	}
	if typ != "" {
		if err := checkName(typ, "type"); err != nil {
			return nil, nil, err
		}
		t = typ
	}
	return q, t, nil
}

func knownState(s JobState) bool {
	for _, known := range JobStates {
		if s == known {
			return true
		}
	}
	return false
}

// textArray writes checked words (names, states: no quotes or backslashes) as a PostgreSQL
// array literal, which every driver sends as text for a `$n::text[]` parameter.
func textArray(words []string) string {
	return `{"` + strings.Join(words, `","`) + `"}`
}

// nullable sends "" as SQL NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// deref is *p, or T's zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

type checkedDeadLetterFilter struct {
	DeadLetterFilter
	after, before any // ISO text or nil
}

func checkDeadLetterFilter(f DeadLetterFilter) (checkedDeadLetterFilter, error) {
	out := checkedDeadLetterFilter{DeadLetterFilter: f}
	if _, _, err := optionalNames(f.Queue, f.Type); err != nil {
		return out, err
	}
	if len([]rune(f.ErrorName)) > 200 {
		return out, invalid("errorName", "must be a string of at most 200 characters")
	}
	for _, t := range []struct {
		at    time.Time
		field string
		into  *any
	}{{f.FinishedAfter, "finishedAfter", &out.after}, {f.FinishedBefore, "finishedBefore", &out.before}} {
		if t.at.IsZero() {
			continue
		}
		text, err := checkTime(t.at, t.field)
		if err != nil {
			return out, err
		}
		*t.into = text
	}
	return out, nil
}

func checkActor(o ActorOptions) error {
	if len([]rune(o.Actor)) > 200 {
		return invalid("actor", "must be a string of at most 200 characters")
	}
	if len([]rune(o.Reason)) > 1000 {
		return invalid("reason", "must be a string of at most 1000 characters")
	}
	return nil
}

func checkRedrive(requestID string, max int, o ActorOptions) error {
	if n := len([]rune(requestID)); n == 0 || n > max {
		return invalid("requestId", "must be a string of 1 to %d characters", max)
	}
	return checkActor(o)
}
