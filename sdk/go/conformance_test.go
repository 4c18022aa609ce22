package workhorse_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/conformance"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// scenarios loads the shared conformance scenarios (sdk/conformance/scenarios, or
// WORKHORSE_CONFORMANCE_DIR).
func scenarios(t *testing.T) []conformance.File {
	t.Helper()
	dir := os.Getenv("WORKHORSE_CONFORMANCE_DIR")
	if dir == "" {
		dir = filepath.Join(testpg.RepoRoot(), "sdk", "conformance", "scenarios")
	}
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("%s does not exist in this checkout: the shared scenarios land with the conformance format", dir)
	}
	files, err := conformance.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 12 {
		t.Fatalf("%d scenarios in %s, want at least 12", len(files), dir)
	}
	return files
}

var (
	buildWorker   sync.Once
	workerCommand string
	buildErr      error
)

// conformanceWorker builds cmd/workhorse-conformance-worker once per test binary.
func conformanceWorker(t *testing.T) string {
	t.Helper()
	buildWorker.Do(func() {
		dir, err := os.MkdirTemp("", "workhorse-go-worker-")
		if err != nil {
			buildErr = err
			return
		}
		workerCommand = filepath.Join(dir, "workhorse-conformance-worker")
		out, err := exec.Command("go", "build", "-o", workerCommand, "./cmd/workhorse-conformance-worker").CombinedOutput()
		if err != nil {
			buildErr = err
			t.Logf("%s", out)
		}
	})
	if buildErr != nil {
		t.Fatalf("building the conformance worker: %v", buildErr)
	}
	return workerCommand
}

// runScenario runs one scenario in a fresh database, its workers started by start.
func runScenario(t *testing.T, file conformance.File, start func(db *testpg.DB) conformance.StartWorker) {
	db := testpg.New(t)
	runner := conformance.NewRunner(&file.Scenario, workhorse.Pgx(db.Pool), start(db))
	runner.Owner = db.Pool
	err := runner.Run(context.Background())
	if stopErr := runner.StopAll(); err == nil {
		err = stopErr
	}
	if err != nil {
		t.Fatal(err)
	}
}

// runScenarios runs every scenario in parallel subtests, each in a fresh database, its workers
// started by start.
func runScenarios(t *testing.T, files []conformance.File, start func(file conformance.File, db *testpg.DB) conformance.StartWorker) {
	for _, file := range files {
		t.Run(file.Scenario.Name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, file, func(db *testpg.DB) conformance.StartWorker { return start(file, db) })
		})
	}
}

func TestConformanceScenarios(t *testing.T) {
	runScenarios(t, scenarios(t), func(_ conformance.File, db *testpg.DB) conformance.StartWorker {
		return conformance.InProcess(workhorse.Pgx(db.Pool))
	})
}

// The same scenarios with every worker a process of the conformance worker command: kill_worker
// is a real SIGKILL, stop_worker a SIGTERM that must drain and exit 0.
func TestConformanceScenariosWithWorkerProcesses(t *testing.T) {
	command := conformance.Command{Args: []string{conformanceWorker(t)}}
	runScenarios(t, scenarios(t), func(file conformance.File, db *testpg.DB) conformance.StartWorker {
		return conformance.Process(command, db.URL, file.Path)
	})
}
