package workhorse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// installLockKey serialises two *fresh* installs (the same key as the TypeScript and Python
// installers). Upgrades are serialised by the row lock on workhorse.schema_version instead,
// which needs UPDATE on that table: no application role has it, so none can take or hold it.
const installLockKey = 7_362_515_001

const (
	lockVersionSQL = "SELECT version FROM workhorse.schema_version FOR UPDATE"
	logStepSQL     = "INSERT INTO workhorse.schema_migration (version, name) VALUES ($1, $2)"
)

// MigrationResult is what InstallSchema did.
type MigrationResult struct {
	// Created is true when this call installed the schema into a database that had none.
	Created bool
	// From is the version before the call, 0 when the schema was absent.
	From int
	// To is the version now installed: SchemaVersion.
	To int
	// Applied lists the steps this call applied, in order (not those another migrator applied first).
	Applied []int
}

// InstallSchema installs the workhorse schema from the SQL embedded in this module if it is
// absent, or upgrades it step by step to [SchemaVersion]; it does nothing when the schema is up
// to date. Run it as the role that owns the schema. Each step commits together with its
// bookkeeping in one transaction (a step marked `-- workhorse:no-transaction` runs its
// statements outside one and is idempotent), and concurrent migrators apply each step once. A
// database newer than this module is refused with a *SchemaVersionMismatchError and left
// unchanged: a schema is never downgraded.
//
//	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
//	result, err := workhorse.InstallSchema(ctx, pool)
func InstallSchema(ctx context.Context, pool *pgxpool.Pool) (MigrationResult, error) {
	return installSchemaFrom(ctx, pool, embeddedSchema())
}

func installSchemaFrom(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (MigrationResult, error) {
	files, err := loadSchemaFiles(fsys)
	if err != nil {
		return MigrationResult{}, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return MigrationResult{}, err
	}
	defer conn.Release()
	return migrate(ctx, conn.Conn(), files)
}

func migrate(ctx context.Context, conn *pgx.Conn, files schemaFiles) (MigrationResult, error) {
	target := files.target()
	installed, err := installedVersion(ctx, conn)
	if err != nil {
		return MigrationResult{}, err
	}
	if installed == 0 {
		created := false
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(installLockKey)); err != nil {
				return err
			}
			if installed, err = installedVersion(ctx, tx); err != nil || installed != 0 {
				return err
			}
			for _, text := range files.full {
				if _, err := tx.Exec(ctx, text); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, "INSERT INTO workhorse.schema_version (version) VALUES ($1)", target); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, logStepSQL, target, "install"); err != nil {
				return err
			}
			created = true
			return nil
		})
		if err != nil {
			return MigrationResult{}, err
		}
		if created {
			return MigrationResult{Created: true, To: target, Applied: []int{}}, nil
		}
	}
	if installed > target {
		return MigrationResult{}, &SchemaVersionMismatchError{Installed: installed, Expected: target, Minimum: MinSchemaVersion}
	}
	if installed < baselineVersion {
		return MigrationResult{}, &SchemaMigrationError{Reason: fmt.Sprintf(
			"the workhorse schema in this database is version %d, older than version %d, the first one that can be migrated: "+
				"no release ever installed it with an upgrade path; nothing was changed", installed, baselineVersion)}
	}
	result := MigrationResult{From: installed, To: target, Applied: []int{}}
	for _, step := range files.pending(installed) {
		applied, err := applyStep(ctx, conn, step)
		if err != nil {
			return result, stepFailed(step, err)
		}
		if applied {
			result.Applied = append(result.Applied, step.version)
		}
	}
	return result, nil
}

// querier is what a connection and a transaction share.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// installedVersion is the version in workhorse.schema_version, 0 when the schema is absent.
func installedVersion(ctx context.Context, q querier) (int, error) {
	var present bool
	if err := q.QueryRow(ctx, "SELECT to_regclass('workhorse.schema_version') IS NOT NULL").Scan(&present); err != nil || !present {
		return 0, err
	}
	var version int
	err := q.QueryRow(ctx, "SELECT version FROM workhorse.schema_version").Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return version, err
}

// stillPending takes the row lock and says whether no other migrator has applied step yet.
func stillPending(ctx context.Context, tx pgx.Tx, step schemaStep) (bool, error) {
	var version int
	if err := tx.QueryRow(ctx, lockVersionSQL).Scan(&version); err != nil {
		return false, err
	}
	return version < step.version, nil
}

// applyStep applies one step unless another migrator has, and says whether this call applied it.
func applyStep(ctx context.Context, conn *pgx.Conn, step schemaStep) (bool, error) {
	applied := false
	if step.transactional() {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			pending, err := stillPending(ctx, tx, step)
			if err != nil || !pending {
				return err
			}
			if _, err := tx.Exec(ctx, step.sql); err != nil {
				return err
			}
			applied = true
			return recordStep(ctx, tx, step)
		})
		return applied && err == nil, err
	}
	// A no-transaction step: checked under the row lock, run outside it (so two migrators may
	// both run its idempotent statements), and recorded by whichever of them bumps the version.
	pending := false
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) (err error) {
		pending, err = stillPending(ctx, tx, step)
		return err
	}); err != nil || !pending {
		return false, err
	}
	for _, statement := range splitStatements(step.sql) {
		if _, err := conn.Exec(ctx, statement); err != nil {
			return false, err
		}
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		pending, err := stillPending(ctx, tx, step)
		if err != nil || !pending {
			return err
		}
		applied = true
		return recordStep(ctx, tx, step)
	})
	return applied && err == nil, err
}

// stepFailed says which step failed, what of it was kept, and what to do.
func stepFailed(step schemaStep, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return &SchemaMigrationError{Version: step.version, Err: err, Reason: fmt.Sprintf(
			"cannot migrate the workhorse schema to version %d as this role: %v; run the migration as the schema's owner "+
				"(the role that installed it) or a superuser; application roles (producer, worker, operator) may not", step.version, err)}
	}
	kept := "nothing of this step was applied (it runs in one transaction)"
	if !step.transactional() {
		kept = "the statements before the failing one may have been applied; the step is resumable"
	}
	return &SchemaMigrationError{Version: step.version, Err: err, Reason: fmt.Sprintf(
		"migration step %s (version %d to %d) failed: %v; %s, and the database stays at version %d: fix the cause and migrate again",
		step.file(), step.version-1, step.version, err, kept, step.version-1)}
}

func recordStep(ctx context.Context, tx pgx.Tx, step schemaStep) error {
	if _, err := tx.Exec(ctx, "UPDATE workhorse.schema_version SET version = $1", step.version); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, logStepSQL, step.version, step.name)
	return err
}
