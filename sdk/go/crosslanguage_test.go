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
// workhorse.conformance_worker in sdk/python's virtual environment, which .ci/run creates);
// the test is skipped, saying why, where it cannot run.
func pythonWorker(t *testing.T) conformance.Command {
	t.Helper()
	python := filepath.Join(testpg.RepoRoot(), "sdk", "python", ".venv", "bin", "python")
	env := []string{"PYTHONPATH=" + filepath.Join(testpg.RepoRoot(), "sdk", "python", "src")}
	check := exec.Command(python, "-c", "import workhorse.conformance_worker")
	check.Env = append(os.Environ(), env...)
	if out, err := check.CombinedOutput(); err != nil {
		t.Skipf("the Python SDK's conformance worker does not run (%v: %s): create sdk/python/.venv as .ci/run does", err, out)
	}
	return conformance.Command{Args: []string{python, "-m", "workhorse.conformance_worker"}, Env: env}
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
