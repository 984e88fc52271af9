/**
 * The HTTP contract of `cutover server`, endpoint by endpoint, against the server built in process
 * as `cutover server` builds it (requests through `inject`; a client still sending an oversized body
 * over a real loopback socket): statuses, error codes, headers, and every JSON body against the
 * route's documented response schema (the Api client checks each answer; see
 * test/support/server-api.ts). The real process is started in
 * sse, events, log-streams and shutdown (streams, signals) and auth, tokens-file (refusals to start).
 */

import { once } from 'node:events';
import { cpSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot, runCli } from '../support/cli.js';
import { waitGone } from '../support/processes.js';
import {
  Api,
  demoApply,
  demoPath,
  demoText,
  demoTopology,
  type InProcessServer,
  injectOrigin,
  injectTransport,
  type MigrationSummary,
  ServerHarness,
  unknownId,
} from '../support/server.js';

const harness = new ServerHarness();
let server: InProcessServer;
let api: Api;
/** Every migration a test started: cancelled (if still in flight) and awaited in afterAll. */
const started: string[] = [];

beforeAll(async () => {
  ({ server, api } = await harness.serveInProcess({ args: ['--rate-limit', '0'], listen: true }));
}, 30_000);

afterAll(() => harness.cancelThenCleanup(api, started), 60_000);

/** Applies and expects a 202; records the migration for cleanup. */
async function apply(body: Record<string, unknown>): Promise<MigrationSummary> {
  const r = await api.post('/v1/apply', body);
  expect(r.status, r.text).toBe(202);
  const id = r.json.summary.id as string;
  started.push(id);
  expect(r.headers.get('location')).toBe(`/v1/migrations/${id}`);
  return r.json.summary as MigrationSummary;
}

/** A migration that stays in flight (a 10-minute bake) until it is cancelled. */
const slow = (name: string, version = '1') => demoApply({ name, version, bake: '10m', commit: 'manual' });

describe('operational endpoints', () => {
  it('GET /healthz answers ok', async () => {
    const r = await api.get('/healthz');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers ready while the state directory is writable', async () => {
    const r = await api.get('/readyz');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'ready' });
  });

  it('GET /readyz answers 503 not_ready when the state directory is gone', async () => {
    const stateDir = await harness.stateDir();
    const other = await harness.startInProcess({ stateDir });
    const otherApi = await Api.inject(other.app);
    rmSync(stateDir, { recursive: true, force: true });
    // A dangling link: not writable even for root.
    symlinkSync(path.join(stateDir, '..', 'nowhere'), stateDir);
    const r = await otherApi.get('/readyz');
    expect(r.status).toBe(503);
    expect(r.json.status).toBe('not_ready');
    expect(r.json.detail).toMatch(/state directory not writable/);
    await other.close();
  });

  it('GET /metrics is Prometheus text with the migration and request metrics', async () => {
    await api.get('/healthz');
    const r = await api.get('/metrics');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/plain/);
    expect(r.text).toMatch(/^# HELP cutover_migrations /m);
    expect(r.text).toMatch(/^cutover_migrations\{state="running"\} \d+$/m);
    expect(r.text).toMatch(
      /^cutover_http_requests_total\{method="GET",route="\/healthz",status="200"\} \d+$/m,
    );
    expect(r.text).toMatch(/^# TYPE cutover_stage_duration_seconds histogram$/m);
    expect(r.text).toMatch(/^cutover_health_gate_failures \d+$/m);
  });

  it('GET /v1/openapi.json is an OpenAPI 3.1 document', async () => {
    const r = await api.get('/v1/openapi.json');
    expect(r.status).toBe(200);
    expect(r.json.openapi).toBe('3.1.0');
    expect(Object.keys(r.json.paths)).toContain('/v1/apply');
  });
});

describe('POST /v1/validate', () => {
  const invalid = [
    'apiVersion: cutover/v1',
    'kind: Topology',
    'metadata:',
    '  name: Bad_Name',
    'drivers:',
    '  infra: { type: exec, dir: ./infra }',
    'components:',
    '  api:',
    '    driver: nowhere',
    '    version: "1"',
    '    replicas: -1',
    '    color: blue',
    '',
  ].join('\n');
  const expected = [
    { path: 'metadata.name', line: 4 },
    { path: 'components.api.driver', line: 9 },
    { path: 'components.api.replicas', line: 11 },
    { path: 'components.api.color', line: 12 },
  ];

  it('200 for a valid topology, as text or as an object', async () => {
    const text = await api.post('/v1/validate', { topology: demoText, path: demoPath });
    expect(text.status).toBe(200);
    expect(text.json).toEqual({ valid: true, environment: 'exec-demo', components: 2, routes: 0 });
    const object = await api.post('/v1/validate', {
      topology: {
        apiVersion: 'cutover/v1',
        kind: 'Topology',
        metadata: { name: 'obj' },
        drivers: { infra: { type: 'exec', dir: './infra' } },
        components: { db: { driver: 'infra', version: '1' } },
      },
    });
    expect(object.status, object.text).toBe(200);
    expect(object.json).toEqual({ valid: true, environment: 'obj', components: 1, routes: 0 });
  });

  it('422 TOPOLOGY_INVALID for text: every error, located by file, line and column', async () => {
    const r = await api.post('/v1/validate', { topology: invalid, path: 'bad/topology.yaml' });
    expect(r.status).toBe(422);
    expect(r.json.code).toBe('TOPOLOGY_INVALID');
    expect(r.json.errors).toHaveLength(expected.length);
    const lines = invalid.split('\n');
    for (const [i, want] of expected.entries()) {
      const e = r.json.errors[i];
      expect(e).toMatchObject({ file: 'bad/topology.yaml', path: want.path, line: want.line });
      expect(e.column).toBeGreaterThanOrEqual(1);
      expect(e.message).toEqual(expect.any(String));
      // The column points into that line.
      expect(e.column).toBeLessThanOrEqual((lines[want.line - 1] as string).length + 1);
    }
  });

  it('422 for text without a path names topology.yaml', async () => {
    const r = await api.post('/v1/validate', { topology: 'kind: [' });
    expect(r.status).toBe(422);
    expect(r.json.errors[0]).toMatchObject({ file: 'topology.yaml', line: 1 });
    expect(r.json.errors[0].column).toBeGreaterThanOrEqual(1);
  });

  it('422 for an object: the same errors, with paths only', async () => {
    const parsed = {
      apiVersion: 'cutover/v1',
      kind: 'Topology',
      metadata: { name: 'Bad_Name' },
      drivers: { infra: { type: 'exec', dir: './infra' } },
      components: { api: { driver: 'nowhere', version: '1', replicas: -1, color: 'blue' } },
    };
    const r = await api.post('/v1/validate', { topology: parsed });
    expect(r.status).toBe(422);
    expect(r.json.code).toBe('TOPOLOGY_INVALID');
    expect(r.json.errors.map((e: { path: string }) => e.path)).toEqual(expected.map((e) => e.path));
    for (const e of r.json.errors) expect(Object.keys(e).sort()).toEqual(['message', 'path']);
  });

  it('400 BAD_REQUEST for a request that does not match ValidateRequest', async () => {
    for (const body of [{}, { topology: 5 }, { topology: '' }, { topology: 'x', extra: 1 }, [], 'text']) {
      const r = await api.post('/v1/validate', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.code).toBe('BAD_REQUEST');
    }
  });

  it('400 for an object topology nested deeper than the limit', async () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 100; i++) deep = { a: deep };
    const r = await api.post('/v1/validate', { topology: deep });
    expect(r.status).toBe(400);
    expect(r.json.errors[0].path).toBe('body/topology');
  });
});

describe('POST /v1/plan', () => {
  /** `cutover topology plan --format json` in the server's workdir, on its state directory. */
  async function cliPlan(args: string[]): Promise<string> {
    const result = await runCli(['topology', 'plan', '--format', 'json', ...args], {
      cwd: repoRoot,
      env: { CUTOVER_STATE_DIR: server.stateDir },
    });
    expect(result.code, result.stderr).toBe(0);
    return result.stdout;
  }

  it('is byte-identical to the CLI against the recorded layout, before and after a migration', async () => {
    const before = await api.post('/v1/plan', { topology: demoText, path: demoPath });
    expect(before.status).toBe(200);
    expect(before.headers.get('content-type')).toMatch(/^application\/json/);
    expect(before.text).toBe(await cliPlan(['-f', demoPath]));
    expect(before.json.baseSerial).toBe(0);
    expect(before.json.summary.add).toBe(2);

    // Record a layout for exec-demo, then plan a change against it.
    const m = await apply({ topology: demoText, path: demoPath });
    expect((await api.waitForEnd(m.id)).lifecycle).toBe('completed');
    const dir = await harness.tempDir();
    cpSync(path.join(repoRoot, 'examples', 'exec-demo'), dir, { recursive: true });
    const v2 = path.join(dir, 'topology.yaml');
    writeFileSync(v2, demoTopology({ name: 'exec-demo', version: '2' }));
    const after = await api.post('/v1/plan', { topology: readFileSync(v2, 'utf8'), path: v2 });
    expect(after.status).toBe(200);
    expect(after.json.baseSerial).toBe(1);
    expect(after.json.summary.change).toBeGreaterThan(0);
    expect(after.text).toBe(await cliPlan(['-f', v2]));

    // And against another topology given as `against`.
    const against = await api.post('/v1/plan', {
      topology: readFileSync(v2, 'utf8'),
      path: v2,
      against: demoText,
      againstPath: demoPath,
    });
    expect(against.status).toBe(200);
    expect(against.text).toBe(await cliPlan(['-f', v2, '--against', demoPath]));
    expect(against.text).not.toBe(after.text);
  });

  it('422 TOPOLOGY_INVALID for an invalid topology or an invalid `against`, located', async () => {
    const r = await api.post('/v1/plan', { topology: 'kind: Topology\n', path: 'x.yaml' });
    expect(r.status).toBe(422);
    expect(r.json.code).toBe('TOPOLOGY_INVALID');
    expect(r.json.errors[0]).toMatchObject({ file: 'x.yaml', line: expect.any(Number) });
    const bad = await api.post('/v1/plan', { topology: demoText, against: 'a: [', againstPath: 'old.yaml' });
    expect(bad.status).toBe(422);
    expect(bad.json.errors[0]).toMatchObject({ file: 'old.yaml', line: 1 });
  });

  it('400 for a malformed plan request', async () => {
    for (const body of [{ against: demoText }, { topology: demoText, planId: 'x' }, { topology: 1 }]) {
      const r = await api.post('/v1/plan', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.json.code).toBe('BAD_REQUEST');
    }
  });
});

describe('POST /v1/apply and /v1/cancel', () => {
  it('202 with Location and the migration; then 200 with migration null when nothing changes', async () => {
    const body = demoApply({ name: 'apply-once' });
    const m = await apply(body);
    expect(m).toMatchObject({ environment: 'apply-once', actionsTotal: 4 });
    const done = await api.waitForEnd(m.id);
    expect(done.lifecycle).toBe('completed');
    const again = await api.post('/v1/apply', body);
    expect(again.status).toBe(200);
    expect(again.json.summary).toBeNull();
    expect(again.json.planId).toMatch(/^sha256:/);
    expect(again.headers.get('location')).toBeNull();
    const list = await api.get('/v1/migrations?environment=apply-once');
    expect(list.json.items).toHaveLength(1);
  });

  it('409 MIGRATION_CONFLICT names the migration in flight; cancel 202, then 409 VERB_REFUSED', async () => {
    const m = await apply(slow('conflict'));
    const second = await api.post('/v1/apply', slow('conflict', '2'));
    expect(second.status).toBe(409);
    expect(second.json.code).toBe('MIGRATION_CONFLICT');
    expect(second.json.migrationId).toBe(m.id);
    expect(second.json.detail).toContain(m.id);

    const cancel = await api.post('/v1/cancel', { migrationId: m.id });
    expect(cancel.status).toBe(202);
    expect(cancel.headers.get('location')).toBe(`/v1/migrations/${m.id}`);
    expect(cancel.json.summary.id).toBe(m.id);
    expect(cancel.json.recovered).toBe(false);
    const ended = await api.waitForEnd(m.id);
    expect(ended.lifecycle).toBe('cancelled');
    if (m.runnerPid !== null) await waitGone(m.runnerPid);

    const late = await api.post('/v1/cancel', { migrationId: m.id });
    expect(late.status).toBe(409);
    expect(late.json.code).toBe('VERB_REFUSED');
    expect(late.json.detail).toMatch(/cancel/);
  });

  it('cancel: 404 MIGRATION_NOT_FOUND for an unknown id, 400 for a malformed one', async () => {
    const unknown = await api.post('/v1/cancel', { migrationId: unknownId });
    expect(unknown.status).toBe(404);
    expect(unknown.json.code).toBe('MIGRATION_NOT_FOUND');
    for (const body of [{}, { migrationId: 'mig_x' }, { migrationId: unknownId, more: 1 }]) {
      const r = await api.post('/v1/cancel', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
  });

  it('409 PLAN_MISMATCH for a planId of another topology, PLAN_STALE when the layout moved on', async () => {
    const mismatch = await api.post(
      '/v1/apply',
      demoApply({ name: 'pinned' }, { planId: `sha256:${'0'.repeat(64)}` }),
    );
    expect(mismatch.status).toBe(409);
    expect(mismatch.json.code).toBe('PLAN_MISMATCH');

    // The plan of v2, reviewed while the environment is empty (serial 0)...
    const v2 = demoApply({ name: 'pinned', version: '2' });
    const reviewed = await api.post('/v1/plan', { topology: v2.topology, path: demoPath });
    expect(reviewed.json.baseSerial).toBe(0);
    // ...then v1 is migrated to (serial 1)...
    const first = await apply(demoApply({ name: 'pinned' }));
    expect((await api.waitForEnd(first.id)).lifecycle).toBe('completed');
    // ...so the reviewed plan is stale.
    const stale = await api.post('/v1/apply', { ...v2, planId: reviewed.json.planId });
    expect(stale.status).toBe(409);
    expect(stale.json.code).toBe('PLAN_STALE');
    expect(stale.json.detail).toMatch(/serial 0/);

    // The current plan's id is accepted, and the migration carries it.
    const current = await api.post('/v1/plan', { topology: v2.topology, path: demoPath });
    const m = await apply({ ...v2, planId: current.json.planId });
    expect(m.planId).toBe(current.json.planId);
    expect((await api.waitForEnd(m.id)).lifecycle).toBe('completed');
  });

  it('422 TOPOLOGY_INVALID and 400 for bad apply requests', async () => {
    const invalid = await api.post('/v1/apply', { topology: 'kind: x\n' });
    expect(invalid.status).toBe(422);
    expect(invalid.json.errors[0].line).toBe(1);
    for (const body of [{}, { topology: demoText, planId: 'sha256:xyz' }, { topology: demoText, path: '' }]) {
      const r = await api.post('/v1/apply', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
    }
  });
});

describe('migrations', () => {
  const env = 'listing';
  const ids: string[] = [];

  beforeAll(async () => {
    // Three completed migrations (versions 1, 2, 3) and one cancelled.
    for (const version of ['1', '2', '3']) {
      const m = await apply(demoApply({ name: env, version }));
      expect((await api.waitForEnd(m.id)).lifecycle).toBe('completed');
      ids.push(m.id);
    }
    const m = await apply(slow(env, '4'));
    await api.cancelAndWait(m.id);
    ids.push(m.id);
  }, 60_000);

  it('GET /v1/migrations filters by environment and state, newest first', async () => {
    const all = await api.get(`/v1/migrations?environment=${env}`);
    expect(all.status).toBe(200);
    expect(all.json.items.map((m: MigrationSummary) => m.id)).toEqual([...ids].reverse());
    expect(all.json.nextCursor).toBeNull();
    const completed = await api.get(`/v1/migrations?environment=${env}&state=completed`);
    expect(completed.json.items.map((m: MigrationSummary) => m.id)).toEqual(ids.slice(0, 3).reverse());
    const cancelled = await api.get(`/v1/migrations?environment=${env}&state=cancelled`);
    expect(cancelled.json.items.map((m: MigrationSummary) => m.id)).toEqual([ids[3]]);
    const none = await api.get('/v1/migrations?environment=no-such-env');
    expect(none.json).toEqual({ items: [], nextCursor: null });
    const everywhere = await api.get('/v1/migrations?limit=100');
    const environments = new Set(everywhere.json.items.map((m: MigrationSummary) => m.environment));
    expect(environments.has(env)).toBe(true);
    expect(environments.size).toBeGreaterThan(1);
  });

  it('pages with limit and nextCursor, without gaps or repeats', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await api.get(
        `/v1/migrations?environment=${env}&limit=1${cursor ? `&cursor=${cursor}` : ''}`,
      );
      expect(r.status).toBe(200);
      expect(r.json.items.length).toBe(1);
      seen.push(...r.json.items.map((m: MigrationSummary) => m.id));
      cursor = r.json.nextCursor;
      pages++;
    } while (cursor !== null && pages < 10);
    expect(seen).toEqual([...ids].reverse());
    expect(pages).toBe(4);
    const two = await api.get(`/v1/migrations?environment=${env}&limit=3`);
    expect(two.json.items).toHaveLength(3);
    expect(two.json.nextCursor).toBe(two.json.items[2].id);
    const rest = await api.get(`/v1/migrations?environment=${env}&limit=3&cursor=${two.json.nextCursor}`);
    expect(rest.json.items.map((m: MigrationSummary) => m.id)).toEqual([ids[0]]);
    expect(rest.json.nextCursor).toBeNull();
  });

  it('400 for bad query strings', async () => {
    for (const q of [
      'limit=0',
      'limit=101',
      'limit=x',
      'state=bogus',
      'cursor=nope',
      'other=1',
      'environment=',
    ]) {
      const r = await api.get(`/v1/migrations?${q}`);
      expect(r.status, q).toBe(400);
      expect(r.json.code).toBe('BAD_REQUEST');
    }
  });

  it('GET /v1/migrations/{id}: 200 with summary and state, 400 for a bad id, 404 for an unknown one', async () => {
    const id = ids[0] as string;
    const r = await api.get(`/v1/migrations/${id}`);
    expect(r.status).toBe(200);
    expect(r.json.summary).toMatchObject({ id, environment: env, lifecycle: 'completed' });
    expect(typeof r.json.state).toBe('object');
    for (const bad of ['nope', 'mig_', `${id}x`, id.toUpperCase()]) {
      const b = await api.get(`/v1/migrations/${bad}`);
      expect(b.status, bad).toBe(400);
      expect(b.json.code).toBe('BAD_REQUEST');
    }
    const unknown = await api.get(`/v1/migrations/${unknownId}`);
    expect(unknown.status).toBe(404);
    expect(unknown.json.code).toBe('MIGRATION_NOT_FOUND');
  });

  it('GET /v1/migrations/{id}/logs: JSON lines of LogLine; 404 and 400', async () => {
    const r = await api.get(`/v1/migrations/${ids[0]}/logs`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(r.text.endsWith('\n')).toBe(true);
    const lines = r.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.length).toBeGreaterThan(3);
    for (const line of lines) api.contract.component('LogLine', line);
    expect(lines[0].kind).toBe('migration_started');
    expect(lines.at(-1).kind).toBe('completed');
    expect((await api.get(`/v1/migrations/${unknownId}/logs`)).status).toBe(404);
    expect((await api.get('/v1/migrations/bad/logs')).status).toBe(400);
    expect((await api.get(`/v1/migrations/${ids[0]}/logs?follow=maybe`)).status).toBe(400);
    expect((await api.get(`/v1/migrations/${ids[0]}/logs?tail=1`)).status).toBe(400);
  });
});

describe('POST /v1/migrations/{id}/{verb}', () => {
  const verbs = ['pause', 'resume', 'rollback', 'commit', 'cancel'] as const;

  it('pause, resume and rollback a migration in flight; commit refused; every verb refused once it ended', async () => {
    const m = await apply(slow('verbs'));
    await api.waitFor(m.id, (s) => s.status.includes('bake'));
    const pause = await api.post(`/v1/migrations/${m.id}/pause`);
    expect(pause.status).toBe(202);
    expect(pause.headers.get('location')).toBe(`/v1/migrations/${m.id}`);
    expect(pause.json.summary.id).toBe(m.id);
    await api.waitFor(m.id, (s) => s.lifecycle === 'paused');
    const pausedAgain = await api.post(`/v1/migrations/${m.id}/pause`);
    expect(pausedAgain.status).toBe(409);
    expect(pausedAgain.json.code).toBe('VERB_REFUSED');

    const resume = await api.post(`/v1/migrations/${m.id}/resume`);
    expect(resume.status).toBe(202);
    expect(resume.json.summary.lifecycle).toBe('running');

    const commit = await api.post(`/v1/migrations/${m.id}/commit`);
    expect(commit.status).toBe(409);
    expect(commit.json.code).toBe('VERB_REFUSED');
    expect(commit.json.detail).toMatch(/not awaiting commit/);

    const rollback = await api.post(`/v1/migrations/${m.id}/rollback`);
    expect(rollback.status).toBe(202);
    expect((await api.waitForEnd(m.id)).lifecycle).toBe('rolled_back');

    for (const verb of verbs) {
      const r = await api.post(`/v1/migrations/${m.id}/${verb}`);
      expect(r.status, verb).toBe(409);
      expect(r.json.code).toBe('VERB_REFUSED');
    }
  });

  it('commit a migration awaiting it; cancel through the verb route', async () => {
    const m = await apply(demoApply({ name: 'manual', bake: '0s', commit: 'manual' }));
    await api.waitFor(m.id, (s) => s.lifecycle === 'awaiting_commit');
    const commit = await api.post(`/v1/migrations/${m.id}/commit`);
    expect(commit.status).toBe(202);
    expect(commit.json.summary.committedAt).not.toBeNull();
    expect((await api.waitForEnd(m.id)).lifecycle).toBe('completed');

    const other = await apply(slow('manual', '2'));
    const cancel = await api.post(`/v1/migrations/${other.id}/cancel`);
    expect(cancel.status).toBe(202);
    expect((await api.waitForEnd(other.id)).lifecycle).toBe('cancelled');
  });

  it('404 MIGRATION_NOT_FOUND for an unknown id and 400 for a malformed one, for every verb', async () => {
    for (const verb of verbs) {
      const unknown = await api.post(`/v1/migrations/${unknownId}/${verb}`);
      expect(unknown.status, verb).toBe(404);
      expect(unknown.json.code).toBe('MIGRATION_NOT_FOUND');
      const bad = await api.post(`/v1/migrations/mig_bad/${verb}`);
      expect(bad.status, verb).toBe(400);
      expect(bad.json.code).toBe('BAD_REQUEST');
    }
  });
});

describe('request errors', () => {
  it('413 BODY_TOO_LARGE beyond 1 MiB', async () => {
    const r = await api.post('/v1/validate', { topology: 'x'.repeat(1024 * 1024 + 1) });
    expect(r.status).toBe(413);
    expect(r.json.code).toBe('BODY_TOO_LARGE');
  });

  it('413 answered, not a reset, to a client still sending an oversized body', async () => {
    // 2 MiB announced, sent slowly: answered at once and closed, the client's writes would fail.
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const chunks = 32;
    const answer = await new Promise<{ status: number; body: string; connection: string | undefined }>(
      (resolve, reject) => {
        const req = request(`${server.url as string}/v1/validate`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-length': chunk.length * chunks },
        });
        req.on('response', (res) => {
          let body = '';
          res.setEncoding('utf8').on('data', (d: string) => {
            body += d;
          });
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, body, connection: res.headers.connection }),
          );
        });
        req.on('error', reject);
        void (async () => {
          for (let i = 0; i < chunks; i++) {
            if (!req.write(chunk)) await once(req, 'drain');
            await sleep(5);
          }
          req.end();
        })().catch(reject);
      },
    );
    expect(answer.status).toBe(413);
    expect(JSON.parse(answer.body)).toMatchObject({
      code: 'BODY_TOO_LARGE',
      detail: `the request body is ${chunk.length * chunks} bytes; the limit is ${1024 * 1024}`,
    });
    expect(answer.connection).not.toBe('close');
  });

  it('413 beyond --body-limit', async () => {
    const small = await harness.startInProcess({
      stateDir: await harness.stateDir(),
      args: ['--body-limit', '200'],
    });
    const smallApi = await Api.inject(small.app);
    expect((await smallApi.post('/v1/validate', { topology: 'x'.repeat(100) })).status).toBe(422);
    const r = await smallApi.post('/v1/validate', { topology: 'x'.repeat(300) });
    expect(r.status).toBe(413);
    expect(r.json.code).toBe('BODY_TOO_LARGE');
    await small.close();
  });

  it('415 UNSUPPORTED_MEDIA_TYPE for a body that is not JSON', async () => {
    for (const type of [
      'text/plain',
      'application/x-yaml',
      'application/xml',
      'multipart/form-data; boundary=x',
    ]) {
      for (const url of ['/v1/validate', '/v1/plan', '/v1/apply', '/v1/cancel']) {
        const r = await api.request('POST', url, { raw: 'topology: x', headers: { 'content-type': type } });
        expect(r.status, `${type} ${url}`).toBe(415);
        expect(r.json.code).toBe('UNSUPPORTED_MEDIA_TYPE');
      }
    }
  });

  it('400 BAD_REQUEST for broken or empty JSON', async () => {
    for (const raw of ['{', '{"topology": }', '', 'nul', '{"topology": "x"}}']) {
      const r = await api.request('POST', '/v1/validate', {
        raw,
        headers: { 'content-type': 'application/json' },
      });
      expect(r.status, raw).toBe(400);
      expect(r.json.code).toBe('BAD_REQUEST');
    }
  });

  it('400 for a URL that does not decode, 414 for an overlong id: problems too', async () => {
    const bad = await api.get('/v1/migrations/%ff');
    expect(bad.status).toBe(400);
    expect(bad.json.code).toBe('BAD_REQUEST');
    const long = await api.post(`/v1/migrations/${'a'.repeat(300)}/pause`);
    expect(long.status).toBe(414);
    expect(long.json.code).toBe('URI_TOO_LONG');
  });

  it('404 NOT_FOUND for unknown routes and methods', async () => {
    for (const [method, url] of [
      ['GET', '/'],
      ['GET', '/v2/plan'],
      ['POST', '/v1/nope'],
      ['GET', '/v1/plan'],
      ['DELETE', '/v1/migrations'],
      ['PUT', '/healthz'],
      ['GET', `/v1/migrations/${unknownId}/logs/more`],
      ['POST', `/v1/migrations/${unknownId}/explode`],
      ['GET', '/V1/MIGRATIONS'],
    ] as const) {
      const r = await api.request(method, url);
      expect(r.status, `${method} ${url}`).toBe(404);
      expect(r.json.code).toBe('NOT_FOUND');
      expect(r.json.detail).toContain(method);
    }
  });

  it('429 RATE_LIMITED with --rate-limit 5', async () => {
    const limited = await harness.startInProcess({
      stateDir: await harness.stateDir(),
      args: ['--rate-limit', '5'],
    });
    // The contract already loaded: fetching it again would spend the budget.
    const limitedApi = new Api(injectOrigin, api.contract, null, injectTransport(limited.app));
    for (let i = 0; i < 5; i++) expect((await limitedApi.get('/healthz')).status).toBe(200);
    const r = await limitedApi.get('/healthz');
    expect(r.status).toBe(429);
    expect(r.json.code).toBe('RATE_LIMITED');
    expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
    expect((await limitedApi.post('/v1/validate', { topology: demoText })).status).toBe(429);
    await limited.close();
  });
});

describe('Idempotency-Key', () => {
  it('same key and body: the same answer, replayed, and one migration; another body: 422', async () => {
    const body = slow('idempotent');
    const headers = { 'idempotency-key': 'apply-idempotent-1' };
    const first = await api.post('/v1/apply', body, { headers });
    expect(first.status).toBe(202);
    const id = first.json.summary.id as string;
    started.push(id);
    expect(first.headers.get('idempotent-replayed')).toBeNull();

    const retry = await api.post('/v1/apply', body, { headers });
    expect(retry.status).toBe(202);
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(retry.text).toBe(first.text);
    expect(retry.headers.get('location')).toBe(`/v1/migrations/${id}`);
    const list = await api.get('/v1/migrations?environment=idempotent');
    expect(list.json.items.map((m: MigrationSummary) => m.id)).toEqual([id]);

    const other = await api.post('/v1/apply', slow('idempotent', '2'), { headers });
    expect(other.status).toBe(422);
    expect(other.json.code).toBe('IDEMPOTENCY_KEY_REUSED');

    // Without the key, the same body is a second request: refused by the one in flight.
    const unkeyed = await api.post('/v1/apply', body);
    expect(unkeyed.status).toBe(409);
    expect(unkeyed.json.code).toBe('MIGRATION_CONFLICT');

    // A verb under a key is replayed as well, rather than refused the second time.
    const cancelHeaders = { 'idempotency-key': 'cancel-idempotent-1' };
    const cancel = await api.post('/v1/cancel', { migrationId: id }, { headers: cancelHeaders });
    expect(cancel.status).toBe(202);
    await api.waitForEnd(id);
    const cancelAgain = await api.post('/v1/cancel', { migrationId: id }, { headers: cancelHeaders });
    expect(cancelAgain.status).toBe(202);
    expect(cancelAgain.headers.get('idempotent-replayed')).toBe('true');
    expect(cancelAgain.text).toBe(cancel.text);
  });

  it('an error is not kept: a retry under the same key tries again', async () => {
    const headers = { 'idempotency-key': 'not-found-1' };
    const a = await api.post('/v1/cancel', { migrationId: unknownId }, { headers });
    const b = await api.post('/v1/cancel', { migrationId: unknownId }, { headers });
    expect([a.status, b.status]).toEqual([404, 404]);
    expect(b.headers.get('idempotent-replayed')).toBeNull();
  });

  it('400, not 500, for a body too deep to fingerprint', async () => {
    const deep = `{"topology":{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`;
    for (const url of ['/v1/apply', '/v1/cancel', `/v1/migrations/${unknownId}/pause`]) {
      const r = await api.request('POST', url, {
        raw: deep,
        headers: { 'content-type': 'application/json', 'idempotency-key': 'deep-1' },
      });
      expect(r.status, url).toBe(400);
      expect(r.json.code).toBe('BAD_REQUEST');
    }
  });

  it('400 for a key that is too long', async () => {
    const r = await api.post(
      '/v1/cancel',
      { migrationId: unknownId },
      { headers: { 'idempotency-key': 'k'.repeat(256) } },
    );
    expect(r.status).toBe(400);
    expect(r.json.code).toBe('BAD_REQUEST');
  });
});
