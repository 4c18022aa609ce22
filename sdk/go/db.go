package workhorse

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DB is where the SDK runs its statements: a pgx pool, connection or transaction wrapped by
// [Pgx], or a database/sql pool, connection or transaction wrapped by [SQL]. Wrap your open
// transaction and the SDK's writes commit or roll back with your own.
//
// Queue and Admin run on any DB. A Worker needs a pool (*pgxpool.Pool or *sql.DB): it runs
// its statements on the pool's connections and opens connections of its own for heartbeats
// and LISTEN.
type DB interface {
	query(ctx context.Context, sql string, args ...any) (rows, error)
	// asPool is the pool a worker can run on, or nil for a transaction or a single connection.
	asPool() workerPool
}

// PgxQuerier is what [Pgx] wraps: *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx all have it.
type PgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// SQLQuerier is what [SQL] wraps: *sql.DB, *sql.Conn and *sql.Tx all have it.
type SQLQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Pgx runs the SDK's statements through pgx v5: a *pgxpool.Pool (for a Worker, or for Queue and
// Admin calls that commit on their own), or your pgx.Tx to make them part of your transaction.
//
//	queue := workhorse.NewQueue(workhorse.Pgx(pool))
//	id, err := queue.With(workhorse.Pgx(tx)).Enqueue(ctx, "email.send", payload, nil)
func Pgx(q PgxQuerier) DB {
	return pgxDB{q: q}
}

// SQL runs the SDK's statements through database/sql: a *sql.DB, or your *sql.Tx to make them
// part of your transaction. Any PostgreSQL driver works for Queue and Admin; a Worker's LISTEN
// needs pgx's driver (github.com/jackc/pgx/v5/stdlib) or WorkerOptions.ListenURL, and polls
// otherwise.
func SQL(q SQLQuerier) DB {
	return sqlDB{q: q}
}

// rows is the part of pgx.Rows and *sql.Rows the SDK reads results through.
type rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

type pgxDB struct{ q PgxQuerier }

func (d pgxDB) query(ctx context.Context, sql string, args ...any) (rows, error) {
	r, err := d.q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (d pgxDB) asPool() workerPool {
	if p, ok := d.q.(*pgxpool.Pool); ok {
		return pgxPool{pool: p}
	}
	return nil
}

type sqlDB struct{ q SQLQuerier }

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

func (d sqlDB) query(ctx context.Context, sql string, args ...any) (rows, error) {
	r, err := d.q.QueryContext(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

func (d sqlDB) asPool() workerPool {
	if db, ok := d.q.(*sql.DB); ok {
		return sqlPool{sqldb: db}
	}
	return nil
}

// queryRow runs a statement that answers one row and scans it; no row is an error.
func queryRow(ctx context.Context, db DB, sql string, args []any, dest ...any) error {
	r, err := db.query(ctx, sql, args...)
	if err != nil {
		return fromDriverError(err)
	}
	defer r.Close()
	if !r.Next() {
		if err := r.Err(); err != nil {
			return fromDriverError(err)
		}
		return errNoRow
	}
	if err := r.Scan(dest...); err != nil {
		return err
	}
	r.Close()
	return fromDriverError(r.Err())
}

// queryAll runs a statement and calls scan for each row.
func queryAll(ctx context.Context, db DB, sql string, args []any, scan func(r rows) error) error {
	r, err := db.query(ctx, sql, args...)
	if err != nil {
		return fromDriverError(err)
	}
	defer r.Close()
	for r.Next() {
		if err := scan(r); err != nil {
			return err
		}
	}
	return fromDriverError(r.Err())
}

var errNoRow = errors.New("workhorse: the statement returned no row")

// status runs one of the owner functions that answer a single status word.
func status(ctx context.Context, db DB, sql string, args ...any) (string, error) {
	var s string
	err := queryRow(ctx, db, sql, args, &s)
	return s, err
}
