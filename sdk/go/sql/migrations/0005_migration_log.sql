-- Step 4 -> 5: the migration log. One row per applied step (and one 'install' row for a fresh
-- install), written by the migrator in the step's own transaction; workhorse.schema_version
-- stays the single source of the installed version. Owned by the schema owner; no grants.
CREATE TABLE workhorse.schema_migration (
  version integer PRIMARY KEY,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  applied_by name NOT NULL DEFAULT session_user
);
