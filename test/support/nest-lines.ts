/**
 * The Nest majors the package's peer ranges accept (10, 11 and 12), each as `nest new` of that
 * major makes an application, for the packaging tests (test/package/).
 */
import { devVersion } from './package';

/** One line of Nest, as `nest new` of that major makes an application. */
export interface NestLine {
  name: string;
  /** The application's dependencies and dev dependencies (exact versions). */
  dependencies: Record<string, string>;
  /** `module` for Nest 12's ESM application. */
  type?: 'module';
  /** Its tsconfig.json's compiler options, made strict. */
  compilerOptions: Record<string, unknown>;
  /** Its tsconfig.build.json, which `nest build` compiles (src/ to dist/, without the tests). */
  buildConfig: Record<string, unknown>;
  /** Whether its tests run with vitest (Nest 12's default). */
  vitest: boolean;
}

/** What the tsconfig of a `nest new` application held in Nest 10 and 11 alike, made strict (`strict: true` instead of its loosened flags). */
const NEST_APP_OPTIONS = {
  declaration: true,
  removeComments: true,
  emitDecoratorMetadata: true,
  experimentalDecorators: true,
  allowSyntheticDefaultImports: true,
  sourceMap: true,
  outDir: './dist',
  baseUrl: './',
  incremental: true,
  skipLibCheck: true,
  strict: true,
  forceConsistentCasingInFileNames: true,
};

/** The tsconfig.build.json of a `nest new` application in Nest 10 and 11. */
const NEST_APP_BUILD_CONFIG = { extends: './tsconfig.json', exclude: ['node_modules', 'test', 'dist', '**/*spec.ts'] };

/**
 * The three majors the peer ranges accept. Nest 12 is this checkout's dev dependencies (npm ci
 * cached them) and what `nest new` 12 (@nestjs/schematics 12, default `--type esm`) writes:
 * `"type": "module"`, `nodenext`, TypeScript 6, `@types/node` 24, vitest 4. Nest 11 and 10 are
 * their last releases, with the TypeScript of this checkout.
 */
export const NEST_LINES: NestLine[] = [
  {
    name: 'Nest 12',
    type: 'module',
    dependencies: {
      ...Object.fromEntries(['@nestjs/common', '@nestjs/core', '@nestjs/platform-express', '@nestjs/testing', 'reflect-metadata', 'rxjs'].map((name) => [name, devVersion(name)])),
      typescript: '6.0.3',
      '@types/node': '24.19.4',
      vitest: '4.1.12',
    },
    // The template's tsconfig.json with `strict: true` (and its `strictPropertyInitialization: false`).
    compilerOptions: {
      module: 'nodenext',
      moduleResolution: 'nodenext',
      resolvePackageJsonExports: true,
      esModuleInterop: true,
      isolatedModules: true,
      declaration: true,
      removeComments: true,
      emitDecoratorMetadata: true,
      experimentalDecorators: true,
      allowSyntheticDefaultImports: true,
      target: 'ES2023',
      sourceMap: true,
      outDir: './dist',
      rootDir: '.',
      incremental: true,
      skipLibCheck: true,
      strict: true,
      strictPropertyInitialization: false,
      types: ['vitest/globals', 'node'],
    },
    buildConfig: {
      extends: './tsconfig.json',
      compilerOptions: { rootDir: './src' },
      include: ['src'],
      exclude: ['node_modules', 'test', 'dist', '**/*spec.ts'],
    },
    vitest: true,
  },
  {
    name: 'Nest 11',
    dependencies: {
      '@nestjs/common': '11.2.10',
      '@nestjs/core': '11.2.10',
      '@nestjs/platform-express': '11.2.10',
      'reflect-metadata': '0.2.2',
      rxjs: '7.8.2',
      typescript: devVersion('typescript'),
      '@types/node': devVersion('@types/node'),
    },
    // Node's module resolution, which reads the package's `exports`; CommonJS output.
    compilerOptions: {
      ...NEST_APP_OPTIONS,
      module: 'nodenext',
      moduleResolution: 'nodenext',
      resolvePackageJsonExports: true,
      esModuleInterop: true,
      isolatedModules: true,
      target: 'ES2023',
    },
    buildConfig: NEST_APP_BUILD_CONFIG,
    vitest: false,
  },
  {
    name: 'Nest 10',
    dependencies: {
      '@nestjs/common': '10.4.9',
      '@nestjs/core': '10.4.9',
      '@nestjs/platform-express': '10.4.9',
      'reflect-metadata': '0.2.2',
      rxjs: '7.8.2',
      typescript: devVersion('typescript'),
      '@types/node': devVersion('@types/node'),
    },
    // CommonJS with TypeScript's classic node resolution, which reads `typesVersions` instead.
    compilerOptions: { ...NEST_APP_OPTIONS, module: 'commonjs', target: 'ES2021' },
    buildConfig: NEST_APP_BUILD_CONFIG,
    vitest: false,
  },
];

/** The application `nest new` makes today. */
export const NEST_12 = NEST_LINES.find((line) => line.name === 'Nest 12') as NestLine;
