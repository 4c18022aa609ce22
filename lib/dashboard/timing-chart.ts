import type { TimingStats } from '../core/operator/job-insights';
import { html, type Html } from './html';

/** `850 ms`, `12.4 s`, `3.2 min`, `1.5 h`: short enough for a chart's label. */
export function shortDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toPrecision(3))} s`;
  if (ms < 3_600_000) return `${Number((ms / 60_000).toPrecision(3))} min`;
  return `${Number((ms / 3_600_000).toPrecision(3))} h`;
}

const ROW = 46;
const BAR = 8;
const PERCENTILES = [
  { key: 'p50', label: '50th percentile', className: 'fill-p50' },
  { key: 'p90', label: '90th percentile', className: 'fill-p90' },
  { key: 'p99', label: '99th percentile', className: 'fill-p99' },
] as const;

/**
 * Percentiles of one timing per queue or type as inline SVG: per name, its label and three
 * bars (50th, 90th, 99th percentile) on a scale shared by all names, each with its value. The x
 * axis is in percent of the width the page gives, so the chart fits a phone's 390 px as well.
 */
export function percentileChart(title: string, rows: readonly TimingStats[], pick: (row: TimingStats) => TimingStats['run'] | null): Html {
  const shown = rows.filter((row) => pick(row) !== null);
  if (shown.length === 0) return html`<p class="muted">No attempt in this window.</p>`;
  const max = Math.max(1, ...shown.map((row) => pick(row)?.p99 ?? 0));
  const height = shown.length * ROW;
  const groups = shown.map((row, i) => {
    const values = pick(row) as TimingStats['run'];
    const top = i * ROW;
    const bars = PERCENTILES.map((p, j) => {
      const width = Math.max(0.4, (values[p.key] / max) * 70);
      const y = top + 16 + j * (BAR + 2);
      return html`<rect class="${p.className}" x="0" y="${y}" width="${width.toFixed(2)}%" height="${BAR}"><title>${row.name}: ${p.label} ${shortDuration(values[p.key])}</title></rect>
        <text class="axis" x="${(width + 1).toFixed(2)}%" y="${y + BAR - 0.5}">${shortDuration(values[p.key])}</text>`;
    });
    return html`<g data-name="${row.name}"><text class="axis" x="0" y="${top + 11}">${row.name} · ${row.attempts.toLocaleString('en')} attempts</text>${bars}</g>`;
  });
  return html`<figure class="chart timing">
    <svg width="100%" height="${height}" role="img" aria-label="${title}">${groups}</svg>
    <figcaption>${PERCENTILES.map((p) => html`<span class="legend"><span class="swatch ${p.className}"></span>${p.label}</span>`)}</figcaption>
  </figure>`;
}
