/**
 * What `npm pack` puts in the tarball (issue 16, item 2), read from `npm pack --dry-run --json`
 * in a copy of the checkout that has no dist/: prepack builds the package, every entry point
 * and the CLI are in it, the SQL is in it exactly once (byte for byte the files of sql/), the
 * LICENSE is, and nothing from the repository's tests, sample app, sources or tooling is. The
 * package's metadata points at one repository, so the README's relative links resolve on the
 * registry's page.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { copyCheckout, pack, ROOT, scratchDirectory, type Packed, type Scratch } from '../support/package';

interface Manifest {
  name: string;
  license: string;
  main: string;
  types: string;
  bin: Record<string, string>;
  exports: Record<string, string | { types: string; default: string }>;
  typesVersions: Record<string, Record<string, string[]>>;
  files: string[];
  scripts: Record<string, string>;
  repository: { type: string; url: string };
  homepage: string;
  bugs: { url: string };
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
}

const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Manifest;
const strip = (path: string) => path.replace(/^\.\//, '');

let scratch: Scratch;
let packed: Packed;
let paths: string[];

beforeAll(async () => {
  scratch = scratchDirectory('workhorse-pack');
  await copyCheckout(scratch.dir);
  packed = await pack(scratch.dir, { dryRun: true });
  paths = packed.files.map((file) => file.path).sort();
}, 360_000);

afterAll(() => {
  scratch?.remove();
});

describe('the tarball (npm pack --dry-run --json, from a checkout without dist/)', () => {
  it('holds the build that prepack made: every entry point, its declarations and the CLI', () => {
    expect(manifest.scripts.prepack).toBe('npm run build');
    const entryFiles = Object.values(manifest.exports).flatMap((target) =>
      typeof target === 'string' ? [target] : [target.types, target.default],
    );
    const required = [
      'package.json',
      'README.md',
      'LICENSE',
      manifest.main,
      manifest.types,
      ...Object.values(manifest.bin),
      ...entryFiles,
      'dist/lib/cli/main.js',
      // dist/lib/core/limits.js reads ../../sdk/protocol/limits.json.
      'dist/sdk/protocol/limits.json',
    ].map(strip);
    expect(required.filter((file) => !paths.includes(file))).toEqual([]);
  });

  it("ships the dashboard's assets where its built handler reads them", () => {
    const assets = readdirSync(join(ROOT, 'lib/dashboard/assets')).sort();
    expect(assets.length).toBeGreaterThan(0);
    expect(paths.filter((path) => path.startsWith('dist/lib/dashboard/assets/'))).toEqual(assets.map((name) => `dist/lib/dashboard/assets/${name}`));
  });

  it('ships the SQL exactly once, as the files of sql/ and sql/migrations/ byte for byte, where the compiled code reads it', () => {
    const sqlIn = (dir: string) => readdirSync(join(ROOT, dir)).filter((name) => name.endsWith('.sql')).sort();
    const sources = [...sqlIn('sql'), ...sqlIn('sql/migrations').map((name) => `migrations/${name}`)];
    expect(sources.length).toBeGreaterThan(0);
    expect(sources.filter((name) => name.startsWith('migrations/')).length).toBeGreaterThan(0);
    const shipped = packed.files.filter((file) => file.path.endsWith('.sql'));
    // dist/lib/core/schema.js reads ../../sql, that is dist/sql (and dist/sql/migrations).
    expect(shipped.map((file) => file.path).sort()).toEqual(sources.map((name) => `dist/sql/${name}`).sort());
    for (const file of shipped) {
      expect([file.path, file.size]).toEqual([file.path, statSync(join(ROOT, 'sql', file.path.slice('dist/sql/'.length))).size]);
    }
  });

  it('holds nothing but the build, the executable and the documents a package page shows', () => {
    const allowed =
      /^(package\.json|README\.md|LICENSE|bin\/workhorse\.js|dist\/lib\/.+\.(js|d\.ts)|dist\/lib\/dashboard\/assets\/[^/]+\.css|dist\/sql\/(migrations\/)?[^/]+\.sql|dist\/sdk\/protocol\/limits\.json)$/;
    expect(paths.filter((path) => !allowed.test(path))).toEqual([]);
    // Spelled out, the things that must never be in it.
    const forbidden = /^(lib|test|sample-app|docs|scripts|sql|\.ci|node_modules|dist\/test|dist\/sample-app)\/|\.tgz$|\.map$|\.tsbuildinfo$|^tsconfig|^jest\.config/;
    expect(paths.filter((path) => forbidden.test(path))).toEqual([]);
    // A stray large file would show here first: the whole package is about 1.9 MB unpacked
    // (1.2 MB of JavaScript and declarations, 0.65 MB of SQL, which grows by a migration step per
    // schema change).
    expect(packed.unpackedSize).toBeLessThan(2.5 * 1024 * 1024);
  });

  it('is MIT licensed, with the license text in the tarball', () => {
    expect(manifest.license).toBe('MIT');
    const license = readFileSync(join(ROOT, 'LICENSE'), 'utf8');
    expect(license.split('\n')[0]).toBe('MIT License');
    expect(license).toContain('Permission is hereby granted, free of charge');
  });

  it('names one repository for the source, the home page and the issues (relative README links resolve against it)', () => {
    const repository = /^git\+https:\/\/github\.com\/([\w.-]+\/[\w.-]+)\.git$/.exec(manifest.repository.url)?.[1];
    expect(repository).toBeDefined();
    expect(manifest.repository.type).toBe('git');
    expect(manifest.homepage).toBe(`https://github.com/${repository}#readme`);
    expect(manifest.bugs.url).toBe(`https://github.com/${repository}/issues`);
  });

  it('declares what its published declarations import: @types/pg is a dependency, not a dev dependency', () => {
    /** The packages the declarations under `dir` import (by their package name). */
    const importedBy = (dir: string) =>
      new Set(
        paths
          .filter((path) => path.startsWith(dir) && path.endsWith('.d.ts'))
          .flatMap((path) => [...readFileSync(join(scratch.dir, path), 'utf8').matchAll(/(?:from |import\()'([^'.][^']*)'/g)])
          .map((match) => match[1].split('/').slice(0, match[1].startsWith('@') ? 2 : 1).join('/'))
          .filter((name) => name !== manifest.name && !name.startsWith('node:')),
      );
    const all = importedBy('dist/lib/');
    expect(all.has('pg')).toBe(true);
    expect(manifest.dependencies['@types/pg']).toBeDefined();
    expect(manifest.devDependencies['@types/pg']).toBeUndefined();
    // Everything else they import is a dependency that ships its own types (@opentelemetry/api)
    // or a peer dependency: the application brings it, with its types. croner is a devDependency
    // (the tests' reference for the server's cron evaluator): nothing shipped imports it.
    expect(manifest.dependencies['@opentelemetry/api']).toBeDefined();
    expect(
      [...all].filter((name) => name !== 'pg' && manifest.dependencies[name] === undefined && manifest.peerDependencies[name] === undefined),
    ).toEqual([]);
    // The main entry points import only pg, OpenTelemetry's API, Nest and RxJS: an application
    // without an ORM or nestjs-cls installed gets no silent any from them (those live in their own
    // entry points).
    const main = new Set([...importedBy('dist/lib/core/'), ...importedBy('dist/lib/nest/'), ...importedBy('dist/lib/testing/')]);
    expect([...main].sort()).toEqual(['@nestjs/common', '@nestjs/core', '@opentelemetry/api', 'pg', 'rxjs']);
    expect(all.has('croner')).toBe(false);
    expect(manifest.dependencies.croner).toBeUndefined();
  });

  it('gives every subpath entry point types under moduleResolution node10 too (typesVersions)', () => {
    const subpaths = Object.keys(manifest.exports)
      .filter((key) => key !== '.' && key !== './package.json')
      .map(strip);
    const mapped = manifest.typesVersions['*'];
    for (const subpath of subpaths) {
      const target = manifest.exports[`./${subpath}`];
      expect([subpath, mapped[subpath]]).toEqual([subpath, [strip(typeof target === 'string' ? target : target.types)]]);
    }
  });

  it('is ignored by git when packed into the checkout', () => {
    expect(readFileSync(join(ROOT, '.gitignore'), 'utf8').split('\n')).toContain('*.tgz');
  });
});
