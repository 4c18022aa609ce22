/**
 * HTML built from template literals in which every interpolated value is escaped unless it is
 * already `Html`. Payloads, results, errors and names are user data: the only way markup
 * reaches a page is through the `html` tag, so forgetting to escape cannot happen by accident.
 */

/** A fragment of markup that is safe to send as it is. */
export class Html {
  private constructor(readonly text: string) {}

  /** Markup this module composed; never call it with data. */
  static trusted(text: string): Html {
    return new Html(text);
  }

  toString(): string {
    return this.text;
  }
}

/** What may be interpolated: escaped as text unless it is `Html`; lists are concatenated. */
export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

// C0 and C1 control characters (but tab, line feed and carriage return) and the bidirectional
// overrides: shown as visible escapes, so stored data cannot hide text or reorder what an
// operator reads.
const INVISIBLE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;

/** Escapes text for use in an element or a quoted attribute. */
export function escapeHtml(text: string): string {
  return text
    .replace(/[&<>"']/g, (c) => ENTITIES[c])
    .replace(INVISIBLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (value === null || value === undefined || value === false) return '';
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/**
 * The tag: `html\`<td>${job.type}</td>\``. `null`, `undefined` and `false` render nothing, so
 * `${condition && html\`...\`}` works.
 */
export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i += 1) out += render(values[i]) + strings[i + 1];
  return Html.trusted(out);
}
