/**
 * One migration in flight per environment, under load: 50 applies at once for one environment
 * answer exactly one 202, and 49 × 409 MIGRATION_CONFLICT naming the one that started.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { waitGone } from '../support/processes.js';
import {
  type Api,
  type CheckedResponse,
  demoApply,
  type MigrationSummary,
  ServerHarness,
} from '../support/server.js';

const harness = new ServerHarness();
let api: Api;
let started: string | undefined;

beforeAll(async () => {
  ({ api } = await harness.serveInProcess({ args: ['--rate-limit', '0'] }));
}, 30_000);

afterAll(() => harness.cancelThenCleanup(api, started ? [started] : []), 60_000);

it('50 concurrent applies for one environment: one 202, 49 × 409 MIGRATION_CONFLICT naming it', async () => {
  // Each request a different version: none is a retry of another. A 10-minute bake keeps the
  // winner in flight until it is cancelled.
  const answers: CheckedResponse[] = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      api.post(
        '/v1/apply',
        demoApply({ name: 'race', version: String(i + 1), bake: '10m', commit: 'manual' }),
      ),
    ),
  );
  const accepted = answers.filter((r) => r.status === 202);
  const conflicts = answers.filter((r) => r.status === 409);
  expect(accepted).toHaveLength(1);
  started = accepted[0]?.json.summary.id as string;
  expect(conflicts).toHaveLength(49);
  for (const r of conflicts) {
    expect(r.json.code).toBe('MIGRATION_CONFLICT');
    expect(r.json.migrationId).toBe(started);
  }

  const list = await api.get('/v1/migrations?environment=race');
  expect(list.json.items.map((m: MigrationSummary) => m.id)).toEqual([started]);
  const summary = await api.summary(started);
  expect(summary.endedAt).toBeNull();

  // Then cancelled: it ends, its runner exits, and the environment takes a migration again.
  const cancel = await api.post('/v1/cancel', { migrationId: started });
  expect(cancel.status).toBe(202);
  const ended = await api.waitForEnd(started);
  expect(ended.lifecycle).toBe('cancelled');
  if (summary.runnerPid !== null) await waitGone(summary.runnerPid);
  const next = await api.post('/v1/apply', demoApply({ name: 'race', version: 'next' }));
  expect(next.status).toBe(202);
  const done = await api.waitForEnd(next.json.summary.id);
  expect(done.lifecycle).toBe('completed');
}, 60_000);
