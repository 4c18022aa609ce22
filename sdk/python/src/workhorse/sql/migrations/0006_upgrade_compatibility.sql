-- Step 5 -> 6: what lets later upgrades roll without a second manual step.
-- * workhorse.oldest_client_v1(): the oldest client release (named by the schema version it
--   ships) whose calls this schema serves. Clients of this release on accept a newer schema when
--   it is <= their own version, so a process of the previous release can still start after the
--   migration. This step keeps every function: 4. (A function, not a column of schema_version:
--   application roles may read that table, and one holding a read open would stall an ALTER.)
-- * workhorse.role_capability and workhorse.regrant_capabilities(): grantRole records the
--   capabilities it grants, and a later step that adds a protocol function grants it to the
--   roles that hold its capability (as this step does for oldest_client_v1). The roles granted
--   before this step are recorded from the grants they hold: a role holds a capability when it
--   may execute every protocol function of that capability.
-- Locks: none of an existing table (new objects, and a read of the catalog).
CREATE TABLE workhorse.role_capability (
  role_oid oid NOT NULL,
  capability text NOT NULL CHECK (capability IN ('producer', 'worker', 'operator')),
  granted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (role_oid, capability)
);

INSERT INTO workhorse.role_capability (role_oid, capability)
SELECT r.oid, c.capability
FROM pg_catalog.pg_roles r
CROSS JOIN (VALUES ('producer'), ('worker'), ('operator')) AS c (capability)
WHERE NOT r.rolsuper
  AND r.rolname !~ '^pg_'
  AND r.oid <> (SELECT n.nspowner FROM pg_catalog.pg_namespace n WHERE n.nspname = 'workhorse')
  AND NOT EXISTS (
    SELECT 1
    FROM workhorse.protocol_function f
    JOIN pg_catalog.pg_proc p ON p.proname = f.name AND p.pronamespace = 'workhorse'::regnamespace
    WHERE c.capability = ANY (f.capabilities)
      AND NOT pg_catalog.has_function_privilege(r.oid, p.oid, 'EXECUTE'));

CREATE FUNCTION workhorse.regrant_capabilities() RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
  v_grant record;
  v_count integer := 0;
BEGIN
  FOR v_grant IN
    SELECT DISTINCT r.rolname, p.oid::regprocedure AS function
    FROM workhorse.role_capability rc
    JOIN pg_catalog.pg_roles r ON r.oid = rc.role_oid
    JOIN workhorse.protocol_function f ON rc.capability = ANY (f.capabilities)
    JOIN pg_catalog.pg_proc p ON p.proname = f.name AND p.pronamespace = 'workhorse'::regnamespace
    WHERE NOT pg_catalog.has_function_privilege(r.oid, p.oid, 'EXECUTE')
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_grant.function, v_grant.rolname);
    v_count := v_count + 1;
  END LOOP;
  RETURN v_count;
END
$$;
REVOKE ALL ON FUNCTION workhorse.regrant_capabilities() FROM PUBLIC;

CREATE FUNCTION workhorse.oldest_client_v1() RETURNS integer
LANGUAGE plpgsql STABLE AS $$ BEGIN RETURN 4; END $$;
REVOKE ALL ON FUNCTION workhorse.oldest_client_v1() FROM PUBLIC;
ALTER FUNCTION workhorse.oldest_client_v1() SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
INSERT INTO workhorse.protocol_function (name, capabilities) VALUES ('oldest_client_v1', '{producer,worker,operator}');
SELECT workhorse.regrant_capabilities();
