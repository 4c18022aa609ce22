import type { ActorOptions } from './types';
import { checkParamText } from './validation';

/**
 * Who asked and why, as stored with an operator action: null for what was not given. Their
 * bounds are the SQL functions' (check_actor).
 */
export function actorOf(options: ActorOptions): [string | null, string | null] {
  return [
    options.actor === undefined ? null : checkParamText(options.actor, 'actor'),
    options.reason === undefined ? null : checkParamText(options.reason, 'reason'),
  ];
}

export const ACTOR_KEYS = ['actor', 'reason'] as const;
