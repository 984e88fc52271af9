/**
 * `POST /v1/migrations/{id}/promote` against the server (built in process): a migration waiting at a manual hold
 * goes on to its next step with no body, straight to 100 % with `{ "full": true }`, and the verb is
 * refused (409 VERB_REFUSED) once nothing waits for it. Real app processes behind the real router.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { freePort, killSlots } from '../support/migrations.js';
import { type Api, type InProcessServer, ServerHarness } from '../support/server.js';

const harness = new ServerHarness();
let server: InProcessServer;
let api: Api;
let listen: string;
const fixture = 'test/fixtures/canary/topology.yaml';

beforeAll(async () => {
  ({ server, api } = await harness.serveInProcess({ args: ['--rate-limit', '0'] }));
  listen = `127.0.0.1:${await freePort()}`;
}, 30_000);

afterAll(async () => {
  killSlots(server.stateDir);
  await harness.cleanup();
}, 60_000);

function topology(version: string, shift: string): string {
  return readFileSync(path.join(repoRoot, fixture), 'utf8')
    .replace(/127\.0\.0\.1:\d+/, listen)
    .replace(/version: "[^"]*"/, `version: "${version}"`)
    .replace(/shift: .*/, `shift: ${shift}`);
}

async function apply(text: string): Promise<string> {
  const r = await api.post('/v1/apply', { topology: text, path: fixture });
  expect(r.status, r.text).toBe(202);
  return r.json.summary.id as string;
}

describe('POST /v1/migrations/{id}/promote', () => {
  it('moves a manual hold on: the next step, then { full: true } to 100 %; refused once ended', {
    timeout: 60_000,
  }, async () => {
    expect((await api.waitForEnd(await apply(topology('1.0.0', '[100]')))).lifecycle).toBe('completed');
    const id = await apply(
      topology('2.0.0', '[{ weight: 10, hold: manual }, { weight: 30, hold: manual }, 60, 100]'),
    );
    await api.waitFor(id, (s) => s.lifecycle === 'awaiting_promotion');

    const next = await api.post(`/v1/migrations/${id}/promote`);
    expect(next.status, next.text).toBe(202);
    expect(next.json.summary.lifecycle).toBe('running');
    // At 30 %, which holds too.
    await api.waitFor(id, (s) => s.lifecycle === 'awaiting_promotion');

    const full = await api.post(`/v1/migrations/${id}/promote`, { full: true });
    expect(full.status, full.text).toBe(202);
    expect((await api.waitForEnd(id)).lifecycle).toBe('completed');
    const logs = await api.get(`/v1/migrations/${id}/logs`);
    const messages = logs.text
      .trimEnd()
      .split('\n')
      .map((l) => (JSON.parse(l) as { message: string }).message);
    const steps = messages.filter((m) => /^route www at \d+% green$/.test(m));
    expect(steps).toEqual(['route www at 10% green', 'route www at 30% green', 'route www at 100% green']);

    const again = await api.post(`/v1/migrations/${id}/promote`);
    expect(again.status).toBe(409);
    expect(again.json.code).toBe('VERB_REFUSED');
    expect(again.json.detail).toMatch(/cannot promote .*: it has completed/);
  });
});
