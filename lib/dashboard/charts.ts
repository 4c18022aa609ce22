import { utcText } from './format';
import { html, type Html } from './html';

/** One stacked layer of a bar chart; `className` colours it (see dashboard.css). */
export interface ChartSeries {
  label: string;
  className: string;
  values: readonly number[];
}

export interface BarChartInput {
  /** Accessible name of the chart. */
  title: string;
  /** Start of each bucket. */
  buckets: readonly Date[];
  bucketSeconds: number;
  series: readonly ChartSeries[];
}

// The plot is as wide as the page gives it (x in percent), and as high as these pixels: text
// keeps its size on a phone and on a wide screen, instead of scaling with a viewBox.
const HEIGHT = 180;
const BOTTOM = 22;
const TOP = 8;

/** 1, 2, 5, 10, 20, 50, ...: the smallest such number not below `value` (at least 1). */
export function niceCeiling(value: number): number {
  if (value <= 1) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

const UNITS: ReadonlyArray<[number, string]> = [
  [1e9, 'G'],
  [1e6, 'M'],
  [1e3, 'k'],
];

/** A count short enough for an axis: `950`, `2.5k`, `100k`, `1.2M` (at most three significant digits). */
export function shortCount(value: number): string {
  for (const [size, unit] of UNITS) {
    if (Math.abs(value) >= size) return `${Number((value / size).toPrecision(3))}${unit}`;
  }
  return String(Number(value.toPrecision(3)));
}

function bucketLabel(date: Date, bucketSeconds: number): string {
  const text = utcText(date);
  return bucketSeconds >= 3600 ? text.slice(5, 16) : text.slice(11, 16);
}

function totals(input: BarChartInput): number[] {
  return input.buckets.map((_, i) => input.series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
}

const percent = (value: number): string => `${value.toFixed(3)}%`;

/**
 * A stacked bar chart as inline SVG: one bar per bucket, a y axis from 0 to a round maximum
 * (its labels shortened: `100k`), times under the first, middle and last bars (the last one
 * saying UTC), and a
 * tooltip per bar. Drawn on the server, so a page needs no chart library and no script;
 * colours and the axis's gutter come from the stylesheet.
 */
export function barChart(input: BarChartInput): Html {
  if (input.buckets.length === 0) return html``;
  const max = niceCeiling(Math.max(0, ...totals(input)));
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const count = input.buckets.length;
  const step = 100 / count;
  const barWidth = step * 0.8;
  const y = (value: number): number => TOP + plotHeight - (value / max) * plotHeight;
  const bars = input.buckets.map((bucket, i) => {
    let base = 0;
    const x = i * step + (step - barWidth) / 2;
    const parts = input.series.map((series) => {
      const value = series.values[i] ?? 0;
      const rect = value > 0
        ? html`<rect class="${series.className}" x="${percent(x)}" y="${y(base + value).toFixed(1)}" width="${percent(barWidth)}" height="${(y(base) - y(base + value)).toFixed(1)}"/>`
        : html``;
      base += value;
      return rect;
    });
    const tip = `${utcText(bucket)}: ${input.series.map((s) => `${(s.values[i] ?? 0).toLocaleString('en')} ${s.label}`).join(', ')}`;
    return html`<g><title>${tip}</title><rect class="hit" x="${percent(i * step)}" y="${TOP}" width="${percent(step)}" height="${plotHeight}"/>${parts}</g>`;
  });
  // The y axis's labels stand left of the plot, in the gutter the stylesheet leaves (overflow: visible).
  const ticks = [0, max / 2, max].map(
    (value) => html`<line class="grid" x1="0" x2="100%" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}"/>
      <text class="axis" x="-6" y="${(y(value) + 4).toFixed(1)}" text-anchor="end">${shortCount(value)}</text>`,
  );
  const labelled = [...new Set([0, Math.floor((count - 1) / 2), count - 1])];
  const anchor = (i: number): string => (i === 0 ? 'start' : i === count - 1 ? 'end' : 'middle');
  const labelX = (i: number): number => (i === 0 ? 0 : i === count - 1 ? 100 : i * step + step / 2);
  // The zone is said once, after the last time, so that three times fit a phone's width.
  const labels = labelled.map(
    (i) => html`<text class="axis" x="${percent(labelX(i))}" y="${HEIGHT - 6}" text-anchor="${anchor(i)}">${bucketLabel(input.buckets[i], input.bucketSeconds)}${i === count - 1 ? ' UTC' : ''}</text>`,
  );
  return html`<figure class="chart">
    <svg width="100%" height="${HEIGHT}" role="img" aria-label="${input.title}">${ticks}${bars}${labels}</svg>
    <figcaption>${input.series.map((s) => html`<span class="legend"><span class="swatch ${s.className}"></span>${s.label}</span>`)}</figcaption>
  </figure>`;
}

/** A bar per bucket without axes, for a table cell: the shape of recent activity. */
export function sparkline(input: BarChartInput): Html {
  const width = 120;
  const height = 24;
  const max = Math.max(1, ...totals(input));
  const step = width / Math.max(1, input.buckets.length);
  const bars = input.buckets.map((_, i) => {
    let base = 0;
    return input.series.map((series) => {
      const value = series.values[i] ?? 0;
      if (value === 0) return html``;
      const top = height - ((base + value) / max) * height;
      const bar = html`<rect class="${series.className}" x="${(i * step).toFixed(1)}" y="${top.toFixed(1)}" width="${Math.max(0.8, step - 0.4).toFixed(1)}" height="${((value / max) * height).toFixed(1)}"/>`;
      base += value;
      return bar;
    });
  });
  return html`<svg class="sparkline" viewBox="0 0 ${width} ${height}" role="img" aria-label="${input.title}" preserveAspectRatio="none">${bars}</svg>`;
}
