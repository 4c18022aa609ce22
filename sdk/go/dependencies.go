package workhorse

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
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

// wireDependencies checks the dependency options of the request at position `index` of its
// batch and appends them to out as enqueue_many_v1 reads them.
func wireDependencies(out []byte, o *EnqueueOptions, path string, index int) ([]byte, error) {
	for _, p := range []struct {
		policy DependencyPolicy
		field  string
	}{{o.OnDependencyFailed, "onDependencyFailed"}, {o.OnDependencyCanceled, "onDependencyCanceled"}} {
		if p.policy == "" && !o.isGiven(p.field) {
			continue
		}
		if o.DependsOn == nil && !o.isGiven("dependsOn") {
			return nil, invalid(path+p.field, "needs dependsOn")
		}
		if p.policy != DependencyFail && p.policy != DependencyCancel && p.policy != DependencyRun {
			return nil, invalid(path+p.field, `must be "fail", "cancel" or "run"`)
		}
		out = append(append(append(append(append(out, `,"`...), p.field...), `":"`...), p.policy...), '"')
	}
	if o.DependsOn == nil && !o.isGiven("dependsOn") {
		return out, nil
	}
	if len(o.DependsOn) < 1 || len(o.DependsOn) > maxBatch {
		return nil, invalid(path+"dependsOn", "must be an array of 1 to 1000 job ids")
	}
	seen := make(map[string]bool, len(o.DependsOn))
	out = append(out, `,"dependsOn":[`...)
	for i, p := range o.DependsOn {
		field := path + "dependsOn[" + strconv.Itoa(i) + "]"
		if i > 0 {
			out = append(out, ',')
		}
		var key string
		if p.jobID != "" {
			if err := checkJobID(p.jobID, field); err != nil {
				return nil, err
			}
			key = strings.ToLower(p.jobID)
			out = append(append(append(out, '"'), key...), '"')
		} else {
			if p.index < 0 || p.index >= index {
				if index == 0 {
					return nil, invalid(field, "must name a job id (a batch index names an earlier request of EnqueueMany)")
				}
				return nil, invalid(field, "must name a job id, or the index of an earlier request of the batch (0 to %d)", index-1)
			}
			key = strconv.Itoa(p.index)
			out = strconv.AppendInt(out, int64(p.index), 10)
		}
		if seen[key] {
			return nil, invalid(field, "names a job that dependsOn already names")
		}
		seen[key] = true
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
