package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// Reporter learns what the handlers do that the database does not show: the checkpoint
// operations that really ran (effects) and the marks handlers reach.
type Reporter interface {
	Effect(jobID, name string)
	Mark(jobID, name string)
}

// SaveMeanwhile saves value under name for the job as its current owner: a checkpoint step's
// storedMeanwhile (README, "Handler scripts").
type SaveMeanwhile func(ctx context.Context, jobID, name string, value json.RawMessage) error

// RowQuerier runs one statement for one row: a *pgxpool.Pool of the database's owner.
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// saveAsOwnerSQL is the other save: the job's runtime row names its current owner.
const saveAsOwnerSQL = `SELECT c.status FROM workhorse.job_runtime r,
	workhorse.save_checkpoint_v2(r.job_id, r.worker_id, r.fence_token, $2, $3::jsonb) c WHERE r.job_id = $1`

// OwnerSaver saves as the job's owner through db, which must be allowed to read
// workhorse.job_runtime (a test's owner pool); nil refuses every such save.
func OwnerSaver(db RowQuerier) SaveMeanwhile {
	return func(ctx context.Context, jobID, name string, value json.RawMessage) error {
		if db == nil {
			return errors.New("this worker was started without a way to save as the owner (storedMeanwhile)")
		}
		var status string
		if err := db.QueryRow(ctx, saveAsOwnerSQL, jobID, name, string(orNull(value))).Scan(&status); err != nil {
			return err
		}
		if status != "saved" {
			return fmt.Errorf("the other save of %q answered %s", name, status)
		}
		return nil
	}
}

// Register registers every handler script of the scenario on w.
func Register(w *workhorse.Worker, s *Scenario, report Reporter, save SaveMeanwhile) error {
	for jobType, steps := range s.Handlers {
		if err := workhorse.Handle(w, jobType, script(steps, report, save)); err != nil {
			return fmt.Errorf("handler %s: %w", jobType, err)
		}
	}
	return nil
}

// script is a handler that runs the steps in order on every call (README, "Handler scripts").
func script(steps []Step, report Reporter, save SaveMeanwhile) func(context.Context, *workhorse.Job, json.RawMessage) (json.RawMessage, error) {
	return func(ctx context.Context, job *workhorse.Job, _ json.RawMessage) (json.RawMessage, error) {
		checkpoints := map[string]json.RawMessage{}
		values := map[string]any{}
		for _, step := range steps {
			if len(step.Attempts) > 0 && !slices.Contains(step.Attempts, job.Attempt) {
				continue
			}
			switch step.Do {
			case "checkpoint":
				value, err := workhorse.Checkpoint(ctx, job, step.Name, func(ctx context.Context) (json.RawMessage, error) {
					report.Effect(job.ID, step.Name)
					if step.StoredMeanwhile != nil {
						if err := save(ctx, job.ID, step.Name, step.StoredMeanwhile); err != nil {
							return nil, workhorse.NonRetryable(err)
						}
					}
					return orNull(step.Value), nil
				})
				if err != nil {
					return nil, err
				}
				checkpoints[step.Name] = value
				values[step.Name] = value
				if step.As != "" {
					values[step.As] = value
				}
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
