import type { JsonValue, TimelineEntry } from 'nestjs-workhorse/core';

/** Keys whose values the table shows in other columns, or derives `took` from. */
const HIDDEN_KEYS = new Set(['startedAt', 'finishedAt']);

function detail(key: string, value: JsonValue): string | null {
  if (value === null) return null;
  if (typeof value === 'object' && !Array.isArray(value) && typeof value.name === 'string') {
    return `${key}="${value.name}: ${String(value.message ?? '')}"`;
  }
  const text = typeof value === 'string' ? value : JSON.stringify(value);
  return `${key}=${text.length > 60 ? `${text.slice(0, 57)}...` : text}`;
}

function details(entry: TimelineEntry): string {
  const data = entry.data ?? {};
  const parts = Object.entries(data)
    .filter(([key]) => !HIDDEN_KEYS.has(key))
    .map(([key, value]) => detail(key, value))
    .filter((part): part is string => part !== null);
  const { startedAt, finishedAt } = data;
  if (typeof startedAt === 'string' && typeof finishedAt === 'string') {
    parts.push(`took=${Date.parse(finishedAt) - Date.parse(startedAt)}ms`);
  }
  return parts.join(' ');
}

/**
 * A job's timeline as a table, like `workhorse jobs timeline ID` prints it: times relative to the
 * first entry, lifecycle events by their kind, closed attempts as `attempt <outcome>`.
 */
export function formatTimeline(entries: TimelineEntry[]): string {
  const start = entries[0]?.at.getTime() ?? 0;
  const rows = entries.map((entry) => [
    `+${((entry.at.getTime() - start) / 1000).toFixed(3)}s`,
    entry.source === 'attempt' ? `attempt ${entry.kind}` : entry.kind,
    entry.attempt === null ? '-' : String(entry.attempt),
    entry.workerId ?? '-',
    entry.fenceToken ?? '-',
    details(entry),
  ]);
  const header = ['AT', 'WHAT', 'ATTEMPT', 'WORKER', 'FENCE', 'DETAILS'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  return [header, ...rows]
    .map((row) => row.map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]))).join('  ').trimEnd())
    .join('\n');
}
