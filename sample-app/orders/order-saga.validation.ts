import { BadRequestException } from '@nestjs/common';
import type { ShipmentNotice } from './order.types';

const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

function oneLineText(value: unknown, field: string, max: number, problems: string[]): string {
  if (typeof value !== 'string' || value.trim() === '' || value.length > max || CONTROL_CHARACTERS.test(value)) {
    problems.push(`${field}: must be a non-empty string of at most ${max} characters without control characters`);
    return '';
  }
  return value.trim();
}

function objectOf(body: unknown, keys: readonly string[], problems: string[]): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    problems.push('body: must be a JSON object');
    return {};
  }
  for (const key of Object.keys(body)) if (!keys.includes(key)) problems.push(`${key}: unknown field; the body has ${keys.join(', ')}`);
  return body as Record<string, unknown>;
}

/** The body of `POST /orders/:id/shipped`: `{ trackingId, missingLines? }` (positions of order lines). */
export function parseShipmentNotice(body: unknown): ShipmentNotice {
  const problems: string[] = [];
  const fields = objectOf(body, ['trackingId', 'missingLines'], problems);
  const trackingId = oneLineText(fields.trackingId, 'trackingId', 100, problems);
  const missing = fields.missingLines ?? [];
  if (!Array.isArray(missing) || missing.length > 20 || !missing.every((i) => Number.isInteger(i) && i >= 0 && i < 20)) {
    problems.push('missingLines: must be an array of at most 20 line positions (integers from 0)');
  }
  if (problems.length > 0) throw new BadRequestException(problems);
  return { trackingId, missingLines: [...new Set(missing as number[])] };
}

/** The body of `POST /orders/:id/refund-decision`: `{ decision, actor, reason? }`. */
export function parseRefundDecision(body: unknown): { decision: string; actor: string; reason?: string } {
  const problems: string[] = [];
  const fields = objectOf(body, ['decision', 'actor', 'reason'], problems);
  const decision = oneLineText(fields.decision, 'decision', 200, problems);
  const actor = oneLineText(fields.actor, 'actor', 200, problems);
  const reason = fields.reason === undefined ? undefined : oneLineText(fields.reason, 'reason', 1000, problems);
  if (problems.length > 0) throw new BadRequestException(problems);
  return { decision, actor, ...(reason !== undefined && { reason }) };
}
