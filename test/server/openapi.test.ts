/**
 * The OpenAPI document: valid OpenAPI 3.1, its schemas are those of schemas/api.v1.json, and the
 * routes it lists are exactly the routes served. The served set comes from Fastify's own route
 * table (`printRoutes`) of the server built as `cutover server` builds it, and cross-checked by
 * requests to it (through `inject`).
 */

import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import apiSchema from '../../schemas/api.v1.json' with { type: 'json' };
import { dashboardRoutes } from '../../server/dashboard.js';
import {
  type Api,
  documentedRoutes,
  type InProcessServer,
  type OpenApiDoc,
  ServerHarness,
  unknownId,
} from '../support/server.js';

const harness = new ServerHarness();
let api: Api;
let doc: OpenApiDoc;
let inProcess: InProcessServer;

beforeAll(async () => {
  ({ server: inProcess, api } = await harness.serveInProcess({
    args: ['--rate-limit', '0'],
    // Every route configured (the Git webhook answers 503 without a secret).
    env: { CUTOVER_HOOK_SECRET: 'openapi-hook-secret-0123456789' },
  }));
  doc = api.contract.doc;
}, 30_000);

afterAll(async () => {
  await harness.cleanup();
});

/**
 * `METHOD /path` of every route in Fastify's route table, from `printRoutes({ commonPrefix: false })`:
 * a tree whose lines are `<indent>├── <segment> (<METHODS>)`, each segment under its parent's.
 */
function servedRoutes(tree: string): string[] {
  const routes: string[] = [];
  const prefixes: string[] = [];
  for (const line of tree.split('\n')) {
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(\S+)(?: \(([^)]*)\))?/.exec(line);
    if (!match) continue;
    const depth = (match[1] as string).length / 4;
    const full = (prefixes[depth - 1] ?? '') + (match[2] as string);
    prefixes[depth] = full;
    prefixes.length = depth + 1;
    const methods = (match[3] ?? '-').split(',').map((m) => m.trim());
    for (const method of methods) {
      if (method === '-' || method === '') continue;
      routes.push(`${method} ${full.replace(/:(\w+)/g, '{$1}')}`);
    }
  }
  return routes.sort();
}

/** A concrete URL for a documented path: parameters filled with values of the right form. */
function concrete(template: string): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => (name === 'id' ? unknownId : 'no-such-thing'));
}

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(doc as unknown as Record<string, unknown>);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
  });

  it('served at /v1/openapi.json is the document Fastify builds from the routes', () => {
    const local = inProcess.app.swagger() as unknown as OpenApiDoc;
    expect(documentedRoutes(local).sort()).toEqual(documentedRoutes(doc).sort());
  });

  it('carries every schema of schemas/api.v1.json as a component', () => {
    const names = Object.keys(apiSchema.$defs).sort();
    expect(Object.keys(doc.components.schemas).sort()).toEqual(names);
    // Compared as validation rules: annotations (description, title) may be dropped beside a $ref.
    const rules = (v: unknown): unknown => {
      if (Array.isArray(v)) return v.map(rules);
      if (v === null || typeof v !== 'object') return v;
      const out: Record<string, unknown> = {};
      for (const [key, inner] of Object.entries(v)) {
        if (['description', 'title', '$id'].includes(key) && typeof inner === 'string') continue;
        // `const: x` comes out as the equivalent `enum: [x]`.
        if (key === 'const') {
          out.enum = [inner];
          continue;
        }
        out[key] =
          key === '$ref' && typeof inner === 'string'
            ? inner.replace('#/components/schemas/', '#/$defs/')
            : rules(inner);
      }
      return out;
    };
    for (const name of names) {
      expect(rules(doc.components.schemas[name]), name).toEqual(
        rules((apiSchema.$defs as Record<string, unknown>)[name]),
      );
    }
  });

  it('documents a security requirement on every non-public route, and problems for errors', () => {
    for (const [p, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const isPublic = /Access: anybody\./.test(op.description ?? '');
        if (['/healthz', '/readyz', '/v1/openapi.json'].includes(p)) expect(isPublic, p).toBe(true);
        if (p.startsWith('/v1/migrations') || ['/v1/apply', '/v1/plan', '/metrics'].includes(p)) {
          expect(isPublic, p).toBe(false);
        }
        expect(op.security, `${method} ${p}`).toEqual(isPublic ? [] : [{ bearer: [] }]);
        expect(op.responses['4XX'], `${method} ${p}`).toBeDefined();
        expect(
          Object.keys(op.responses).some((s) => /^2\d\d$/.test(s)),
          `${method} ${p}`,
        ).toBe(true);
      }
    }
  });
});

describe('documented routes = served routes', () => {
  it("lists exactly the routes in Fastify's route table", () => {
    // The dashboard's pages (server/dashboard.ts) are pages, not operations: left out of the document.
    const served = servedRoutes(inProcess.app.printRoutes({ commonPrefix: false })).filter(
      (route) => !dashboardRoutes.includes(route),
    );
    expect(served.length).toBeGreaterThan(10);
    expect(served).toEqual(documentedRoutes(doc).sort());
  });

  it('every documented route answers (never 404 NOT_FOUND)', async () => {
    for (const route of documentedRoutes(doc)) {
      const [method, template] = route.split(' ') as [string, string];
      const r = await api.request(method, concrete(template), method === 'POST' ? { body: {} } : {});
      expect(r.route, route).toBe(route);
      expect(r.json?.code, route).not.toBe('NOT_FOUND');
      expect(r.status, route).toBeLessThan(500);
    }
  });

  it('any other method on a documented path is 404 NOT_FOUND', async () => {
    const documented = new Set(documentedRoutes(doc));
    for (const template of Object.keys(doc.paths)) {
      for (const method of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) {
        if (documented.has(`${method} ${template}`)) continue;
        const r = await api.request(method, concrete(template));
        expect(r.status, `${method} ${template}`).toBe(404);
        expect(r.json.code).toBe('NOT_FOUND');
      }
    }
  });
});
