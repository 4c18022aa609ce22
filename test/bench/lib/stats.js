'use strict';

function sorted(values) {
  return values.filter((v) => typeof v === 'number' && Number.isFinite(v)).sort((a, b) => a - b);
}

/** Nearest-rank percentile (p in 0..100) of numbers. */
function percentile(values, p) {
  const s = sorted(values);
  if (s.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[Math.min(s.length, rank) - 1];
}

function median(values) {
  const s = sorted(values);
  if (s.length === 0) return null;
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** { median, min, max, n } of numbers (nulls skipped). */
function summary(values) {
  const s = sorted(values);
  if (s.length === 0) return { median: null, min: null, max: null, n: 0 };
  return { median: median(s), min: s[0], max: s[s.length - 1], n: s.length };
}

function rotate(list, by) {
  if (list.length === 0) return [];
  const k = ((by % list.length) + list.length) % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

module.exports = { percentile, median, summary, rotate };
