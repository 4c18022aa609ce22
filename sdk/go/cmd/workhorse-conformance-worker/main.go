// Command workhorse-conformance-worker runs the handlers of one conformance scenario
// (sdk/conformance) in a Go SDK worker until SIGTERM (graceful drain, exit 0) or SIGKILL, so
// that a test in any language can start, crash and recover Go workers:
//
//	go run ./cmd/workhorse-conformance-worker --database-url URL --scenario FILE --worker-id ID
//
// It writes one JSON object per line on standard output: {"event": "ready"} once claiming,
// {"event": "effect", "jobId", "name"} when a checkpoint operation runs, {"event": "mark",
// "jobId", "name"} at a mark, {"event": "stopped"} after a drain. Worker errors go to standard
// error.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/conformance"
)

func main() {
	os.Exit(run())
}

func run() int {
	databaseURL := flag.String("database-url", os.Getenv("DATABASE_URL"), "the database (default $DATABASE_URL)")
	scenarioFile := flag.String("scenario", "", "the scenario whose handlers and worker options to run")
	workerID := flag.String("worker-id", "", "the worker's id (default host:pid:random)")
	flag.Parse()
	if *databaseURL == "" || *scenarioFile == "" {
		fmt.Fprintln(os.Stderr, "usage: workhorse-conformance-worker --database-url URL --scenario FILE [--worker-id ID]")
		return 2
	}
	scenario, err := conformance.LoadFile(*scenarioFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, *databaseURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	out := &lines{}
	options := scenario.Worker.Options(*workerID)
	options.OnEvent = func(e workhorse.Event) {
		switch e.Name {
		case workhorse.EventWorkerStarted:
			out.write(map[string]string{"event": "ready"})
		case workhorse.EventWorkerError:
			fmt.Fprintf(os.Stderr, "worker error during %s: %v\n", e.During, e.Err)
		}
	}
	worker, err := workhorse.NewWorker(workhorse.Pgx(pool), options)
	if err == nil {
		err = conformance.Register(worker, &scenario, out, conformance.OwnerSaver(pool))
	}
	if err == nil {
		err = worker.Run(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	out.write(map[string]string{"event": "stopped"})
	return 0
}

// lines writes the JSON lines of standard output, one whole line at a time.
type lines struct{ mu sync.Mutex }

func (l *lines) write(v map[string]string) {
	data, _ := json.Marshal(v)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = os.Stdout.Write(append(data, '\n'))
}

func (l *lines) Effect(jobID, name string) {
	l.write(map[string]string{"event": "effect", "jobId": jobID, "name": name})
}

func (l *lines) Mark(jobID, name string) {
	l.write(map[string]string{"event": "mark", "jobId": jobID, "name": name})
}
