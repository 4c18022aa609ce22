/**
 * The conformance scenarios of sdk/conformance (the format is defined in its README): their
 * types, and the handler scripts as handlers of the core Worker.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ChildJobFailedError, SignalTimeoutError, type ChildJobSpec, type HandlerContext, type JsonValue } from '../../lib/core';

export const SCENARIO_DIR = join(__dirname, '..', '..', 'sdk', 'conformance', 'scenarios');

export interface Step {
  do:
    | 'checkpoint'
    | 'return'
    | 'return_checkpoints'
    | 'return_values'
    | 'throw'
    | 'progress'
    | 'sleep'
    | 'mark'
    | 'pause'
    | 'block'
    | 'wait_signal'
    | 'wait_human'
    | 'run_child'
    | 'run_children'
    | 'dependencies';
  attempts?: number[];
  /** Where a wait, child or dependencies step keeps its value (see `return_values`). */
  as?: string;
  timeoutMs?: number;
  onTimeout?: JsonValue;
  context?: JsonValue;
  choices?: string[];
  key?: string;
  type?: string;
  payload?: JsonValue;
  /** A child's `options` are enqueue options by their wire names (the TypeScript names). */
  children?: { type: string; payload: JsonValue; options?: Record<string, JsonValue> }[];
  name?: string;
  value?: JsonValue;
  message?: string;
  retryable?: boolean;
  retryDelayMs?: number;
  ms?: number;
  /** A checkpoint step's other save: stored under the step's name while its operation runs (see the README). */
  storedMeanwhile?: JsonValue;
}

/** An action: `do` and the keys of that action (see the README's table). */
export type Action = { do: string } & Record<string, unknown>;

export interface Scenario {
  name: string;
  description: string;
  worker?: { queues?: string[]; concurrency?: number; leaseMs?: number; pollMs?: number; tickMs?: number };
  handlers: Record<string, Step[]>;
  actions: Action[];
}

export function loadScenarios(): { file: string; scenario: Scenario }[] {
  return readdirSync(SCENARIO_DIR)
    .filter((file) => file.endsWith('.json'))
    .sort()
    .map((file) => ({ file, scenario: expandText(JSON.parse(readFileSync(join(SCENARIO_DIR, file), 'utf8'))) as Scenario }));
}

/**
 * `{"$text": [part, ...]}` anywhere in a scenario is the text of its parts joined, a part being a
 * string or `{"repeat": S, "times": n}` (S written n times): long hostile text stays readable.
 */
export function expandText(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(expandText);
  if (value === null || typeof value !== 'object') return value;
  const object = value as Record<string, unknown>;
  const parts = object.$text;
  if (Array.isArray(parts) && Object.keys(object).length === 1) {
    return parts.map((part) => (typeof part === 'string' ? part : String((part as { repeat: string }).repeat).repeat((part as { times: number }).times))).join('');
  }
  return Object.fromEntries(Object.entries(object).map(([key, item]) => [key, expandText(item)]));
}

/** Called when a checkpoint operation really runs (`effect`) or a handler reaches a mark. */
export type Report = (event: 'effect' | 'mark', jobId: string, name: string) => void;

/** Saves `value` under `name` for the job as its current owner (a checkpoint step's `storedMeanwhile`). */
export type SaveMeanwhile = (jobId: string, name: string, value: JsonValue) => Promise<void>;

/** An error whose envelope is `{ name, message }` as the step says, with the step's retry controls. */
function scriptedError(step: Step): Error {
  const error = new Error(step.message) as Error & { retryable?: boolean; retryDelayMs?: number };
  error.name = step.name as string;
  if (step.retryable === false) error.retryable = false;
  if (step.retryDelayMs !== undefined) error.retryDelayMs = step.retryDelayMs;
  return error;
}

/** A handler that runs a scenario's script. */
export function scriptHandler(steps: Step[], report: Report, saveMeanwhile: SaveMeanwhile) {
  return async (_payload: unknown, ctx: HandlerContext): Promise<JsonValue> => {
    const checkpoints: Record<string, JsonValue> = {};
    const values: Record<string, JsonValue> = {};
    for (const step of steps) {
      if (step.attempts && !step.attempts.includes(ctx.attempt)) continue;
      const name = step.name as string;
      switch (step.do) {
        case 'checkpoint':
          checkpoints[name] = values[name] = await ctx.checkpoint(name, async () => {
            report('effect', ctx.jobId, name);
            if (step.storedMeanwhile !== undefined) await saveMeanwhile(ctx.jobId, name, step.storedMeanwhile);
            return step.value as JsonValue;
          });
          if (step.as !== undefined) values[step.as] = checkpoints[name];
          break;
        case 'return':
          return step.value as JsonValue;
        case 'return_checkpoints':
          return checkpoints;
        case 'return_values':
          return values;
        case 'wait_signal':
          values[step.as as string] = await waitSignal(ctx, step);
          break;
        case 'wait_human': {
          const options = { context: step.context, choices: step.choices, timeoutMs: step.timeoutMs };
          const { decision, actor, reason } = await ctx.waitForHuman(name, options);
          values[step.as as string] = { decision, actor, reason };
          break;
        }
        case 'run_child':
          values[step.as as string] = await runChild(ctx, step);
          break;
        case 'run_children': {
          const outcomes = await ctx.runChildren(step.key as string, step.children as ChildJobSpec[]);
          values[step.as as string] = outcomes.map((o) => ({ state: o.state, result: o.result, errorName: o.error?.name ?? null }));
          break;
        }
        case 'dependencies':
          values[step.as as string] = (await ctx.dependencies()).map((d) => ({ state: d.state, result: d.result }));
          break;
        case 'throw':
          throw scriptedError(step);
        case 'progress':
          await ctx.setProgress(step.value);
          break;
        case 'sleep':
          await ctx.sleep(name, step.ms as number);
          break;
        case 'mark':
          report('mark', ctx.jobId, name);
          break;
        case 'pause':
          await new Promise((resolve) => setTimeout(resolve, step.ms));
          break;
        case 'block': {
          const signal = ctx.signal;
          if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
          throw signal.reason;
        }
        default:
          throw new Error(`unknown step ${JSON.stringify(step)}`);
      }
    }
    return null;
  };
}

/** `wait_signal`: the signal's payload, or the step's `onTimeout` value when the wait timed out. */
async function waitSignal(ctx: HandlerContext, step: Step): Promise<JsonValue> {
  try {
    return await ctx.waitForSignal(step.name as string, step.timeoutMs === undefined ? undefined : { timeoutMs: step.timeoutMs });
  } catch (error) {
    if (error instanceof SignalTimeoutError && step.onTimeout !== undefined) return step.onTimeout;
    throw error;
  }
}

/** `run_child`: the child's result, or what the child-failed error says. */
async function runChild(ctx: HandlerContext, step: Step): Promise<JsonValue> {
  try {
    return await ctx.runChild(step.key as string, step.type as string, step.payload);
  } catch (error) {
    if (!(error instanceof ChildJobFailedError)) throw error;
    return { childFailed: error.childState, errorName: error.childError.name };
  }
}
