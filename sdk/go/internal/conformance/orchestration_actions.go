package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// orchestrationAction runs one of the orchestration actions (README, scenarios 014 on);
// handled is false for any other action.
func (r *Runner) orchestrationAction(ctx context.Context, a Action) (handled bool, err error) {
	switch a.Do() {
	case "set_queue_policy":
		var policy workhorse.QueuePolicy
		if err := json.Unmarshal(a["policy"], &policy); err != nil {
			return true, err
		}
		got, err := r.Admin.SetQueuePolicy(ctx, a.str("queue"), policy, workhorse.ActorOptions{})
		if a["expectError"] != nil {
			if err == nil {
				return true, fmt.Errorf("expected %s, the policy was set", a["expectError"])
			}
			return true, r.expectError(err, a["expectError"])
		}
		if err != nil {
			return true, err
		}
		var expected map[string]json.RawMessage
		if a["expect"] != nil {
			if err := json.Unmarshal(a["expect"], &expected); err != nil {
				return true, err
			}
		}
		fields := map[string]any{"concurrency": nil, "rateLimit": got.RateLimit, "perKey": got.PerKey}
		if got.Concurrency != 0 {
			fields["concurrency"] = got.Concurrency
		}
		for key, want := range expected {
			if !sameJSON(fields[key], want) {
				text, _ := json.Marshal(fields[key])
				return true, fmt.Errorf("set_queue_policy %s: %s, want %s", key, text, want)
			}
		}
		return true, nil
	case "send_signal":
		id := a.str("jobId")
		if id == "" {
			if id, err = r.id(a, "job"); err != nil {
				return true, err
			}
		}
		var payload any
		if a["payload"] != nil {
			payload = a["payload"]
		}
		var o *workhorse.SignalOptions
		if key := a.str("idempotencyKey"); key != "" {
			o = &workhorse.SignalOptions{IdempotencyKey: key}
		}
		got, err := r.Queue.SendSignal(ctx, id, a.str("name"), payload, o)
		if err == nil && string(got) != a.str("expect") {
			err = fmt.Errorf("send_signal answered %s", got)
		}
		return true, err
	case "complete_human_wait":
		id, err := r.id(a, "job")
		if err != nil {
			return true, err
		}
		o := workhorse.DecisionOptions{Actor: a.str("actor"), Reason: a.str("reason"), IdempotencyKey: a.str("idempotencyKey")}
		got, err := r.Queue.CompleteHumanWait(ctx, id, a.str("name"), orNull(a["decision"]), o)
		if a["expectError"] != nil {
			if err == nil {
				return true, fmt.Errorf("expected %s, got %s", a["expectError"], got)
			}
			return true, r.expectError(err, a["expectError"])
		}
		if err == nil && string(got) != a.str("expect") {
			err = fmt.Errorf("complete_human_wait answered %s", got)
		}
		return true, err
	case "expect_human_waits":
		id, err := r.id(a, "job")
		if err != nil {
			return true, err
		}
		var want []struct {
			Name    string          `json:"name"`
			Context json.RawMessage `json:"context"`
			Choices json.RawMessage `json:"choices"`
		}
		if err := json.Unmarshal(a["waits"], &want); err != nil {
			return true, err
		}
		var got []workhorse.HumanWait
		cursor := ""
		for {
			page, err := r.Admin.ListHumanWaits(ctx, workhorse.HumanWaitFilter{JobID: id, Limit: 1, Cursor: cursor})
			if err != nil {
				return true, err
			}
			got = append(got, page.Items...)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(got) != len(want) {
			return true, fmt.Errorf("%d open waits, want %d", len(got), len(want))
		}
		for i, w := range want {
			if got[i].Name != w.Name || !sameJSON(got[i].Context, orNull(w.Context)) || !sameJSON(got[i].Choices, orNull(w.Choices)) {
				return true, fmt.Errorf("wait %d: %+v, want %s %s %s", i, got[i], w.Name, w.Context, w.Choices)
			}
		}
		return true, nil
	case "name_children":
		id, err := r.id(a, "job")
		if err != nil {
			return true, err
		}
		var names []string
		if err := json.Unmarshal(a["as"], &names); err != nil {
			return true, err
		}
		var children []string
		cursor := ""
		for {
			page, err := r.Admin.ListJobs(ctx, workhorse.ListJobsFilter{ParentID: id, Limit: 2, Cursor: cursor})
			if err != nil {
				return true, err
			}
			for _, j := range page.Items {
				children = append(children, j.ID)
			}
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
		if len(children) != len(names) {
			return true, fmt.Errorf("%d children, want %d", len(children), len(names))
		}
		for i, name := range names {
			r.jobs[name] = children[i]
		}
		return true, nil
	}
	return false, nil
}

// withJobIDs replaces the job names in a request's (or options') dependsOn by their ids; other
// entries (ids, batch indexes) stay as written.
func (r *Runner) withJobIDs(wire json.RawMessage) json.RawMessage {
	var fields map[string]json.RawMessage
	if json.Unmarshal(wire, &fields) != nil || fields["dependsOn"] == nil {
		return wire
	}
	var entries []json.RawMessage
	if json.Unmarshal(fields["dependsOn"], &entries) != nil {
		return wire
	}
	for i, e := range entries {
		var name string
		if json.Unmarshal(e, &name) == nil {
			if id, ok := r.jobs[name]; ok {
				entries[i], _ = json.Marshal(id)
			}
		}
	}
	fields["dependsOn"], _ = json.Marshal(entries)
	out, _ := json.Marshal(fields)
	return out
}

// expectLineage checks one lineage key of expect_job; known is false for any other key.
func (r *Runner) expectLineage(job *workhorse.JobSnapshot, key string, want json.RawMessage) (known bool, err error) {
	type link struct {
		Job   string `json:"job"`
		State string `json:"state"`
		Key   string `json:"key"`
	}
	describe := func(links []link) []string {
		out := make([]string, len(links))
		for i, l := range links {
			out[i] = r.jobs[l.Job] + " " + l.State + " " + l.Key
		}
		return out
	}
	switch key {
	case "dependencies", "children":
		var links []link
		if err := json.Unmarshal(want, &links); err != nil {
			return true, err
		}
		var got []string
		if key == "dependencies" {
			for _, d := range job.Dependencies {
				got = append(got, d.ID+" "+string(d.State)+" ")
			}
		} else {
			for _, c := range job.Children {
				got = append(got, c.ID+" "+string(c.State)+" "+c.Key)
			}
		}
		if w := describe(links); !slices.Equal(got, w) {
			return true, fmt.Errorf("%s %v, want %v", key, got, w)
		}
		return true, nil
	case "waitingOn":
		var names []string
		if err := json.Unmarshal(want, &names); err != nil {
			return true, err
		}
		var got, w []string
		for _, l := range job.WaitingOn {
			got = append(got, l.ID)
		}
		for _, n := range names {
			w = append(w, r.jobs[n])
		}
		if !slices.Equal(got, w) {
			return true, fmt.Errorf("waitingOn %v, want %v", got, w)
		}
		return true, nil
	case "parent":
		var name *string
		if err := json.Unmarshal(want, &name); err != nil {
			return true, err
		}
		w := ""
		if name != nil {
			w = r.jobs[*name]
		}
		if job.ParentID != w {
			return true, fmt.Errorf("parent %q, want %q", job.ParentID, w)
		}
		return true, nil
	}
	return false, nil
}
