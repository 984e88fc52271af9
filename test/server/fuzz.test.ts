/**
 * 5,000 generated bad requests, over a real loopback socket, against every documented route of the
 * server (built in process as `cutover server` builds it): broken YAML, wrong
 * types, huge strings, deeply nested JSON, YAML alias bombs, bad ids, bad query strings, wrong
 * content types. No answer may be a 5xx; every answer must be what the OpenAPI document allows
 * (errors as problems); and the server must still answer afterwards. (The seed is fixed under CI:
 * test/support/fast-check-setup.ts.)
 */
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  Api,
  type CheckedResponse,
  demoText,
  documentedRoutes,
  type InProcessServer,
  type MigrationSummary,
  pool,
  ServerHarness,
  unknownId,
} from '../support/server.js';

const harness = new ServerHarness();
let server: InProcessServer;
let api: Api;

beforeAll(async () => {
  // The working directory is an empty temp dir: a mutation that happens to be a valid topology
  // starts a migration whose exec scripts are missing, so it fails at once.
  ({ server, api } = await harness.serveInProcess({
    workdir: await harness.tempDir(),
    args: ['--rate-limit', '0', '--log-level', 'warn'],
    // Every route configured (the Git webhook answers 503 without a secret).
    env: { CUTOVER_HOOK_SECRET: 'fuzz-hook-secret-0123456789' },
    // Malformed requests go through a real socket and Node's HTTP parser, not inject.
    listen: true,
  }));
  api = await Api.connect(server.url as string);
}, 30_000);

afterAll(async () => {
  try {
    const list = await api.get('/v1/migrations?limit=100');
    for (const m of list.json.items as MigrationSummary[]) await api.cancelAndWait(m.id);
  } finally {
    await harness.cleanup();
  }
}, 60_000);

interface BadRequest {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
}

// ─── Pieces ─────────────────────────────────────────────────────────────────────────────────────

const demoDoc = parse(demoText) as Record<string, unknown>;

const printable = fc.string({
  unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
});

/** Broken YAML: the demo topology with a slice cut out, junk spliced in, or lines shuffled. */
const brokenYaml = fc.oneof(
  fc
    .tuple(
      fc.nat(demoText.length),
      fc.nat(200),
      fc.constantFrom(
        ':',
        '[',
        '{',
        '&a',
        '*a',
        '\t',
        '"',
        "'",
        '- ',
        '|',
        '>',
        '%',
        '@',
        '`',
        '!!binary',
        '<<: *x',
        '\u0000',
        '\uFEFF',
      ),
    )
    .map(([at, cut, junk]) => demoText.slice(0, at) + junk + demoText.slice(at + cut)),
  fc.shuffledSubarray(demoText.split('\n')).map((lines) => lines.join('\n')),
  fc.string({ maxLength: 300 }),
  fc.constantFrom(
    '---\n...\n---',
    '? [a]\n: b',
    'a: !!js/function "x"',
    '%YAML 9.9\n---\na: 1',
    'a: *undefined',
    '&a a: *a',
  ),
);

/** The demo document with one place set to a value of a wrong (or random) type. */
const places: string[][] = [
  [],
  ['apiVersion'],
  ['kind'],
  ['metadata'],
  ['metadata', 'name'],
  ['drivers'],
  ['drivers', 'infra'],
  ['drivers', 'infra', 'type'],
  ['drivers', 'infra', 'timeout'],
  ['components'],
  ['components', 'db'],
  ['components', 'db', 'version'],
  ['components', 'db', 'stateful'],
  ['components', 'api', 'dependsOn'],
  ['components', 'api', 'health'],
  ['components', 'api', 'health', 'interval'],
  ['components', 'api', 'health', 'command'],
  ['routes'],
  ['strategy'],
  ['strategy', 'bake'],
];
const wrongTypes = fc
  .tuple(
    fc.constantFrom(...places),
    fc.oneof(fc.jsonValue({ maxDepth: 3 }), fc.constantFrom(null, -1, 1e308, '', [], {})),
  )
  .map(([place, value]) => {
    const doc = structuredClone(demoDoc);
    if (place.length === 0) return value;
    let at = doc as Record<string, unknown>;
    for (const key of place.slice(0, -1)) {
      if (typeof at[key] !== 'object' || at[key] === null) at[key] = {};
      at = at[key] as Record<string, unknown>;
    }
    at[place.at(-1) as string] = value;
    return doc;
  });

/** `a: &a [x,…]`, `b: &b [*a,…]`, …: fan-out^depth nodes once expanded. */
const aliasBomb = fc
  .record({
    fanOut: fc.integer({ min: 2, max: 16 }),
    depth: fc.integer({ min: 2, max: 12 }),
    block: fc.boolean(),
  })
  .map(({ fanOut, depth, block }) => {
    const lines = [`a0: &a0 [${Array(fanOut).fill('x').join(',')}]`];
    for (let i = 1; i < depth; i++) {
      const refs = Array(fanOut).fill(`*a${i - 1}`);
      lines.push(
        block
          ? `a${i}: &a${i}\n${refs.map((r) => `  - ${r}`).join('\n')}`
          : `a${i}: &a${i} [${refs.join(',')}]`,
      );
    }
    return `${demoText}\n${lines.join('\n')}\n`;
  });

/** Deep nesting, in YAML or JSON text (100,000 levels of `[` among them). */
const nested = fc
  .tuple(
    fc.integer({ min: 50, max: 100_000 }),
    fc.constantFrom('[', '{', '- ', '{"a":', 'a:\n', '[{'),
    fc.boolean(),
  )
  .map(([n, open, close]) => {
    if (open === 'a:\n') {
      const depth = Math.min(n, 400);
      return Array.from({ length: depth }, (_, i) => `${' '.repeat(i)}a:`).join('\n');
    }
    const closer: Record<string, string> = { '[': ']', '{': '}', '- ': '', '{"a":': '}', '[{': '}]' };
    return open.repeat(n) + (close ? `1${(closer[open] as string).repeat(n)}` : '');
  });
const deepText = fc.oneof(
  { weight: 4, arbitrary: nested },
  {
    weight: 1,
    arbitrary: fc.constantFrom('['.repeat(100_000), `${'['.repeat(100_000)}${']'.repeat(100_000)}`),
  },
);

/** Large strings: a lot of one character, or of a random piece. */
const hugeString = fc
  .tuple(fc.integer({ min: 10_000, max: 1_200_000 }), fc.string({ minLength: 1, maxLength: 8 }))
  .map(([n, piece]) => piece.repeat(Math.ceil(n / piece.length)).slice(0, n));

const topologyValue = fc.oneof(
  { weight: 4, arbitrary: brokenYaml },
  { weight: 4, arbitrary: wrongTypes },
  { weight: 2, arbitrary: aliasBomb },
  { weight: 2, arbitrary: deepText },
  { weight: 1, arbitrary: hugeString },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 4 }) },
);

const badId = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.stringMatching(/^mig_[0-9a-zA-Z_-]{0,40}$/),
  fc.constantFrom(
    unknownId,
    unknownId.toUpperCase(),
    'mig_',
    '0'.repeat(26),
    '%00',
    '..',
    '.',
    '~',
    ' ',
    'a'.repeat(150),
  ),
);

const bodyFields = {
  topology: topologyValue,
  path: fc.oneof(fc.string({ maxLength: 40 }), fc.constantFrom('../../../etc/passwd', '/', '\u0000', '')),
  against: fc.oneof(topologyValue, fc.constant(null)),
  againstPath: fc.string({ maxLength: 20 }),
  planId: fc.oneof(fc.string({ maxLength: 80 }), fc.stringMatching(/^sha256:[0-9a-f]{64}$/)),
  migrationId: badId,
  extra: fc.jsonValue({ maxDepth: 2 }),
};

/** A body of the route's own shape (so that it gets past the schema), bad in its values. */
function shapedBody(route: string): fc.Arbitrary<string> {
  const keys: (keyof typeof bodyFields)[] = route.endsWith('/v1/plan')
    ? ['topology', 'path', 'against', 'againstPath']
    : route.endsWith('/v1/apply')
      ? ['topology', 'path', 'planId']
      : route.endsWith('/v1/cancel')
        ? ['migrationId']
        : ['topology', 'path'];
  const picked = Object.fromEntries(keys.map((k) => [k, bodyFields[k]]));
  return fc
    .record(picked, { requiredKeys: keys.filter((k) => k === 'topology' || k === 'migrationId') })
    .map((o) => JSON.stringify(o));
}

/** A request body: JSON objects with bad fields, broken JSON, deep nesting, or huge strings. */
const anyBody: fc.Arbitrary<string | undefined> = fc.oneof(
  { weight: 1, arbitrary: fc.constant(undefined) },
  {
    weight: 3,
    arbitrary: fc.record(bodyFields, { requiredKeys: [] }).map((o) => JSON.stringify(o)),
  },
  { weight: 2, arbitrary: fc.jsonValue({ maxDepth: 5 }).map((v) => JSON.stringify(v)) },
  { weight: 2, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 2, arbitrary: deepText },
  { weight: 1, arbitrary: hugeString.map((s) => JSON.stringify({ topology: s })) },
);

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'application/json; charset=latin1',
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/yaml',
      'multipart/form-data; boundary=x',
      'application/octet-stream',
      'application/problem+json',
      'application/jsonx',
      '*/*',
      'json',
    ),
  },
  { weight: 1, arbitrary: printable.filter((s) => s.length > 0) },
);

const queryString = fc.oneof(
  fc.constant(''),
  fc
    .dictionary(
      fc.oneof(
        fc.constantFrom('limit', 'cursor', 'state', 'environment', 'follow'),
        fc.string({ maxLength: 10 }),
      ),
      fc.oneof(
        fc.string({ maxLength: 30 }),
        fc.constantFrom('0', '-1', '101', '1e3', 'true', 'yes', 'running', unknownId),
      ),
    )
    .map((q) => `?${new URLSearchParams(q).toString()}`),
  fc.constantFrom(
    '?%',
    '?%zz',
    '?limit=1&limit=2',
    '?a[b]=c',
    '?&&&==&',
    '?follow',
    '?state=running&state=paused',
    `?cursor=${'z'.repeat(500)}`,
  ),
);

function describe(req: BadRequest): string {
  const body = req.body === undefined ? 'none' : `${req.body.length} chars: ${req.body.slice(0, 120)}`;
  return `${req.method} ${req.url.slice(0, 200)} ${JSON.stringify(req.headers).slice(0, 200)} body ${body}`;
}

/** `arb` `yes` times in `yes + no`, else null. */
function rarely<T>(arb: fc.Arbitrary<T>, yes: number, no: number): fc.Arbitrary<T | null> {
  return fc.oneof({ weight: no, arbitrary: fc.constant(null) }, { weight: yes, arbitrary: arb });
}

function fill(template: string, id: string, raw: boolean): string {
  return template.replace(/\{(\w+)\}/g, () => (raw ? id : encodeURIComponent(id)));
}

// ─── The property ───────────────────────────────────────────────────────────────────────────────

it('5,000 bad requests over every route: never a 5xx, always a documented answer; the server lives on', async () => {
  const routes = documentedRoutes(api.contract.doc);
  expect(routes.length).toBeGreaterThan(10);
  const request: fc.Arbitrary<BadRequest> = fc
    .constantFrom(...routes)
    .chain((route) =>
      fc.record({
        route: fc.constant(route),
        body: fc.oneof({ weight: 3, arbitrary: shapedBody(route) }, { weight: 2, arbitrary: anyBody }),
        otherMethod: rarely(fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH'), 1, 8),
        id: badId,
        rawId: fc.boolean(),
        query: queryString,
        contentType: rarely(contentType, 9, 1),
        key: rarely(
          printable.filter((s) => s.length > 0),
          1,
          3,
        ),
        auth: rarely(
          printable.map((s) => `Bearer ${s}`),
          1,
          8,
        ),
      }),
    )
    .map((r) => {
      const [method, template] = r.route.split(' ') as [string, string];
      const m = r.otherMethod ?? method;
      const headers: Record<string, string> = {};
      if (r.contentType !== null) headers['content-type'] = r.contentType;
      if (r.key !== null) headers['idempotency-key'] = r.key;
      if (r.auth !== null) headers.authorization = r.auth;
      const withBody = m !== 'GET' && r.body !== undefined;
      const req: BadRequest = {
        method: m,
        url: fill(template, r.id, r.rawId && /^[\w.~%-]*$/.test(r.id)) + r.query,
        headers,
        ...(withBody ? { body: r.body } : {}),
      };
      // Counterexamples print short: some bodies are a megabyte.
      return Object.assign(req, { [fc.toStringMethod]: () => describe(req) });
    });

  let sent = 0;
  const statuses = new Map<number, number>();
  const started = Date.now();
  await fc.assert(
    fc.asyncProperty(fc.array(request, { minLength: 50, maxLength: 50 }), async (batch) => {
      const answers = await pool(batch, 6, async (req): Promise<CheckedResponse | Error> => {
        try {
          return await api.request(req.method, req.url, {
            headers: req.headers,
            ...(req.body === undefined ? {} : { raw: req.body }),
            signal: AbortSignal.timeout(20_000),
            token: null,
          });
        } catch (error) {
          return error as Error;
        }
      });
      for (const [i, answer] of answers.entries()) {
        sent++;
        const req = batch[i] as BadRequest;
        const what = describe(req);
        if (answer instanceof Error) {
          const cause = answer.cause as (Error & { code?: string }) | undefined;
          throw new Error(
            `${what}: ${answer.message}${cause ? ` (${cause.code ?? ''} ${cause.message})` : ''}`,
          );
        }
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        if (answer.status >= 500) throw new Error(`${what}: ${answer.status} ${answer.text.slice(0, 300)}`);
      }
    }),
    { numRuns: 100, endOnFailure: true },
  );
  console.info(
    `fuzz: ${sent} requests in ${Date.now() - started} ms; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}`,
  );
  expect(sent).toBeGreaterThanOrEqual(5_000);
  // The generators reach past request parsing: into validation of topologies, and the routes.
  // (About 2% of the requests are 422: 100 at CI's seed, 100-135 unseeded; an apply whose path
  // lies outside --workdir is a 400 before its topology is validated.)
  expect(statuses.get(422) ?? 0).toBeGreaterThan(50);
  expect(statuses.get(400) ?? 0).toBeGreaterThan(100);
  expect(statuses.get(404) ?? 0).toBeGreaterThan(100);
  expect(statuses.get(415) ?? 0).toBeGreaterThan(10);
  expect(statuses.get(413) ?? 0).toBeGreaterThan(10);

  const health = await api.get('/healthz');
  expect(health.status).toBe(200);
  // No request was handled as a bug (logged at error level with its stack).
  expect(server.stdout()).not.toMatch(/"level":50/);
}, 120_000);
