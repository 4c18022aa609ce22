package workhorse

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says how long to wait before the next attempt after a failed one. Make one with
// [ExponentialRetry] or [FixedRetry], or decode the wire form ({"kind": "fixed", "delayMs":
// 500}) with encoding/json; the policy is checked where it is used, naming the field.
type RetryPolicy struct {
	kind string
	// Integer options by wire name (delayMs, initialMs, maxMs), as given.
	ms         map[string]int64
	multiplier *float64
	jitter     *bool
	// keys of a decoded policy that no kind has
	unknown []string
	// a problem found while building or decoding, its field relative to the policy
	problem *ValidationError
}

// ExponentialRetryOptions are the settings of [ExponentialRetry]; a zero field takes its default.
type ExponentialRetryOptions struct {
	// Initial is the delay after the first failed attempt (default 1 s).
	Initial time.Duration
	// Multiplier is the growth per attempt, 1 to 10 (default 2).
	Multiplier float64
	// Max bounds every delay (default 1 h).
	Max time.Duration
	// NoJitter turns off drawing each delay from [50%, 100%] of its nominal value.
	NoJitter bool
}

// ExponentialRetry waits Initial after the first failure, multiplied by Multiplier after each
// further one, at most Max (whole milliseconds).
//
//	workhorse.ExponentialRetry(workhorse.ExponentialRetryOptions{Initial: 5 * time.Second, Max: 10 * time.Minute})
func ExponentialRetry(o ExponentialRetryOptions) RetryPolicy {
	p := RetryPolicy{kind: "exponential", ms: map[string]int64{}}
	p.setDuration("initialMs", o.Initial)
	p.setDuration("maxMs", o.Max)
	if o.Multiplier != 0 {
		m := o.Multiplier
		p.multiplier = &m
	}
	if o.NoJitter {
		off := false
		p.jitter = &off
	}
	return p
}

// FixedRetry waits the same delay after every failed attempt (0 retries at once).
func FixedRetry(delay time.Duration) RetryPolicy {
	p := RetryPolicy{kind: "fixed", ms: map[string]int64{}}
	if delay == 0 {
		p.ms["delayMs"] = 0
	}
	p.setDuration("delayMs", delay)
	return p
}

func (p *RetryPolicy) setDuration(key string, d time.Duration) {
	if d == 0 {
		return
	}
	if d%time.Millisecond != 0 && p.problem == nil {
		p.problem = invalid(key, "must be a whole number of milliseconds")
	}
	p.ms[key] = d.Milliseconds()
}

var retryOptions = map[string][]string{
	"fixed":       {"kind", "delayMs"},
	"exponential": {"kind", "initialMs", "multiplier", "maxMs", "jitter"},
}

// UnmarshalJSON reads the wire form of a policy. Anything wrong with it is reported where the
// policy is used (Enqueue, Handle), naming the field.
func (p *RetryPolicy) UnmarshalJSON(data []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		*p = RetryPolicy{problem: invalid("", `must be an object such as {"kind": "exponential"} or {"kind": "fixed", "delayMs": 5000}`)}
		return nil
	}
	*p = RetryPolicy{ms: map[string]int64{}}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	note := func(key, format string, args ...any) {
		if p.problem == nil {
			p.problem = invalid(key, format, args...)
		}
	}
	for _, key := range keys {
		value := raw[key]
		switch key {
		case "kind":
			if json.Unmarshal(value, &p.kind) != nil {
				p.kind = "?"
			}
		case "delayMs", "initialMs", "maxMs":
			n, ok := jsonInteger(value)
			if !ok {
				note(key, "must be an integer from %d to %d", limits.RetryPolicy.DelayMs.Min, limits.RetryPolicy.DelayMs.Max)
			}
			p.ms[key] = n
		case "multiplier":
			var m float64
			if json.Unmarshal(value, &m) != nil {
				note(key, "must be a number from 1 to 10")
			}
			p.multiplier = &m
		case "jitter":
			var j bool
			if json.Unmarshal(value, &j) != nil {
				note(key, "must be true or false")
			}
			p.jitter = &j
		default:
			p.unknown = append(p.unknown, key)
		}
	}
	return nil
}

// jsonInteger reads a JSON number that is a whole number (5, 5.0, 5e1).
func jsonInteger(value json.RawMessage) (int64, bool) {
	var f float64
	if json.Unmarshal(value, &f) != nil || f != float64(int64(f)) {
		return 0, false
	}
	return int64(f), true
}

// wire checks the policy's shape (its kind and keys, whole milliseconds) and writes it as the
// SQL functions read it (`field` names it); its ranges are the function's to check
// (normalize_retry_policy, P1001 naming the field), or checkRanges' for a handler's policy.
func (p RetryPolicy) wire(field string) ([]byte, error) {
	allowed, ok := retryOptions[p.kind]
	if !ok {
		if p.problem != nil && p.problem.Field == "" {
			return nil, invalid(field, "%s", p.problem.Message)
		}
		return nil, invalid(field+".kind", `must be "exponential" or "fixed"`)
	}
	given := append([]string{}, p.unknown...)
	for key := range p.ms {
		given = append(given, key)
	}
	if p.multiplier != nil {
		given = append(given, "multiplier")
	}
	if p.jitter != nil {
		given = append(given, "jitter")
	}
	sort.Strings(given)
	for _, key := range given {
		if !contains(allowed, key) {
			return nil, invalid(field+"."+key, "is not an option of a %s retry policy (%s)", p.kind, strings.Join(allowed, ", "))
		}
	}
	if p.problem != nil {
		return nil, invalid(field+"."+p.problem.Field, "%s", p.problem.Message)
	}
	var out bytes.Buffer
	out.WriteString(`{"kind":"` + p.kind + `"`)
	for _, key := range []string{"delayMs", "initialMs", "maxMs"} {
		if n, set := p.ms[key]; set {
			out.WriteString(`,"` + key + `":` + strconv.FormatInt(n, 10))
		}
	}
	if p.multiplier != nil {
		out.WriteString(`,"multiplier":` + strconv.FormatFloat(*p.multiplier, 'g', -1, 64))
	}
	if p.jitter != nil {
		out.WriteString(`,"jitter":` + strconv.FormatBool(*p.jitter))
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

// checkRanges checks a handler's policy (Handle, which has no database at hand) against the
// ranges of limits.json; an enqueue's policy is checked by the SQL function alone.
func (p RetryPolicy) checkRanges(field string) error {
	r := limits.RetryPolicy
	for _, key := range []string{"delayMs", "initialMs", "maxMs"} {
		if n, set := p.ms[key]; set {
			if err := checkRange(n, field+"."+key, r.DelayMs.Min, r.DelayMs.Max); err != nil {
				return err
			}
		}
	}
	if p.multiplier != nil {
		if m := *p.multiplier; m < float64(r.Multiplier.Min) || m > float64(r.Multiplier.Max) {
			return invalid(field+".multiplier", "must be a number from %d to %d", r.Multiplier.Min, r.Multiplier.Max)
		}
	}
	if p.kind == "exponential" {
		initial, max := r.Default.InitialMs, r.Default.MaxMs
		if n, set := p.ms["initialMs"]; set {
			initial = n
		}
		if n, set := p.ms["maxMs"]; set {
			max = n
		}
		if max < initial {
			return invalid(field+".maxMs", "must not be smaller than initialMs")
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
