import type { JobLineage, JobSnapshot, JobState } from '../../core/types';
import { stateBadge } from '../format';
import { html, type Html } from '../html';
import type { PageContext } from '../page';

/** What a section of the job page needs. */
export interface JobSection {
  context: PageContext;
  job: JobSnapshot & JobLineage;
  /** Whether the viewer may see payloads, results, progress and checkpoint values. */
  data: boolean;
}

/** A link to a job by its id, with its state when known. */
export function jobLink(context: PageContext, id: string, state?: JobState): Html {
  return html`<a class="id" href="${context.href(`jobs/${id}`)}">${id}</a>${state && html` ${stateBadge(state)}`}`;
}
