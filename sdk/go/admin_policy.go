package workhorse

import (
	"context"
	"encoding/json"
)

// QueuePolicy is a queue's flow control, enforced by the claim across all workers. A limit left
// zero (or nil) is not applied; a policy with none removes the queue's policy.
type QueuePolicy struct {
	// Concurrency: at most this many of the queue's jobs active at once (1 to 100000).
	Concurrency int `json:"concurrency,omitempty"`
	// RateLimit: at most Limit claims of the queue's jobs in any window of IntervalMs.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// PerKey: at most PerKey.Concurrency active jobs per EnqueueOptions.ConcurrencyKey; jobs
	// without a key are not limited by it, and the keys take turns at each claim.
	PerKey *PerKeyLimit `json:"perKey,omitempty"`
}

// RateLimit is at most Limit claims (1 to 100000) in any window of IntervalMs (1 to 86400000).
type RateLimit struct {
	Limit      int   `json:"limit"`
	IntervalMs int64 `json:"intervalMs"`
}

// PerKeyLimit is at most Concurrency (1 to 100000) active jobs per concurrency key.
type PerKeyLimit struct {
	Concurrency int `json:"concurrency"`
}

// SetQueuePolicy sets a queue's flow control, replacing its previous policy, and returns the
// policy now in force. The policy is checked by the SQL function (a *ValidationError names the
// field, such as "perKey.concurrency"); setting the policy a queue has changes nothing.
func (a *Admin) SetQueuePolicy(ctx context.Context, queue string, policy QueuePolicy, o ActorOptions) (QueuePolicy, error) {
	if err := checkName(queue, "queue"); err != nil {
		return QueuePolicy{}, err
	}
	if err := checkActor(o); err != nil {
		return QueuePolicy{}, err
	}
	if err := a.schema.check(ctx, a.db); err != nil {
		return QueuePolicy{}, err
	}
	wire, _ := json.Marshal(policy)
	var answer string
	if err := queryRow(ctx, a.db, setQueuePolicySQL, []any{queue, string(wire), nullable(o.Actor), nullable(o.Reason)}, &answer); err != nil {
		return QueuePolicy{}, err
	}
	var got QueuePolicy
	err := json.Unmarshal([]byte(answer), &got)
	return got, err
}
