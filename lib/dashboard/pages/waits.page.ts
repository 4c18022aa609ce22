import { WorkhorseValidationError } from '../../core/errors';
import type { HumanWait, ListHumanWaitsFilter } from '../../core/waits';
import { relative, time } from '../format';
import { html, type Html } from '../html';
import type { DashboardPage, PageContext } from '../page';
import { deadline, decide, decideForm, mayShowContext, waitContext } from './human-decision';
import { optionalName, optionalText, pageSize, pager } from './listing';

function filterOf(query: URLSearchParams): ListHumanWaitsFilter {
  return { queue: optionalName(query, 'queue'), type: optionalName(query, 'type'), name: optionalText(query, 'name', 200) };
}

function filterForm(context: PageContext, error: string | null): Html {
  const q = context.query;
  return html`<form method="get" action="${context.href('waits')}" class="filters">
    <label>Queue <input name="queue" value="${q.get('queue') ?? ''}" maxlength="128"></label>
    <label>Type <input name="type" value="${q.get('type') ?? ''}" maxlength="128"></label>
    <label>Wait <input name="name" value="${q.get('name') ?? ''}" maxlength="200"></label>
    <button type="submit">Filter</button> <a href="${context.href('waits')}">Clear</a>
    ${error && html`<p class="error" role="alert">${error}</p>`}</form>`;
}

async function waitCard(context: PageContext, wait: HumanWait, showContext: boolean): Promise<Html> {
  return html`<article class="wait">
    <h2><span class="wait-name">${wait.name}</span> <span class="muted">on</span> <a class="id" href="${context.href(`jobs/${wait.jobId}`)}">${wait.jobId}</a></h2>
    <dl class="summary">
      <dt>Job</dt><dd>${wait.type} <span class="muted">in</span> <a href="${context.href('waits', { queue: wait.queue })}">${wait.queue}</a>, attempt ${wait.attempt}</dd>
      <dt>Waiting since</dt><dd>${time(wait.createdAt)} <span class="muted">(${relative(wait.createdAt, context.now)})</span></dd>
      <dt>Deadline</dt><dd>${deadline(wait)}</dd>
      <dt>Choices</dt><dd>${wait.choices ? wait.choices.map((choice) => html`<span class="tag">${choice}</span> `) : html`<span class="muted">any JSON value</span>`}</dd>
    </dl>
    <h3>Context</h3>${waitContext(wait, showContext)}
    ${await decideForm(context, wait)}
  </article>`;
}

/** The open human waits, oldest first, each with its context and the form that decides it. */
export const waitsPage: DashboardPage = {
  route: 'waits',
  live: true,
  nav: 'Human waits',
  async render(context) {
    let filter: ListHumanWaitsFilter;
    try {
      filter = filterOf(context.query);
    } catch (error) {
      if (!(error instanceof WorkhorseValidationError)) throw error;
      return { title: 'Human waits', status: 400, body: filterForm(context, error.message) };
    }
    const page = await context.admin.listHumanWaits({ ...filter, limit: pageSize(context.query), cursor: context.query.get('cursor') ?? undefined });
    const showContext = await mayShowContext(context);
    const cards = await Promise.all(page.items.map((wait) => waitCard(context, wait, showContext)));
    return {
      title: 'Human waits',
      body: html`${filterForm(context, null)}
        ${cards.length === 0 ? html`<p class="muted">No job is waiting for a decision${context.query.has('cursor') ? ' on this page' : ''}.</p>` : cards}
        ${pager(context, 'waits', page.nextCursor, 'Next waits')}`,
    };
  },
  actions: { decide: { action: 'decide-wait', run: decide } },
};
