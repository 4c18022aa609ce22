import { BadRequestException } from '@nestjs/common';
import type { NewOrder } from './order.types';

/** Limits of an order's fields. */
export const ORDER_LIMITS = {
  /** Longest customer name or item description, in characters. */
  textMaxLength: 200,
  /** Largest amount: 1,000,000.00 in cents. */
  maxAmountCents: 100_000_000,
} as const;

const FIELDS = ['customer', 'item', 'amountCents'];
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  try {
    const json = JSON.stringify(value);
    return json.length > 40 ? `${json.slice(0, 40)}...` : json;
  } catch {
    return typeof value;
  }
}

function text(body: Record<string, unknown>, field: string, problems: string[]): string {
  const value = body[field];
  const trimmed = typeof value === 'string' ? value.trim() : '';
  if (trimmed === '' || trimmed.length > ORDER_LIMITS.textMaxLength) {
    problems.push(`${field}: must be a non-empty string of at most ${ORDER_LIMITS.textMaxLength} characters, got ${describe(value)}`);
  } else if (CONTROL_CHARACTERS.test(trimmed)) {
    // PostgreSQL's text cannot hold U+0000 at all, and a label has no use for the others.
    problems.push(`${field}: must not contain control characters (line breaks, tabs, U+0000, ...)`);
  }
  return trimmed;
}

/**
 * Checks the body of `POST /orders` by hand and returns the order it describes. Every problem
 * is reported at once, each naming its field, as a 400 whose `message` lists them (the shape
 * Nest's own validation answers with). Nothing is written before this has passed.
 *
 * @example
 * parseNewOrder({ customer: 'Ada', item: 'Loom', amountCents: 4200 }); // { customer: 'Ada', ... }
 * parseNewOrder({ customer: 'Ada', item: 'Loom', amountCents: -1 });  // 400: "amountCents: must be ..."
 */
export function parseNewOrder(body: unknown): NewOrder {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestException([
      `body: must be a JSON object like {"customer": "Ada Lovelace", "item": "Loom cards", "amountCents": 4200}, got ${describe(body)}`,
    ]);
  }
  const fields = body as Record<string, unknown>;
  const problems: string[] = [];
  for (const key of Object.keys(fields)) {
    if (!FIELDS.includes(key)) problems.push(`${key}: unknown field; an order has ${FIELDS.join(', ')}`);
  }
  const customer = text(fields, 'customer', problems);
  const item = text(fields, 'item', problems);
  const amountCents = fields.amountCents;
  if (typeof amountCents !== 'number' || !Number.isInteger(amountCents) || amountCents < 1 || amountCents > ORDER_LIMITS.maxAmountCents) {
    problems.push(
      `amountCents: must be a positive integer number of cents, at most ${ORDER_LIMITS.maxAmountCents}, got ${describe(amountCents)}`,
    );
  }
  if (problems.length > 0) throw new BadRequestException(problems);
  return { customer, item, amountCents: amountCents as number };
}
