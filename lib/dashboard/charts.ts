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

const WIDTH = 720;
const HEIGHT = 180;
const LEFT = 44;
const BOTTOM = 22;
const TOP = 8;

/** 1, 2, 5, 10, 20, 50, ...: the smallest such number not below `value` (at least 1). */
export function niceCeiling(value: number): number {
  if (value <= 1) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

function bucketLabel(date: Date, bucketSeconds: number): string {
  const text = utcText(date);
  return bucketSeconds >= 3600 ? text.slice(5, 16) : text.slice(11, 16);
}

function totals(input: BarChartInput): number[] {
  return input.buckets.map((_, i) => input.series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
}

/**
 * A stacked bar chart as inline SVG: one bar per bucket, a y axis from 0 to a round maximum,
 * times under the first, middle and last bars, and a tooltip per bar. Drawn on the server, so a
 * page needs no chart library and no script; colours come from the stylesheet.
 */
export function barChart(input: BarChartInput): Html {
  if (input.buckets.length === 0) return html``;
  const max = niceCeiling(Math.max(0, ...totals(input)));
  const plotWidth = WIDTH - LEFT - 4;
  const plotHeight = HEIGHT - TOP - BOTTOM;
  const step = plotWidth / Math.max(1, input.buckets.length);
  const barWidth = Math.max(1, step * 0.8);
  const y = (value: number): number => TOP + plotHeight - (value / max) * plotHeight;
  const bars = input.buckets.map((bucket, i) => {
    let base = 0;
    const x = LEFT + i * step + (step - barWidth) / 2;
    const parts = input.series.map((series) => {
      const value = series.values[i] ?? 0;
      const rect = value > 0
        ? html`<rect class="${series.className}" x="${x.toFixed(1)}" y="${y(base + value).toFixed(1)}" width="${barWidth.toFixed(1)}" height="${(y(base) - y(base + value)).toFixed(1)}"/>`
        : html``;
      base += value;
      return rect;
    });
    const tip = `${utcText(bucket)}: ${input.series.map((s) => `${s.values[i] ?? 0} ${s.label}`).join(', ')}`;
    return html`<g><title>${tip}</title><rect class="hit" x="${(LEFT + i * step).toFixed(1)}" y="${TOP}" width="${step.toFixed(1)}" height="${plotHeight}"/>${parts}</g>`;
  });
  const ticks = [0, max / 2, max].map(
    (value) => html`<line class="grid" x1="${LEFT}" x2="${WIDTH - 4}" y1="${y(value).toFixed(1)}" y2="${y(value).toFixed(1)}"/>
      <text class="axis" x="${LEFT - 6}" y="${(y(value) + 4).toFixed(1)}" text-anchor="end">${Number.isInteger(value) ? value : value.toFixed(1)}</text>`,
  );
  const labelled = [...new Set([0, Math.floor((input.buckets.length - 1) / 2), input.buckets.length - 1])].filter((i) => i >= 0);
  const anchor = (i: number): string => (i === 0 ? 'start' : i === input.buckets.length - 1 ? 'end' : 'middle');
  const labelX = (i: number): number => (i === 0 ? LEFT : i === input.buckets.length - 1 ? LEFT + plotWidth : LEFT + i * step + step / 2);
  const labels = labelled.map(
    (i) => html`<text class="axis" x="${labelX(i).toFixed(1)}" y="${HEIGHT - 6}" text-anchor="${anchor(i)}">${bucketLabel(input.buckets[i], input.bucketSeconds)} UTC</text>`,
  );
  return html`<figure class="chart">
    <svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${input.title}">${ticks}${bars}${labels}</svg>
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
