package workhorse

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stablemates/nestjs-workhorse/sdk/go/internal/testpg"
)

// The SQL functions' own refusals (input this client would have caught first) reach the
// caller as typed errors.
func TestSQLStatesBecomeTypedErrors(t *testing.T) {
	db := testpg.New(t)
	ctx := context.Background()
	pgx := Pgx(db.Pool)

	err := queryAll(ctx, pgx, "SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)", []any{`[{"type": "ok", "payload": 1}, {"type": "", "payload": 2}]`},
		func(rows) error { return nil })
	var invalid *ValidationError
	if !errors.As(err, &invalid) || invalid.Field != "requests[1].type" || !strings.HasPrefix(invalid.Message, "must be 1 to 128 characters") {
		t.Fatalf("P1001: got %#v", err)
	}

	batch := "[" + strings.TrimSuffix(strings.Repeat(`{"type": "t", "payload": 1},`, 1001), ",") + "]"
	err = queryAll(ctx, pgx, "SELECT job_id FROM workhorse.enqueue_many_v1($1::jsonb)", []any{batch}, func(rows) error { return nil })
	if !errors.As(err, &invalid) || invalid.Field != "requests" {
		t.Fatalf("P1003: got %#v", err)
	}

	tx, err := db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	err = queryAll(ctx, Pgx(tx), "SELECT job_id FROM workhorse.claim_many_v1('{default}', 'w', 1, 30000)", nil, func(rows) error { return nil })
	var isolation *IsolationError
	if !errors.As(err, &isolation) || !strings.Contains(isolation.Message, "READ COMMITTED") {
		t.Fatalf("P1004: got %#v", err)
	}
}

func TestCheckJSON(t *testing.T) {
	for _, ok := range []string{`1`, `"\ud83d\ude00"`, `{"a":[1,{"b":"\u00e9\\u0000"}]}`, `"\\"`} {
		if err := checkJSON([]byte(ok), "v", maxJSONBytes); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{`"\u0000"`, `"\ud800"`, `"\udc00"`, `"\ud800x"`, `"\ud800\ud800"`, `"\ud800\n"`, "\"\xff\""} {
		if err := checkJSON([]byte(bad), "v", maxJSONBytes); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
}
