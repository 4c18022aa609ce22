-- The workhorse schema: tables, sequences and indexes.
--
-- Installation runs the files of sql/ in name order (then sql/migrations/ upgrades an existing
-- schema step by step); the number range of a file is its layer, each built on the ones before:
--   010-012  tables, sequences, indexes; daily partitions of the history
--   020      internal helpers: input checks, the ownership rule and owner-write preamble
--            (owns, lock_owned), the one event writer (write_events), ending and requeueing a job
--   030      producer protocol: enqueue
--   040-045  worker protocol: claim and complete (the hot path), heartbeat, fail, release,
--            checkpoints, sleeps; flow control inside the claim; handler policies
--   046-048  orchestration: dependencies, child jobs, signals, human waits
--   050      maintenance: promotion, lease recovery, deadlines, the tick
--   060-068  operator admin and reads: cancel, timelines, queue control, dead letters and
--            redrive, listings, a job's waits
--   084-085  schedules: the cron evaluator, then schedules and their occurrences
--   095-098  registry of live workers, health, retention; the install-time partitions
--   990      privileges: every protocol function's capability, run last
-- Functions named *_vN are the protocol clients call; the others are internal (no application
-- role may execute them).
--
-- A job is three kinds of row. `job` is its immutable definition; `job_runtime` exists only
-- while the job is live (blocked, scheduled, ready, active) and is the only row the lifecycle
-- mutates; `job_outcome` is written once, in the same transaction that deletes the runtime row,
-- when the job ends. So a committed job always has exactly one runtime row or one outcome row,
-- and finished jobs leave every index that dispatch searches.

CREATE SCHEMA workhorse;

CREATE TABLE workhorse.schema_version (
  version integer NOT NULL,
  installed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row)
);
-- No migration step may alter schema_version: application roles may read it, so one holding a
-- read open would stall the ACCESS EXCLUSIVE lock of an ALTER (and every reader behind it).

-- How the installed version came about: one row per migration step an upgrade applied
-- (sql/migrations/NNNN_*.sql), or one row named 'install' for the version a fresh install
-- created. Written by the migrator (installSchema), in the transaction of each step.
CREATE TABLE workhorse.schema_migration (
  version integer PRIMARY KEY,
  name text NOT NULL,
  applied_at timestamptz NOT NULL DEFAULT now(),
  applied_by name NOT NULL DEFAULT session_user
);

-- The capabilities granted to each role by grantRole (docs/least-privilege.sql), so that a
-- migration step that adds a protocol function grants it to the roles that hold its
-- capability (workhorse.regrant_capabilities, sql/990_privileges.sql) and a deploy need not
-- grant again. Keyed by the role's oid: a renamed role keeps its grants, a dropped one is skipped.
CREATE TABLE workhorse.role_capability (
  role_oid oid NOT NULL,
  capability text NOT NULL CHECK (capability IN ('producer', 'worker', 'operator')),
  granted_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (role_oid, capability)
);

-- The three sequences count in blocks of 1000: a statement that writes a batch (up to 1000 rows:
-- a claim, a batch of completions, a batch enqueue) draws one value v and gives its rows v,
-- v + 1, ... v + 999 in batch order; a statement that writes one row uses v itself. Every value
-- drawn is larger than any drawn before, so the orders below hold as with one value per row,
-- and a batch pays for one nextval() instead of one per row (~0.3 us each here, more when two
-- backends draw from one sequence at once and contend for its page).
--
-- Fence tokens: one global sequence, so every claim gets a value larger than any before it.
CREATE SEQUENCE workhorse.fence_seq AS bigint INCREMENT BY 1000;
-- Order of arrival: creation order for job_query, and FIFO order among ready jobs (a job that
-- becomes ready again after a retry or a delay queues behind the jobs already waiting).
CREATE SEQUENCE workhorse.job_seq AS bigint INCREMENT BY 1000;
-- Ids of job_event and attempt_history rows: one sequence, so a job's timeline is ordered by id.
CREATE SEQUENCE workhorse.history_seq AS bigint INCREMENT BY 1000;

-- Time-ordered ids (UUID version 7 layout: 48 bits of Unix milliseconds, then random bits), so
-- consecutive inserts land on the right edge of the primary-key index instead of at random pages.
-- PostgreSQL 18 and later have uuidv7() built in (about 30% cheaper per id than composing one);
-- older servers get the same layout composed from gen_random_uuid().
DO $install$
BEGIN
  IF to_regprocedure('pg_catalog.uuidv7()') IS NOT NULL THEN
    CREATE FUNCTION workhorse.new_job_id() RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE AS $$ SELECT pg_catalog.uuidv7() $$;
  ELSE
    CREATE FUNCTION workhorse.new_job_id() RETURNS uuid
    LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
      SELECT encode(
        set_bit(set_bit(
          overlay(uuid_send(gen_random_uuid())
                  PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                  FROM 1 FOR 6),
          52, 1), 53, 1),
        'hex')::uuid
    $$;
  END IF;
END
$install$;

CREATE TABLE workhorse.job (
  id uuid PRIMARY KEY,
  queue text NOT NULL,
  type text NOT NULL,
  payload jsonb NOT NULL,
  priority smallint NOT NULL CHECK (priority BETWEEN 0 AND 100),
  max_attempts integer NOT NULL CHECK (max_attempts BETWEEN 1 AND 100),
  -- Null: none given at enqueue; the handler's policy or the default applies.
  retry_policy jsonb,
  tags text[] NOT NULL,
  run_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL,
  -- The whole job must end by then, or it fails with DeadlineExceeded (never retried).
  deadline timestamptz,
  -- Each attempt may run this long before it closes as `timeout`.
  execution_timeout_ms integer CHECK (execution_timeout_ms BETWEEN 1000 AND 86400000),
  -- Creation order (also job_query's key).
  seq bigint NOT NULL,
  -- The login role that enqueued the job (session_user, which SET ROLE and the protocol's
  -- SECURITY DEFINER do not change): a producer reads the jobs it enqueued (get_own_job_v1).
  enqueued_by text NOT NULL DEFAULT session_user,
  -- The enqueuer's W3C trace context, {"traceparent", "tracestate"?}, when it enqueued under an
  -- OpenTelemetry span: the claim hands it to the worker, whose span links to it. Null otherwise.
  trace_context jsonb,
  -- The enqueuer's concurrency key (a tenant, a customer): a queue policy `perKey` limits how many
  -- jobs of one key are active at once (042_flow_control.sql). Null: none.
  concurrency_key text
);

-- The live row. Priority and queue are copied from `job` so a claim never joins it. Lease and
-- heartbeat columns appear in no index and no index predicate, so a lease renewal is a HOT
-- update; fillfactor leaves room on each page for those updates.
-- job_runtime and job_outcome carry no foreign key to job: the protocol functions are their
-- only writers and always write the job first, and a foreign key would make every enqueue and
-- every completion lock (and dirty) the job's row as well. The split invariant (exactly one
-- runtime or outcome row per job, none without a job) is checked by the test suite after every
-- test. See docs/decisions.md.
CREATE TABLE workhorse.job_runtime (
  job_id uuid PRIMARY KEY,
  queue text NOT NULL,
  priority smallint NOT NULL,
  state text NOT NULL,
  seq bigint NOT NULL,
  run_at timestamptz NOT NULL,
  current_attempt integer NOT NULL DEFAULT 0,
  max_attempts integer NOT NULL,
  fence_token bigint,
  worker_id text,
  lease_expires_at timestamptz,
  heartbeat_at timestamptz,
  attempt_started_at timestamptz,
  cancel_requested_at timestamptz,
  cancel_reason text,
  last_error jsonb,
  progress jsonb,
  deadline timestamptz,
  -- When the running attempt's execution timeout ends (PostgreSQL's clock).
  attempt_deadline timestamptz,
  execution_timeout_ms integer,
  -- The next claim continues the current attempt (after a durable sleep) instead of starting one.
  resuming boolean NOT NULL DEFAULT false,
  -- While a job sleeps its attempt stays open, but no worker holds it: these keep the worker
  -- that ran it last and when that run started, for the attempt's closing row if the job ends
  -- (canceled, or failed by its deadline) before it wakes. Written when a job goes to sleep,
  -- never by a claim; meaningless while `resuming` is false.
  sleep_worker_id text,
  sleep_attempt_started_at timestamptz,
  CONSTRAINT job_runtime_state_check CHECK (state IN ('blocked', 'scheduled', 'ready', 'active')),
  CONSTRAINT job_runtime_owner_check CHECK (
    CASE state
      WHEN 'active' THEN worker_id IS NOT NULL AND fence_token > 0 AND lease_expires_at IS NOT NULL
                         AND heartbeat_at IS NOT NULL AND attempt_started_at IS NOT NULL
                         AND current_attempt >= 1
      ELSE worker_id IS NULL AND lease_expires_at IS NULL AND heartbeat_at IS NULL
           AND attempt_started_at IS NULL AND cancel_requested_at IS NULL AND attempt_deadline IS NULL
    END),
  CONSTRAINT job_runtime_sleep_check CHECK (
    state = 'active' OR NOT resuming OR (sleep_worker_id IS NOT NULL AND sleep_attempt_started_at IS NOT NULL)),
  -- max_attempts starts as the job's own and grows by one with each released attempt (released
  -- attempts are numbered and recorded, but do not count against the job's budget).
  CONSTRAINT job_runtime_attempt_check CHECK (current_attempt BETWEEN 0 AND max_attempts)
) WITH (fillfactor = 80);

-- Dispatch: the claim walks this index in (priority DESC, seq) order and stops after LIMIT rows.
CREATE INDEX job_runtime_ready_idx ON workhorse.job_runtime (queue, priority DESC, seq)
  WHERE state = 'ready';
-- Promotion of due delayed jobs, in the order they became due and then in creation order (seq
-- does not change while a job is scheduled): with seq in the key, jobs due at the same moment
-- (a batch enqueued with one runAt) come out of the index in order, without a sort.
CREATE INDEX job_runtime_scheduled_idx ON workhorse.job_runtime (run_at, seq)
  WHERE state = 'scheduled';
-- Deadline enforcement; the column never changes after enqueue, so HOT renewals are unaffected.
CREATE INDEX job_runtime_deadline_idx ON workhorse.job_runtime (deadline)
  WHERE deadline IS NOT NULL;
-- Lease recovery scans active rows only; the lease column stays out of the key (HOT renewals).
CREATE INDEX job_runtime_active_idx ON workhorse.job_runtime (queue)
  WHERE state = 'active';

-- The terminal row, written once.
CREATE TABLE workhorse.job_outcome (
  job_id uuid PRIMARY KEY,
  queue text NOT NULL,
  state text NOT NULL CHECK (state IN ('succeeded', 'failed', 'canceled')),
  result jsonb,
  error jsonb,
  final_attempt integer NOT NULL,
  fence_token bigint,
  worker_id text,
  finished_at timestamptz NOT NULL,
  progress jsonb,
  CONSTRAINT job_outcome_result_check CHECK (state = 'succeeded' OR result IS NULL),
  CONSTRAINT job_outcome_error_check CHECK (state = 'succeeded' OR error IS NOT NULL)
);

-- Dead letters are failed outcomes. Live dispatch never reads job_outcome, so this index costs
-- only the terminal insert of failed jobs.
CREATE INDEX job_outcome_dead_letter_idx ON workhorse.job_outcome (finished_at DESC, job_id DESC)
  WHERE state = 'failed';

-- Finished jobs over time (queue_activity_v1, the dashboard's charts). Outcomes are appended in
-- finish order, so a BRIN index of a few kB finds the pages of a recent window; maintaining it
-- costs an insert almost nothing (a new page range stays unsummarised until autovacuum reaches
-- it), unlike a B-tree that every completion would write. minmax-multi keeps it selective when
-- pages freed by retention are refilled with new outcomes.
CREATE INDEX job_outcome_finished_idx ON workhorse.job_outcome
  USING brin (finished_at timestamptz_minmax_multi_ops) WITH (autosummarize = on);

-- Lineage of redriven dead letters: one row per redrive, idempotent per request id. A dead
-- letter is redriven once; further copies are asked for explicitly (`again`).
CREATE TABLE workhorse.job_redrive (
  request_id text PRIMARY KEY,
  source_job_id uuid NOT NULL REFERENCES workhorse.job (id),
  new_job_id uuid NOT NULL REFERENCES workhorse.job (id),
  actor text,
  reason text,
  created_at timestamptz NOT NULL,
  again boolean NOT NULL DEFAULT false
);
CREATE INDEX job_redrive_source_idx ON workhorse.job_redrive (source_job_id);
CREATE UNIQUE INDEX job_redrive_new_idx ON workhorse.job_redrive (new_job_id);
-- The first redrive of a dead letter, whatever the isolation level of the transactions that race
-- for it (redrive_v1 also serialises them, so at READ COMMITTED the later one returns this job).
CREATE UNIQUE INDEX job_redrive_once_idx ON workhorse.job_redrive (source_job_id) WHERE NOT again;

-- Idempotent enqueue: one row per (scope, hashed key) until it expires. `request` holds the
-- fields the caller gave, so a repeat can be told apart from a conflicting reuse of the key.
CREATE TABLE workhorse.enqueue_idempotency (
  scope text NOT NULL,
  key_hash bytea NOT NULL,
  request jsonb NOT NULL,
  job_id uuid NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (scope, key_hash)
);
CREATE INDEX enqueue_idempotency_expiry_idx ON workhorse.enqueue_idempotency (expires_at);

-- Deduplication windows (enqueue's `dedupe` option, claim_dedupe_keys in 030_enqueue.sql): one
-- row per (queue, type, mode, hashed key), naming the job that holds the key. A throttle key is
-- held until `expires_at` (the end of its window); a debounce key while its job has not started
-- (`expires_at` is then the job's run time). tick_v1 deletes rows that hold nothing any more.
CREATE TABLE workhorse.enqueue_dedupe (
  queue text NOT NULL,
  type text NOT NULL,
  mode text NOT NULL CHECK (mode IN ('throttle', 'debounce')),
  key_hash bytea NOT NULL,
  job_id uuid NOT NULL,
  created_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (queue, type, mode, key_hash)
);
CREATE INDEX enqueue_dedupe_expiry_idx ON workhorse.enqueue_dedupe (expires_at);

-- Paused queues. A queue without a row is running.
CREATE TABLE workhorse.queue_control (
  queue text PRIMARY KEY,
  paused boolean NOT NULL,
  changed_at timestamptz NOT NULL,
  changed_by text,
  reason text,
  -- The login role (session_user) of the session that made the last change, next to the
  -- caller-chosen changed_by; null for a change made before the schema recorded it. Every
  -- change is also in workhorse.operator_change (070_operations.sql).
  login_role text
);

-- The retry policies of the handlers, as workers registered them when they started
-- (register_handlers_v1), per queue and job type: the server applies them to the attempts it
-- closes itself (execution timeouts and expired leases, in recover_expired_v1), which no worker
-- reports. The last registration of a (queue, type) wins; see docs/decisions.md. Read only when
-- maintenance closes an attempt, never by a claim.
CREATE TABLE workhorse.handler_policy (
  queue text NOT NULL,
  type text NOT NULL,
  -- Normalised; null: the handler has no policy of its own (the default applies).
  retry_policy jsonb,
  worker_id text NOT NULL,
  registered_at timestamptz NOT NULL,
  PRIMARY KEY (queue, type)
);

-- Routing projection for operator reads (Admin.listJobs): written once at enqueue, never by
-- claims or completions. State is read from job_runtime or job_outcome by primary key.
CREATE TABLE workhorse.job_query (
  seq bigint PRIMARY KEY,
  job_id uuid NOT NULL,
  queue text NOT NULL,
  type text NOT NULL,
  created_at timestamptz NOT NULL
);
CREATE INDEX job_query_queue_idx ON workhorse.job_query (queue, seq);
CREATE INDEX job_query_type_idx ON workhorse.job_query (type, seq);

-- Named completed stages of a job, replayed instead of run again.
CREATE TABLE workhorse.job_checkpoint (
  job_id uuid NOT NULL REFERENCES workhorse.job (id),
  name text NOT NULL,
  value jsonb,
  attempt integer NOT NULL,
  fence_token bigint NOT NULL,
  worker_id text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (job_id, name)
);

-- Durable sleeps: the wake time of each named sleep, fixed the first time the handler reaches it.
CREATE TABLE workhorse.job_wait (
  job_id uuid NOT NULL REFERENCES workhorse.job (id),
  name text NOT NULL,
  wake_at timestamptz NOT NULL,
  attempt integer NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (job_id, name)
);

-- Append-only history, range-partitioned by day (UTC). The protocol functions write it; the
-- claim path never reads it. Partitions are prepared ahead by prepare_partitions_v1 (called from
-- tick_v1); the default partition catches rows if preparation ever falls behind.
CREATE TABLE workhorse.job_event (
  id bigint NOT NULL DEFAULT nextval('workhorse.history_seq'),
  job_id uuid NOT NULL,
  at timestamptz NOT NULL,
  kind text NOT NULL,
  attempt integer,
  worker_id text,
  fence_token bigint,
  data jsonb,
  -- The login role of the session that wrote the event (session_user: a SECURITY DEFINER
  -- function does not change it), next to the caller-chosen `actor` of human decisions and
  -- operator changes; null for events written before the schema recorded it.
  login_role text DEFAULT session_user
) PARTITION BY RANGE (at);
CREATE INDEX job_event_job_idx ON workhorse.job_event (job_id, id);
CREATE TABLE workhorse.job_event_default PARTITION OF workhorse.job_event DEFAULT;

CREATE TABLE workhorse.attempt_history (
  id bigint NOT NULL DEFAULT nextval('workhorse.history_seq'),
  job_id uuid NOT NULL,
  attempt integer NOT NULL,
  outcome text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'timeout', 'expired', 'canceled', 'released', 'deadline')),
  worker_id text NOT NULL,
  fence_token bigint NOT NULL,
  started_at timestamptz NOT NULL,
  finished_at timestamptz NOT NULL,
  error jsonb
) PARTITION BY RANGE (finished_at);
CREATE INDEX attempt_history_job_idx ON workhorse.attempt_history (job_id, id);
CREATE TABLE workhorse.attempt_history_default PARTITION OF workhorse.attempt_history DEFAULT;

-- Jobs someone awaits (waitForResult, await_results_v1). A job's end notifies the channel
-- `workhorse_results` (payload: the ended ids, comma-separated) only while its id is here, so a
-- job nobody awaits pays one probe of this (then empty) table per batch of ends and nothing more.
-- A waiter refreshes its rows while it waits; the rows of a waiter that went away expire
-- (expires_at) and are dropped by the next registration; a job's end removes its row.
CREATE TABLE workhorse.result_waiter (
  job_id uuid PRIMARY KEY,
  expires_at timestamptz NOT NULL
);
