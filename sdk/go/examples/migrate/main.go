// Migrate: install the workhorse schema, or upgrade it to this SDK's version, before workers start.
package main

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	workhorse "github.com/stablemates/nestjs-workhorse/sdk/go"
)

func main() {
	ctx := context.Background()
	// As the role that owns the schema, once per deploy.
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// Installs into an empty database, or applies the pending steps; never downgrades.
	result, err := workhorse.InstallSchema(ctx, pool)
	if err != nil {
		log.Fatal(err)
	}
	status, err := workhorse.GetSchemaStatus(ctx, workhorse.Pgx(pool))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("schema %s, steps applied now: %v\n", status.Situation(), result.Applied)
}
