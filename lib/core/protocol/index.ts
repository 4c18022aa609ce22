/**
 * Every SQL statement the TypeScript client sends, in one place (a test keeps it so), grouped by
 * area: `producer` (Queue), `handler` (what a running handler sends as its job's owner),
 * `owner-statements` (the worker's claims, completions and failures as a job's owner), `worker`
 * (leases, registry, maintenance), `admin` (operator reads and actions), `grants` and `session`
 * (transactions, notifications, the installed schema). Besides them: the call helper (`call`),
 * the one error mapper (`errors`, `fromPgError`) and the job-row mapping (`job-row`).
 */
export { call, callOne } from './call';
export { fromPgError, SQLSTATE } from './errors';
export { toSnapshot, type JobRow } from './job-row';
