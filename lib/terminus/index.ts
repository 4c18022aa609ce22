/**
 * nestjs-workhorse/terminus: a `@nestjs/terminus` health indicator over `admin.health()`.
 * Needs `@nestjs/terminus` 11 or 12 (an optional peer dependency; 12 is ESM-only, loaded with
 * `require(esm)`).
 *
 * @example
 * import { WorkhorseHealthIndicator } from 'nestjs-workhorse/terminus';
 */
export { WorkhorseHealthIndicator, type WorkhorseHealthCheckOptions } from './workhorse.health-indicator';
