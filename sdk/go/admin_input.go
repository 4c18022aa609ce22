package workhorse

import (
	"strings"
	"time"
)

// limitOf is a listing's limit: 0 is the default; its range is the SQL function's to check.
func limitOf(limit, byDefault int) (int, error) {
	if limit == 0 {
		return byDefault, nil
	}
	return checkParamInt(limit, "limit")
}

// optionalNames passes a queue and a type filter on; "" is no filter (SQL NULL). That they are
// names is the SQL function's to check.
func optionalNames(queue, typ string) (any, any, error) {
	var q, t any
	if queue != "" {
		if err := checkText(queue, "queue"); err != nil {
			return nil, nil, err
		}
		q = queue
	}
	if typ != "" {
		if err := checkText(typ, "type"); err != nil {
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
	if err := checkText(f.ErrorName, "errorName"); err != nil {
		return out, err
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

// checkActor: an actor and a reason text can hold; their bounds are the SQL functions'
// (check_actor).
func checkActor(o ActorOptions) error {
	if err := checkText(o.Actor, "actor"); err != nil {
		return err
	}
	return checkText(o.Reason, "reason")
}

func checkRedrive(requestID string, o ActorOptions) error {
	if err := checkText(requestID, "requestId"); err != nil {
		return err
	}
	return checkActor(o)
}
