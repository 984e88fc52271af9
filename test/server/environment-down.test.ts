/**
 * `POST /v1/environments/{name}/down` over real HTTP: 404 problem+json for an environment never
 * migrated (it answered 200 with empty lists, as if something had been taken down).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Api, demoApply, ServerHarness } from '../support/server.js';

const harness = new ServerHarness();
let api: Api;
const started: string[] = [];

beforeAll(async () => {
  ({ api } = await harness.serveInProcess({ args: ['--rate-limit', '0'] }));
}, 30_000);

afterAll(() => harness.cancelThenCleanup(api, started), 60_000);

it('404 ENVIRONMENT_NOT_FOUND for an environment never migrated; 200 for one that was, then empty', async () => {
  const unknown = await api.post('/v1/environments/nope/down');
  expect(unknown.status).toBe(404);
  expect(unknown.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(unknown.json).toMatchObject({ code: 'ENVIRONMENT_NOT_FOUND', status: 404 });
  expect(unknown.json.detail).toMatch(
    /^environment nope has no recorded layout in .*: it was never migrated/,
  );

  const r = await api.post('/v1/apply', demoApply({ name: 'downed' }));
  const id = r.json.summary.id as string;
  started.push(id);
  const done = await api.waitForEnd(id);
  const down = await api.post(`/v1/environments/${done.environment}/down`);
  expect(down.status).toBe(200);
  const again = await api.post(`/v1/environments/${done.environment}/down`);
  expect(again.json).toEqual({ environment: done.environment, components: [], routes: [] });
});
