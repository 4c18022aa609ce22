/**
 * nestjs-workhorse/typeorm against TypeORM 1.x, what `npm install typeorm` gives today (the
 * dev dependency `typeorm1` is an npm alias of it; the tests are in typeorm-adapter.ts). The
 * adapter reads 1.x's objects as it reads 0.3's, by their methods; that its declarations take
 * 1.x's types is checked where TypeORM 1 is an application's only TypeORM
 * (test/package/install-lines.test.ts).
 */
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as typeorm1 from 'typeorm1';
import { describeTypeOrmAdapter, type TypeOrmPackage } from './typeorm-adapter';

it('runs on TypeORM 1.x (the alias is not a second name for the 0.3 the other tests use)', () => {
  // (Its `exports` do not include package.json.)
  const manifest = JSON.parse(readFileSync(join(dirname(require.resolve('typeorm1')), 'package.json'), 'utf8')) as { version: string };
  expect(manifest.version).toMatch(/^1\./);
});

// The suite is typed with 0.3's declarations, which 1.x's differ from (it dropped 0.3's
// deprecated members): the package goes in as the suite's type, unchanged at run time.
describeTypeOrmAdapter('TypeORM 1.x', typeorm1 as unknown as TypeOrmPackage);
