-- Step 4 -> 5: the migration log. One row per step an upgrade applied (a fresh install writes one
-- row, `install`, for the version it created). `workhorse.schema_version` stays the one place
-- that says which version is installed; this table says how it got there. Application roles get
-- nothing on it (grantRole revokes every table privilege but SELECT on schema_version).
-- Locks: creates a new table; touches no existing one.
CREATE TABLE workhorse.schema_migration (
  version integer PRIMARY KEY,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  applied_by name NOT NULL DEFAULT session_user
);
