import { html, type Html } from '../html';
import { table } from '../layout';
import { jobLink, type JobSection } from './job-section';

/** How many children the job page lists; the rest are a link to the job list away. */
const CHILDREN_SHOWN = 50;

/**
 * The jobs a job waits on and its family: what it is blocked on now, its `dependsOn`
 * prerequisites, the parent that started it and the children it started, each linked with its
 * state.
 */
export function family({ context, job }: JobSection): Html {
  if (job.dependencies.length === 0 && job.parentId === null && job.children.length === 0) return html``;
  const shown = job.children.slice(0, CHILDREN_SHOWN);
  const childRows = shown.map((child) => html`<tr><td>${jobLink(context, child.id, child.state)}</td><td>${child.key}</td></tr>`);
  return html`<section class="family"><h2>Dependencies and children</h2>
    ${job.parentId && html`<p>Started by the parent ${jobLink(context, job.parentId)}</p>`}
    ${job.waitingOn.length > 0 && html`<h3>Waiting on</h3><ul class="links">${job.waitingOn.map((link) => html`<li>${jobLink(context, link.id, link.state)}</li>`)}</ul>`}
    ${job.dependencies.length > 0 && html`<h3>Prerequisites</h3><ul class="links">${job.dependencies.map((link) => html`<li>${jobLink(context, link.id, link.state)}</li>`)}</ul>`}
    ${job.children.length > 0 && html`<h3>Children (${job.children.length})</h3>${table(['Child', 'Started under the key'], childRows, '')}
      <p><a href="${context.href('jobs', { parent: job.id })}">${job.children.length > CHILDREN_SHOWN ? `All ${job.children.length} children` : 'The children in the job list'}</a></p>`}
  </section>`;
}
