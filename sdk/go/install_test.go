package workhorse_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// installCommands are the shell commands of the README's Install section (continued lines
// joined), and where its `git clone` puts the checkout.
func installCommands(t *testing.T) (commands []string, cloneTo string) {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	must(t, err)
	section := string(readme)[strings.Index(string(readme), "## Install\n"):]
	block := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if block == nil {
		t.Fatal("the README's Install section has no ```sh block")
	}
	for _, line := range strings.Split(strings.ReplaceAll(block[1], "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "":
		case strings.HasPrefix(line, "git clone "):
			fields := strings.Fields(line)
			cloneTo = fields[len(fields)-1]
		default:
			commands = append(commands, line)
		}
	}
	if cloneTo == "" || len(commands) == 0 {
		t.Fatalf("the README's install block %q has no clone or no commands", block[1])
	}
	return commands, cloneTo
}

// The README's way to use the module from a checkout until it is published: a new module runs
// its commands (the clone is a copy of sdk/go alone), offline, then builds and runs a program;
// and a typed job given a payload of the wrong type does not compile there.
func TestTheREADMEsInstallFromACheckoutBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	commands, cloneTo := installCommands(t)
	dir := t.TempDir()
	app := filepath.Join(dir, "app")
	must(t, os.MkdirAll(app, 0o755))
	checkout := filepath.Join(app, cloneTo)
	must(t, os.CopyFS(filepath.Join(checkout, "sdk", "go"), os.DirFS(filepath.Join(testpg.RepoRoot(), "sdk", "go"))))
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOWORK=off")
	run := func(dir string, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(app, "go", "mod", "init", "example.com/app"); err != nil {
		t.Fatalf("go mod init: %v\n%s", err, out)
	}
	must(t, os.WriteFile(filepath.Join(app, "main.go"), []byte(`package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

type Welcome struct {
	To string `+"`json:\"to\"`"+`
}

func (Welcome) Kind() string { return "email.welcome" }

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	id, err := workhorse.EnqueueArgs(ctx, workhorse.NewQueue(workhorse.Pgx(pool)), Welcome{To: "a@example.com"}, nil)
	if err != nil {
		panic(err)
	}
	job, err := workhorse.NewAdmin(workhorse.Pgx(pool)).GetJob(ctx, id)
	if err != nil {
		panic(err)
	}
	fmt.Println(job.Type, job.State, workhorse.SchemaVersion)
}
`), 0o644))
	for _, command := range commands {
		if out, err := run(app, "sh", "-c", command); err != nil {
			t.Fatalf("%s: %v\n%s", command, err, out)
		}
	}
	db := testpg.New(t)
	binary := filepath.Join(dir, "app-binary")
	if out, err := run(app, "go", "build", "-o", binary, "."); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.URL)
	out, err := cmd.CombinedOutput()
	if want := fmt.Sprintf("email.welcome ready %d", workhorse.SchemaVersion); err != nil || strings.TrimSpace(string(out)) != want {
		t.Fatalf("the program printed %q (%v), want %q", out, err, want)
	}

	// A payload that is not the job's args type is a compile error, at enqueue and at handle.
	bad := filepath.Join(app, "bad")
	must(t, os.MkdirAll(bad, 0o755))
	must(t, os.WriteFile(filepath.Join(bad, "main.go"), []byte(`package main

import (
	"context"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

func main() {
	var q *workhorse.Queue
	var w *workhorse.Worker
	_, _ = workhorse.EnqueueArgs(context.Background(), q, "a@example.com", nil)
	_ = workhorse.HandleArgs(w, func(ctx context.Context, job *workhorse.Job, to string) (any, error) { return nil, nil })
}
`), 0o644))
	out2, err := run(app, "go", "build", "-o", os.DevNull, "./bad")
	if err == nil || strings.Count(out2, "does not satisfy workhorse.JobArgs (missing method Kind)") != 2 {
		t.Fatalf("go build ./bad: %v\n%s", err, out2)
	}
}

// A schema mismatch gives the advice of the TypeScript (and Python) SDK: the same sentences,
// with this SDK's call first.
func TestTheSchemaMismatchMessagesGiveTheAdviceOfTheOtherSDKs(t *testing.T) {
	ts, err := os.ReadFile(filepath.Join(testpg.RepoRoot(), "lib", "core", "errors.ts"))
	must(t, err)
	older := (&workhorse.SchemaVersionMismatchError{Installed: 3, Expected: workhorse.SchemaVersion, Minimum: workhorse.MinSchemaVersion}).Error()
	newer := (&workhorse.SchemaVersionMismatchError{Installed: workhorse.SchemaVersion + 1, Expected: workhorse.SchemaVersion}).Error()
	for message, shared := range map[string][]string{
		older: {"older than this package needs", "`npx workhorse schema migrate`", "schema's owner, then start again. Queued jobs, schedules and history are kept."},
		newer: {"newer than this package", "and it no longer serves this release: upgrade the package to a release that works with it. A schema is never downgraded."},
	} {
		for _, sentence := range shared {
			if !strings.Contains(string(ts), sentence) {
				t.Fatalf("the TypeScript message no longer says %q: align this test and the Go message", sentence)
			}
			if !strings.Contains(message, sentence) {
				t.Errorf("the Go message %q does not say %q", message, sentence)
			}
		}
	}
	if !strings.Contains(older, "workhorse.InstallSchema(ctx, pool)") || !strings.Contains(older, "`python -m workhorse schema migrate`") {
		t.Errorf("the Go message %q names neither InstallSchema nor the Python command", older)
	}
}
