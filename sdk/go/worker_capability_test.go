package workhorse_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// grantCapability is what grantRole(pool, role, capability) grants (docs/security.md).
const grantCapability = `DO $grant$
DECLARE v_function regprocedure;
BEGIN
  EXECUTE format('GRANT USAGE ON SCHEMA workhorse TO %I', '%ROLE%');
  EXECUTE format('GRANT SELECT ON TABLE workhorse.schema_version TO %I', '%ROLE%');
  FOR v_function IN
    SELECT p.oid::regprocedure FROM pg_catalog.pg_proc p JOIN workhorse.protocol_function f ON f.name = p.proname
    WHERE p.pronamespace = 'workhorse'::regnamespace AND f.capabilities && ARRAY['%CAPABILITY%']
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_function, '%ROLE%');
  END LOOP;
END
$grant$`

// workerRolePool is a pool logged in as a new role with the worker capability's grants.
func workerRolePool(t *testing.T, db *testpg.DB) *pgxpool.Pool {
	t.Helper()
	pool, _ := capabilityRolePool(t, db, "worker")
	return pool
}

// capabilityRolePool is a pool logged in as a new role with one capability's grants, and the role.
func capabilityRolePool(t *testing.T, db *testpg.DB, capability string) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	role, password := "wh_go_"+capability[:1]+"_"+hex.EncodeToString(b), hex.EncodeToString(b)+"pw"
	_, err := db.Pool.Exec(ctx, "CREATE ROLE "+role+" LOGIN PASSWORD '"+password+"'")
	must(t, err)
	_, err = db.Pool.Exec(ctx, strings.NewReplacer("%ROLE%", role, "%CAPABILITY%", capability).Replace(grantCapability))
	must(t, err)
	u, err := url.Parse(db.URL)
	must(t, err)
	u.User = url.UserPassword(role, password)
	pool, err := pgxpool.New(ctx, u.String())
	must(t, err)
	t.Cleanup(func() {
		pool.Close()
		_, _ = db.Pool.Exec(context.Background(), "DROP OWNED BY "+role)
		_, _ = db.Pool.Exec(context.Background(), "DROP ROLE "+role)
	})
	return pool, role
}

// sqlstate is the SQLSTATE a statement failed with ("" when it succeeded).
func sqlstate(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err == nil {
		for rows.Next() {
		}
		rows.Close()
		err = rows.Err()
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	must(t, err)
	return ""
}

func TestAWorkerRoleReadsOnlyTheDependenciesOfTheJobItHolds(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	role := workerRolePool(t, db)
	queue := workhorse.NewQueue(workhorse.Pgx(db.Pool))
	ids, err := queue.EnqueueMany(ctx, []workhorse.EnqueueRequest{
		{Type: "cap.one", Payload: 1},
		{Type: "cap.two", Payload: 2, EnqueueOptions: workhorse.EnqueueOptions{DependsOn: []workhorse.Prerequisite{workhorse.DependOnRequest(0)}}},
	})
	must(t, err)
	w, err := workhorse.NewWorker(workhorse.Pgx(role), workhorse.WorkerOptions{Poll: 50 * time.Millisecond, Tick: 100 * time.Millisecond})
	must(t, err)
	must(t, workhorse.Handle(w, "cap.one", func(ctx context.Context, job *workhorse.Job, n int) (int, error) { return n * 10, nil }))
	must(t, workhorse.Handle(w, "cap.two", func(ctx context.Context, job *workhorse.Job, n int) ([]workhorse.DependencyOutcome, error) {
		return job.Dependencies(ctx)
	}))
	stop := startWorker(t, w)
	job := waitForState(t, workhorse.NewAdmin(workhorse.Pgx(db.Pool)), ids[1], 20*time.Second, workhorse.StateSucceeded)
	stop()
	var deps []workhorse.DependencyOutcome
	decode(t, job.Result, &deps)
	if len(deps) != 1 || deps[0].JobID != ids[0] || !sameJSON(deps[0].Result, "10") {
		t.Fatalf("the handler read %+v", deps)
	}
	// The job has ended: no worker id and fence hold it, and the previous release's v1 is refused too.
	for _, sql := range []string{"SELECT * FROM workhorse.dependencies_v2($1, 'w', 1)", "SELECT * FROM workhorse.dependencies_v1($1)"} {
		if code := sqlstate(t, role, sql, ids[1]); code != workhorse.SQLStateNotYours {
			t.Fatalf("%s: SQLSTATE %q", sql, code)
		}
	}
}

func TestAWorkerRoleKeepsItsOwnRegistryRowAndCannotTouchAnother(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	role, intruder := workerRolePool(t, db), workerRolePool(t, db)
	admin := workhorse.NewAdmin(workhorse.Pgx(db.Pool))
	w, err := workhorse.NewWorker(workhorse.Pgx(role), workhorse.WorkerOptions{WorkerID: "go-cap", Heartbeat: 100 * time.Millisecond, Poll: 50 * time.Millisecond})
	must(t, err)
	stop := startWorker(t, w)
	defer stop()
	waitForWorker(t, admin, "go-cap", func(workhorse.WorkerInfo) bool { return true })
	var drained string
	must(t, db.Pool.QueryRow(ctx, "SELECT workhorse.drain_worker_v1('go-cap', 'ops')").Scan(&drained))
	info := `{"host": "h", "pid": 1, "queues": ["q"], "concurrency": 1, "version": "v", "startedAt": "2026-12-01T01:00:00Z", "periodMs": 60000}`
	for _, pool := range []*pgxpool.Pool{role, intruder} {
		for _, sql := range []string{
			"SELECT * FROM workhorse.report_worker_v2('go-cap', $1, 0, NULL)",
			"SELECT * FROM workhorse.report_worker_v2('go-cap', $1, 0, 'guess')",
			"SELECT workhorse.unregister_worker_v2('go-cap', 'guess' || $1)",
			"SELECT workhorse.report_worker_v1('go-cap', $1, 0)",
		} {
			if code := sqlstate(t, pool, sql, info); code != workhorse.SQLStateNotYours {
				t.Fatalf("%s: SQLSTATE %q", sql, code)
			}
		}
	}
	for !w.Draining() {
		time.Sleep(20 * time.Millisecond)
	}
	if got := waitForWorker(t, admin, "go-cap", func(i workhorse.WorkerInfo) bool { return i.DrainRequestedAt != nil }); got.DrainRequestedBy != "ops" {
		t.Fatalf("drain by %q", got.DrainRequestedBy)
	}
	stop()
	if list, err := admin.ListWorkers(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after stop the registry holds %+v (%v)", list, err)
	}
}
