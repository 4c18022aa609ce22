package workhorse

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// sqlFiles is the SQL this module ships: sql/ is a copy of the repository's sql/ tree made by
// scripts/copy-sdk-sql.js (a test keeps the two identical), so a Go-only install needs no
// checkout. Its top-level files are the current full schema, run in name order by a fresh
// install; migrations/NNNN_<slug>.sql is the step from version NNNN-1 to NNNN.
//
//go:embed sql
var sqlFiles embed.FS

// baselineVersion is the release before migrations existed: the oldest version a step starts from.
const baselineVersion = 4

// noTransactionMarker, as a step's first line, makes it run statement by statement outside a
// transaction (for CREATE INDEX CONCURRENTLY); such a step is idempotent.
const noTransactionMarker = "-- workhorse:no-transaction"

var stepName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.sql$`)

// schemaStep takes the schema from version-1 to version.
type schemaStep struct {
	version int
	// name is the file's slug, as the migration log records it.
	name string
	sql  string
}

func (s schemaStep) file() string { return fmt.Sprintf("%04d_%s.sql", s.version, s.name) }

func (s schemaStep) transactional() bool {
	first, _, _ := strings.Cut(s.sql, "\n")
	return strings.TrimRight(first, " \t\r") != noTransactionMarker
}

type schemaFiles struct {
	// full holds the full schema's files' texts, in name order.
	full []string
	// steps run from baselineVersion+1 to the target, without gaps.
	steps []schemaStep
}

// target is the version the full schema installs and the last step reaches.
func (f schemaFiles) target() int {
	if len(f.steps) == 0 {
		return baselineVersion
	}
	return f.steps[len(f.steps)-1].version
}

func (f schemaFiles) pending(installed int) []schemaStep {
	var steps []schemaStep
	for _, s := range f.steps {
		if s.version > installed {
			steps = append(steps, s)
		}
	}
	return steps
}

// loadSchemaFiles reads the SQL from fsys, whose root holds what sql/ holds.
func loadSchemaFiles(fsys fs.FS) (schemaFiles, error) {
	var files schemaFiles
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return files, err
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		text, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return files, err
		}
		files.full = append(files.full, string(text))
	}
	if len(files.full) == 0 {
		return files, &SchemaMigrationError{Reason: "the workhorse module ships no .sql files: reinstall it"}
	}
	steps, err := fs.ReadDir(fsys, "migrations")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return files, err
	}
	for _, e := range steps {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		m := stepName.FindStringSubmatch(e.Name())
		if m == nil {
			return files, &SchemaMigrationError{Reason: "migrations/" + e.Name() + ": a migration step is named NNNN_<slug>.sql"}
		}
		text, err := fs.ReadFile(fsys, path.Join("migrations", e.Name()))
		if err != nil {
			return files, err
		}
		version, _ := strconv.Atoi(m[1])
		files.steps = append(files.steps, schemaStep{version: version, name: m[2], sql: string(text)})
	}
	sort.Slice(files.steps, func(i, j int) bool { return files.steps[i].version < files.steps[j].version })
	for i, s := range files.steps {
		if want := baselineVersion + 1 + i; s.version != want {
			return files, &SchemaMigrationError{Reason: fmt.Sprintf("the module's migration steps skip version %d (found %d next): reinstall it", want, s.version), Version: want}
		}
	}
	return files, nil
}

// embeddedSchema is the SQL of this module, without its sql/ prefix.
func embeddedSchema() fs.FS {
	sub, err := fs.Sub(sqlFiles, "sql")
	if err != nil {
		panic(err) // sql/ is embedded at build time
	}
	return sub
}
