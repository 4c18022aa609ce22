// The job as the worker hands it to a handler's context: a leaf module of types that the worker,
// the context, the signal and human waits, the children and the tracing share (none of them imports another
// through it).
import type { JsonValue } from './types';

/** What the worker tells a context about the job it runs. */
export interface ClaimedJob {
  jobId: string;
  queue: string;
  type: string;
  attempt: number;
  maxAttempts: number;
  fenceToken: string;
  workerId: string;
  /** Checkpoints stored by earlier runs: name -> [] (undefined) or [value]; null while there are none. */
  checkpoints: Record<string, [] | [JsonValue]> | null;
  /**
   * Wake times of durable sleeps reached by earlier runs (ISO text); null while there are none.
   * (The claim's column is named `waits` for history; it holds sleeps, never signal or human waits.)
   */
  sleeps: Record<string, string> | null;
}
