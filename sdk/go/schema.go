package workhorse

import (
	"context"
	"sync/atomic"
)

// SchemaVersion is the version of the workhorse schema this SDK installs and migrates to: the
// highest step in its embedded sql/migrations/ (a test keeps the two equal).
const SchemaVersion = 20

// MinSchemaVersion is the oldest schema version whose functions every call of this SDK still
// finds, so a database not yet migrated keeps serving this release during a rolling deploy.
// The clients accept MinSchemaVersion through SchemaVersion, and a newer schema that still
// serves this release (see SchemaStatus.Compatible). (20: job reads carry the concurrency key of
// step 20; Admin's operator actions on jobs call the functions of step 19; the wait for a result
// and the deduplicating enqueue those of steps 18 and 17.)
const MinSchemaVersion = 20

// SchemaSituation names how the installed schema compares with this SDK's.
type SchemaSituation string

const (
	SchemaUpToDate     SchemaSituation = "up-to-date"
	SchemaNotInstalled SchemaSituation = "not-installed"
	SchemaOlder        SchemaSituation = "older"
	SchemaNewer        SchemaSituation = "newer"
)

// PendingStep is a migration step the database has not had yet.
type PendingStep struct {
	// Version is the version the step leads to (from Version-1).
	Version int `json:"version"`
	// Name is the step file's slug: migration_log for 0005_migration_log.sql.
	Name string `json:"name"`
	// Transactional is false for a step marked `-- workhorse:no-transaction`, which runs
	// statement by statement outside a transaction and is resumable.
	Transactional bool `json:"transactional"`
}

// SchemaStatus is what GetSchemaStatus reads.
type SchemaStatus struct {
	// Installed is the version in the database, 0 when the schema is absent.
	Installed int
	// Expected is SchemaVersion.
	Expected int
	// Minimum is MinSchemaVersion, the oldest version this SDK's clients work with.
	Minimum int
	// OldestClient is workhorse.oldest_client_v1() (schema version 6 on): the oldest client
	// release, by the schema version it ships, that the installed schema still serves. Nil when
	// the schema is absent, older than version 6, or this role may not call it.
	OldestClient *int
	// Compatible says whether this SDK's clients and workers work with the installed schema: a
	// version from Minimum to Expected, or a newer one that still serves this release
	// (OldestClient <= Expected).
	Compatible bool
	// Pending lists the steps InstallSchema would apply, in order (none for an absent or newer schema).
	Pending []PendingStep
}

// UpToDate reports whether the installed schema is the one this SDK installs.
func (s SchemaStatus) UpToDate() bool { return s.Installed == s.Expected }

// Situation says whether the schema is up to date, absent, older or newer than this SDK's.
func (s SchemaStatus) Situation() SchemaSituation {
	switch {
	case s.Installed == 0:
		return SchemaNotInstalled
	case s.Installed == s.Expected:
		return SchemaUpToDate
	case s.Installed < s.Expected:
		return SchemaOlder
	default:
		return SchemaNewer
	}
}

// GetSchemaStatus reads the installed schema version and lists the steps InstallSchema would
// apply; it never writes.
//
//	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(pool))
//	if err == nil && status.Situation() == workhorse.SchemaOlder {
//		log.Printf("pending steps: %v", status.Pending)
//	}
func GetSchemaStatus(ctx context.Context, db DB) (SchemaStatus, error) {
	status := SchemaStatus{Expected: SchemaVersion, Minimum: MinSchemaVersion, Pending: []PendingStep{}}
	installed, err := readInstalledSchema(ctx, dbRows(db))
	if err != nil {
		return status, err
	}
	status.Installed, status.OldestClient = installed.version, installed.oldestClient
	status.Compatible = installed.worksWith(SchemaVersion, MinSchemaVersion)
	// Older than the baseline, no step leads from there (InstallSchema refuses it).
	if status.Situation() == SchemaOlder && status.Installed >= baselineVersion {
		files, err := loadSchemaFiles(embeddedSchema())
		if err != nil {
			return status, err
		}
		for _, step := range files.pending(status.Installed) {
			status.Pending = append(status.Pending, PendingStep{Version: step.version, Name: step.name, Transactional: step.transactional()})
		}
	}
	return status, nil
}

// VerifySchema returns a *SchemaNotInstalledError or *SchemaVersionMismatchError (each says
// what to do) unless the database holds a schema this SDK works with: MinSchemaVersion through
// SchemaVersion, or a newer one that still serves this release (workhorse.oldest_client_v1()
// at most SchemaVersion).
func VerifySchema(ctx context.Context, db DB) error {
	status, err := GetSchemaStatus(ctx, db)
	if err != nil {
		return err
	}
	if status.Installed == 0 {
		return &SchemaNotInstalledError{Expected: SchemaVersion}
	}
	if !status.Compatible {
		return &SchemaVersionMismatchError{Installed: status.Installed, Expected: SchemaVersion, Minimum: MinSchemaVersion}
	}
	return nil
}

// schemaGate verifies the schema before a client's first call and remembers a success, so a
// database of another version is refused with a clear message instead of a missing-function
// error, at the cost of one check per client (shared by the clients With derives).
type schemaGate struct {
	verified atomic.Bool
}

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
