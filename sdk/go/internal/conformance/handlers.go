package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// Reporter learns what the handlers do that the database does not show: the checkpoint
// operations that really ran (effects) and the marks handlers reach.
type Reporter interface {
	Effect(jobID, name string)
	Mark(jobID, name string)
}

// Register registers every handler script of the scenario on w.
func Register(w *workhorse.Worker, s *Scenario, report Reporter) error {
	for jobType, steps := range s.Handlers {
		if err := workhorse.Handle(w, jobType, script(steps, report)); err != nil {
			return fmt.Errorf("handler %s: %w", jobType, err)
		}
	}
	return nil
}

// script is a handler that runs the steps in order on every call (README, "Handler scripts").
func script(steps []Step, report Reporter) func(context.Context, *workhorse.Job, json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, job *workhorse.Job, _ json.RawMessage) (json.RawMessage, error) {
		checkpoints := map[string]json.RawMessage{}
		values := map[string]any{}
		for _, step := range steps {
			if len(step.Attempts) > 0 && !slices.Contains(step.Attempts, job.Attempt) {
				continue
			}
			switch step.Do {
			case "checkpoint":
				value, err := workhorse.Checkpoint(ctx, job, step.Name, func(context.Context) (json.RawMessage, error) {
					report.Effect(job.ID, step.Name)
					return orNull(step.Value), nil
				})
				if err != nil {
					return nil, err
				}
				checkpoints[step.Name] = value
				values[step.Name] = value
			case "return":
				return orNull(step.Value), nil
			case "return_checkpoints":
				return json.Marshal(checkpoints)
			case "return_values":
				return json.Marshal(values)
			case "throw":
				var err error = workhorse.NewError(step.Name, step.Message)
				if step.Retryable != nil && !*step.Retryable {
					err = workhorse.NonRetryable(err)
				}
				if step.RetryDelayMs != nil {
					err = workhorse.RetryAfter(err, time.Duration(*step.RetryDelayMs)*time.Millisecond)
				}
				return nil, err
			case "progress":
				if err := job.SetProgress(ctx, orNull(step.Value)); err != nil {
					return nil, err
				}
			case "sleep":
				if err := job.Sleep(ctx, step.Name, time.Duration(step.Ms)*time.Millisecond); err != nil {
					return nil, err
				}
			case "mark":
				report.Mark(job.ID, step.Name)
			case "pause":
				time.Sleep(time.Duration(step.Ms) * time.Millisecond)
			case "block":
				<-ctx.Done()
				return nil, context.Cause(ctx)
			default:
				value, handled, err := orchestrationStep(ctx, job, step)
				if err != nil {
					return nil, err
				}
				if !handled {
					return nil, workhorse.NonRetryable(fmt.Errorf("unknown step %q", step.Do))
				}
				values[step.As] = value
			}
		}
		return json.RawMessage("null"), nil
	}
}

func orNull(value json.RawMessage) json.RawMessage {
	if value == nil {
		return json.RawMessage("null")
	}
	return value
}
