package workhorse

import (
	"encoding/json"
	"sort"
	"time"
)

// wireNotes is what decoding wire-named options learned that Go values alone cannot say: which
// options were given (an explicit 0 or "" is checked, not taken as "the default"), keys that are
// no option, and a value of the wrong JSON type. Enqueue reports them, naming the field.
type wireNotes struct {
	given   map[string]bool
	unknown []string
	problem *ValidationError
}

func (n *wireNotes) note(key, format string, args ...any) {
	if n.problem == nil {
		n.problem = invalid(key, format, args...)
	}
}

// isGiven reports whether a decoded option was present in the JSON.
func (o *EnqueueOptions) isGiven(key string) bool {
	return o.notes != nil && o.notes.given[key]
}

// UnmarshalJSON reads options by the wire names of enqueue_many_v1 (queue, priority, runAt,
// maxAttempts, retryPolicy, tags, deadline, executionTimeoutMs, idempotencyKey,
// idempotencyScope, idempotencyTtlMs, dependsOn, onDependencyFailed, onDependencyCanceled, dedupe; times as RFC 3339
// text), for requests that arrive as
// JSON. Nothing is refused here: Enqueue checks the options as given (an explicit
// "maxAttempts": 0 is refused, not taken for the default) and names the field.
func (o *EnqueueOptions) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	*o = decodeOptions(raw)
	return nil
}

func decodeOptions(raw map[string]json.RawMessage) EnqueueOptions {
	var o EnqueueOptions
	n := &wireNotes{given: map[string]bool{}}
	o.notes = n
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	text := func(key string, value json.RawMessage, into *string) {
		if json.Unmarshal(value, into) != nil {
			n.note(key, "must be a string")
		}
	}
	integer := func(key string, value json.RawMessage, min, max int64) int64 {
		v, ok := jsonInteger(value)
		if !ok {
			n.note(key, "must be an integer from %d to %d", min, max)
		}
		return v
	}
	at := func(key string, value json.RawMessage, into *time.Time) {
		var s string
		err := json.Unmarshal(value, &s)
		if err == nil {
			*into, err = time.Parse(time.RFC3339Nano, s)
		}
		if err != nil {
			n.note(key, "must be an ISO 8601 timestamp with a time zone, such as 2030-01-01T00:00:00Z")
		}
	}
	for _, key := range keys {
		value := raw[key]
		n.given[key] = true
		switch key {
		case "queue":
			text(key, value, &o.Queue)
		case "priority":
			o.Priority = int(integer(key, value, 0, 100))
		case "maxAttempts":
			o.MaxAttempts = int(integer(key, value, 1, 100))
		case "runAt":
			at(key, value, &o.RunAt)
		case "deadline":
			at(key, value, &o.Deadline)
		case "executionTimeoutMs":
			o.ExecutionTimeout = time.Duration(integer(key, value, 1000, 86_400_000)) * time.Millisecond
		case "idempotencyKey":
			text(key, value, &o.IdempotencyKey)
		case "idempotencyScope":
			text(key, value, &o.IdempotencyScope)
		case "concurrencyKey":
			text(key, value, &o.ConcurrencyKey)
		case "idempotencyTtlMs":
			o.IdempotencyTTL = time.Duration(integer(key, value, 1000, 2_592_000_000)) * time.Millisecond
		case "tags":
			if json.Unmarshal(value, &o.Tags) != nil {
				n.note(key, "must be an array of at most %d strings", maxTags)
			}
		case "dependsOn":
			var ok bool
			if o.DependsOn, ok = decodePrerequisites(value); !ok {
				n.note(key, "must be an array of 1 to 1000 job ids")
			}
		case "onDependencyFailed", "onDependencyCanceled":
			var policy string
			text(key, value, &policy)
			if key == "onDependencyFailed" {
				o.OnDependencyFailed = DependencyPolicy(policy)
			} else {
				o.OnDependencyCanceled = DependencyPolicy(policy)
			}
		case "dedupe":
			if string(value) != "null" {
				o.Dedupe = &Dedupe{}
				_ = o.Dedupe.UnmarshalJSON(value)
			}
		case "retryPolicy":
			if string(value) != "null" {
				o.RetryPolicy = &RetryPolicy{}
				_ = o.RetryPolicy.UnmarshalJSON(value)
			}
		default:
			n.unknown = append(n.unknown, key)
		}
	}
	return o
}

// UnmarshalJSON reads one request of a batch by its wire names: "type", "payload" (kept as
// JSON) and the options of EnqueueOptions.UnmarshalJSON. EnqueueMany checks it.
func (r *EnqueueRequest) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	typ, hasType := raw["type"]
	payload, hasPayload := raw["payload"]
	delete(raw, "type")
	delete(raw, "payload")
	*r = EnqueueRequest{EnqueueOptions: decodeOptions(raw)}
	if hasType && json.Unmarshal(typ, &r.Type) != nil {
		r.notes.note("type", "must be a string")
	}
	if !hasPayload {
		r.notes.note("payload", "is required (use null for no payload)")
	}
	r.Payload = payload
	return nil
}
