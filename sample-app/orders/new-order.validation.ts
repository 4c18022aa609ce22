import { BadRequestException } from '@nestjs/common';
import type { NewOrder, OrderLine } from './order.types';

/** Limits of an order's fields. */
export const ORDER_LIMITS = {
  /** Longest customer name or item description, in characters. */
  textMaxLength: 200,
  /** Largest amount: 1,000,000.00 in cents. */
  maxAmountCents: 100_000_000,
  /** Most lines in an order placed with lines. */
  maxLines: 20,
} as const;

const FIELDS = ['customer', 'item', 'amountCents'];
const FIELDS_WITH_LINES = ['customer', 'lines'];
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

function text(body: Record<string, unknown>, key: string, problems: string[], field = key): string {
  const value = body[key];
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
 * Checks the body of `POST /orders` by hand and returns the order it describes: one item
 * (`{ customer, item, amountCents }`), or lines (`{ customer, lines: [{ item, amountCents }] }`,
 * whose order runs the saga). Every problem
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
  const allowed = 'lines' in fields ? FIELDS_WITH_LINES : FIELDS;
  for (const key of Object.keys(fields)) {
    if (!allowed.includes(key)) problems.push(`${key}: unknown field; an order has ${FIELDS.join(', ')}, or ${FIELDS_WITH_LINES.join(' and ')}`);
  }
  const customer = text(fields, 'customer', problems);
  if ('lines' in fields) {
    const lines = parseLines(fields.lines, problems);
    if (problems.length > 0) throw new BadRequestException(problems);
    const summary = lines.map((line) => line.item).join(', ');
    const item = summary.length > ORDER_LIMITS.textMaxLength ? `${summary.slice(0, ORDER_LIMITS.textMaxLength - 3)}...` : summary;
    return { customer, item, amountCents: lines.reduce((total, line) => total + line.amountCents, 0), lines };
  }
  const item = text(fields, 'item', problems);
  const amountCents = amount(fields.amountCents, 'amountCents', problems);
  if (problems.length > 0) throw new BadRequestException(problems);
  return { customer, item, amountCents };
}

function amount(value: unknown, field: string, problems: string[]): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > ORDER_LIMITS.maxAmountCents) {
    problems.push(`${field}: must be a positive integer number of cents, at most ${ORDER_LIMITS.maxAmountCents}, got ${describe(value)}`);
  }
  return value as number;
}

/** `lines`: 1 to 20 `{ item, amountCents }`, whose total is at most the largest amount. */
function parseLines(value: unknown, problems: string[]): OrderLine[] {
  if (!Array.isArray(value) || value.length < 1 || value.length > ORDER_LIMITS.maxLines) {
    problems.push(`lines: must be an array of 1 to ${ORDER_LIMITS.maxLines} {"item", "amountCents"} objects, got ${describe(value)}`);
    return [];
  }
  const lines = value.map((line: unknown, i) => {
    if (typeof line !== 'object' || line === null || Array.isArray(line)) {
      problems.push(`lines[${i}]: must be an object like {"item": "Loom cards", "amountCents": 4200}, got ${describe(line)}`);
      return { item: '', amountCents: 0 };
    }
    const fields = line as Record<string, unknown>;
    for (const key of Object.keys(fields)) {
      if (key !== 'item' && key !== 'amountCents') problems.push(`lines[${i}].${key}: unknown field; a line has item, amountCents`);
    }
    return { item: text(fields, 'item', problems, `lines[${i}].item`), amountCents: amount(fields.amountCents, `lines[${i}].amountCents`, problems) };
  });
  if (problems.length === 0 && lines.reduce((total, line) => total + line.amountCents, 0) > ORDER_LIMITS.maxAmountCents) {
    problems.push(`lines: the total must be at most ${ORDER_LIMITS.maxAmountCents} cents`);
  }
  return lines;
}
