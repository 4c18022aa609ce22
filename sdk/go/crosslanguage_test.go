package workhorse_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/conformance"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// pythonWorker is the Python SDK's conformance worker command (python -m
// tests.conformance_worker from sdk/python's tests, in its virtual environment, which .ci/run
// creates; the package does not ship it); the test is skipped, saying why, where it cannot run.
func pythonWorker(t *testing.T) conformance.Command {
	t.Helper()
	python := filepath.Join(testpg.RepoRoot(), "sdk", "python", ".venv", "bin", "python")
	sdk := filepath.Join(testpg.RepoRoot(), "sdk", "python")
	env := []string{"PYTHONPATH=" + filepath.Join(sdk, "src") + string(os.PathListSeparator) + sdk}
	check := exec.Command(python, "-c", "import tests.conformance_worker")
	check.Env = append(os.Environ(), env...)
	if out, err := check.CombinedOutput(); err != nil {
		t.Skipf("the Python SDK's conformance worker does not run (%v: %s): create sdk/python/.venv as .ci/run does", err, out)
	}
	return conformance.Command{Args: []string{python, "-m", "tests.conformance_worker"}, Env: env}
}

// scenarioNamed is the shared scenario of that name.
func scenarioNamed(t *testing.T, name string) conformance.File {
	t.Helper()
	for _, f := range scenarios(t) {
		if f.Scenario.Name == name {
			return f
		}
	}
	t.Fatalf("no %s scenario", name)
	return conformance.File{}
}

// Every scenario with each worker a Python process: jobs enqueued through the Go SDK run in
// Python, and their states, results, error envelopes and timelines read the same from Go.
func TestScenariosWithPythonWorkers(t *testing.T) {
	python := pythonWorker(t)
	files := scenarios(t)
	runScenarios(t, files, func(file conformance.File, db *testpg.DB) conformance.StartWorker {
		return conformance.Process(python, db.URL, file.Path)
	})
}

// checkpoint-then-crash across languages: a worker of one language is SIGKILLed after its
// checkpoint, and a worker of the other recovers the job and replays the checkpoint.
func TestACrashedWorkerIsRecoveredInTheOtherLanguage(t *testing.T) {
	crash := scenarioNamed(t, "checkpoint-then-crash")
	python := pythonWorker(t)
	goWorker := conformance.Command{Args: []string{conformanceWorker(t)}}
	for _, order := range []struct {
		name          string
		first, second conformance.Command
	}{{"python-then-go", python, goWorker}, {"go-then-python", goWorker, python}} {
		t.Run(order.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, crash, func(db *testpg.DB) conformance.StartWorker {
				first := conformance.Process(order.first, db.URL, crash.Path)
				second := conformance.Process(order.second, db.URL, crash.Path)
				return func(r *conformance.Runner, name string) (conformance.Worker, error) {
					if name == "w1" {
						return first(r, name)
					}
					return second(r, name)
				}
			})
		})
	}
}

// Three languages on one job: checkpoint-then-crash with its job enqueued through the
// TypeScript core, the worker that checkpoints and is SIGKILLed a Python process, and the one
// that recovers the job and replays the checkpoint a Go worker.
func TestEnqueuedInTypeScriptCrashedInPythonFinishedInGo(t *testing.T) {
	crash := scenarioNamed(t, "checkpoint-then-crash")
	python := pythonWorker(t)
	node, err := exec.LookPath("node")
	register := filepath.Join(testpg.RepoRoot(), "test", "support", "ts-register.js")
	if _, statErr := os.Stat(filepath.Join(testpg.RepoRoot(), "node_modules", "typescript")); err != nil || statErr != nil {
		t.Skip("node and the repository's node_modules (npm ci) are needed to enqueue through the TypeScript core")
	}
	first := crash.Scenario.Actions[0]
	if first.Do() != "enqueue" {
		t.Fatalf("the scenario's first action is %s, not the enqueue", first.Do())
	}
	db := testpg.New(t)
	var typ, job string
	_ = json.Unmarshal(first["type"], &typ)
	_ = json.Unmarshal(first["job"], &job)
	args := []string{"-r", register, filepath.Join(testpg.RepoRoot(), "test", "fixtures", "enqueue-job.ts"), db.URL, typ, string(first["payload"])}
	if options, ok := first["options"]; ok {
		args = append(args, string(options))
	}
	out, err := exec.Command(node, args...).Output()
	if err != nil {
		t.Fatalf("enqueue through TypeScript: %v", err)
	}
	runner := conformance.NewRunner(&crash.Scenario, workhorse.Pgx(db.Pool), func(r *conformance.Runner, name string) (conformance.Worker, error) {
		if name == "w1" {
			return conformance.Process(python, db.URL, crash.Path)(r, name)
		}
		return conformance.InProcess(workhorse.Pgx(db.Pool))(r, name)
	})
	runner.Name(job, strings.TrimSpace(string(out)))
	err = runner.RunFrom(context.Background(), 1)
	if stopErr := runner.StopAll(); err == nil {
		err = stopErr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// A trace that starts in TypeScript goes on in Go: a job enqueued through the TypeScript core
// under a span (its OpenTelemetry SDK and W3C propagator registered) runs in a Go worker in a
// CONSUMER span linked to the TypeScript send span.
func TestAJobEnqueuedUnderATypeScriptSpanRunsInALinkedGoSpan(t *testing.T) {
	node, err := exec.LookPath("node")
	root := testpg.RepoRoot()
	if _, statErr := os.Stat(filepath.Join(root, "node_modules", "@opentelemetry", "sdk-trace-base")); err != nil || statErr != nil {
		t.Skip("node and the repository's node_modules (npm ci) are needed to enqueue through the TypeScript core")
	}
	db := testpg.New(t)
	script := filepath.Join(t.TempDir(), "enqueue-traced.js")
	must(t, os.WriteFile(script, []byte(tracedTypeScriptEnqueue), 0o600))
	out, err := exec.Command(node, "-r", filepath.Join(root, "test", "support", "ts-register.js"), script, root, db.URL).Output()
	if err != nil {
		t.Fatalf("enqueue through TypeScript: %v", err)
	}
	var sent struct{ ID, TraceID, SpanID string }
	decode(t, out, &sent)

	provider, exporter := newTracing(t)
	w := newWorker(t, db, workhorse.WorkerOptions{Queues: []string{"from-ts"}, TracerProvider: provider})
	must(t, workhorse.Handle(w, "email.send", func(ctx context.Context, job *workhorse.Job, _ any) (any, error) { return nil, nil }))
	startWorker(t, w)
	process := spanFor(t, exporter, "process from-ts", "messaging.message.id", sent.ID)
	if len(process.Links) != 1 || process.Links[0].SpanContext.TraceID().String() != sent.TraceID || process.Links[0].SpanContext.SpanID().String() != sent.SpanID {
		t.Errorf("the Go attempt links to %v, want the TypeScript send span %s/%s", process.Links, sent.TraceID, sent.SpanID)
	}
	wantAttributes(t, process, map[string]string{"workhorse.job.type": "email.send", "workhorse.job.outcome": "succeeded"})
}

// tracedTypeScriptEnqueue enqueues one job through the TypeScript core under a span, as an
// application with the OpenTelemetry SDK does (docs/operations.md#tracing), and prints the job's
// id and its send span's ids: `node -r ts-register.js FILE REPO_ROOT DATABASE_URL`.
const tracedTypeScriptEnqueue = `
const [root, url] = process.argv.slice(2);
const from = (name) => require(require('node:path').join(root, 'node_modules', name));
const api = from('@opentelemetry/api');
const { AsyncLocalStorageContextManager } = from('@opentelemetry/context-async-hooks');
const { W3CTraceContextPropagator } = from('@opentelemetry/core');
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = from('@opentelemetry/sdk-trace-base');
const { Pool, Queue } = require(require('node:path').join(root, 'lib', 'core'));

api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
api.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
const exporter = new InMemorySpanExporter();
api.trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));

async function main() {
  const pool = new Pool({ connectionString: url });
  try {
    const id = await api.trace.getTracer('shop').startActiveSpan('checkout', async (span) => {
      try {
        return await new Queue(pool).enqueue('email.send', {}, { queue: 'from-ts' });
      } finally {
        span.end();
      }
    });
    const send = exporter.getFinishedSpans().find((s) => s.name === 'send from-ts').spanContext();
    process.stdout.write(JSON.stringify({ id, traceId: send.traceId, spanId: send.spanId }) + '\n');
  } finally {
    await pool.end();
  }
}
main().catch((error) => {
  process.stderr.write(String((error && error.stack) || error) + '\n');
  process.exit(1);
});
`
