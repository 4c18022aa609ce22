// Command bench is the Go side of `npm run bench`: the Go SDK's worker and batch enqueue, and
// River (riverqueue/river on riverpgxv5, the Go peer), each in a process of its own that the
// benchmark's adapters (test/bench/systems/workhorse-go.js, river.js) drive over standard
// input and output, one JSON object per line:
//
//	bench migrate river URL                 River's migrations (what `river migrate-up` runs)
//	bench preload river URL COUNT           COUNT no-op River jobs, inserted 1,000 at a time
//	bench worker SYSTEM URL C OPTIONS       a worker of concurrency C: {"event":"started"}, then
//	                                        {"handled":N} as jobs run; "stop" on stdin drains it
//	bench producer SYSTEM URL POOLMAX       {"event":"ready"}; each {"from","to"} line on stdin
//	                                        enqueues that batch and answers {"done":true}
//
// SYSTEM is workhorse-go or river; OPTIONS is JSON (workhorse-go: {"roundTrips"}; river:
// {"fetchCooldownMs", "fetchPollIntervalMs"}, absent means River's defaults).
// WORKHORSE_BENCH_GO_CPUPROFILE=DIR makes a worker write its CPU profile into DIR.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// poolMax is the pool size of every system in the benchmark.
const poolMax = 10

// noop is the payload of every benchmark job.
type noop struct {
	I int `json:"i"`
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("usage: bench migrate|preload|worker|producer SYSTEM URL ...")
	}
	ctx := context.Background()
	mode, system, url := args[0], args[1], args[2]
	size := poolMax
	if mode == "producer" && len(args) > 3 {
		size, _ = strconv.Atoi(args[3])
	}
	config, err := pgxpool.ParseConfig(url)
	if err != nil {
		return err
	}
	config.MaxConns = int32(size)
	pool, err := pgxpool.NewWithConfig(ctx, config)
	if err != nil {
		return err
	}
	defer pool.Close()
	switch {
	case mode == "migrate" && system == "river":
		return riverMigrate(ctx, pool)
	case mode == "preload" && system == "river" && len(args) > 3:
		count, err := strconv.Atoi(args[3])
		if err != nil {
			return err
		}
		return riverPreload(ctx, pool, count)
	case mode == "worker" && len(args) > 4:
		// WORKHORSE_BENCH_GO_CPUPROFILE=DIR writes the worker's CPU profile (go tool pprof) there.
		if dir := os.Getenv("WORKHORSE_BENCH_GO_CPUPROFILE"); dir != "" {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", system, os.Getpid())))
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		concurrency, err := strconv.Atoi(args[3])
		if err != nil {
			return err
		}
		var options map[string]int
		if err := json.Unmarshal([]byte(args[4]), &options); err != nil {
			return err
		}
		start := map[string]func(context.Context, *pgxpool.Pool, int, map[string]int, func()) (func() error, error){
			"workhorse-go": workhorseWorker, "river": riverWorker,
		}[system]
		if start == nil {
			return fmt.Errorf("unknown system %s", system)
		}
		return serveWorker(ctx, pool, concurrency, options, start)
	case mode == "producer":
		enqueue := map[string]func(context.Context, *pgxpool.Pool, []noop) error{
			"workhorse-go": workhorseEnqueue, "river": riverEnqueue,
		}[system]
		if enqueue == nil {
			return fmt.Errorf("unknown system %s", system)
		}
		return serveProducer(ctx, pool, enqueue)
	}
	return fmt.Errorf("unknown command %v", args)
}

var out sync.Mutex

func say(v any) {
	data, _ := json.Marshal(v)
	out.Lock()
	defer out.Unlock()
	_, _ = os.Stdout.Write(append(data, '\n'))
}

// serveWorker runs a worker and reports how many jobs its handler ran: at once for the first
// (the drain is timed from it), then every 5 ms while the count grows, until "stop".
func serveWorker(ctx context.Context, pool *pgxpool.Pool, concurrency int, options map[string]int,
	start func(context.Context, *pgxpool.Pool, int, map[string]int, func()) (func() error, error)) error {
	var handled atomic.Int64
	first := make(chan struct{})
	var once sync.Once
	stop, err := start(ctx, pool, concurrency, options, func() {
		if handled.Add(1) == 1 {
			once.Do(func() { close(first) })
		}
	})
	if err != nil {
		return err
	}
	say(map[string]string{"event": "started"})
	stdin := make(chan struct{})
	go func() {
		lines := bufio.NewScanner(os.Stdin)
		for lines.Scan() && lines.Text() != "stop" {
		}
		close(stdin)
	}()
	reported := int64(0)
	ticker := time.NewTicker(5 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-first:
			first = nil
		case <-ticker.C:
		case <-stdin:
			if err := stop(); err != nil {
				return err
			}
			say(map[string]any{"handled": handled.Load()})
			say(map[string]string{"event": "stopped"})
			return nil
		}
		if n := handled.Load(); n != reported {
			reported = n
			say(map[string]any{"handled": n})
		}
	}
}

// serveProducer enqueues each batch asked for on stdin, one after another.
func serveProducer(ctx context.Context, pool *pgxpool.Pool, enqueue func(context.Context, *pgxpool.Pool, []noop) error) error {
	say(map[string]string{"event": "ready"})
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() && lines.Text() != "stop" {
		var batch struct{ From, To int }
		if err := json.Unmarshal(lines.Bytes(), &batch); err != nil {
			return err
		}
		jobs := make([]noop, 0, batch.To-batch.From)
		for i := batch.From; i < batch.To; i++ {
			jobs = append(jobs, noop{I: i})
		}
		if err := enqueue(ctx, pool, jobs); err != nil {
			return err
		}
		say(map[string]bool{"done": true})
	}
	return nil
}
