/**
 * Login roles for privilege tests: create one with a random name and password, connect as it,
 * and drop every role a file made once its databases are gone (roles are cluster-wide; the
 * privileges they held inside a dropped database went with it).
 */
import { randomBytes } from 'node:crypto';
import { Client, Pool, type DatabaseError } from 'pg';
import { withAdminClient } from './db';

export interface LoginRole {
  name: string;
  /** `databaseUrl` with this role's name and password. */
  url: string;
}

/** Makes login roles and forgets none of them. */
export class LoginRoles {
  private readonly names: string[] = [];

  /** A new ordinary login role (no superuser, no CREATEROLE), with a URL on `databaseUrl`. */
  async create(databaseUrl: string, prefix = 'wh_app'): Promise<LoginRole> {
    const name = `${prefix}_${randomBytes(6).toString('hex')}`;
    const password = randomBytes(12).toString('hex');
    await withAdminClient((client) =>
      client.query(`CREATE ROLE ${client.escapeIdentifier(name)} LOGIN PASSWORD ${client.escapeLiteral(password)}`),
    );
    this.names.push(name);
    const url = new URL(databaseUrl);
    url.username = name;
    url.password = password;
    return { name, url: url.toString() };
  }

  /** Drops every role made so far; call it after the databases they were granted on are dropped. */
  async dropAll(): Promise<void> {
    for (const name of this.names.splice(0)) {
      await withAdminClient((client) => client.query(`DROP ROLE IF EXISTS ${client.escapeIdentifier(name)}`));
    }
  }
}

/** A pool on `url` whose idle-connection errors do not crash the test process. */
export function poolFor(url: string, max = 10): Pool {
  const pool = new Pool({ connectionString: url, max });
  pool.on('error', () => undefined);
  return pool;
}

/**
 * A connected client on `url`, for statements meant to fail: a pool replaces the connection of
 * every failed query with a new login.
 */
export async function clientFor(url: string): Promise<Client> {
  const client = new Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Resolves with the SQLSTATE the statement failed with (fails the test if it succeeded). */
export async function sqlstateOf(client: Client, text: string, values: unknown[] = []): Promise<string> {
  try {
    await client.query(text, values);
  } catch (error) {
    return (error as DatabaseError).code ?? `no code: ${String(error)}`;
  }
  throw new Error(`expected "${text}" to fail, but it succeeded`);
}
