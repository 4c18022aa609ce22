// Package conformance runs the shared conformance scenarios (sdk/conformance, whose README
// defines the format) through the Go SDK's public API: the handler scripts as Go handlers,
// the actions against a database, with workers in this process or in processes of any SDK's
// conformance worker command.
package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// Scenario is one sdk/conformance/scenarios/NNN-name.json.
type Scenario struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Worker      WorkerSpec        `json:"worker"`
	Handlers    map[string][]Step `json:"handlers"`
	Actions     []Action          `json:"actions"`
}

// WorkerSpec is a scenario's worker options by wire name; absent keys take the runner defaults.
type WorkerSpec struct {
	Queues      []string `json:"queues"`
	Concurrency int      `json:"concurrency"`
	LeaseMs     int      `json:"leaseMs"`
	PollMs      int      `json:"pollMs"`
	TickMs      int      `json:"tickMs"`
}

// Options are the Go worker options of a scenario's workers (concurrency 4, poll and tick
// 100 ms unless the scenario says otherwise).
func (s WorkerSpec) Options(workerID string) workhorse.WorkerOptions {
	o := workhorse.WorkerOptions{
		Queues: s.Queues, Concurrency: 4, Poll: 100 * time.Millisecond, Tick: 100 * time.Millisecond,
		WorkerID: workerID, ShutdownTimeout: 25 * time.Second,
	}
	if s.Concurrency != 0 {
		o.Concurrency = s.Concurrency
	}
	if s.LeaseMs != 0 {
		o.Lease = time.Duration(s.LeaseMs) * time.Millisecond
	}
	if s.PollMs != 0 {
		o.Poll = time.Duration(s.PollMs) * time.Millisecond
	}
	if s.TickMs != 0 {
		o.Tick = time.Duration(s.TickMs) * time.Millisecond
	}
	return o
}

// Step is one step of a handler script.
type Step struct {
	Do           string          `json:"do"`
	Name         string          `json:"name"`
	Value        json.RawMessage `json:"value"`
	Message      string          `json:"message"`
	Retryable    *bool           `json:"retryable"`
	RetryDelayMs *int64          `json:"retryDelayMs"`
	Ms           int64           `json:"ms"`
	Attempts     []int           `json:"attempts"`
	// StoredMeanwhile is a checkpoint step's other save (scenarios 021 on).
	StoredMeanwhile json.RawMessage `json:"storedMeanwhile"`
	// Orchestration steps (scenarios 014 on).
	As        string          `json:"as"`
	Key       string          `json:"key"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	Children  []ChildSpec     `json:"children"`
	TimeoutMs int64           `json:"timeoutMs"`
	OnTimeout json.RawMessage `json:"onTimeout"`
	Context   json.RawMessage `json:"context"`
	Choices   []string        `json:"choices"`
}

// ChildSpec is one child of a run_children step.
type ChildSpec struct {
	Type    string          `json:"type"`
	Payload json.RawMessage `json:"payload"`
	// Options are the child's enqueue options by their wire names (optional).
	Options workhorse.EnqueueOptions `json:"options"`
}

// Action is one action, its keys as written (they depend on its "do").
type Action map[string]json.RawMessage

// Do is the action's kind.
func (a Action) Do() string { return a.str("do") }

func (a Action) str(key string) string {
	var s string
	_ = json.Unmarshal(a[key], &s)
	return s
}

// File is a scenario and the file it came from.
type File struct {
	Path     string
	Scenario Scenario
}

// Load reads every scenario of dir, in file-name order, checking that each is named after its file.
func Load(dir string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	files := make([]File, 0, len(paths))
	for _, path := range paths {
		s, err := LoadFile(path)
		if err != nil {
			return nil, err
		}
		base := filepath.Base(path)
		if want := base[:min(4, len(base))] + s.Name + ".json"; base != want {
			return nil, fmt.Errorf("%s: the scenario is named %q; its file should be %s", path, s.Name, want)
		}
		files = append(files, File{Path: path, Scenario: s})
	}
	return files, nil
}

// LoadFile reads one scenario.
func LoadFile(path string) (Scenario, error) {
	var s Scenario
	data, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	var raw any
	if err := json.Unmarshal(data, &raw); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	if data, err = json.Marshal(expandText(raw)); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	decoder := json.NewDecoder(strings.NewReader(string(data)))
	decoder.DisallowUnknownFields()
	if err := decoder.Decode(&s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// expandText replaces {"$text": [part, ...]} anywhere in a scenario by the text of its parts
// joined, a part being a string or {"repeat": S, "times": n} (S written n times).
func expandText(value any) any {
	switch v := value.(type) {
	case []any:
		for i, item := range v {
			v[i] = expandText(item)
		}
		return v
	case map[string]any:
		if parts, ok := v["$text"].([]any); ok && len(v) == 1 {
			var text strings.Builder
			for _, part := range parts {
				if s, ok := part.(string); ok {
					text.WriteString(s)
				} else if r, ok := part.(map[string]any); ok {
					s, _ := r["repeat"].(string)
					n, _ := r["times"].(float64)
					text.WriteString(strings.Repeat(s, int(n)))
				}
			}
			return text.String()
		}
		for key, item := range v {
			v[key] = expandText(item)
		}
		return v
	}
	return value
}
