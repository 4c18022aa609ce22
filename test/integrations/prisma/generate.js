// Generates the Prisma Client of the Prisma integration tests into ./generated, offline, once per
// schema and Prisma version (a stamp file remembers which). `prisma generate` looks for the
// schema engine binary, which it would download; generating needs no engine, so any existing
// file will do as that binary (see docs/integrations.md). Run by Jest's global setup and by
// `npm run typecheck`; exits non-zero, with Prisma's output, when generation fails.
const { spawnSync } = require('node:child_process');
const { createHash } = require('node:crypto');
const { existsSync, readFileSync, writeFileSync } = require('node:fs');
const { join } = require('node:path');

const schema = join(__dirname, 'schema.prisma');
const stamp = join(__dirname, 'generated', '.stamp');

function generatePrismaClient() {
  const prismaVersion = require('prisma/package.json').version;
  const wanted = createHash('sha256').update(prismaVersion).update(readFileSync(schema)).digest('hex');
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === wanted) return;
  const result = spawnSync(process.execPath, [require.resolve('prisma/build/index.js'), 'generate', '--schema', schema], {
    encoding: 'utf8',
    env: {
      ...process.env,
      PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? schema,
      CHECKPOINT_DISABLE: '1',
      PRISMA_HIDE_UPDATE_MESSAGE: '1',
    },
  });
  if (result.status !== 0) {
    throw new Error(`prisma generate failed (exit ${result.status}):\n${result.stdout}\n${result.stderr}`);
  }
  writeFileSync(stamp, wanted);
}

module.exports = { generatePrismaClient };

if (require.main === module) generatePrismaClient();
