package workhorse

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// workerPool is what a Worker needs of its pool besides running statements: connections of its
// own, for heartbeats (so busy handlers holding pool connections cannot starve lease renewal)
// and for LISTEN (which needs one session for as long as it listens).
type workerPool interface {
	db() DB
	// connect opens a connection of the worker's own; close it with ownConn.close.
	connect(ctx context.Context) (ownConn, error)
	// listen runs f on a pgx connection of its own and closes (or discards) it afterwards, or
	// answers errListenUnsupported.
	listen(ctx context.Context, f func(*pgx.Conn) error) error
	// begin opens a transaction on one of the pool's connections (a transactional handler's).
	begin(ctx context.Context) (*HandlerTx, error)
}

// ownConn is a connection a worker opened for itself.
type ownConn interface {
	DB
	close()
}

var errListenUnsupported = errors.New("LISTEN needs pgx's database/sql driver (github.com/jackc/pgx/v5/stdlib) or WorkerOptions.ListenURL; the worker polls instead")

type pgxPool struct{ pool *pgxpool.Pool }

func (p pgxPool) db() DB { return pgxDB{q: p.pool} }

type pgxConn struct{ conn *pgx.Conn }

func (c pgxConn) query(ctx context.Context, sql string, args ...any) (rows, error) {
	return pgxDB{q: c.conn}.query(ctx, sql, args...)
}
func (c pgxConn) asPool() workerPool { return nil }
func (c pgxConn) close()             { _ = c.conn.Close(context.Background()) }

func (p pgxPool) connect(ctx context.Context) (ownConn, error) {
	conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	return pgxConn{conn: conn}, nil
}

func (p pgxPool) listen(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := pgx.ConnectConfig(ctx, p.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}

func (p pgxPool) begin(ctx context.Context) (*HandlerTx, error) {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &HandlerTx{pgx: tx}, nil
}

type sqlPool struct{ sqldb *sql.DB }

func (p sqlPool) begin(ctx context.Context) (*HandlerTx, error) {
	tx, err := p.sqldb.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return &HandlerTx{sql: tx}, nil
}

func (p sqlPool) db() DB { return sqlDB{q: p.sqldb} }

type sqlConn struct{ conn *sql.Conn }

func (c sqlConn) query(ctx context.Context, sql string, args ...any) (rows, error) {
	return sqlDB{q: c.conn}.query(ctx, sql, args...)
}
func (c sqlConn) asPool() workerPool { return nil }
func (c sqlConn) close()             { _ = c.conn.Close() }

func (p sqlPool) connect(ctx context.Context) (ownConn, error) {
	conn, err := p.sqldb.Conn(ctx)
	if err != nil {
		return nil, err
	}
	return sqlConn{conn: conn}, nil
}

// pgxDriverConn is what pgx's database/sql driver connection (*stdlib.Conn) offers.
type pgxDriverConn interface{ Conn() *pgx.Conn }

func (p sqlPool) listen(ctx context.Context, f func(*pgx.Conn) error) error {
	conn, err := p.sqldb.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var listenErr error
	err = conn.Raw(func(driverConn any) error {
		c, ok := driverConn.(pgxDriverConn)
		if !ok {
			return errListenUnsupported
		}
		listenErr = f(c.Conn())
		// The session LISTENed: database/sql must discard it (driver.ErrBadConn), never reuse it.
		return driver.ErrBadConn
	})
	if errors.Is(err, errListenUnsupported) {
		return err
	}
	return listenErr
}

// listenURL runs f on a connection to WorkerOptions.ListenURL (a direct server connection, for
// pools behind a transaction-pooling PgBouncer).
func listenURL(ctx context.Context, url string, f func(*pgx.Conn) error) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return f(conn)
}
