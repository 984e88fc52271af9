/**
 * Bearer tokens: every route × {no token, bad token, malformed header, viewer, operator}, and the
 * ways around them that must not work. Public routes answer everyone alike; viewer routes need a
 * token (401 with WWW-Authenticate: Bearer without one); operator routes refuse a viewer (403).
 * Tokens never reach the server's logs. Without tokens the server refuses a non-loopback address.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type Api,
  type CheckedResponse,
  demoApply,
  demoPath,
  demoText,
  documentedRoutes,
  type InProcessServer,
  ServerHarness,
  unknownId,
} from '../support/server.js';

const viewerToken = 'viewer-token-5f2c9a7e1b3d4c6f';
const operatorToken = 'operator-token-8e1d2c3b4a5f6e7d';
const badToken = 'not-a-token-at-all-0123456789abcdef';

const harness = new ServerHarness();
let server: InProcessServer;
let api: Api;

beforeAll(async () => {
  // The client connects without a token: the document is public.
  ({ server, api } = await harness.serveInProcess({
    args: ['--rate-limit', '0', '--log-level', 'trace'],
    env: {
      CUTOVER_TOKENS: `v:viewer:${viewerToken},o:operator:${operatorToken}`,
      CUTOVER_HOOK_SECRET: 'auth-hook-secret-0123456789',
    },
  }));
}, 30_000);

afterAll(async () => {
  await harness.cleanup();
}, 60_000);

type Access = 'public' | 'viewer' | 'operator';

/** Who may call what, as specified; routes not listed here are held to what the document says. */
const specified: Record<string, Access> = {
  'GET /healthz': 'public',
  'GET /readyz': 'public',
  'GET /v1/openapi.json': 'public',
  'GET /metrics': 'viewer',
  'POST /v1/validate': 'viewer',
  'POST /v1/plan': 'viewer',
  'GET /v1/migrations': 'viewer',
  'GET /v1/migrations/{id}': 'viewer',
  'GET /v1/migrations/{id}/logs': 'viewer',
  'POST /v1/apply': 'operator',
  'POST /v1/cancel': 'operator',
  'POST /v1/migrations/{id}/pause': 'operator',
  'POST /v1/migrations/{id}/resume': 'operator',
  'POST /v1/migrations/{id}/rollback': 'operator',
  'POST /v1/migrations/{id}/commit': 'operator',
  'POST /v1/migrations/{id}/cancel': 'operator',
};

function documentedAccess(route: string): Access {
  const [method, template] = route.split(' ') as [string, string];
  const op = api.contract.doc.paths[template]?.[method.toLowerCase()];
  const text = /Access: ([^.]*)\./.exec(op?.description ?? '')?.[1] ?? '';
  if (text === 'anybody') return 'public';
  if (/^an? viewer token/.test(text)) return 'viewer';
  if (/^an? operator token/.test(text)) return 'operator';
  throw new Error(`${route}: the document does not say who may call it ("${text}")`);
}

/** A request for a route that, once past auth, changes nothing (unknown ids, invalid topologies). */
function requestFor(route: string): { method: string; url: string; body?: unknown } {
  const [method, template] = route.split(' ') as [string, string];
  const url = template.replace(/\{(\w+)\}/g, (_, name: string) =>
    name === 'id' ? unknownId : 'no-such-env',
  );
  const bodies: Record<string, unknown> = {
    'POST /v1/validate': { topology: demoText, path: demoPath },
    'POST /v1/plan': { topology: demoText, path: demoPath },
    'POST /v1/apply': { topology: 'kind: invalid\n' },
    'POST /v1/cancel': { migrationId: unknownId },
  };
  return { method, url, ...(method === 'POST' ? { body: bodies[route] ?? {} } : {}) };
}

const callers: { name: string; headers: Record<string, string> }[] = [
  { name: 'no token', headers: {} },
  { name: 'bad token', headers: { authorization: `Bearer ${badToken}` } },
  {
    name: 'not bearer',
    headers: { authorization: `Basic ${Buffer.from(`o:${operatorToken}`).toString('base64')}` },
  },
  { name: 'viewer', headers: { authorization: `Bearer ${viewerToken}` } },
  { name: 'operator', headers: { authorization: `Bearer ${operatorToken}` } },
];

async function call(route: string, headers: Record<string, string>, url?: string): Promise<CheckedResponse> {
  const r = requestFor(route);
  return api.request(r.method, url ?? r.url, {
    headers,
    token: null,
    ...(r.body === undefined ? {} : { body: r.body }),
  });
}

function expectUnauthorized(r: CheckedResponse, where: string): void {
  expect(r.status, where).toBe(401);
  expect(r.json.code, where).toBe('UNAUTHORIZED');
  expect(r.headers.get('www-authenticate'), where).toMatch(/^Bearer\b/);
}

function expectAllowed(r: CheckedResponse, where: string): void {
  expect([401, 403], `${where}: ${r.status} ${r.text.slice(0, 200)}`).not.toContain(r.status);
  expect(r.status, where).toBeLessThan(500);
}

describe('the auth matrix', () => {
  it('covers every documented route, and the specified access is the documented one', () => {
    const routes = documentedRoutes(api.contract.doc);
    for (const route of Object.keys(specified)) expect(routes, route).toContain(route);
    for (const route of routes) {
      if (specified[route]) expect(documentedAccess(route), route).toBe(specified[route]);
    }
  });

  it('every route × {no token, bad token, not bearer, viewer, operator}: zero bypasses', async () => {
    let checked = 0;
    for (const route of documentedRoutes(api.contract.doc)) {
      const access = specified[route] ?? documentedAccess(route);
      const answers = new Map<string, CheckedResponse>();
      for (const caller of callers) answers.set(caller.name, await call(route, caller.headers));
      const at = (name: string) => answers.get(name) as CheckedResponse;
      const where = (name: string) => `${route} as ${name}`;
      if (access === 'public') {
        // A public route ignores bearer tokens: everyone gets the same answer.
        const statuses = callers.map((c) => at(c.name).status);
        expect(new Set(statuses).size, `${route}: ${statuses}`).toBe(1);
        for (const c of callers) expect(at(c.name).headers.get('www-authenticate'), where(c.name)).toBeNull();
      } else {
        for (const name of ['no token', 'bad token', 'not bearer']) expectUnauthorized(at(name), where(name));
        if (access === 'viewer') expectAllowed(at('viewer'), where('viewer'));
        else {
          expect(at('viewer').status, where('viewer')).toBe(403);
          expect(at('viewer').json.code).toBe('FORBIDDEN');
          expect(at('viewer').headers.get('www-authenticate')).toBeNull();
        }
        expectAllowed(at('operator'), where('operator'));
      }
      checked++;
    }
    expect(checked).toBe(documentedRoutes(api.contract.doc).length);
  });

  it('public routes answer without a token', async () => {
    for (const url of ['/healthz', '/readyz', '/v1/openapi.json']) {
      const r = await api.request('GET', url, { token: null });
      expect(r.status, url).toBe(200);
    }
  });

  it('no way around a token: near misses, other places, two tokens, path tricks', async () => {
    const opRoute = 'POST /v1/cancel';
    const viewRoute = 'GET /v1/migrations';
    const attempts: [string, Record<string, string>, string?][] = [
      [opRoute, { authorization: `Bearer ${operatorToken}x` }],
      [opRoute, { authorization: `Bearer ${operatorToken.slice(0, -1)}` }],
      [opRoute, { authorization: `Bearer ${operatorToken.toUpperCase()}` }],
      [opRoute, { authorization: `Bearer ${viewerToken}, Bearer ${operatorToken}` }],
      [opRoute, { authorization: `Token ${operatorToken}` }],
      [opRoute, { authorization: operatorToken }],
      [opRoute, { authorization: 'Bearer' }],
      [opRoute, { authorization: '' }],
      [opRoute, { 'x-api-key': operatorToken, cookie: `token=${operatorToken}` }],
      [opRoute, {}, `/v1/cancel?access_token=${operatorToken}`],
      [viewRoute, {}, `/v1/migrations?access_token=${viewerToken}`],
      [viewRoute, { authorization: `Bearer ${viewerToken}\t` }, '/v1/migrations/'],
      ['GET /v1/migrations/{id}/logs', {}, `/v1/migrations/${unknownId}/logs?follow=true`],
      ['GET /metrics', {}, '/metrics?x=1'],
    ];
    for (const [route, headers, url] of attempts) {
      const r = await call(route, headers, url);
      const where = `${route} ${url ?? ''} ${JSON.stringify(headers)}`;
      if (url === '/v1/migrations/') {
        // Not the list route: no answer there either.
        expect([400, 401, 404], where).toContain(r.status);
      } else {
        expectUnauthorized(r, where);
      }
    }
    // The scheme is case-insensitive (RFC 7235), and a viewer is still no operator.
    expectAllowed(await call(opRoute, { authorization: `bearer ${operatorToken}` }), 'lower-case scheme');
    expect((await call(opRoute, { authorization: `BEARER ${viewerToken}` })).status).toBe(403);
    // Paths that are not the route are not a way in.
    for (const url of [
      '/v1/apply/',
      '/V1/APPLY',
      '//v1/apply',
      '/v1/./apply',
      '/v1/apply;x',
      '/v1/apply%2F',
    ]) {
      const r = await api.request('POST', url, { token: null, body: { topology: demoText } });
      expect([401, 404], `${url}: ${r.status}`).toContain(r.status);
    }
  });

  it('an operator runs a migration; no token is in any log or file of the server', async () => {
    const op = api.as(operatorToken);
    const r = await op.post('/v1/apply', demoApply({ name: 'auth-demo' }));
    expect(r.status).toBe(202);
    expect((await op.waitForEnd(r.json.summary.id)).lifecycle).toBe('completed');
    const viewer = api.as(viewerToken);
    expect((await viewer.get(`/v1/migrations/${r.json.summary.id}/logs`)).status).toBe(200);

    const output = server.stdout() + server.stderr();
    expect(output.length).toBeGreaterThan(1000);
    expect(output).toContain('"url":"/v1/apply"');
    // A token sent in a query string (a client's mistake) is not logged either.
    expect(output).toContain('"url":"/v1/cancel?…"');
    for (const secret of [viewerToken, operatorToken, badToken]) {
      expect(output).not.toContain(secret);
      expect(output).not.toContain(Buffer.from(`o:${secret}`).toString('base64'));
    }
    // Nor in the state directory: journals, runner records, the runner's output.
    const files: string[] = [];
    const walk = (dir: string) => {
      for (const name of readdirSync(dir)) {
        const file = path.join(dir, name);
        if (statSync(file).isDirectory()) walk(file);
        else files.push(file);
      }
    };
    walk(server.stateDir);
    expect(files.some((f) => f.endsWith('journal.ndjson'))).toBe(true);
    for (const file of files) {
      const text = readFileSync(file, 'utf8');
      for (const secret of [viewerToken, operatorToken]) expect(text, file).not.toContain(secret);
    }
  });
});

describe('starting without tokens', () => {
  it('refuses --host 0.0.0.0 without tokens: a non-zero exit and why', async () => {
    const refused = await harness.startRefused({
      stateDir: await harness.stateDir(),
      args: ['--host', '0.0.0.0'],
    });
    expect(refused.listening).toBe(false);
    expect(refused.code).not.toBe(0);
    expect(refused.code).not.toBeNull();
    expect(refused.stderr).toMatch(/refusing to listen on 0\.0\.0\.0 without tokens/);
  });

  it('refuses a token shorter than 16 characters', async () => {
    const refused = await harness.startRefused({
      stateDir: await harness.stateDir(),
      env: { CUTOVER_TOKENS: 'ci:operator:short' },
    });
    expect(refused.listening).toBe(false);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toMatch(/shorter than 16 characters/);
    expect(refused.stderr).not.toContain('short\n');
  });
});
