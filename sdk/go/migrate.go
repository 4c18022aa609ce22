package workhorse

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// installLockKey serialises two *fresh* installs (the same key as the TypeScript and Python
// installers); no application role exists before the install grants one. Upgrades are
// serialised by the row lock on workhorse.schema_version instead, which needs UPDATE on that
// table: no application role has it, so none can take or hold it.
const installLockKey = 7_362_515_001

// lockPollInterval is how long a migrator waits before it looks at the migration lock again.
// A migrator that finds the lock taken does not queue for it (SKIP LOCKED, then this pause): a
// blocked SELECT ... FOR UPDATE would hold a snapshot, and CREATE INDEX CONCURRENTLY in the
// holder's no-transaction step waits for every older snapshot to end, so the two would wait
// for each other forever.
const lockPollInterval = 100 * time.Millisecond

const (
	lockVersionSQL = "SELECT version FROM workhorse.schema_version FOR UPDATE SKIP LOCKED"
	logStepSQL     = "INSERT INTO workhorse.schema_migration (version, name) VALUES ($1, $2) ON CONFLICT (version) DO NOTHING"
	// schemaPresentSQL reads pg_class with the statement's snapshot rather than through a name
	// lookup: after waiting for the install lock, this session's catalog cache may still hold
	// the "no such relation" it saw before another installer committed.
	schemaPresentSQL = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'workhorse' AND c.relname = 'schema_version')`
	schemaOwnerSQL = `SELECT r.rolname, pg_has_role(current_user, n.nspowner, 'MEMBER')
		FROM pg_namespace n JOIN pg_roles r ON r.oid = n.nspowner WHERE n.nspname = 'workhorse'`
)

// MigrationResult is what InstallSchema did.
type MigrationResult struct {
	// Created is true when this call installed the schema into a database that had none.
	Created bool
	// From is the version before the call, 0 when the schema was absent.
	From int
	// To is the version now installed: SchemaVersion, or a newer one that still serves this
	// release (left as it is: a schema is never downgraded).
	To int
	// Applied lists the steps this call applied, in order (not those another migrator applied first).
	Applied []int
}

// InstallSchema installs the workhorse schema from the SQL embedded in this module if it is
// absent, or upgrades it step by step to [SchemaVersion]; it does nothing when the schema is up
// to date. Run it as the role that owns the schema. Each step commits together with its
// bookkeeping in one transaction (a step marked `-- workhorse:no-transaction` runs its
// statements outside one and is idempotent), and concurrent migrators apply each step once. A
// schema is never downgraded: a database newer than this module that still serves this release
// (workhorse.oldest_client_v1()) is left as it is (From == To, nothing applied); one that does
// not is refused with a *SchemaVersionMismatchError, unchanged.
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
	return migrate(ctx, pool, conn.Conn(), files)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, conn *pgx.Conn, files schemaFiles) (MigrationResult, error) {
	target := files.target()
	schema, err := readInstalledSchema(ctx, connRows(conn))
	if err != nil {
		return MigrationResult{}, err
	}
	if schema.version == 0 {
		created, found, err := installFresh(ctx, conn, files)
		if err != nil {
			return MigrationResult{}, err
		}
		if created {
			return MigrationResult{Created: true, To: target, Applied: []int{}}, nil
		}
		if schema = found; schema.version == 0 {
			schema.version = target
		}
	}
	installed := schema.version
	if installed > target {
		// Never a downgrade. A newer schema that still serves this release is left as it is.
		if schema.worksWith(target, MinSchemaVersion) {
			return MigrationResult{From: installed, To: installed, Applied: []int{}}, nil
		}
		return MigrationResult{}, &SchemaVersionMismatchError{Installed: installed, Expected: target, Minimum: MinSchemaVersion}
	}
	result := MigrationResult{From: installed, To: target, Applied: []int{}}
	if installed == target {
		return result, nil
	}
	if installed < baselineVersion {
		return MigrationResult{}, &SchemaMigrationError{Reason: fmt.Sprintf(
			"the workhorse schema in this database is version %d, older than version %d, the first one that can be migrated: "+
				"no release ever installed it with an upgrade path; nothing was changed", installed, baselineVersion)}
	}
	steps := files.pending(installed)
	var missing []int
	for version := installed + 1; version <= target; version++ {
		found := false
		for _, step := range steps {
			found = found || step.version == version
		}
		if !found {
			missing = append(missing, version)
		}
	}
	if len(missing) > 0 {
		return MigrationResult{}, &SchemaMigrationError{Version: missing[0], Reason: fmt.Sprintf(
			"cannot migrate the workhorse schema from version %d to %d: this module lacks the step file(s) for version %v "+
				"(sql/migrations/NNNN_*.sql); reinstall the module; nothing was changed", installed, target, missing)}
	}
	for _, step := range steps {
		applied, err := applyStep(ctx, pool, conn, step)
		if err != nil {
			return result, err
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

// installFresh creates the schema unless it exists, and says whether this call made it and the
// version installed afterwards. Everything happens in one transaction under a
// transaction-level lock, so it also holds behind a transaction-pooling PgBouncer (a session
// lock could be taken on one server connection and the install run on another). Whether
// another installer got there first is read from pg_class (schemaPresentSQL); the version is
// read only after this transaction has ended, in a fresh one.
func installFresh(ctx context.Context, conn *pgx.Conn, files schemaFiles) (created bool, installed installedSchema, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(installLockKey)); err != nil {
			return err
		}
		var present bool
		if err := tx.QueryRow(ctx, schemaPresentSQL).Scan(&present); err != nil || present {
			return err
		}
		for _, text := range files.full {
			if _, err := tx.Exec(ctx, text); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, "INSERT INTO workhorse.schema_version (version) VALUES ($1)", files.target()); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, logStepSQL, files.target(), "install"); err != nil {
			return err
		}
		created = true
		return nil
	})
	if err != nil || created {
		return created, installedSchema{version: files.target()}, err
	}
	installed, err = readInstalledSchema(ctx, connRows(conn))
	return false, installed, err
}

// schemaOwner is the role that owns the schema, after checking that this session may act as it.
func schemaOwner(ctx context.Context, q querier, step schemaStep) (string, error) {
	var owner string
	var member bool
	if err := q.QueryRow(ctx, schemaOwnerSQL).Scan(&owner, &member); err != nil {
		return "", err
	}
	if !member {
		return "", refusedRole(step, fmt.Errorf("the role %s owns the schema", owner))
	}
	return owner, nil
}

func refusedRole(step schemaStep, err error) error {
	return &SchemaMigrationError{Version: step.version, Err: err, Reason: fmt.Sprintf(
		"cannot migrate the workhorse schema to version %d as this role: %v; run the migration as the schema's owner "+
			"(the role that installed it) or a superuser; application roles (producer, worker, operator) may not", step.version, err)}
}

// lockVersion begins a transaction as the schema's owner (so what a step creates belongs to the
// owner, as what the install created does) and takes the migration lock: the row of
// schema_version FOR UPDATE, which needs the UPDATE privilege no application role holds. While
// another migrator holds it, it polls (see lockPollInterval) holding nothing in between.
// Returns the open transaction and the version.
func lockVersion(ctx context.Context, conn *pgx.Conn, step schemaStep) (pgx.Tx, int, error) {
	for {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return nil, 0, err
		}
		version, found, err := lockedVersion(ctx, tx, step)
		if err != nil {
			_ = tx.Rollback(ctx)
			return nil, 0, err
		}
		if found {
			return tx, version, nil
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, 0, err
		}
		select {
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		case <-time.After(lockPollInterval):
		}
	}
}

func lockedVersion(ctx context.Context, tx pgx.Tx, step schemaStep) (version int, found bool, err error) {
	owner, err := schemaOwner(ctx, tx, step)
	if err != nil {
		return 0, false, err
	}
	if _, err := tx.Exec(ctx, "SET LOCAL ROLE "+pgx.Identifier{owner}.Sanitize()); err != nil {
		return 0, false, refusedRole(step, err)
	}
	// The simple protocol: an extended-protocol portal outlives its query inside a transaction
	// block, and with it its snapshot, which a concurrent index build would wait for.
	err = tx.QueryRow(ctx, lockVersionSQL, pgx.QueryExecModeSimpleProtocol).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, refusedRole(step, err)
	}
	return version, true, nil
}

// applyStep applies one step unless another migrator has, and says whether this call applied it.
func applyStep(ctx context.Context, pool *pgxpool.Pool, conn *pgx.Conn, step schemaStep) (bool, error) {
	if !step.transactional() {
		return applyOutsideTransaction(ctx, pool, conn, step)
	}
	tx, before, err := lockVersion(ctx, conn, step)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if before >= step.version {
		return false, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, step.sql); err != nil {
		return false, stepFailed(step, before, err)
	}
	if err := recordStep(ctx, tx, step); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// lockHolder is the second connection that holds the migration lock while a no-transaction
// step runs on the first: one from the pool, or, when the pool allows a single connection, one
// opened with the pool's configuration.
func lockHolder(ctx context.Context, pool *pgxpool.Pool) (*pgx.Conn, func(), error) {
	if pool.Config().MaxConns < 2 {
		conn, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
		if err != nil {
			return nil, nil, err
		}
		return conn, func() { _ = conn.Close(context.Background()) }, nil
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, err
	}
	return conn.Conn(), conn.Release, nil
}

// applyOutsideTransaction runs a no-transaction step: a second connection holds the migration
// lock while conn runs the statements one by one (as the schema's owner), then the holder
// records the step and commits. A run that dies half-way leaves the version where it was; the
// step's statements are written to be run again (IF NOT EXISTS, dropping an INVALID index first).
func applyOutsideTransaction(ctx context.Context, pool *pgxpool.Pool, conn *pgx.Conn, step schemaStep) (bool, error) {
	holder, release, err := lockHolder(ctx, pool)
	if err != nil {
		return false, err
	}
	defer release()
	tx, before, err := lockVersion(ctx, holder, step)
	if err != nil {
		return false, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if before >= step.version {
		return false, tx.Commit(ctx)
	}
	owner, err := schemaOwner(ctx, conn, step)
	if err != nil {
		return false, err
	}
	if _, err := conn.Exec(ctx, "SET ROLE "+pgx.Identifier{owner}.Sanitize()); err != nil {
		return false, refusedRole(step, err)
	}
	for _, statement := range splitStatements(step.sql) {
		if _, err := conn.Exec(ctx, statement); err != nil {
			_, _ = conn.Exec(context.Background(), "RESET ROLE")
			return false, stepFailed(step, before, err)
		}
	}
	if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
		return false, err
	}
	if err := recordStep(ctx, tx, step); err != nil {
		return false, err
	}
	return true, tx.Commit(ctx)
}

// stepFailed says which step failed, what of it was kept, and what to do.
func stepFailed(step schemaStep, from int, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" { // insufficient_privilege
		return refusedRole(step, err)
	}
	kept := "nothing of this step was applied (it runs in one transaction)"
	if !step.transactional() {
		kept = "the statements before the failing one may have been applied; the step is resumable"
	}
	return &SchemaMigrationError{Version: step.version, Err: err, Reason: fmt.Sprintf(
		"migration step %s (version %d to %d) failed: %v; %s, and the database stays at version %d: fix the cause and migrate again",
		step.file(), from, step.version, err, kept, from)}
}

func recordStep(ctx context.Context, tx pgx.Tx, step schemaStep) error {
	if _, err := tx.Exec(ctx, "UPDATE workhorse.schema_version SET version = $1", step.version); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, logStepSQL, step.version, step.name)
	return err
}
