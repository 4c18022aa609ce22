/**
 * nestjs-workhorse: a durable job queue inside PostgreSQL, as a NestJS module.
 *
 * This entry point exports the Nest integration and the framework-neutral core. Code that does
 * not use Nest can import `nestjs-workhorse/core`, which needs no Nest packages.
 */
export * from './core';
export * from './nest';
