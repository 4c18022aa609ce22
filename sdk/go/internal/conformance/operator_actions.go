package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// operatorArgs are an operator_call's arguments by their wire names (README, scenarios 026 on).
type operatorArgs struct {
	Queue       string `json:"queue"`
	Type        string `json:"type"`
	Name        string `json:"name"`
	ErrorName   string `json:"errorName"`
	WorkerID    string `json:"workerId"`
	Actor       string `json:"actor"`
	Reason      string `json:"reason"`
	Namespace   string `json:"namespace"`
	Definitions []struct {
		Key           string `json:"key"`
		Type          string `json:"type"`
		Cron          string `json:"cron"`
		CatchUp       string `json:"catchUp"`
		CatchUpLimit  int    `json:"catchUpLimit"`
		Overlap       string `json:"overlap"`
		MissedAfterMs int64  `json:"missedAfterMs"`
	} `json:"definitions"`
}

// operatorCallAction runs operator_call; handled is false for any other action.
func (r *Runner) operatorCallAction(ctx context.Context, a Action) (handled bool, err error) {
	if a.Do() != "operator_call" {
		return false, nil
	}
	var args operatorArgs
	if err := json.Unmarshal(a["args"], &args); err != nil {
		return true, fmt.Errorf("operator_call args: %w", err)
	}
	err = r.operatorCall(ctx, a.str("call"), args)
	if a["expectError"] == nil {
		return true, err
	}
	if err == nil {
		return true, fmt.Errorf("expected %s, %s succeeded", a["expectError"], a.str("call"))
	}
	return true, r.expectError(err, a["expectError"])
}

func (r *Runner) operatorCall(ctx context.Context, call string, args operatorArgs) error {
	who := workhorse.ActorOptions{Actor: args.Actor, Reason: args.Reason}
	var err error
	switch call {
	case "pause_queue":
		_, err = r.Admin.PauseQueue(ctx, args.Queue, who)
	case "drain_worker":
		_, err = r.Admin.DrainWorker(ctx, args.WorkerID, who)
	case "list_jobs":
		_, err = r.Admin.ListJobs(ctx, workhorse.ListJobsFilter{Queue: args.Queue, Type: args.Type})
	case "list_dead_letters":
		_, err = r.Admin.ListDeadLetters(ctx, workhorse.ListDeadLettersOptions{
			DeadLetterFilter: workhorse.DeadLetterFilter{Queue: args.Queue, Type: args.Type, ErrorName: args.ErrorName}})
	case "list_human_waits":
		_, err = r.Admin.ListHumanWaits(ctx, workhorse.HumanWaitFilter{Queue: args.Queue, Type: args.Type, Name: args.Name})
	case "sync_schedules":
		definitions := make([]workhorse.ScheduleDefinition, len(args.Definitions))
		for i, d := range args.Definitions {
			definitions[i] = workhorse.ScheduleDefinition{Key: d.Key, Type: d.Type, Cron: d.Cron, CatchUp: d.CatchUp,
				CatchUpLimit: d.CatchUpLimit, Overlap: d.Overlap, MissedAfter: time.Duration(d.MissedAfterMs) * time.Millisecond}
		}
		_, err = r.Queue.SyncSchedules(ctx, args.Namespace, definitions)
	default:
		err = fmt.Errorf("unknown operator call %q", call)
	}
	return err
}

// operatorAction runs operator_call (scenarios 026 on), job_action and bulk_action (README:
// operator actions on jobs, scenarios 029 on); handled is false for any other action.
func (r *Runner) operatorAction(ctx context.Context, a Action) (handled bool, err error) {
	switch a.Do() {
	case "operator_call":
		return r.operatorCallAction(ctx, a)
	case "job_action":
		return true, r.jobAction(ctx, a)
	case "bulk_action":
		return true, r.bulkAction(ctx, a)
	}
	return false, nil
}

func (r *Runner) jobAction(ctx context.Context, a Action) error {
	id, err := r.id(a, "job")
	if err != nil {
		return err
	}
	who := workhorse.ActorOptions{Actor: a.str("actor"), Reason: a.str("reason")}
	var got string
	switch a.str("action") {
	case "run_now":
		got, err = r.Admin.RunNow(ctx, id, who)
	case "delete":
		got, err = r.Admin.DeleteJob(ctx, id, who)
	default:
		o := workhorse.RescheduleOptions{ActorOptions: who}
		if a["runAt"] != nil {
			var at struct {
				InMs int64 `json:"inMs"`
			}
			if err := json.Unmarshal(a["runAt"], &at); err != nil {
				return err
			}
			t := time.Now().Add(time.Duration(at.InMs) * time.Millisecond)
			o.RunAt = &t
		}
		if a["priority"] != nil {
			var p int
			if err := json.Unmarshal(a["priority"], &p); err != nil {
				return err
			}
			o.Priority = &p
		}
		got, err = r.Admin.Reschedule(ctx, id, o)
	}
	if a["expectError"] != nil {
		if err == nil {
			return fmt.Errorf("expected %s, got %s", a["expectError"], got)
		}
		return r.expectError(err, a["expectError"])
	}
	if err == nil && got != a.str("expect") {
		err = fmt.Errorf("%s answered %s", a.str("action"), got)
	}
	return err
}

func (r *Runner) bulkAction(ctx context.Context, a Action) error {
	var spec struct {
		workhorse.JobActionFilter
		Jobs []string `json:"jobs"`
	}
	if a["filter"] != nil {
		if err := json.Unmarshal(a["filter"], &spec); err != nil {
			return err
		}
	}
	f := spec.JobActionFilter
	for _, name := range spec.Jobs {
		f.JobIDs = append(f.JobIDs, r.jobs[name])
	}
	o := workhorse.BulkActionOptions{ActorOptions: workhorse.ActorOptions{Actor: a.str("actor"), Reason: a.str("reason")}, DryRun: string(a["dryRun"]) == "true"}
	if a["limit"] != nil {
		if err := json.Unmarshal(a["limit"], &o.Limit); err != nil {
			return err
		}
	}
	var got workhorse.BulkActionResult
	var err error
	switch a.str("action") {
	case "cancel":
		got, err = r.Admin.CancelMatching(ctx, f, o)
	case "run_now":
		got, err = r.Admin.RunNowMatching(ctx, f, o)
	default:
		got, err = r.Admin.DeleteMatching(ctx, f, o)
	}
	if a["expectError"] != nil {
		if err == nil {
			return fmt.Errorf("expected %s, got %+v", a["expectError"], got)
		}
		return r.expectError(err, a["expectError"])
	}
	if err != nil {
		return err
	}
	var want struct {
		Matched  *int           `json:"matched"`
		Changed  *int           `json:"changed"`
		More     *bool          `json:"more"`
		Busy     *int           `json:"busy"`
		Outcomes map[string]int `json:"outcomes"`
		Skipped  map[string]int `json:"skipped"`
		Jobs     []string       `json:"jobs"`
		Sample   []string       `json:"sample"`
	}
	if err := json.Unmarshal(a["expect"], &want); err != nil {
		return err
	}
	switch {
	case want.Matched != nil && *want.Matched != got.Matched,
		want.Changed != nil && *want.Changed != got.Changed,
		want.More != nil && *want.More != got.More,
		want.Busy != nil && *want.Busy != got.Busy,
		want.Outcomes != nil && !reflect.DeepEqual(want.Outcomes, got.Outcomes),
		want.Skipped != nil && !reflect.DeepEqual(want.Skipped, got.Skipped):
		return fmt.Errorf("got %+v, want %s", got, a["expect"])
	}
	names := func(ids []string) []string {
		out := []string{}
		for _, id := range ids {
			name := id
			for k, v := range r.jobs {
				if v == id {
					name = k
				}
			}
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	sorted := func(s []string) []string { c := slices.Clone(s); slices.Sort(c); return c }
	if want.Jobs != nil && !slices.Equal(names(got.JobIDs), sorted(want.Jobs)) {
		return fmt.Errorf("changed %v, want %v", names(got.JobIDs), want.Jobs)
	}
	if want.Sample != nil {
		ids := []string{}
		for _, s := range got.Sample {
			ids = append(ids, s.ID)
		}
		if !slices.Equal(names(ids), sorted(want.Sample)) {
			return fmt.Errorf("sample %v, want %v", names(ids), want.Sample)
		}
	}
	return nil
}
