package workhorse

import (
	"context"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
)

// For the external tests: the embedded SQL, and InstallSchema from another folder laid out
// like it (steps the shipped SQL does not have yet).
var EmbeddedSchema = embeddedSchema

func InstallSchemaFrom(ctx context.Context, pool *pgxpool.Pool, fsys fs.FS) (MigrationResult, error) {
	return installSchemaFrom(ctx, pool, fsys)
}

var SplitStatements = splitStatements
