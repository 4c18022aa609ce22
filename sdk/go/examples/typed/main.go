// Typed jobs: the payload type names its job type, so enqueueing and handling go through the
// same Go type and a wrong payload does not compile.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// SendEmail is the payload of "email.send" jobs.
type SendEmail struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func (SendEmail) Kind() string { return "email.send" }

type Sent struct {
	MessageID string `json:"messageId"`
}

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	queue := workhorse.NewQueue(workhorse.Pgx(pool))

	// The job type comes from the payload: EnqueueArgs(ctx, queue, "a@example.com", nil) does not compile.
	jobID, err := workhorse.EnqueueArgs(ctx, queue, SendEmail{To: "a@example.com", Subject: "Welcome"}, nil)
	if err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	worker, err := workhorse.NewWorker(workhorse.Pgx(pool), workhorse.WorkerOptions{
		OnEvent: func(e workhorse.Event) {
			if e.Name == workhorse.EventJobSucceeded && e.JobID == jobID {
				stop()
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Registered for SendEmail's kind; the handler gets a SendEmail.
	err = workhorse.HandleArgs(worker, func(ctx context.Context, job *workhorse.Job, email SendEmail) (Sent, error) {
		return Sent{MessageID: "m-" + email.To}, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(runCtx); err != nil {
		log.Fatal(err)
	}

	job, err := queue.GetJob(ctx, jobID)
	if err != nil {
		log.Fatal(err)
	}
	email, err := workhorse.DecodeArgs[SendEmail](job)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Type, job.State, email.Subject, string(job.Result))
}
