package conformance

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

// freshWorkerID is a worker id of its own for each worker a scenario starts.
func freshWorkerID(name string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "conformance-" + name + "-" + hex.EncodeToString(b)
}

// InProcess starts scenario workers in this process, on db (a pool). Kill stops one with no
// time for its handlers: their contexts are canceled and nothing is recorded for their jobs,
// whose leases expire, as after a SIGKILL.
func InProcess(db workhorse.DB) StartWorker {
	return func(r *Runner, name string) (Worker, error) {
		w, err := workhorse.NewWorker(db, r.Scenario.Worker.Options(freshWorkerID(name)))
		if err != nil {
			return nil, err
		}
		if err := Register(w, r.Scenario, r, OwnerSaver(r.Owner)); err != nil {
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		return &inProcess{worker: w, cancel: cancel, done: done}, nil
	}
}

type inProcess struct {
	worker *workhorse.Worker
	cancel context.CancelFunc
	done   chan error
}

func (p *inProcess) Stop() error {
	p.cancel()
	return <-p.done
}

func (p *inProcess) Kill() error {
	now, cancel := context.WithCancel(context.Background())
	cancel()
	err := p.worker.Stop(now)
	p.cancel()
	return errors.Join(err, <-p.done)
}

// Command is a conformance worker command (any SDK's: README, "Cross-language runs"): its
// words before the options, and variables to add to the environment.
type Command struct {
	Args []string
	Env  []string
}

// Process starts scenario workers as processes of a conformance worker command, given the
// database URL and the scenario's file. The process's effects and marks reach the runner from
// its standard output.
func Process(command Command, databaseURL, scenarioFile string) StartWorker {
	return func(r *Runner, name string) (Worker, error) {
		args := append(append([]string{}, command.Args[1:]...), "--database-url", databaseURL, "--scenario", scenarioFile, "--worker-id", freshWorkerID(name))
		cmd := exec.Command(command.Args[0], args...)
		cmd.Env = append(os.Environ(), command.Env...)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		p := &process{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{}), stderr: &stderr}
		go func() {
			// Wait closes the pipe: read it to its end first.
			p.read(stdout, r)
			p.waitErr = cmd.Wait()
			close(p.exited)
		}()
		select {
		case <-p.ready:
			return p, nil
		case <-p.exited:
			return nil, fmt.Errorf("the worker process exited before it was ready: %v\n%s", p.waitErr, stderr.String())
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			return nil, fmt.Errorf("the worker process was not ready within 60 s\n%s", stderr.String())
		}
	}
}

type process struct {
	cmd       *exec.Cmd
	ready     chan struct{}
	readyOnce sync.Once
	exited    chan struct{}
	waitErr   error
	stopped   bool
	mu        sync.Mutex
	stderr    *strings.Builder
}

// read turns the process's JSON lines into the runner's effects and marks.
func (p *process) read(stdout interface{ Read([]byte) (int, error) }, r *Runner) {
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		var line struct {
			Event string `json:"event"`
			JobID string `json:"jobId"`
			Name  string `json:"name"`
		}
		if json.Unmarshal(lines.Bytes(), &line) != nil {
			continue
		}
		switch line.Event {
		case "ready":
			p.readyOnce.Do(func() { close(p.ready) })
		case "effect":
			r.Effect(line.JobID, line.Name)
		case "mark":
			r.Mark(line.JobID, line.Name)
		case "stopped":
			p.mu.Lock()
			p.stopped = true
			p.mu.Unlock()
		}
	}
}

// Stop sends SIGTERM and waits: the process must drain, say so and exit 0.
func (p *process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("the worker process did not exit within 60 s of SIGTERM\n%s", p.stderr.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waitErr != nil || !p.stopped {
		return fmt.Errorf("the worker process ended with %v (stopped reported: %v)\n%s", p.waitErr, p.stopped, p.stderr.String())
	}
	return nil
}

// Kill sends SIGKILL: the process records nothing more.
func (p *process) Kill() error {
	_ = p.cmd.Process.Kill()
	<-p.exited
	return nil
}
