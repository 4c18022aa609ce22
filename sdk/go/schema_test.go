package workhorse_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

func TestClientsRefuseADatabaseWithoutTheSchema(t *testing.T) {
	db := testpg.NewEmpty(t)
	ctx := context.Background()
	_, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "a", 1, nil)
	var missing *workhorse.SchemaNotInstalledError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "workhorse.InstallSchema(ctx, pool)") {
		t.Fatalf("Enqueue: got %v", err)
	}
	w, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), workhorse.WorkerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); !errors.As(err, &missing) {
		t.Fatalf("Run: got %v", err)
	}
	if _, err := workhorse.NewAdmin(workhorse.Pgx(db.Pool)).GetJob(ctx, "01a22858-3d78-7624-95c6-4dc3ae0605a2"); !errors.As(err, &missing) {
		t.Fatalf("GetJob: got %v", err)
	}
}

func TestClientsRefuseASchemaVersionTheyDoNotKnow(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	if _, err := db.Pool.Exec(ctx, "UPDATE workhorse.schema_version SET version = 999"); err != nil {
		t.Fatal(err)
	}
	// A newer schema that no longer serves this release (one that does is used as it is).
	if _, err := db.Pool.Exec(ctx, "CREATE OR REPLACE FUNCTION workhorse.oldest_client_v1() RETURNS integer LANGUAGE plpgsql AS $$ BEGIN RETURN 999; END $$"); err != nil {
		t.Fatal(err)
	}
	_, err := workhorse.NewQueue(workhorse.Pgx(db.Pool)).Enqueue(ctx, "a", 1, nil)
	var mismatch *workhorse.SchemaVersionMismatchError
	if !errors.As(err, &mismatch) || mismatch.Installed != 999 || mismatch.Expected != workhorse.SchemaVersion {
		t.Fatalf("Enqueue: got %v", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("version 999, newer than this package (version %d), and it no longer serves this release: upgrade the package", workhorse.SchemaVersion)) {
		t.Fatalf("the message does not say what to do: %s", err)
	}
	w, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), workhorse.WorkerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); !errors.As(err, &mismatch) {
		t.Fatalf("Run: got %v", err)
	}
	if n := countJobs(t, db); n != 0 {
		t.Fatalf("%d jobs written", n)
	}
	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(db.Pool))
	if err != nil || status.UpToDate() || status.Installed != 999 {
		t.Fatalf("status %+v, %v", status, err)
	}
}

func TestClientsAndWorkersWorkWithANewerSchemaThatStillServesThisRelease(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	newer := workhorse.SchemaVersion + 1
	if _, err := db.Pool.Exec(ctx, "UPDATE workhorse.schema_version SET version = $1", newer); err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDBFromPool(db.Pool)
	defer sqlDB.Close()
	for name, client := range map[string]workhorse.DB{"pgx": workhorse.Pgx(db.Pool), "database/sql": workhorse.SQL(sqlDB)} {
		if err := workhorse.VerifySchema(ctx, client); err != nil {
			t.Fatalf("%s VerifySchema: %v", name, err)
		}
		if _, err := workhorse.NewQueue(client).Enqueue(ctx, "a", 1, nil); err != nil {
			t.Fatalf("%s Enqueue: %v", name, err)
		}
		if _, err := workhorse.NewAdmin(client).GetJob(ctx, "01a22858-3d78-7624-95c6-4dc3ae0605a2"); err != nil {
			t.Fatalf("%s GetJob: %v", name, err)
		}
	}
	w, err := workhorse.NewWorker(workhorse.Pgx(db.Pool), workhorse.WorkerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.Run(runCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if n := countJobs(t, db); n != 2 {
		t.Fatalf("%d jobs", n)
	}
	var version int
	if err := db.Pool.QueryRow(ctx, "SELECT version FROM workhorse.schema_version").Scan(&version); err != nil || version != newer {
		t.Fatalf("version %d, %v", version, err)
	}
}
