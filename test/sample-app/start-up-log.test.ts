/**
 * `npm run start:api` for real, as a child process on a fresh test database: its start-up log
 * lists `GET /health`, `GET /metrics` and the dashboard's URL, and each answers there; SIGTERM
 * ends it.
 */
import { SampleProcess } from '../../sample-app/demo/sample-process';
import { useTestDatabase } from '../support/test-database';

const STEP_TIMEOUT_MS = 60_000;

describe('the sample API process', () => {
  let api: SampleProcess | null = null;
  const { db } = useTestDatabase({
    checkInvariants: false,
    beforeDrop: async () => {
      await api?.stop('SIGKILL');
    },
  });

  it('logs where its health check, metrics and dashboard are, and each answers there', async () => {
    api = new SampleProcess({ name: 'api', script: 'api.ts', env: { DATABASE_URL: db.url, PORT: '0' }, print: () => undefined });
    // Watched together: the lines come one right after the other, and a watch sees only later lines.
    const [[, health], [, metrics], [, dashboard]] = await Promise.all([
      api.waitForLog(/^Health: GET (http:\/\/\S+\/health) /, STEP_TIMEOUT_MS),
      api.waitForLog(/^Metrics: GET (http:\/\/\S+\/metrics) /, STEP_TIMEOUT_MS),
      api.waitForLog(/^Dashboard: (http:\/\/\S+\/workhorse\/) /, STEP_TIMEOUT_MS),
    ]);

    const healthResponse = await fetch(health);
    expect(healthResponse.status).toBe(200);
    expect(await healthResponse.json()).toMatchObject({ status: 'ok', info: { queue: { status: 'up' } } });
    const metricsResponse = await fetch(metrics);
    expect(metricsResponse.status).toBe(200);
    expect(metricsResponse.headers.get('content-type')).toMatch(/^text\/plain/);
    expect((await fetch(dashboard)).status).toBe(200);

    const exit = await api.stop('SIGTERM');
    api = null;
    // Nest's shutdown hooks close the app, then end the process with the signal it received
    // (a process that had not closed would have been killed: SIGKILL).
    expect(exit).toEqual({ code: null, signal: 'SIGTERM' });
  }, 120_000);
});
