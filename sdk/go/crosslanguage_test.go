package workhorse_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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

// Every scenario with each worker a Python process: jobs enqueued through the Go SDK run in
// Python, and their states, results, error envelopes and timelines read the same from Go.
func TestScenariosWithPythonWorkers(t *testing.T) {
	files := scenarios(t)
	python := pythonWorker(t)
	runScenarios(t, files, func(file conformance.File, db *testpg.DB) conformance.StartWorker {
		return conformance.Process(python, db.URL, file.Path)
	})
}

// checkpoint-then-crash across languages: a worker of one language is SIGKILLed after its
// checkpoint, and a worker of the other recovers the job and replays the checkpoint.
func TestACrashedWorkerIsRecoveredInTheOtherLanguage(t *testing.T) {
	var crash conformance.File
	for _, f := range scenarios(t) {
		if f.Scenario.Name == "checkpoint-then-crash" {
			crash = f
		}
	}
	if crash.Path == "" {
		t.Fatal("no checkpoint-then-crash scenario")
	}
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
