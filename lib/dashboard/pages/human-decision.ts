import { randomUUID } from 'node:crypto';
import { DecisionNotAllowedError, WorkhorseValidationError } from '../../core/errors';
import type { JsonValue } from '../../core/types';
import type { CompleteHumanWaitStatus } from '../../core/waits';
import { jsonBlock, redacted, time } from '../format';
import { html, type Html } from '../html';
import { DashboardHttpError } from '../http-request';
import { changeForm, reasonField, reasonOf } from '../layout';
import type { ActionContext, ActionResult, PageContext, PageView } from '../page';

// Deciding a human wait (`ctx.waitForHuman`), from the human waits page and the job page alike:
// the form shows the wait's context and offers exactly its choices; the change is `decide-wait`,
// posted to the `waits` route, and lands in the job's timeline (`human_decided`) with the actor
// and the reason.

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** What a decide form needs of a wait: `admin.listHumanWaits` and `admin.listJobWaits` both give it. */
export interface OpenHumanWait {
  jobId: string;
  name: string;
  context: JsonValue | null;
  choices: string[] | null;
  timeoutAt: Date | null;
}

/**
 * Whether the viewer may see a wait's context: it is the application's data, so `read-data`;
 * and whoever may decide sees what they decide on.
 */
export async function mayShowContext(context: PageContext): Promise<boolean> {
  return (await context.can('read-data')) || (await context.mayChange('decide-wait'));
}

/** The wait's context, or the note that it is hidden. */
export function waitContext(wait: Pick<OpenHumanWait, 'context'>, shown: boolean): Html {
  if (!shown) return redacted('Context');
  return wait.context === null ? html`<p class="muted">The handler gave no context.</p>` : jsonBlock(wait.context);
}

/** What a refused form had in it, shown again so nothing typed is lost. */
interface TypedDecision {
  decision: string;
  reason: string;
  request: string;
}

function decisionField(wait: OpenHumanWait, typed: TypedDecision | null): Html {
  if (wait.choices === null) {
    return html`<label class="decision">Decision (JSON) <textarea name="decision" required maxlength="65536" rows="2" placeholder='"approve" or {"amount": 10}'>${typed?.decision ?? ''}</textarea></label>`;
  }
  return html`<fieldset class="choices"><legend>Decision</legend>${wait.choices.map(
    (choice) => html`<label class="choice"><input type="radio" name="decision" value="${choice}" required${typed?.decision === choice ? html` checked` : ''}> ${choice}</label>`,
  )}</fieldset>`;
}

/** The form that decides one open wait (nothing when the viewer may not decide); `typed` fills it in again after a refusal. */
export async function decideForm(context: PageContext, wait: OpenHumanWait, typed: TypedDecision | null = null): Promise<Html> {
  if (!(await context.mayChange('decide-wait'))) return html``;
  return changeForm(
    context,
    { route: 'waits', name: 'decide', className: 'change decide' },
    html`<input type="hidden" name="job" value="${wait.jobId}"><input type="hidden" name="name" value="${wait.name}">
      <input type="hidden" name="request" value="${typed?.request ?? randomUUID()}">
      ${decisionField(wait, typed)} ${reasonField('why this decision', typed?.reason)} <button type="submit" class="primary">Decide</button>`,
  );
}

/** A decision that was not recorded: what happened, and where to go from here. */
function refused(context: PageContext, jobId: string, status: number, message: string): { view: PageView } {
  return {
    view: {
      title: 'Decision not recorded',
      status,
      body: html`<p class="error" role="alert">${message}</p>
        <p><a href="${context.href(`jobs/${jobId}`)}">Open the job</a> · <a href="${context.href('waits')}">Back to the human waits</a></p>`,
    },
  };
}

/** A decision refused for what the form held: the reason, and the wait's form again with what was typed, to correct it. */
async function correctable(context: ActionContext, wait: OpenHumanWait, typed: TypedDecision, message: string): Promise<{ view: PageView }> {
  const { view } = refused(context, wait.jobId, 400, message);
  const form = html`<article class="wait"><h2>Decision <span class="wait-name">${wait.name}</span> <span class="muted">on</span> <a class="id" href="${context.href(`jobs/${wait.jobId}`)}">${wait.jobId}</a></h2>
    <h3>Context</h3>${waitContext(wait, await mayShowContext(context))}${await decideForm(context, wait, typed)}</article>`;
  return { view: { ...view, body: html`${view.body}${form}` } };
}

const NOT_RECORDED: Record<Exclude<CompleteHumanWaitStatus, 'completed' | 'duplicate'>, [number, string]> = {
  already_decided: [409, 'This wait was decided already: nothing was changed. The job\u2019s page shows the decision.'],
  timed_out: [409, 'This wait timed out before the decision arrived: nothing was recorded, and the job goes on without it.'],
  not_waiting: [409, 'The job has no open wait of this name.'],
  not_found: [404, 'There is no such job.'],
  finished: [409, 'The job has ended: it waits for nothing any more.'],
};

function targetOf(form: URLSearchParams): { jobId: string; name: string; request: string } {
  const jobId = (form.get('job') ?? '').toLowerCase();
  const name = form.get('name') ?? '';
  const request = form.get('request') ?? '';
  if (!UUID.test(jobId) || name.length === 0 || name.length > 200 || !UUID.test(request)) {
    throw new DashboardHttpError(400, 'The form lacks the wait it decides: open the wait again and decide there.');
  }
  return { jobId, name, request };
}

/**
 * The `decide` change: checks the decision against the open wait's choices (a decision outside
 * them, or on a wait no longer open, is a page that says so; one the viewer can correct shows
 * the form again with what was typed), records it with the actor and the reason, and goes to
 * the job. The form's request id makes a repeated post a no-op.
 */
export async function decide(context: ActionContext): Promise<ActionResult> {
  const { jobId, name, request } = targetOf(context.form);
  const raw = context.form.get('decision') ?? '';
  const typed: TypedDecision = { decision: raw, reason: context.form.get('reason') ?? '', request };
  const [wait] = (await context.admin.listHumanWaits({ jobId, name, limit: 1 })).items;
  let reason: string;
  try {
    reason = reasonOf(context.form);
  } catch (error) {
    if (!(error instanceof DashboardHttpError) || !wait) throw error;
    return correctable(context, wait, typed, error.message);
  }
  let decision: JsonValue = raw;
  if (wait?.choices) {
    if (!wait.choices.includes(raw)) {
      const offered = wait.choices.map((choice) => JSON.stringify(choice)).join(', ');
      return correctable(context, wait, typed, `${raw === '' ? 'No decision was chosen' : `${JSON.stringify(raw)} is not one of this wait\u2019s choices`}: choose one of ${offered}.`);
    }
  } else if (wait) {
    try {
      decision = JSON.parse(raw) as JsonValue;
    } catch {
      return correctable(context, wait, typed, 'The decision must be JSON: a string in double quotes ("approve"), a number, an object or a list.');
    }
  }
  let status: CompleteHumanWaitStatus;
  try {
    status = await context.admin.completeHumanWait(jobId, name, decision, { actor: context.actor, reason, idempotencyKey: request });
  } catch (error) {
    if (error instanceof DecisionNotAllowedError || error instanceof WorkhorseValidationError) {
      return wait ? correctable(context, wait, typed, error.message) : refused(context, jobId, 400, error.message);
    }
    throw error;
  }
  if (status === 'completed' || status === 'duplicate') return { redirect: context.href(`jobs/${jobId}`, { notice: 'decided' }) };
  const [code, message] = NOT_RECORDED[status];
  return refused(context, jobId, code, message);
}

/** The deadline of a wait, or "none". */
export function deadline(wait: Pick<OpenHumanWait, 'timeoutAt'>): Html {
  return wait.timeoutAt ? time(wait.timeoutAt) : html`<span class="muted">none</span>`;
}
