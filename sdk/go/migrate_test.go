package workhorse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// baselineCommit is the release before migrations (schema version 4): its sql/ is the baseline.
const baselineCommit = "a46ad78"

// inCheckout skips outside the repository's checkout, never in CI.
func inCheckout(t *testing.T, what string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(testpg.RepoRoot(), ".git")); err != nil && os.Getenv("CI") != "true" {
		t.Skipf("%s needs the repository's checkout", what)
	}
}

// sqlTree is every .sql file under fsys by its slash path.
func sqlTree(t *testing.T, fsys fs.FS) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") {
			return err
		}
		text, err := fs.ReadFile(fsys, path)
		files[path] = string(text)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestTheEmbeddedSQLIsTheRepositorysSQL(t *testing.T) {
	source := filepath.Join(testpg.RepoRoot(), "sql")
	if _, err := os.Stat(source); err != nil {
		inCheckout(t, "comparing the embedded SQL with sql/")
	}
	if got, want := sqlTree(t, workhorse.EmbeddedSchema()), sqlTree(t, os.DirFS(source)); !reflect.DeepEqual(got, want) {
		t.Fatalf("sdk/go/sql differs from sql/: run `node scripts/copy-sdk-sql.js` after changing sql/")
	}
}

func TestSchemaVersionIsTheHighestEmbeddedStep(t *testing.T) {
	var versions []int
	for path := range sqlTree(t, workhorse.EmbeddedSchema()) {
		if name, ok := strings.CutPrefix(path, "migrations/"); ok {
			var v int
			if _, err := fmt.Sscanf(name, "%04d_", &v); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			versions = append(versions, v)
		}
	}
	sort.Ints(versions)
	if len(versions) == 0 || versions[0] != 5 || versions[len(versions)-1] != workhorse.SchemaVersion || len(versions) != workhorse.SchemaVersion-4 {
		t.Fatalf("steps %v, SchemaVersion %d: the steps must run from 5 to SchemaVersion without gaps", versions, workhorse.SchemaVersion)
	}
	if workhorse.MinSchemaVersion < 4 || workhorse.MinSchemaVersion > workhorse.SchemaVersion {
		t.Fatalf("MinSchemaVersion %d", workhorse.MinSchemaVersion)
	}
}

// baselineSQL is the baseline release's sql/, written from git history.
func baselineSQL(t *testing.T) string {
	t.Helper()
	inCheckout(t, "the baseline schema")
	root := testpg.RepoRoot()
	names, err := exec.Command("git", "-C", root, "ls-tree", "--name-only", baselineCommit+":sql").Output()
	if err != nil {
		t.Fatalf("git ls-tree %s:sql: %v", baselineCommit, err)
	}
	dir := t.TempDir()
	for _, name := range strings.Fields(string(names)) {
		text, err := exec.Command("git", "-C", root, "show", baselineCommit+":sql/"+name).Output()
		if err != nil {
			t.Fatalf("git show %s:sql/%s: %v", baselineCommit, name, err)
		}
		must(t, os.WriteFile(filepath.Join(dir, name), text, 0o644))
	}
	return dir
}

// newBaselineDB is a database with the baseline schema installed as its installSchema did:
// every file in one transaction, then version 4.
func newBaselineDB(t *testing.T) *testpg.DB {
	t.Helper()
	dir := baselineSQL(t)
	db := testpg.NewEmpty(t)
	files, _ := filepath.Glob(filepath.Join(dir, "*.sql"))
	sort.Strings(files)
	ctx := context.Background()
	must(t, pgx.BeginFunc(ctx, db.Pool, func(tx pgx.Tx) error {
		for _, file := range files {
			text, err := os.ReadFile(file)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(text)); err != nil {
				return fmt.Errorf("%s: %w", filepath.Base(file), err)
			}
		}
		_, err := tx.Exec(ctx, "INSERT INTO workhorse.schema_version (version) VALUES (4)")
		return err
	}))
	return db
}

func installedVersion(t *testing.T, db *testpg.DB) int {
	t.Helper()
	var v int
	must(t, db.Pool.QueryRow(context.Background(), "SELECT version FROM workhorse.schema_version").Scan(&v))
	return v
}

// migrationLog is workhorse.schema_migration as "version name" lines.
func migrationLog(t *testing.T, db *testpg.DB) []string {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(), "SELECT version::text || ' ' || name FROM workhorse.schema_migration ORDER BY version")
	must(t, err)
	log, err := pgx.CollectRows(rows, pgx.RowTo[string])
	must(t, err)
	return log
}

// catalogQueries read what a migrated database must share with a fresh one (issue 29: tables,
// columns, indexes, constraints, functions and their definitions, grants, owners).
var catalogQueries = []string{
	"SELECT c.relname || ' ' || c.relkind::text || ' ' || pg_get_userbyid(c.relowner) || ' ' || coalesce(c.relacl::text, '') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'workhorse' ORDER BY 1",
	"SELECT concat_ws(' ', table_name, column_name, data_type, is_nullable, column_default) FROM information_schema.columns WHERE table_schema = 'workhorse' ORDER BY 1",
	"SELECT indexdef FROM pg_indexes WHERE schemaname = 'workhorse' ORDER BY 1",
	"SELECT conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint WHERE connamespace = 'workhorse'::regnamespace ORDER BY 1",
	"SELECT p.oid::regprocedure::text || ' ' || coalesce(p.proacl::text, '') || ' ' || pg_get_functiondef(p.oid) FROM pg_proc p WHERE p.pronamespace = 'workhorse'::regnamespace ORDER BY 1",
}

func catalog(t *testing.T, db *testpg.DB) [][]string {
	t.Helper()
	var all [][]string
	for _, q := range catalogQueries {
		rows, err := db.Pool.Query(context.Background(), q)
		must(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		must(t, err)
		all = append(all, lines)
	}
	return all
}

func TestInstallSchemaInstallsAnEmptyDatabaseOnce(t *testing.T) {
	db := testpg.NewEmpty(t)
	ctx := context.Background()
	result, err := workhorse.InstallSchema(ctx, db.Pool)
	if err != nil || !reflect.DeepEqual(result, workhorse.MigrationResult{Created: true, To: workhorse.SchemaVersion, Applied: []int{}}) {
		t.Fatalf("first install: %+v, %v", result, err)
	}
	want := []string{fmt.Sprintf("%d install", workhorse.SchemaVersion)}
	if got := migrationLog(t, db); !reflect.DeepEqual(got, want) {
		t.Fatalf("log %v, want %v", got, want)
	}
	result, err = workhorse.InstallSchema(ctx, db.Pool)
	if err != nil || !reflect.DeepEqual(result, workhorse.MigrationResult{From: workhorse.SchemaVersion, To: workhorse.SchemaVersion, Applied: []int{}}) {
		t.Fatalf("second install: %+v, %v", result, err)
	}
	if got := migrationLog(t, db); !reflect.DeepEqual(got, want) || installedVersion(t, db) != workhorse.SchemaVersion {
		t.Fatalf("log %v after a second install", got)
	}
	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(db.Pool))
	if err != nil || status.Situation() != workhorse.SchemaUpToDate || len(status.Pending) != 0 {
		t.Fatalf("status %+v, %v", status, err)
	}
}

func TestInstallSchemaUpgradesTheBaselineKeepingItsJobsAndEndsInTheFreshCatalog(t *testing.T) {
	db := newBaselineDB(t)
	ctx := context.Background()
	// This release's clients work with the baseline schema before it is migrated.
	id, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "report.build", map[string]int{"n": 1}, nil)
	must(t, err)
	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(db.Pool))
	if err != nil || status.Situation() != workhorse.SchemaOlder || !reflect.DeepEqual(status.Pending, shippedSteps(t)) {
		t.Fatalf("status before: %+v, %v", status, err)
	}
	var versions []int
	var log []string
	for _, step := range shippedSteps(t) {
		versions = append(versions, step.Version)
		log = append(log, fmt.Sprintf("%d %s", step.Version, step.Name))
	}
	result, err := workhorse.InstallSchema(ctx, db.Pool)
	if err != nil || !reflect.DeepEqual(result, workhorse.MigrationResult{From: 4, To: workhorse.SchemaVersion, Applied: versions}) {
		t.Fatalf("migrate: %+v, %v", result, err)
	}
	if got := migrationLog(t, db); !reflect.DeepEqual(got, log) || installedVersion(t, db) != workhorse.SchemaVersion {
		t.Fatalf("log %v", got)
	}
	job, err := workhorse.NewAdmin(workhorse.Pgx(db.Pool)).GetJob(ctx, id)
	if err != nil || job == nil || job.State != workhorse.JobState("ready") || !sameJSON(job.Payload, `{"n": 1}`) {
		t.Fatalf("the job after the migration: %+v, %v", job, err)
	}
	fresh := testpg.NewEmpty(t)
	_, err = workhorse.InstallSchema(ctx, fresh.Pool)
	must(t, err)
	if got, want := catalog(t, db), catalog(t, fresh); !reflect.DeepEqual(got, want) {
		t.Fatalf("the migrated catalog differs from a fresh install's:\n%v\n%v", got, want)
	}
}

func TestInstallSchemaRefusesANewerDatabaseAndChangesNothing(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	newer := workhorse.SchemaVersion + 1
	_, err := db.Pool.Exec(ctx, "UPDATE workhorse.schema_version SET version = $1", newer)
	must(t, err)
	before, log := catalog(t, db), migrationLog(t, db)
	_, err = workhorse.InstallSchema(ctx, db.Pool)
	var mismatch *workhorse.SchemaVersionMismatchError
	if !errors.As(err, &mismatch) || mismatch.Installed != newer || !strings.Contains(err.Error(), fmt.Sprintf("newer than this package (version %d): upgrade the package", workhorse.SchemaVersion)) {
		t.Fatalf("got %v", err)
	}
	if installedVersion(t, db) != newer || !reflect.DeepEqual(catalog(t, db), before) || !reflect.DeepEqual(migrationLog(t, db), log) {
		t.Fatal("the refused migration changed the database")
	}
}

func TestInstallSchemaRefusesAVersionOlderThanTheBaseline(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	_, err := db.Pool.Exec(ctx, "UPDATE workhorse.schema_version SET version = 3")
	must(t, err)
	_, err = workhorse.InstallSchema(ctx, db.Pool)
	var refused *workhorse.SchemaMigrationError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "older than version 4, the first one that can be migrated") || installedVersion(t, db) != 3 {
		t.Fatalf("got %v", err)
	}
}

func TestTheClientsAcceptTheRangeAndSayWhatToDoOutsideIt(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	for _, c := range []struct {
		version int
		advice  string
	}{{workhorse.MinSchemaVersion, ""}, {workhorse.MinSchemaVersion - 1, "python -m workhorse schema migrate"}, {workhorse.SchemaVersion + 1, "upgrade the package"}} {
		_, err := db.Pool.Exec(ctx, "UPDATE workhorse.schema_version SET version = $1", c.version)
		must(t, err)
		_, err = workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "a", 1, nil)
		if c.advice == "" {
			must(t, err)
			continue
		}
		var mismatch *workhorse.SchemaVersionMismatchError
		if !errors.As(err, &mismatch) || mismatch.Installed != c.version || !strings.Contains(err.Error(), c.advice) {
			t.Fatalf("version %d: %v", c.version, err)
		}
	}
}

// installAtOnce runs InstallSchema n times at once, each on a pool (and connection) of its own.
func installAtOnce(t *testing.T, db *testpg.DB, n int) []workhorse.MigrationResult {
	t.Helper()
	ctx := context.Background()
	results := make([]workhorse.MigrationResult, n)
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	ready.Add(n)
	start := make(chan struct{})
	for i := range n {
		pool, err := pgxpool.New(ctx, db.URL)
		must(t, err)
		defer pool.Close()
		done.Add(1)
		go func() {
			defer done.Done()
			conn, err := pool.Acquire(ctx) // connected before the start
			ready.Done()
			if err != nil {
				errs[i] = err
				return
			}
			conn.Release()
			<-start
			results[i], errs[i] = workhorse.InstallSchema(ctx, pool)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	for _, err := range errs {
		must(t, err)
	}
	return results
}

func TestConcurrentMigratorsApplyEachStepOnce(t *testing.T) {
	db := newBaselineDB(t)
	// Each step by exactly one migrator (one that came late may find some steps done).
	var applied []int
	for _, r := range installAtOnce(t, db, 4) {
		applied = append(applied, r.Applied...)
	}
	sort.Ints(applied)
	var want []int
	var log []string
	for _, step := range shippedSteps(t) {
		want = append(want, step.Version)
		log = append(log, fmt.Sprintf("%d %s", step.Version, step.Name))
	}
	if !reflect.DeepEqual(applied, want) || !reflect.DeepEqual(migrationLog(t, db), log) || installedVersion(t, db) != workhorse.SchemaVersion {
		t.Fatalf("applied %v; log %v", applied, migrationLog(t, db))
	}
}

// shippedSteps are the steps of sql/migrations (NNNN_<name>.sql), all transactional here.
func shippedSteps(t *testing.T) []workhorse.PendingStep {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("sql", "migrations"))
	if err != nil {
		t.Fatal(err)
	}
	var steps []workhorse.PendingStep
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".sql") {
			continue
		}
		version, err := strconv.Atoi(name[:4])
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, workhorse.PendingStep{Version: version, Name: strings.TrimSuffix(name[5:], ".sql"), Transactional: true})
	}
	return steps
}

func TestConcurrentFreshInstallsInstallOnce(t *testing.T) {
	db := testpg.NewEmpty(t)
	created := 0
	for _, r := range installAtOnce(t, db, 3) {
		if r.Created {
			created++
		}
	}
	if created != 1 || len(migrationLog(t, db)) != 1 {
		t.Fatalf("%d installs created the schema; log %v", created, migrationLog(t, db))
	}
}

// withSteps is the embedded SQL plus extra steps, for what the shipped steps do not show.
func withSteps(t *testing.T, steps map[string]string) fs.FS {
	t.Helper()
	files := fstest.MapFS{}
	for path, text := range sqlTree(t, workhorse.EmbeddedSchema()) {
		files[path] = &fstest.MapFile{Data: []byte(text)}
	}
	for name, text := range steps {
		files["migrations/"+name] = &fstest.MapFile{Data: []byte(text)}
	}
	return files
}

func TestANoTransactionStepRunsItsStatementsOutsideATransaction(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	version := workhorse.SchemaVersion + 1
	fsys := withSteps(t, map[string]string{fmt.Sprintf("%04d_job_type_index.sql", version): "-- workhorse:no-transaction\n" +
		"-- Resumable: an INVALID index left by an interrupted run is dropped first.\n" +
		"DROP INDEX CONCURRENTLY IF EXISTS workhorse.job_type_test_idx;\n" +
		"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_type_test_idx ON workhorse.job (type) WHERE type <> ';';\n"})
	result, err := workhorse.InstallSchemaFrom(ctx, db.Pool, fsys)
	if err != nil || !reflect.DeepEqual(result.Applied, []int{version}) {
		t.Fatalf("%+v, %v", result, err)
	}
	var valid bool
	must(t, db.Pool.QueryRow(ctx, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'workhorse.job_type_test_idx'::regclass").Scan(&valid))
	log := migrationLog(t, db)
	if !valid || log[len(log)-1] != fmt.Sprintf("%d job_type_index", version) || installedVersion(t, db) != version {
		t.Fatalf("valid %v, log %v", valid, log)
	}
}

func TestAFailingStepChangesNothing(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	fsys := withSteps(t, map[string]string{fmt.Sprintf("%04d_broken.sql", workhorse.SchemaVersion+1): "CREATE TABLE workhorse.half_done (id int);\nSELECT 1 / 0;\n"})
	_, err := workhorse.InstallSchemaFrom(ctx, db.Pool, fsys)
	var failed *workhorse.SchemaMigrationError
	var pgErr *pgconn.PgError
	if !errors.As(err, &failed) || failed.Version != workhorse.SchemaVersion+1 || !errors.As(err, &pgErr) || pgErr.Code != "22012" ||
		!strings.Contains(err.Error(), "nothing of this step was applied") {
		t.Fatalf("got %v", err)
	}
	var absent bool
	must(t, db.Pool.QueryRow(ctx, "SELECT to_regclass('workhorse.half_done') IS NULL").Scan(&absent))
	if !absent || installedVersion(t, db) != workhorse.SchemaVersion || len(migrationLog(t, db)) != 1 {
		t.Fatal("the failed step left changes behind")
	}
}

func TestStatementsSplitAtSemicolonsOutsideQuotesBodiesAndComments(t *testing.T) {
	script := "-- a; comment\nCREATE INDEX CONCURRENTLY a ON t (x);\n" +
		"/* a /* nested; */ block; */ SELECT 'it''s; quoted', \"semi;colon\" FROM t;\n" +
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$;\n" +
		"SELECT E'\\'; still quoted', $$;$$;  -- trailing\n;;"
	want := []string{
		"-- a; comment\nCREATE INDEX CONCURRENTLY a ON t (x)",
		"/* a /* nested; */ block; */ SELECT 'it''s; quoted', \"semi;colon\" FROM t",
		"CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$",
		"SELECT E'\\'; still quoted', $$;$$",
	}
	if got := workhorse.SplitStatements(script); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q", got)
	}
}

// A Go module outside the repository that requires the SDK (a copy of sdk/go alone, so neither
// the checkout's sql/ nor anything else of it is within reach) installs the schema.
func TestAGoOnlyModuleInstallsTheSchemaFromTheEmbeddedSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	db := testpg.NewEmpty(t)
	dir := t.TempDir()
	sdk := filepath.Join(dir, "workhorse-sdk")
	must(t, os.CopyFS(sdk, os.DirFS(filepath.Join(testpg.RepoRoot(), "sdk", "go"))))
	app := filepath.Join(dir, "app")
	must(t, os.MkdirAll(app, 0o755))
	goMod, err := os.ReadFile(filepath.Join(sdk, "go.mod"))
	must(t, err)
	goSum, err := os.ReadFile(filepath.Join(sdk, "go.sum"))
	must(t, err)
	pgxVersion := ""
	for _, line := range strings.Split(string(goMod), "\n") {
		if fields := strings.Fields(line); len(fields) == 2 && fields[0] == "github.com/jackc/pgx/v5" {
			pgxVersion = fields[1]
		}
	}
	must(t, os.WriteFile(filepath.Join(app, "go.mod"), []byte("module example.com/app\n\ngo 1.25.0\n\n"+
		"require (\n\tgithub.com/jackc/pgx/v5 "+pgxVersion+"\n\tgithub.com/stablemates/nestjs-workhorse/sdk/go v0.0.0\n)\n\n"+
		"replace github.com/stablemates/nestjs-workhorse/sdk/go => ../workhorse-sdk\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(app, "go.sum"), goSum, 0o644))
	must(t, os.WriteFile(filepath.Join(app, "main.go"), []byte(`package main

import (
	"context"
	"encoding/json"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	result, err := workhorse.InstallSchema(ctx, pool)
	if err != nil {
		panic(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(result)
}
`), 0o644))
	cmd := exec.Command("go", "run", "-mod=mod", ".")
	cmd.Dir = app
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.URL, "GOFLAGS=", "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, stderr.String())
	}
	if !sameJSON(out, fmt.Sprintf(`{"Created": true, "From": 0, "To": %d, "Applied": []}`, workhorse.SchemaVersion)) {
		t.Fatalf("printed %s", out)
	}
	if installedVersion(t, db) != workhorse.SchemaVersion || len(migrationLog(t, db)) != 1 {
		t.Fatal("the schema is not installed")
	}
}
