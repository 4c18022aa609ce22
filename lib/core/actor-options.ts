import type { ActorOptions } from './types';
import { checkText } from './validation';

/** Who asked and why, as stored with an operator action: null for what was not given. */
export function actorOf(options: ActorOptions): [string | null, string | null] {
  return [
    options.actor === undefined ? null : checkText(options.actor, 'actor', 0, 200),
    options.reason === undefined ? null : checkText(options.reason, 'reason', 0, 1000),
  ];
}

export const ACTOR_KEYS = ['actor', 'reason'] as const;
