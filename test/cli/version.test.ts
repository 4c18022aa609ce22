/**
 * `workhorse --version`: the version of the installed package, on any command line, without a
 * database, in-process and through `bin/workhorse.js` as a real process; and finding the
 * package's manifest from the built layout (`dist/lib/cli/`) as well as from the sources.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { packageVersion } from '../../lib/core/package-version';
import { cli, errorOf } from './cli-harness';

const ROOT = resolve(__dirname, '..', '..');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

it.each([[['--version']], [['jobs', 'list', '--version']], [['--version', 'schema', 'status', '--database-url', 'postgres://unused@127.0.0.1:1/x']]])(
  'workhorse %j prints the package version and exits 0, without a database',
  async (args) => {
    expect(await cli(args, {})).toEqual({ code: 0, stdout: `${VERSION}\n`, stderr: '' });
  },
);

it('--version --json prints one JSON document', async () => {
  const run = await cli(['--json', '--version'], {});
  expect(run).toMatchObject({ code: 0, stderr: '' });
  expect(JSON.parse(run.stdout)).toEqual({ version: VERSION });
});

it('help wins over --version, and --version takes no value', async () => {
  expect((await cli(['--version', '--help'], {})).stdout).toMatch(/^Usage: workhorse <command> \[options\]\n[\s\S]*\n {2}--version +Print the version/);
  expect(errorOf(await cli(['--version=1'], {}), 2)).toBe('workhorse: option --version takes no value. Run `workhorse --help` for usage.');
});

it('`node bin/workhorse.js --version` prints it as a real process', async () => {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [join(ROOT, 'bin', 'workhorse.js'), '--version'], {
    env: { PATH: process.env.PATH },
  });
  expect({ stdout, stderr }).toEqual({ stdout: `${VERSION}\n`, stderr: '' });
});

describe('packageVersion', () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'workhorse-version-'));
    // An installed package: its manifest at the top, the compiled CLI three levels down, and a
    // manifest of another package in between that must not be taken for ours.
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'nestjs-workhorse', version: '9.8.7' }));
    mkdirSync(join(dir, 'dist', 'lib', 'cli'), { recursive: true });
    writeFileSync(join(dir, 'dist', 'package.json'), JSON.stringify({ name: 'something-else', version: '1.0.0' }));
  });

  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("finds nestjs-workhorse's manifest above the built CLI, skipping other packages' manifests", () => {
    expect(packageVersion(join(dir, 'dist', 'lib', 'cli'))).toBe('9.8.7');
  });

  it('reads the checkout it runs from by default', () => {
    expect(packageVersion()).toBe(VERSION);
  });

  it('says so when there is no manifest of nestjs-workhorse above', () => {
    expect(() => packageVersion(join(dir, '..'))).toThrow(/cannot find the package\.json of nestjs-workhorse above /);
  });
});
