// Package workhorse is the Go SDK of nestjs-workhorse, a durable job queue inside PostgreSQL:
// a thin client of the versioned SQL protocol (the workhorse.*_v1 functions) that the
// TypeScript and Python clients call too, so services in every language share one queue.
//
// [Queue] enqueues jobs, in your own transaction when you pass it one ([Queue.With]); [Worker]
// claims and runs them under a lease with a fence token, with batched claims and completions,
// batched heartbeats, LISTEN/NOTIFY wake-up with polling, retries, durable sleeps, cancellation
// and a graceful drain; [Checkpoint] makes a stage run once per job; [Admin] reads what happened
// and acts as an operator. A payload type with a Kind method ([JobArgs]) binds a job type to
// its payload ([EnqueueArgs], [HandleArgs]); [HandleTx] runs a handler in a transaction that
// also records its success; the workhorsetest package helps your tests (Drain,
// RequireEnqueued, RequireState). It runs on pgx v5 ([Pgx]) or database/sql ([SQL]). With an
// OpenTelemetry tracer provider, enqueues under a span store its W3C trace context and each
// attempt runs in a span linked to it, as in the TypeScript client (README, "Tracing").
//
//	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	worker, _ := workhorse.NewWorker(workhorse.Pgx(pool), workhorse.WorkerOptions{Queues: []string{"orders"}})
//	_ = workhorse.Handle(worker, "order.fulfill", func(ctx context.Context, job *workhorse.Job, order Order) (Receipt, error) {
//		return fulfill(ctx, order)
//	})
//	_ = worker.Run(ctx) // until ctx is canceled; then it drains
//
// The database must hold a workhorse schema of version [MinSchemaVersion] through
// [SchemaVersion]; [InstallSchema] installs it, or upgrades it, with the SQL embedded in this
// module, and every client refuses a version outside that range.
package workhorse
