package workhorse

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
)

// installedSchema is the installed schema, as far as a client must know it.
type installedSchema struct {
	// version is workhorse.schema_version.version, 0 when the schema is absent (or its row is).
	version int
	// oldestClient is workhorse.oldest_client_v1() (schema version 6 on): the oldest client
	// release, by the schema version it ships, whose calls this schema serves. Nil before
	// version 6, or when this role may not call it.
	oldestClient *int
}

// worksWith reports whether a package that ships expected and needs at least minimum works with
// the schema: not older than minimum, and not newer than expected unless it still serves
// expected (its oldest client is at most expected).
func (s installedSchema) worksWith(expected, minimum int) bool {
	if s.version == 0 || s.version < minimum {
		return false
	}
	return s.version <= expected || (s.oldestClient != nil && *s.oldestClient <= expected)
}

// rowScanner reads the first row of a statement into dest; found is false when there is none.
type rowScanner func(ctx context.Context, sql string, dest ...any) (found bool, err error)

// readInstalledSchema is the one reader of the installed schema every client, the worker and
// the migrator share (over a DB or a pgx connection).
func readInstalledSchema(ctx context.Context, scan rowScanner) (installedSchema, error) {
	var present bool
	if _, err := scan(ctx, hasSchemaSQL, &present); err != nil || !present {
		return installedSchema{}, err
	}
	var version int64
	var callable sql.NullBool
	found, err := scan(ctx, schemaRowSQL, &version, &callable)
	if err != nil || !found {
		return installedSchema{}, err
	}
	installed := installedSchema{version: int(version)}
	if callable.Valid && callable.Bool {
		var oldest sql.NullInt64
		if _, err := scan(ctx, oldestClientSQL, &oldest); err != nil {
			return installedSchema{}, err
		}
		if oldest.Valid {
			value := int(oldest.Int64)
			installed.oldestClient = &value
		}
	}
	return installed, nil
}

// dbRows scans through a client's DB.
func dbRows(db DB) rowScanner {
	return func(ctx context.Context, sql string, dest ...any) (bool, error) {
		err := queryRow(ctx, db, sql, nil, dest...)
		if err == errNoRow {
			return false, nil
		}
		return err == nil, err
	}
}

// connRows scans through the migrator's connection or transaction.
func connRows(q querier) rowScanner {
	return func(ctx context.Context, sql string, dest ...any) (bool, error) {
		err := q.QueryRow(ctx, sql).Scan(dest...)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
}
