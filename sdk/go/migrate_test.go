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
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

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

// shippedSteps are the steps this module embeds, as GetSchemaStatus lists them for the baseline.
func shippedSteps(t *testing.T) []workhorse.PendingStep {
	t.Helper()
	var steps []workhorse.PendingStep
	for path, text := range sqlTree(t, workhorse.EmbeddedSchema()) {
		if name, ok := strings.CutPrefix(path, "migrations/"); ok {
			var v int
			_, err := fmt.Sscanf(name, "%04d_", &v)
			must(t, err)
			steps = append(steps, workhorse.PendingStep{Version: v, Name: strings.TrimSuffix(name[5:], ".sql"),
				Transactional: !strings.HasPrefix(text, "-- workhorse:no-transaction")})
		}
	}
	sort.Slice(steps, func(i, j int) bool { return steps[i].Version < steps[j].Version })
	return steps
}

func shippedVersions(t *testing.T) []int {
	t.Helper()
	var versions []int
	for _, s := range shippedSteps(t) {
		versions = append(versions, s.Version)
	}
	return versions
}

// shippedLog is schema_migration after an upgrade from the baseline, as migrationLog reads it.
func shippedLog(t *testing.T) []string {
	t.Helper()
	var log []string
	for _, s := range shippedSteps(t) {
		log = append(log, fmt.Sprintf("%d %s", s.Version, s.Name))
	}
	return log
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
	// A job the baseline's producers queued (through its SQL: this release's clients need version
	// MinSchemaVersion) survives the upgrade.
	var id string
	must(t, db.Pool.QueryRow(ctx, "SELECT job_id::text FROM workhorse.enqueue_many_v1($1::jsonb)", `[{"type": "report.build", "payload": {"n": 1}}]`).Scan(&id))
	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(db.Pool))
	if err != nil || status.Situation() != workhorse.SchemaOlder || !reflect.DeepEqual(status.Pending, shippedSteps(t)) {
		t.Fatalf("status before: %+v, %v", status, err)
	}
	result, err := workhorse.InstallSchema(ctx, db.Pool)
	if err != nil || !reflect.DeepEqual(result, workhorse.MigrationResult{From: 4, To: workhorse.SchemaVersion, Applied: shippedVersions(t)}) {
		t.Fatalf("migrate: %+v, %v", result, err)
	}
	if got := migrationLog(t, db); !reflect.DeepEqual(got, shippedLog(t)) || installedVersion(t, db) != workhorse.SchemaVersion {
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

// setNewer leaves what the next release's migration would: SchemaVersion + 1, still serving this
// release, or (oldestClient > 0) no longer serving releases before oldestClient.
func setNewer(t *testing.T, db *testpg.DB, oldestClient int) int {
	t.Helper()
	ctx := context.Background()
	newer := workhorse.SchemaVersion + 1
	_, err := db.Pool.Exec(ctx, "UPDATE workhorse.schema_version SET version = $1", newer)
	must(t, err)
	if oldestClient > 0 {
		_, err = db.Pool.Exec(ctx, fmt.Sprintf("CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN %d; END $$", oldestClient))
		must(t, err)
	}
	return newer
}

func TestInstallSchemaLeavesANewerDatabaseThatStillServesThisReleaseAsItIs(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	newer := setNewer(t, db, 0)
	before, log := catalog(t, db), migrationLog(t, db)
	if err := workhorse.VerifySchema(ctx, workhorse.Pgx(db.Pool)); err != nil {
		t.Fatalf("VerifySchema: %v", err)
	}
	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(db.Pool))
	if err != nil || status.Installed != newer || status.Situation() != workhorse.SchemaNewer || status.OldestClient == nil || *status.OldestClient != 4 ||
		!status.Compatible || len(status.Pending) != 0 {
		t.Fatalf("status %+v, %v", status, err)
	}
	result, err := workhorse.InstallSchema(ctx, db.Pool)
	if err != nil || !reflect.DeepEqual(result, workhorse.MigrationResult{From: newer, To: newer, Applied: []int{}}) {
		t.Fatalf("migrate: %+v, %v", result, err)
	}
	if installedVersion(t, db) != newer || !reflect.DeepEqual(catalog(t, db), before) || !reflect.DeepEqual(migrationLog(t, db), log) {
		t.Fatal("the migration changed a newer database")
	}
}

func TestInstallSchemaRefusesANewerDatabaseThatNoLongerServesThisReleaseAndChangesNothing(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	newer := setNewer(t, db, workhorse.SchemaVersion+1)
	before, log := catalog(t, db), migrationLog(t, db)
	refusal := fmt.Sprintf("version %d, newer than this package (version %d), and it no longer serves this release: upgrade the package", newer, workhorse.SchemaVersion)
	_, err := workhorse.InstallSchema(ctx, db.Pool)
	var mismatch *workhorse.SchemaVersionMismatchError
	if !errors.As(err, &mismatch) || mismatch.Installed != newer || mismatch.Expected != workhorse.SchemaVersion || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("got %v", err)
	}
	if err := workhorse.VerifySchema(ctx, workhorse.Pgx(db.Pool)); !errors.As(err, &mismatch) || !strings.Contains(err.Error(), refusal) {
		t.Fatalf("VerifySchema: %v", err)
	}
	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(db.Pool))
	if err != nil || status.Installed != newer || status.OldestClient == nil || *status.OldestClient != newer || status.Compatible {
		t.Fatalf("status %+v, %v", status, err)
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
		version      int
		oldestClient int // 0: as installed
		advice       string
	}{
		{workhorse.MinSchemaVersion, 0, ""},
		{workhorse.MinSchemaVersion - 1, 0, "python -m workhorse schema migrate"},
		// A newer schema that still serves this release, and one that no longer does.
		{workhorse.SchemaVersion + 1, 0, ""},
		{workhorse.SchemaVersion + 1, workhorse.SchemaVersion + 1, "and it no longer serves this release: upgrade the package"},
	} {
		_, err := db.Pool.Exec(ctx, "UPDATE workhorse.schema_version SET version = $1", c.version)
		must(t, err)
		if c.oldestClient > 0 {
			setNewer(t, db, c.oldestClient)
		}
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
	return installAtOnceFrom(t, db, n, workhorse.EmbeddedSchema())
}

// installAtOnceFrom runs InstallSchemaFrom(fsys) n times at once, each on a pool of its own.
func installAtOnceFrom(t *testing.T, db *testpg.DB, n int, fsys fs.FS) []workhorse.MigrationResult {
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
			results[i], errs[i] = workhorse.InstallSchemaFrom(ctx, pool, fsys)
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
	var applied []int
	for _, r := range installAtOnce(t, db, 4) {
		applied = append(applied, r.Applied...)
	}
	sort.Ints(applied)
	if !reflect.DeepEqual(applied, shippedVersions(t)) || !reflect.DeepEqual(migrationLog(t, db), shippedLog(t)) || installedVersion(t, db) != workhorse.SchemaVersion {
		t.Fatalf("applied %v; log %v", applied, migrationLog(t, db))
	}
}

func TestConcurrentFreshInstallsInstallOnce(t *testing.T) {
	db := testpg.NewEmpty(t)
	created := 0
	for _, r := range installAtOnce(t, db, 4) {
		if r.Created {
			created++
		}
		if r.To != workhorse.SchemaVersion || len(r.Applied) != 0 || (!r.Created && r.From != workhorse.SchemaVersion) {
			t.Fatalf("result %+v", r)
		}
	}
	if created != 1 || len(migrationLog(t, db)) != 1 {
		t.Fatalf("%d installs created the schema; log %v", created, migrationLog(t, db))
	}
}

// probeSteps are two steps after this module's: a table (created twice it would fail) and a
// no-transaction step with CREATE INDEX CONCURRENTLY (which fails inside a transaction).
func probeSteps(t *testing.T) fs.FS {
	t.Helper()
	return withSteps(t, map[string]string{
		fmt.Sprintf("%04d_probe.sql", workhorse.SchemaVersion+1): "CREATE TABLE workhorse.migration_probe (id integer PRIMARY KEY);\n" +
			fmt.Sprintf("INSERT INTO workhorse.migration_probe VALUES (%d);\n", workhorse.SchemaVersion+1),
		fmt.Sprintf("%04d_probe_index.sql", workhorse.SchemaVersion+2): "-- workhorse:no-transaction\n" +
			"CREATE INDEX CONCURRENTLY IF NOT EXISTS migration_probe_id ON workhorse.migration_probe (id);\n",
	})
}

// checkProbeSteps checks that every step up to the probes' was applied by exactly one migrator.
func checkProbeSteps(t *testing.T, db *testpg.DB, results []workhorse.MigrationResult, from int) {
	t.Helper()
	ctx := context.Background()
	target := workhorse.SchemaVersion + 2
	count := map[int]int{}
	for _, r := range results {
		// A migrator whose connection came late may find some or all steps done: it starts there.
		if r.To != target || (r.From < from && !r.Created) {
			t.Fatalf("result %+v", r)
		}
		for _, v := range r.Applied {
			count[v]++
		}
	}
	for v := from + 1; v <= target; v++ {
		if count[v] != 1 {
			t.Fatalf("step %d applied by %d migrators (%+v)", v, count[v], results)
		}
	}
	if installedVersion(t, db) != target {
		t.Fatalf("version %d", installedVersion(t, db))
	}
	var id int
	var valid bool
	must(t, db.Pool.QueryRow(ctx, "SELECT id FROM workhorse.migration_probe").Scan(&id))
	must(t, db.Pool.QueryRow(ctx, "SELECT indisvalid FROM pg_index WHERE indexrelid = 'workhorse.migration_probe_id'::regclass").Scan(&valid))
	if id != workhorse.SchemaVersion+1 || !valid {
		t.Fatalf("probe %d, index valid %v", id, valid)
	}
}

func TestConcurrentMigratorsOnTheBaselineApplyEveryStepOnceTheNoTransactionOneToo(t *testing.T) {
	db := newBaselineDB(t)
	results := installAtOnceFrom(t, db, 5, probeSteps(t))
	checkProbeSteps(t, db, results, 4)
	log := migrationLog(t, db)
	if len(log) != workhorse.SchemaVersion+2-4 || log[len(log)-1] != fmt.Sprintf("%d probe_index", workhorse.SchemaVersion+2) {
		t.Fatalf("log %v", log)
	}
}

func TestANoTransactionStepRunsThroughAPoolOfOneConnection(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	config, err := pgxpool.ParseConfig(db.URL)
	must(t, err)
	config.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, config)
	must(t, err)
	defer pool.Close()
	version := workhorse.SchemaVersion + 1
	fsys := withSteps(t, map[string]string{fmt.Sprintf("%04d_single.sql", version): "-- workhorse:no-transaction\n" +
		"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_single_probe ON workhorse.job (created_at);\n"})
	bounded, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	result, err := workhorse.InstallSchemaFrom(bounded, pool, fsys)
	if err != nil || !reflect.DeepEqual(result.Applied, []int{version}) || installedVersion(t, db) != version {
		t.Fatalf("%+v, %v", result, err)
	}
}

func TestANoTransactionStepInterruptedHalfWayIsResumedByTheNextRun(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	version := workhorse.SchemaVersion + 1
	fsys := withSteps(t, map[string]string{fmt.Sprintf("%04d_concurrent.sql", version): "-- workhorse:no-transaction\n" +
		"CREATE INDEX CONCURRENTLY IF NOT EXISTS job_created_probe ON workhorse.job (created_at);\n" +
		"SELECT * FROM workhorse.appears_later;\n"})
	_, err := workhorse.InstallSchemaFrom(ctx, db.Pool, fsys)
	var failed *workhorse.SchemaMigrationError
	if !errors.As(err, &failed) || failed.Version != version || !strings.Contains(err.Error(), "may have been applied; the step is resumable") {
		t.Fatalf("got %v", err)
	}
	var built bool
	must(t, db.Pool.QueryRow(ctx, "SELECT to_regclass('workhorse.job_created_probe') IS NOT NULL").Scan(&built))
	if !built || installedVersion(t, db) != workhorse.SchemaVersion || len(migrationLog(t, db)) != 1 {
		t.Fatalf("after the failure: index %v, version %d, log %v", built, installedVersion(t, db), migrationLog(t, db))
	}
	_, err = db.Pool.Exec(ctx, "CREATE TABLE workhorse.appears_later (id integer)")
	must(t, err)
	// Resumed under concurrency: three migrators, one applies it.
	results := installAtOnceFrom(t, db, 3, fsys)
	applied := 0
	for _, r := range results {
		applied += len(r.Applied)
	}
	if log := migrationLog(t, db); applied != 1 || installedVersion(t, db) != version || log[len(log)-1] != fmt.Sprintf("%d concurrent", version) {
		t.Fatalf("applied %d, log %v", applied, log)
	}
}

// While a migrator waits for the migration lock it holds no lock request and no snapshot: an
// application reader answers, and CREATE INDEX CONCURRENTLY (what a no-transaction step of the
// lock holder runs, and which waits for every older snapshot) completes.
func TestAWaitingMigratorBlocksNeitherReadersNorAConcurrentIndexBuild(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	holder, err := db.Pool.Acquire(ctx)
	must(t, err)
	defer holder.Release()
	tx, err := holder.Begin(ctx)
	must(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var v int
	// Simple protocol, so this transaction keeps the row lock but no snapshot (as a migrator's holder).
	must(t, tx.QueryRow(ctx, "SELECT version FROM workhorse.schema_version FOR UPDATE", pgx.QueryExecModeSimpleProtocol).Scan(&v))

	pool, err := pgxpool.New(ctx, db.URL)
	must(t, err)
	defer pool.Close()
	fsys := withSteps(t, map[string]string{fmt.Sprintf("%04d_waits.sql", workhorse.SchemaVersion+1): "CREATE TABLE workhorse.waited (id int);\n"})
	type outcome struct {
		result workhorse.MigrationResult
		err    error
	}
	done := make(chan outcome, 1)
	go func() {
		r, err := workhorse.InstallSchemaFrom(ctx, pool, fsys)
		done <- outcome{r, err}
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case o := <-done:
		t.Fatalf("the migrator did not wait: %+v, %v", o.result, o.err)
	default:
	}
	var waiting int
	must(t, db.Pool.QueryRow(ctx, "SELECT count(*) FROM pg_locks WHERE NOT granted").Scan(&waiting))
	if waiting != 0 {
		t.Fatalf("%d lock requests wait while the migrator polls", waiting)
	}
	reader, err := db.Pool.Acquire(ctx)
	must(t, err)
	defer reader.Release()
	bounded, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var n int
	must(t, reader.QueryRow(bounded, "SELECT count(*) FROM workhorse.job").Scan(&n))
	_, err = reader.Exec(bounded, "CREATE INDEX CONCURRENTLY job_waiting_probe ON workhorse.job (created_at)")
	must(t, err)
	_, err = reader.Exec(bounded, "DROP INDEX CONCURRENTLY workhorse.job_waiting_probe")
	must(t, err)
	must(t, tx.Rollback(ctx))
	select {
	case o := <-done:
		if o.err != nil || !reflect.DeepEqual(o.result.Applied, []int{workhorse.SchemaVersion + 1}) {
			t.Fatalf("after the lock was released: %+v, %v", o.result, o.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the migrator did not take the released lock")
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
