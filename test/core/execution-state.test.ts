/**
 * The per-job execution record has one state (phase and interruption) that only its transitions
 * change; a transition the state does not allow is a programming error, thrown under test.
 */
import {
  abandon,
  canceledOnCompletion,
  CLAIMED,
  ExecutionStateError,
  finish,
  handlerReturned,
  interrupt,
  interruptionOf,
  isFinished,
  isLost,
  type Execution,
} from '../../lib/core/worker/execution';

function claimed(): Execution {
  return {
    job: { jobId: 'j1', queue: 'q', type: 't', attempt: 1, maxAttempts: 1, fenceToken: '1', workerId: 'w', checkpoints: null, sleeps: null },
    lane: { group: 'g', active: 0, wake: () => undefined, complete: () => undefined },
    deadline: 0,
    renewing: true,
    controller: null,
    startedAt: 0,
    state: CLAIMED,
    timer: null,
    onFinished: null,
    span: null,
  };
}

describe('an execution state', () => {
  it('runs, returns and finishes once, and stops renewing its lease when finished', () => {
    const e = claimed();
    expect(handlerReturned(e)).toBe(true);
    expect(e.state).toEqual({ phase: 'returned', interruption: null });
    expect(e.renewing).toBe(true);
    expect(finish(e)).toBe(true);
    expect(e.renewing).toBe(false);
    expect(finish(e)).toBe(false);
    expect(isFinished(e)).toBe(true);
  });

  it('refuses a handler that returns twice', () => {
    const e = claimed();
    handlerReturned(e);
    expect(() => handlerReturned(e)).toThrow(ExecutionStateError);
  });

  it('stops renewing the lease of a job that slept or parked', () => {
    const e = claimed();
    expect(interrupt(e, 'sleeping')).toBe(true);
    expect(e.renewing).toBe(false);
  });

  it('is interrupted once, and a lost lease overrides the first reason', () => {
    const e = claimed();
    expect(interrupt(e, 'canceled')).toBe(true);
    expect(e.renewing).toBe(true);
    expect(() => interrupt(e, 'timeout')).toThrow(ExecutionStateError);
    expect(interrupt(e, 'lost')).toBe(true);
    expect(isLost(e)).toBe(true);
    expect(() => interrupt(e, 'lost')).toThrow(ExecutionStateError);
  });

  it('ignores what the handler returns once abandoned, and refuses to interrupt or abandon it again', () => {
    const e = claimed();
    interrupt(e, 'timeout');
    abandon(e);
    expect(interruptionOf(e)).toBe('abandoned');
    expect(() => abandon(e)).toThrow(ExecutionStateError);
    expect(() => interrupt(e, 'lost')).toThrow(ExecutionStateError);
    finish(e);
    expect(handlerReturned(e)).toBe(false);
    expect(e.state).toEqual({ phase: 'finished', interruption: 'abandoned' });
  });

  it('records a cancellation the database answered only after the handler returned', () => {
    const e = claimed();
    expect(() => canceledOnCompletion(e)).toThrow(ExecutionStateError);
    handlerReturned(e);
    canceledOnCompletion(e);
    expect(interruptionOf(e)).toBe('canceled');
  });

  it('ignores an interruption once the job is finished (a late answer the handler did not await)', () => {
    const e = claimed();
    handlerReturned(e);
    finish(e);
    expect(interrupt(e, 'lost')).toBe(false);
    expect(e.state).toEqual({ phase: 'finished', interruption: null });
  });
});
