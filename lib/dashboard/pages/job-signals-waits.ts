import type { JobSignal, JobWait } from '../../core/job-waits';
import { time, truncate } from '../format';
import { html, type Html } from '../html';
import { table } from '../layout';
import { deadline, decideForm, mayShowContext, waitContext } from './human-decision';
import type { JobSection } from './job-section';

/** How many signals and waits the job page lists, the newest first. */
const SHOWN = 100;
const LIVE = new Set(['blocked', 'scheduled', 'ready', 'active']);

function value(shown: boolean, data: JobSignal['payload']): Html {
  if (!shown) return html`<span class="redacted">hidden</span>`;
  return data === null ? html`<span class="muted">-</span>` : html`<pre class="json small">${truncate(JSON.stringify(data), 2048)}</pre>`;
}

function signalRow({ data }: JobSection, signal: JobSignal): Html {
  const status = signal.status === 'consumed' ? `delivered to wait #${signal.waitSeq}` : 'buffered';
  return html`<tr><td>${time(signal.sentAt)}</td><td>${signal.name}</td><td>${status}</td><td class="details">${value(data, signal.payload)}</td></tr>`;
}

function waitDetails(wait: JobWait, data: boolean): Html {
  if (wait.kind === 'signal') return wait.signalId ? html`signal #${wait.signalId}` : html``;
  if (wait.status !== 'decided') return wait.choices ? html`choices: ${wait.choices.map((c) => html`<span class="tag">${c}</span> `)}` : html``;
  return html`${value(data, wait.decision)} by <strong>${wait.actor}</strong>${wait.reason && html`: ${wait.reason}`}`;
}

function waitRow({ data }: JobSection, wait: JobWait): Html {
  return html`<tr><td>${time(wait.createdAt)}</td><td>${wait.kind === 'human' ? 'decision' : 'signal'}</td>
    <td>${wait.name}${wait.kind === 'signal' && html` <span class="muted">#${wait.seq}</span>`}</td>
    <td><span class="wait-status wait-${wait.status}">${wait.status.replace('_', ' ')}</span></td><td>${deadline(wait)}</td><td>${time(wait.resolvedAt)}</td>
    <td class="details">${waitDetails(wait, data)}</td></tr>`;
}

/**
 * The signals sent to the job and the waits its handler reached (for signals and for human
 * decisions), the newest first; an open human wait of a live job shows its context and the form
 * that decides it.
 */
export async function signalsAndWaits(section: JobSection): Promise<Html> {
  const { context, job } = section;
  const [signals, waits] = await Promise.all([
    context.admin.listJobSignals(job.id, { limit: SHOWN }),
    context.admin.listJobWaits(job.id, { limit: SHOWN }),
  ]);
  if (signals.length === 0 && waits.length === 0) return html``;
  const open = waits.filter((wait) => wait.kind === 'human' && wait.status === 'open' && LIVE.has(job.state));
  const showContext = open.length > 0 && (await mayShowContext(context));
  const forms = await Promise.all(
    open.map(async (wait) => html`<article class="wait"><h3>Decision <span class="wait-name">${wait.name}</span> is awaited</h3>
      <h3>Context</h3>${waitContext(wait, showContext)}${await decideForm(context, { ...wait, jobId: job.id })}</article>`),
  );
  const more = (count: number) => count === SHOWN && html`<p class="muted">The newest ${SHOWN} are shown.</p>`;
  return html`<section class="waits"><h2>Signals and waits</h2>
    ${forms}
    ${waits.length > 0 && html`<h3>Waits</h3>${table(['Since', 'For', 'Name', 'State', 'Deadline', 'Answered', 'Details'], waits.map((w) => waitRow(section, w)), '')}${more(waits.length)}`}
    ${signals.length > 0 && html`<h3>Signals</h3>${table(['Sent', 'Name', 'Status', 'Payload'], signals.map((s) => signalRow(section, s)), '')}${more(signals.length)}`}
  </section>`;
}
