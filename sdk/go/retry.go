package workhorse

import (
	"strconv"
	"time"
)

// RetryPolicy says how long to wait before the next attempt after a failed one. Make one with
// [ExponentialRetry] or [FixedRetry]; the zero value is the default policy (exponential from
// 1 s, doubling, at most 1 h, with jitter).
type RetryPolicy struct {
	fixed bool
	// fixed
	delay time.Duration
	// exponential; zero fields take the defaults
	initial    time.Duration
	multiplier float64
	max        time.Duration
	noJitter   bool
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
// further one, at most Max.
//
//	workhorse.ExponentialRetry(workhorse.ExponentialRetryOptions{Initial: 5 * time.Second, Max: 10 * time.Minute})
func ExponentialRetry(o ExponentialRetryOptions) RetryPolicy {
	return RetryPolicy{initial: o.Initial, multiplier: o.Multiplier, max: o.Max, noJitter: o.NoJitter}
}

// FixedRetry waits the same delay after every failed attempt (0 retries at once).
func FixedRetry(delay time.Duration) RetryPolicy {
	return RetryPolicy{fixed: true, delay: delay}
}

// wire checks the policy and writes it as the SQL functions read it (`field` names it in errors).
func (p RetryPolicy) wire(field string) ([]byte, error) {
	if p.fixed {
		ms, err := wholeMs(p.delay, field+".delayMs", 0, maxDelayMs)
		if err != nil {
			return nil, err
		}
		return []byte(`{"kind":"fixed","delayMs":` + strconv.FormatInt(ms, 10) + `}`), nil
	}
	out := []byte(`{"kind":"exponential"`)
	initial, max := int64(1000), int64(3_600_000)
	if p.initial != 0 {
		ms, err := wholeMs(p.initial, field+".initialMs", 0, maxDelayMs)
		if err != nil {
			return nil, err
		}
		initial = ms
		out = append(out, `,"initialMs":`...)
		out = strconv.AppendInt(out, ms, 10)
	}
	if p.multiplier != 0 {
		if p.multiplier < 1 || p.multiplier > 10 {
			return nil, invalid(field+".multiplier", "must be a number from 1 to 10")
		}
		out = append(out, `,"multiplier":`...)
		out = strconv.AppendFloat(out, p.multiplier, 'g', -1, 64)
	}
	if p.max != 0 {
		ms, err := wholeMs(p.max, field+".maxMs", 0, maxDelayMs)
		if err != nil {
			return nil, err
		}
		max = ms
		out = append(out, `,"maxMs":`...)
		out = strconv.AppendInt(out, ms, 10)
	}
	if max < initial {
		return nil, invalid(field+".maxMs", "must not be smaller than initialMs")
	}
	if p.noJitter {
		out = append(out, `,"jitter":false`...)
	}
	return append(out, '}'), nil
}
