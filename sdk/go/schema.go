package workhorse

import (
	"context"
	"sync/atomic"
)

// SchemaVersion is the version of the workhorse schema this SDK speaks. It is the TypeScript
// package's SCHEMA_VERSION (lib/core/schema.ts); a test keeps the two equal.
const SchemaVersion = 4

// SchemaStatus is what GetSchemaStatus reads.
type SchemaStatus struct {
	// Installed is the version in the database, 0 when the schema is absent.
	Installed int
	// Expected is SchemaVersion.
	Expected int
}

// UpToDate reports whether the installed schema is the one this SDK speaks.
func (s SchemaStatus) UpToDate() bool { return s.Installed == s.Expected }

// GetSchemaStatus reads the installed schema version; it never writes.
func GetSchemaStatus(ctx context.Context, db DB) (SchemaStatus, error) {
	status := SchemaStatus{Expected: SchemaVersion}
	var present bool
	if err := queryRow(ctx, db, "SELECT to_regclass('workhorse.schema_version') IS NOT NULL", nil, &present); err != nil {
		return status, err
	}
	if !present {
		return status, nil
	}
	var version int64
	err := queryRow(ctx, db, "SELECT version FROM workhorse.schema_version", nil, &version)
	if err == errNoRow {
		return status, nil
	}
	status.Installed = int(version)
	return status, err
}

// VerifySchema returns a *SchemaNotInstalledError or *SchemaVersionMismatchError (each says
// what to do) unless the database holds the schema version this SDK speaks.
func VerifySchema(ctx context.Context, db DB) error {
	status, err := GetSchemaStatus(ctx, db)
	if err != nil {
		return err
	}
	if status.Installed == 0 {
		return &SchemaNotInstalledError{Expected: SchemaVersion}
	}
	if !status.UpToDate() {
		return &SchemaVersionMismatchError{Installed: status.Installed, Expected: SchemaVersion}
	}
	return nil
}

// schemaGate verifies the schema before a client's first call and remembers a success, so a
// database of another version is refused with a clear message instead of a missing-function
// error, at the cost of one check per client (shared by the clients With derives).
type schemaGate struct{ verified atomic.Bool }

func (g *schemaGate) check(ctx context.Context, db DB) error {
	if g.verified.Load() {
		return nil
	}
	if err := VerifySchema(ctx, db); err != nil {
		return err
	}
	g.verified.Store(true)
	return nil
}
