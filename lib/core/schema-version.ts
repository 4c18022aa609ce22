/**
 * The schema version this package ships. It changes whenever `sql/` changes in a way an
 * installed database must see; during 0.x there is no migration between versions.
 */
export const SCHEMA_VERSION = 1;
