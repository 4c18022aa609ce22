/**
 * The dashboard's rendering without a server: escaping of hostile text, charts, route matching,
 * option checks, and its browser script type-checked against the DOM's types.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import * as ts from 'typescript';
import { Admin, Pool, WorkhorseValidationError } from '../../lib/core';
import { barChart, niceCeiling, shortCount, sparkline } from '../../lib/dashboard/charts';
import { resolveDashboardOptions, type DashboardOptions } from '../../lib/dashboard/dashboard-options';
import { inlineData, jsonBlock, INLINE_JSON_CHARS } from '../../lib/dashboard/format';
import { escapeHtml, html, Html } from '../../lib/dashboard/html';
import { DASHBOARD_ACTIONS } from '../../lib/dashboard/dashboard-actions';
import { matchPage, type DashboardPage, type PageAction } from '../../lib/dashboard/page';
import { DASHBOARD_PAGES } from '../../lib/dashboard/pages';

describe('escaping', () => {
  const hostile = [
    '<script>alert(1)</script>',
    '"><img src=x onerror=alert(1)>',
    "' onmouseover='alert(1)",
    '</pre><svg onload=alert(1)>',
    '&lt;already&gt; & more',
  ];

  it('leaves no markup of the data in the output', () => {
    for (const text of hostile) {
      const out = html`<td title="${text}">${text}</td>`.toString();
      expect(out.startsWith('<td title="')).toBe(true);
      expect(out.slice(4).match(/[<>]/g)).toEqual(['>', '<', '>']);
      expect(out).not.toMatch(/<(script|img|svg)/i);
    }
    expect(escapeHtml('&lt;')).toBe('&amp;lt;');
  });

  it('shows control characters and bidirectional overrides as visible escapes', () => {
    expect(escapeHtml('red\u001b[31m bell\u0007 nul\u0000 rtl\u202egnp.exe c1\u0085')).toBe(
      'red\\u001b[31m bell\\u0007 nul\\u0000 rtl\\u202egnp.exe c1\\u0085',
    );
    expect(escapeHtml('tab\tline\nreturn\r')).toBe('tab\tline\nreturn\r');
  });

  it('inserts Html fragments as they are and renders nothing for null, undefined and false', () => {
    const inner = html`<b>${'<i>'}</b>`;
    expect(html`<p>${inner}${null}${undefined}${false}${[html`<br>`, '<br>']}${0}</p>`.toString()).toBe('<p><b>&lt;i&gt;</b><br>&lt;br&gt;0</p>');
    expect(Html.trusted('<hr>').toString()).toBe('<hr>');
  });

  it('pretty-prints JSON escaped, and cuts huge values with a note and a download link', () => {
    const small = jsonBlock({ html: '<script>x</script>' }).toString();
    expect(small).toContain('&lt;script&gt;x&lt;/script&gt;');
    const huge = jsonBlock({ text: 'y'.repeat(INLINE_JSON_CHARS * 2) }, 'jobs/1/payload.json').toString();
    expect(huge.length).toBeLessThan(INLINE_JSON_CHARS + 1000);
    expect(huge).toContain('Download the whole value');
  });

  it('summarises timeline data on one line: errors without their stack, attempts as durations', () => {
    expect(
      inlineData({
        error: { name: 'Boom', message: 'bad <thing>', stack: 'at x' },
        startedAt: '2026-01-01T00:00:00.000Z',
        finishedAt: '2026-01-01T00:00:01.250Z',
        reason: null,
      }),
    ).toBe('took=1250 ms error=Boom: bad <thing>');
  });
});

describe('charts', () => {
  const buckets = [0, 1, 2, 3].map((i) => new Date(Date.UTC(2026, 0, 1, 12, i)));

  it('rounds the axis to 1, 2 or 5 times a power of ten', () => {
    expect([0, 1, 3, 7, 10, 11, 42, 99, 101, 4999].map(niceCeiling)).toEqual([1, 1, 5, 10, 10, 20, 50, 100, 200, 5000]);
  });

  it('shortens the axis\'s counts to at most three significant digits', () => {
    expect([0, 0.5, 7, 950, 1000, 2500, 100_000, 1_250_000, 5_000_000_000].map(shortCount)).toEqual(['0', '0.5', '7', '950', '1k', '2.5k', '100k', '1.25M', '5G']);
  });

  it('draws stacked bars with a tooltip per bucket and no invalid coordinates', () => {
    const svg = barChart({
      title: 'Jobs <per> minute',
      buckets,
      bucketSeconds: 60,
      series: [
        { label: 'succeeded', className: 'fill-succeeded', values: [3, 0, 7, 1] },
        { label: 'failed', className: 'fill-failed', values: [1, 0, 0, 2] },
      ],
    }).toString();
    expect(svg).toContain('aria-label="Jobs &lt;per&gt; minute"');
    expect(svg.match(/<rect class="fill-/g)).toHaveLength(5);
    expect(svg.match(/<title>/g)).toHaveLength(4);
    expect(svg).toContain('2026-01-01 12:02:00 UTC: 7 succeeded, 0 failed');
    expect(svg).not.toMatch(/NaN|Infinity/);
    const empty = sparkline({ title: 'nothing', buckets, bucketSeconds: 60, series: [{ label: 'x', className: 'fill-failed', values: [0, 0, 0, 0] }] });
    expect(empty.toString()).not.toMatch(/<rect|NaN/);
  });
});

describe('actions', () => {
  it('are a closed list: a page cannot ask authorize about an action outside it (checked by the compiler)', () => {
    const offered: PageAction = {
      // @ts-expect-error 'drop-everything' is not one of DASHBOARD_ACTIONS; this file stops compiling if it ever is.
      action: 'drop-everything',
      run: async () => ({ redirect: './' }),
    };
    expect(DASHBOARD_ACTIONS).not.toContain(offered.action);
    const asked = DASHBOARD_PAGES.flatMap((page) => Object.values(page.actions ?? {}).map((action) => action.action));
    expect(asked.filter((action) => !DASHBOARD_ACTIONS.includes(action))).toEqual([]);
  });
});

describe('routes', () => {
  it('every route is matched by its own page, with decoded parameters', () => {
    const page = (route: string): DashboardPage | undefined => DASHBOARD_PAGES.find((p) => p.route === route);
    expect(matchPage(DASHBOARD_PAGES, '/')?.page).toBe(page(''));
    expect(matchPage(DASHBOARD_PAGES, '/jobs')?.page).toBe(page('jobs'));
    expect(matchPage(DASHBOARD_PAGES, '/jobs/')?.page).toBe(page('jobs'));
    expect(matchPage(DASHBOARD_PAGES, '/jobs/a%2Fb')).toEqual({ page: page('jobs/:id'), params: { id: 'a/b' } });
    expect(matchPage(DASHBOARD_PAGES, '/jobs/x/payload.json')?.params).toEqual({ id: 'x', file: 'payload.json' });
    expect(matchPage(DASHBOARD_PAGES, '/jobs/%E0%A4%A')).toBeNull();
    expect(matchPage(DASHBOARD_PAGES, '/nothing')).toBeNull();
    const routes = DASHBOARD_PAGES.map((p) => p.route);
    expect(new Set(routes).size).toBe(routes.length);
  });
});

describe('options', () => {
  const admin = new Admin(new Pool());
  const valid: DashboardOptions = { admin, path: '/workhorse', authorize: () => true };

  it('fills in defaults and drops a trailing slash', () => {
    const resolved = resolveDashboardOptions({ ...valid, path: '/ops/workhorse/' });
    expect(resolved.path).toBe('/ops/workhorse');
    expect(resolved.readOnly).toBe(false);
    expect(resolved.secret.length).toBeGreaterThanOrEqual(32);
    expect(resolveDashboardOptions({ ...valid, path: '/' }).path).toBe('/');
  });

  it('names the first bad option', () => {
    const cases: Array<[Partial<Record<string, unknown>>, string]> = [
      [{ path: 'workhorse' }, 'path'],
      [{ path: '/a//b' }, 'path'],
      [{ path: '/a/../b' }, 'path'],
      [{ path: '/a b' }, 'path'],
      [{ authorize: undefined }, 'authorize'],
      [{ admin: {} }, 'admin'],
      [{ readOnly: 'yes' }, 'readOnly'],
      [{ secret: 'short' }, 'secret'],
      [{ trustedOrigins: ['https://ops.example.com/path'] }, 'trustedOrigins'],
      [{ actor: 'me' }, 'actor'],
      [{ allowedHosts: 'ops.example.com' }, 'allowedHosts'],
      [{ allowedHosts: ['https://ops.example.com'] }, 'allowedHosts'],
      [{ allowedHosts: ['ops.example.com:8443'] }, 'allowedHosts'],
      [{ allowedHosts: [''] }, 'allowedHosts'],
      [{ allowedHosts: ['*'] }, 'allowedHosts'],
      [{ pathPrefix: '/x' }, 'pathPrefix'],
    ];
    for (const [change, field] of cases) {
      const attempt = () => resolveDashboardOptions({ ...valid, ...change } as DashboardOptions);
      expect(attempt).toThrow(WorkhorseValidationError);
      try {
        attempt();
      } catch (error) {
        expect((error as WorkhorseValidationError).field).toBe(field);
      }
    }
  });
});

describe('the entry points', () => {
  it('nestjs-workhorse/dashboard/handler loads no Nest package', () => {
    const root = join(__dirname, '../..');
    const script = `require('./lib/dashboard/handler.ts');
      const loaded = Object.keys(require.cache).filter((file) => file.includes('@nestjs'));
      process.stdout.write(JSON.stringify(loaded));`;
    const output = execFileSync(process.execPath, ['-r', './scripts/run-ts.js', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(JSON.parse(output)).toEqual([]);
  });
});

describe('the browser script', () => {
  it('type-checks against the DOM (checkJs, strict)', () => {
    const file = join(__dirname, '../../lib/dashboard/assets/dashboard.js');
    const program = ts.createProgram([file], {
      allowJs: true,
      checkJs: true,
      noEmit: true,
      strict: true,
      target: ts.ScriptTarget.ES2020,
      lib: ['lib.es2020.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'],
      types: [],
    });
    const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    expect(diagnostics).toEqual([]);
  });
});
