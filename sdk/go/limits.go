package workhorse

import (
	_ "embed"
	"encoding/json"
	"fmt"
)

// limitsJSON is the protocol's limits and defaults: limits.json is a copy of the repository's
// sdk/protocol/limits.json (the one source every SDK reads) made by scripts/copy-sdk-sql.js.
// The SQL functions enforce the enqueue and handler limits; this SDK uses the values to default
// and document its options and to check the worker options, which never reach the server.
//
//go:embed limits.json
var limitsJSON []byte

// limitRange is a bound of limits.json: min, max and (for options that have one) the default.
type limitRange struct {
	Min     int64  `json:"min"`
	Max     int64  `json:"max"`
	Default *int64 `json:"default,omitempty"`
}

// def is the range's default (0 for a range without one).
func (r limitRange) def() int64 {
	if r.Default == nil {
		return 0
	}
	return *r.Default
}

// protocolLimits is limits.json parsed; every key of the file has a field (a test checks that
// encoding it again gives the file's values).
type protocolLimits struct {
	About   string `json:"about"`
	Enqueue struct {
		NameLength limitRange `json:"nameLength"`
		Queue      struct {
			Default string `json:"default"`
		} `json:"queue"`
		Priority    limitRange `json:"priority"`
		MaxAttempts limitRange `json:"maxAttempts"`
		Tags        struct {
			Max int64 `json:"max"`
		} `json:"tags"`
		TagLength            limitRange `json:"tagLength"`
		IdempotencyKeyLength limitRange `json:"idempotencyKeyLength"`
		ConcurrencyKeyLength limitRange `json:"concurrencyKeyLength"`
		IdempotencyTTLMs     limitRange `json:"idempotencyTtlMs"`
		DedupeKeyLength      limitRange `json:"dedupeKeyLength"`
		DedupeWindowMs       limitRange `json:"dedupeWindowMs"`
		ExecutionTimeoutMs   limitRange `json:"executionTimeoutMs"`
		Dependencies         limitRange `json:"dependencies"`
		BatchSize            struct {
			Max int64 `json:"max"`
		} `json:"batchSize"`
		BatchBytes struct {
			Max int64 `json:"max"`
		} `json:"batchBytes"`
		JSONBytes struct {
			Max int64 `json:"max"`
		} `json:"jsonBytes"`
		JSONDepth struct {
			Max int64 `json:"max"`
		} `json:"jsonDepth"`
	} `json:"enqueue"`
	RetryPolicy struct {
		DelayMs    limitRange `json:"delayMs"`
		Multiplier limitRange `json:"multiplier"`
		Default    struct {
			Kind       string `json:"kind"`
			InitialMs  int64  `json:"initialMs"`
			Multiplier int64  `json:"multiplier"`
			MaxMs      int64  `json:"maxMs"`
			Jitter     bool   `json:"jitter"`
		} `json:"default"`
		FixedDelayMsDefault int64 `json:"fixedDelayMsDefault"`
	} `json:"retryPolicy"`
	Handler struct {
		SleepMs       limitRange `json:"sleepMs"`
		WaitTimeoutMs limitRange `json:"waitTimeoutMs"`
		NameLength    limitRange `json:"nameLength"`
	} `json:"handler"`
	Dates struct {
		MinYear int `json:"minYear"`
		MaxYear int `json:"maxYear"`
	} `json:"dates"`
	Worker struct {
		Queues struct {
			Min     int64    `json:"min"`
			Max     int64    `json:"max"`
			Default []string `json:"default"`
		} `json:"queues"`
		Concurrency limitRange `json:"concurrency"`
		RoundTrips  limitRange `json:"roundTrips"`
		LeaseMs     limitRange `json:"leaseMs"`
		HeartbeatMs struct {
			Min                 int64 `json:"min"`
			Max                 int64 `json:"max"`
			BelowLeaseMs        bool  `json:"belowLeaseMs"`
			DefaultLeaseDivisor int64 `json:"defaultLeaseDivisor"`
		} `json:"heartbeatMs"`
		PollMs             limitRange `json:"pollMs"`
		TickMs             limitRange `json:"tickMs"`
		ShutdownTimeoutMs  limitRange `json:"shutdownTimeoutMs"`
		UnknownTypeDelayMs limitRange `json:"unknownTypeDelayMs"`
		WorkerIDLength     limitRange `json:"workerIdLength"`
	} `json:"worker"`
	Results struct {
		PollMs     limitRange `json:"pollMs"`
		TTLSeconds limitRange `json:"ttlSeconds"`
		BatchSize  struct {
			Max int64 `json:"max"`
		} `json:"batchSize"`
	} `json:"results"`
}

// limits is the parsed limits.json.
var limits = mustParseLimits(limitsJSON)

func mustParseLimits(data []byte) protocolLimits {
	var l protocolLimits
	if err := json.Unmarshal(data, &l); err != nil {
		panic(fmt.Sprintf("workhorse: the embedded limits.json does not parse: %v", err))
	}
	return l
}

// heartbeatNotBelowLease is the message every SDK gives for a heartbeat that is not below the
// lease (field heartbeatMs).
func heartbeatNotBelowLease(leaseMs int64) string {
	return fmt.Sprintf("must be below leaseMs (%d), or every lease lapses before it is renewed; a third of leaseMs is the default", leaseMs)
}
