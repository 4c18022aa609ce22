package conformance

import (
	"context"
	"encoding/json"
	"fmt"
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

// operatorAction runs operator_call; handled is false for any other action.
func (r *Runner) operatorAction(ctx context.Context, a Action) (handled bool, err error) {
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
