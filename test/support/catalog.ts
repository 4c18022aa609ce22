/**
 * The catalog of the `workhorse` schema as comparable text: one line per object with everything
 * that makes it what it is (never an oid, never row data), so two databases that should hold
 * the same schema (a fresh install and an upgrade) compare with one `toEqual`, and a difference
 * reads as a diff of the objects that differ.
 */
import type { Pool, PoolClient } from 'pg';

const CATALOG_SQL = `
WITH ns AS (SELECT oid FROM pg_namespace WHERE nspname = 'workhorse')
SELECT line FROM (
  SELECT 'schema workhorse owner=' || pg_get_userbyid(n.nspowner) || ' acl=' || coalesce(n.nspacl::text, '-') AS line
  FROM pg_namespace n WHERE n.nspname = 'workhorse'
  UNION ALL
  -- Tables, partitions, sequences, views, indexes (as relations), composite types.
  SELECT format('relation %s kind=%s owner=%s acl=%s persistence=%s rls=%s options=%s parent=%s bound=%s partkey=%s',
                c.relname, c.relkind, pg_get_userbyid(c.relowner), coalesce(c.relacl::text, '-'), c.relpersistence,
                c.relrowsecurity, coalesce(c.reloptions::text, '-'),
                coalesce((SELECT string_agg(i.inhparent::regclass::text, ',') FROM pg_inherits i WHERE i.inhrelid = c.oid), '-'),
                coalesce(pg_get_expr(c.relpartbound, c.oid), '-'),
                CASE WHEN c.relkind = 'p' THEN pg_get_partkeydef(c.oid) ELSE '-' END)
  FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns)
  UNION ALL
  -- Columns in their order (dropped ones skipped), with type, nullability, default, identity, grants.
  SELECT format('column %s.%s #%s type=%s notnull=%s default=%s identity=%s generated=%s collation=%s acl=%s',
                c.relname, a.attname,
                row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum),
                format_type(a.atttypid, a.atttypmod), a.attnotnull,
                coalesce(pg_get_expr(d.adbin, d.adrelid), '-'), a.attidentity, a.attgenerated,
                coalesce((SELECT collname FROM pg_collation WHERE oid = a.attcollation AND a.attcollation <> 0), '-'),
                coalesce(a.attacl::text, '-'))
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
  WHERE c.relnamespace IN (SELECT oid FROM ns) AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
  UNION ALL
  SELECT format('index %s valid=%s %s', ci.relname, x.indisvalid, pg_get_indexdef(x.indexrelid))
  FROM pg_index x JOIN pg_class ci ON ci.oid = x.indexrelid
  WHERE ci.relnamespace IN (SELECT oid FROM ns)
  UNION ALL
  SELECT format('constraint %s on %s: %s deferrable=%s deferred=%s validated=%s',
                co.conname, coalesce(co.conrelid::regclass::text, co.contypid::regtype::text), pg_get_constraintdef(co.oid),
                co.condeferrable, co.condeferred, co.convalidated)
  FROM pg_constraint co WHERE co.connamespace IN (SELECT oid FROM ns)
  UNION ALL
  -- Functions with their whole definition (language, volatility, SECURITY DEFINER, search_path, body).
  SELECT format('function %s owner=%s acl=%s%s', p.oid::regprocedure, pg_get_userbyid(p.proowner), coalesce(p.proacl::text, '-'),
                E'\\n' || CASE WHEN p.prokind IN ('a', 'w') THEN '(aggregate)' ELSE pg_get_functiondef(p.oid) END)
  FROM pg_proc p WHERE p.pronamespace IN (SELECT oid FROM ns)
  UNION ALL
  SELECT format('sequence %s type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s owned_by=%s',
                s.seqrelid::regclass, s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle,
                coalesce((SELECT d.refobjid::regclass::text || '.' || a.attname FROM pg_depend d
                          JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
                          WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid AND d.deptype IN ('a', 'i')), '-'))
  FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid WHERE c.relnamespace IN (SELECT oid FROM ns)
  UNION ALL
  SELECT format('trigger %s enabled=%s %s', t.tgname, t.tgenabled, pg_get_triggerdef(t.oid))
  FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  WHERE c.relnamespace IN (SELECT oid FROM ns) AND NOT t.tgisinternal
  UNION ALL
  SELECT format('view %s: %s', c.relname, pg_get_viewdef(c.oid))
  FROM pg_class c WHERE c.relnamespace IN (SELECT oid FROM ns) AND c.relkind IN ('v', 'm')
  UNION ALL
  SELECT format('type %s kind=%s owner=%s acl=%s labels=%s', t.typname, t.typtype, pg_get_userbyid(t.typowner), coalesce(t.typacl::text, '-'),
                coalesce((SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid), '-'))
  FROM pg_type t
  WHERE t.typnamespace IN (SELECT oid FROM ns) AND t.typtype IN ('e', 'd', 'r', 'm')
  UNION ALL
  SELECT format('policy %s on %s: %s using %s check %s', pol.polname, pol.polrelid::regclass, pol.polcmd,
                coalesce(pg_get_expr(pol.polqual, pol.polrelid), '-'), coalesce(pg_get_expr(pol.polwithcheck, pol.polrelid), '-'))
  FROM pg_policy pol JOIN pg_class c ON c.oid = pol.polrelid WHERE c.relnamespace IN (SELECT oid FROM ns)
  UNION ALL
  -- The capability of each protocol function: the grants are made from these rows.
  SELECT format('protocol_function %s capabilities=%s', f.name, f.capabilities) FROM workhorse.protocol_function f
) catalog
ORDER BY line`;

/**
 * Every object of the `workhorse` schema, one line each, sorted: the schema (owner, grants),
 * relations (kind, owner, grants, partition parent and bound, partition key), columns (order,
 * type, nullability, default), indexes (definitions, validity), constraints, functions (owner,
 * grants, pg_get_functiondef), sequences, triggers, views, types, row-level policies, and the rows
 * of `protocol_function` (which capability may call which function: configuration, not data).
 */
export async function workhorseCatalog(db: Pool | PoolClient): Promise<string[]> {
  const { rows } = await db.query<{ line: string }>(CATALOG_SQL);
  return rows.map((row) => row.line);
}
