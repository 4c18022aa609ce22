// The grant of a role's capabilities (`grantRole`): install-time SQL run by the schema owner.

/** Sets what GRANT_ROLE_SQL reads, for the transaction: role, capabilities (comma-separated). */
export const SET_GRANT_SETTINGS = "SELECT set_config('workhorse.grant_role', $1, true), set_config('workhorse.grant_capabilities', $2, true)";

/**
 * The grants of one role, as one `DO` block that reads the role's name from the setting
 * `workhorse.grant_role` and its capabilities (comma-separated) from
 * `workhorse.grant_capabilities`. `docs/least-privilege.sql` holds the same block for psql users;
 * a test keeps the two identical.
 *
 * The role gets CONNECT on the database (when the granting role may grant it), USAGE on the
 * schema (never CREATE), SELECT on
 * `schema_version` (clients check the version before they start), and EXECUTE on the protocol
 * functions of its capabilities. It gets no privilege on any other table or sequence (any it held
 * is revoked): the protocol functions run with the schema owner's rights, and they are the only
 * door. Grants add up: granting `worker` to a role that holds `producer` leaves it both.
 */
export const GRANT_ROLE_SQL = `DO $grants$
DECLARE
  v_role text := current_setting('workhorse.grant_role', true);
  v_capabilities text[] := string_to_array(current_setting('workhorse.grant_capabilities', true), ',');
  v_function regprocedure;
BEGIN
  IF v_role IS NULL OR v_role = '' THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'set workhorse.grant_role to the name of the role first';
  END IF;
  IF cardinality(v_capabilities) IS DISTINCT FROM cardinality(ARRAY(SELECT DISTINCT c FROM unnest(v_capabilities) AS c))
     OR coalesce(cardinality(v_capabilities), 0) = 0
     OR NOT v_capabilities <@ ARRAY['producer', 'worker', 'operator'] THEN
    RAISE EXCEPTION USING ERRCODE = '22023',
      MESSAGE = 'set workhorse.grant_capabilities to one or more of producer, worker, operator (comma-separated)';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = v_role) THEN
    RAISE EXCEPTION USING ERRCODE = '42704', MESSAGE = format('role %I does not exist', v_role);
  END IF;
  IF to_regnamespace('workhorse') IS NULL THEN
    RAISE EXCEPTION USING ERRCODE = '3F000',
      MESSAGE = 'schema workhorse does not exist: install it first (npx workhorse schema install)';
  END IF;

  -- CONNECT only when this role may grant it (the database's owner, a superuser, or a role given
  -- it WITH GRANT OPTION); otherwise whoever set up the database grants it.
  IF has_database_privilege(current_database(), 'CONNECT WITH GRANT OPTION') THEN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), v_role);
  END IF;
  EXECUTE format('GRANT USAGE ON SCHEMA workhorse TO %I', v_role);
  -- The protocol functions run with the owner's rights: no table or sequence privilege is needed.
  EXECUTE format('REVOKE ALL ON ALL TABLES IN SCHEMA workhorse FROM %I', v_role);
  EXECUTE format('REVOKE ALL ON ALL SEQUENCES IN SCHEMA workhorse FROM %I', v_role);
  EXECUTE format('GRANT SELECT ON TABLE workhorse.schema_version TO %I', v_role);

  FOR v_function IN
    SELECT p.oid::regprocedure
    FROM pg_catalog.pg_proc p
    JOIN workhorse.protocol_function f ON f.name = p.proname
    WHERE p.pronamespace = 'workhorse'::regnamespace AND f.capabilities && v_capabilities
  LOOP
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_function, v_role);
  END LOOP;
  -- Recorded (schema version 6 on), so a migration step that adds a protocol function grants it
  -- to this role too.
  IF to_regclass('workhorse.role_capability') IS NOT NULL THEN
    INSERT INTO workhorse.role_capability (role_oid, capability)
    SELECT r.oid, c FROM pg_catalog.pg_roles r, unnest(v_capabilities) AS c WHERE r.rolname = v_role
    ON CONFLICT DO NOTHING;
  END IF;
END
$grants$;`;
