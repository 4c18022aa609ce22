package workhorse

import (
	"context"
	"encoding/json"
	"strconv"
)

// Prerequisite names a job that another one waits for (EnqueueOptions.DependsOn): an existing
// job by its id ([DependOnJob]) or, in EnqueueMany, an earlier request of the same batch
// ([DependOnRequest]).
type Prerequisite struct {
	jobID string
	index int // the batch index, when jobID is ""
}

// DependOnJob names a prerequisite by its job id: a job the enqueueing transaction can see
// (committed, or enqueued earlier in the same transaction).
func DependOnJob(jobID string) Prerequisite { return Prerequisite{jobID: jobID} }

// DependOnRequest names, inside EnqueueMany, the request at index (0-based) of the same batch,
// which must come before the request that names it.
func DependOnRequest(index int) Prerequisite { return Prerequisite{index: index} }

// DependOnJobs names prerequisites by their ids.
func DependOnJobs(jobIDs ...string) []Prerequisite {
	list := make([]Prerequisite, len(jobIDs))
	for i, id := range jobIDs {
		list[i] = DependOnJob(id)
	}
	return list
}

// DependencyPolicy is what a dependent does when a prerequisite ended `failed` or `canceled`.
type DependencyPolicy string

const (
	// DependencyFail ends the dependent `failed` (error DependencyFailed / DependencyCanceled).
	DependencyFail DependencyPolicy = "fail"
	// DependencyCancel ends the dependent `canceled`.
	DependencyCancel DependencyPolicy = "cancel"
	// DependencyRun runs the dependent anyway (Job.Dependencies tells it what happened).
	DependencyRun DependencyPolicy = "run"
)

// wireDependencies appends the dependency options of a request to out as enqueue_many_v1 reads
// them; the function checks them (policies, 1 to 1000 distinct prerequisites, ids, earlier
// batch indexes).
func wireDependencies(out []byte, o *EnqueueOptions, path string) ([]byte, error) {
	for _, p := range []struct {
		policy DependencyPolicy
		field  string
	}{{o.OnDependencyFailed, "onDependencyFailed"}, {o.OnDependencyCanceled, "onDependencyCanceled"}} {
		if p.policy == "" && !o.isGiven(p.field) {
			continue
		}
		if err := checkText(string(p.policy), path+p.field); err != nil {
			return nil, err
		}
		policy, _ := json.Marshal(string(p.policy))
		out = append(append(append(append(out, `,"`...), p.field...), `":`...), policy...)
	}
	if o.DependsOn == nil && !o.isGiven("dependsOn") {
		return out, nil
	}
	out = append(out, `,"dependsOn":[`...)
	for i, p := range o.DependsOn {
		if i > 0 {
			out = append(out, ',')
		}
		if p.jobID == "" {
			out = strconv.AppendInt(out, int64(p.index), 10)
			continue
		}
		if err := checkText(p.jobID, path+"dependsOn["+strconv.Itoa(i)+"]"); err != nil {
			return nil, err
		}
		id, _ := json.Marshal(p.jobID)
		out = append(out, id...)
	}
	return append(out, ']'), nil
}

// decodePrerequisites reads a wire dependsOn (job id strings and batch indexes).
func decodePrerequisites(value json.RawMessage) ([]Prerequisite, bool) {
	var raw []json.RawMessage
	if json.Unmarshal(value, &raw) != nil || raw == nil {
		return nil, false
	}
	list := make([]Prerequisite, len(raw))
	for i, entry := range raw {
		var id string
		if json.Unmarshal(entry, &id) == nil {
			if id == "" {
				return nil, false
			}
			list[i] = DependOnJob(id)
			continue
		}
		n, ok := jsonInteger(entry)
		if !ok {
			return nil, false
		}
		list[i] = DependOnRequest(int(n))
	}
	return list, true
}

// DependencyOutcome is one prerequisite of a job as Job.Dependencies reports it.
type DependencyOutcome struct {
	JobID string   `json:"jobId"`
	State JobState `json:"state"`
	// Result is the prerequisite's result once it succeeded, else nil.
	Result json.RawMessage `json:"result"`
	// Error is its error envelope once it failed or was canceled, else nil.
	Error *ErrorEnvelope `json:"error"`
}

// Dependencies returns the prerequisites this job was enqueued with (DependsOn), in that order,
// each with its state and its result or error. Every one has ended by the time the handler runs,
// so a job with policy DependencyRun can see which of them failed. Only while the worker holds
// the job under its claim's fence: afterwards it answers a *NotYoursError.
func (j *Job) Dependencies(ctx context.Context) ([]DependencyOutcome, error) {
	list := []DependencyOutcome{}
	err := queryAll(ctx, j.w.db, dependenciesSQL, []any{j.ID, j.WorkerID, j.FenceToken}, func(r rows) error {
		var d DependencyOutcome
		var state string
		var result, envelope []byte
		if err := r.Scan(&d.JobID, &state, &result, &envelope); err != nil {
			return err
		}
		d.State, d.Result = JobState(state), result
		var err error
		d.Error, err = decodeEnvelope(envelope)
		list = append(list, d)
		return err
	})
	return list, err
}

// decodeEnvelope reads a stored error envelope; nil for SQL NULL.
func decodeEnvelope(data []byte) (*ErrorEnvelope, error) {
	if data == nil {
		return nil, nil
	}
	e := &ErrorEnvelope{}
	return e, json.Unmarshal(data, e)
}
