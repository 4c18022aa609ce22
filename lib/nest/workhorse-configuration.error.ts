import { WorkhorseError } from '../core/errors';

/**
 * The Nest integration was set up in a way that cannot work: bad module options, a schema that
 * is missing or of another version under `schema: 'verify'`, two handlers for one job type, a
 * handler on a request-scoped provider, or a `@Transactional()` method with no transaction host.
 * Raised at start-up (or at the offending call) with a message that says what to change.
 *
 * @example
 * try {
 *   await app.init();
 * } catch (error) {
 *   if (error instanceof WorkhorseConfigurationError) console.error(error.message);
 *   throw error;
 * }
 */
export class WorkhorseConfigurationError extends WorkhorseError {}
