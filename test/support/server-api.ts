/**
 * The server tests' client: the OpenAPI contract every answer is checked against, and a checked
 * client that reaches the server either over HTTP (fetch, for a server listening on a port) or
 * through Fastify's `inject` (an in-process server: no port, no process).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { eventually } from './wait.js';

/** ajv-formats is CommonJS: its function is the module's `default`. */
const addFormats = (ajvFormats as unknown as { default: (ajv: Ajv2020) => Ajv2020 }).default;

// ─── Transports ─────────────────────────────────────────────────────────────────────────────────

export interface SentRequest {
  method: string;
  /** Path and query, as the server sees them (`..` and `.` already resolved, as fetch does). */
  url: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal;
}

export interface ReceivedResponse {
  status: number;
  headers: Headers;
  text: string;
}

/** How a request reaches the server. */
export type Transport = (request: SentRequest) => Promise<ReceivedResponse>;

/** fetch over loopback (keep-alive) to a listening server. */
export function fetchTransport(baseUrl: string): Transport {
  return async ({ method, url, headers, body, signal }) => {
    const response = await fetch(`${baseUrl}${url}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      ...(signal ? { signal } : {}),
    });
    return { status: response.status, headers: response.headers, text: await response.text() };
  };
}

/** Fastify's `inject`: the request runs through the server's hooks and routes without a socket. */
export function injectTransport(app: FastifyInstance): Transport {
  return async ({ method, url, headers, body, signal }) => {
    const injected = app.inject({
      method: method as 'GET',
      url,
      headers,
      ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : Buffer.from(body) }),
    });
    const response = signal
      ? await Promise.race([
          injected,
          new Promise<never>((_, reject) => {
            if (signal.aborted) reject(signal.reason);
            signal.addEventListener('abort', () => reject(signal.reason), { once: true });
          }),
        ])
      : await injected;
    const out = new Headers();
    for (const [name, value] of Object.entries(response.headers)) {
      if (value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) out.append(name, String(one));
    }
    return { status: response.statusCode, headers: out, text: response.body };
  };
}

/** The origin an in-process client resolves its paths against; never contacted. */
export const injectOrigin = 'http://in-process.invalid';

// ─── The contract: documented response schemas ────────────────────────────────────────────────

type JsonObject = Record<string, unknown>;

export interface OpenApiDoc {
  openapi: string;
  paths: Record<
    string,
    Record<string, { description?: string; security?: unknown[]; responses: JsonObject }>
  >;
  components: { schemas: Record<string, JsonObject> };
}

/** `METHOD /path/{param}` of every operation in the document. */
export function documentedRoutes(doc: OpenApiDoc): string[] {
  return Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.keys(ops).map((method) => `${method.toUpperCase()} ${p}`),
  );
}

function rewriteRefs(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(rewriteRefs);
  if (value === null || typeof value !== 'object') return value;
  const out: JsonObject = {};
  for (const [key, inner] of Object.entries(value)) {
    out[key] =
      key === '$ref' && typeof inner === 'string' && inner.startsWith('#/components/schemas/')
        ? `urn:component:${inner.slice('#/components/schemas/'.length)}`
        : rewriteRefs(inner);
  }
  return out;
}

export interface CheckedResponse {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: a parsed JSON body, checked against its schema
  json: any;
  /** The documented route it matched (`POST /v1/apply`), or null (an unknown route). */
  route: string | null;
}

/**
 * Checks answers against the OpenAPI document the server serves: every JSON body against the
 * route's documented response schema for its status (2xx exactly, 4XX/5XX as ranges; an
 * undocumented status fails), every error as an application/problem+json problem, and anything
 * off the documented routes as 404 NOT_FOUND.
 */
export class Contract {
  // date-time checked for real: every time the API answers is ISO 8601 (the JSON contract).
  private readonly ajv = addFormats(new Ajv2020({ strict: false, allErrors: true }));
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly matchers: { method: string; template: string; re: RegExp }[];

  constructor(readonly doc: OpenApiDoc) {
    for (const [name, schema] of Object.entries(doc.components.schemas)) {
      this.ajv.addSchema({ ...(rewriteRefs(schema) as JsonObject), $id: `urn:component:${name}` });
    }
    this.matchers = documentedRoutes(doc).map((route) => {
      const [method, template] = route.split(' ') as [string, string];
      const re = new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]*').replaceAll('.', '\\.')}$`);
      return { method, template, re };
    });
  }

  static async load(transport: Transport, headers: Record<string, string> = {}): Promise<Contract> {
    const response = await transport({ method: 'GET', url: '/v1/openapi.json', headers });
    if (response.status !== 200) throw new Error(`GET /v1/openapi.json: ${response.status}`);
    return new Contract(JSON.parse(response.text) as OpenApiDoc);
  }

  /** The documented route of a request, or null. */
  routeOf(method: string, url: string): string | null {
    const pathname = url.split('?')[0] as string;
    const found = this.matchers.find((m) => m.method === method.toUpperCase() && m.re.test(pathname));
    return found ? `${found.method} ${found.template}` : null;
  }

  /** The validator of a documented response schema, or a reason it has none. */
  schemaFor(route: string, status: number, mediaType = 'application/json'): ValidateFunction | string {
    const [method, template] = route.split(' ') as [string, string];
    const responses = this.doc.paths[template]?.[method.toLowerCase()]?.responses ?? {};
    const entry = (responses[String(status)] ?? responses[`${String(status)[0]}XX`]) as
      | { content?: Record<string, { schema: JsonObject }> }
      | undefined;
    if (!entry) return `${route} does not document status ${status}`;
    const schema = entry.content?.[mediaType]?.schema;
    if (!schema) return `${route} documents status ${status} without a schema for ${mediaType}`;
    const key = `${route} ${status} ${mediaType}`;
    let validate = this.compiled.get(key);
    if (!validate) {
      validate = this.ajv.compile(rewriteRefs(schema) as JsonObject);
      this.compiled.set(key, validate);
    }
    return validate;
  }

  /** Validates `value` against a component schema (e.g. LogLine, MigrationSummary). */
  component(name: string, value: unknown): void {
    const validate = this.ajv.getSchema(`urn:component:${name}`);
    if (!validate) throw new Error(`no component ${name}`);
    if (!validate(value)) {
      throw new Error(
        `not a valid ${name}: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`,
      );
    }
  }

  private documentsExactly(route: string, status: number): boolean {
    const [method, template] = route.split(' ') as [string, string];
    const entry = this.doc.paths[template]?.[method.toLowerCase()]?.responses[String(status)] as
      | { content?: Record<string, { schema: JsonObject }> }
      | undefined;
    const ref = entry?.content?.['application/json']?.schema.$ref;
    return entry !== undefined && ref !== '#/components/schemas/Problem';
  }

  /** Throws unless the response is what the document says it may be. */
  check(method: string, url: string, r: Omit<CheckedResponse, 'route'>): string | null {
    const route = this.routeOf(method, url);
    const type = r.headers.get('content-type') ?? '';
    const where = `${method} ${url} → ${r.status}`;
    // An error is a problem, unless the route documents a body of its own for that very status
    // (GET /readyz: 503 with a Health body).
    const ownBody = route !== null && this.documentsExactly(route, r.status);
    if (r.status >= 400 && !ownBody) {
      if (!type.startsWith('application/problem+json')) {
        throw new Error(`${where}: an error must be application/problem+json, not ${type}: ${r.text}`);
      }
      assertProblem(r.json, r.status, where);
    }
    if (route === null) {
      // Off the documented routes: 404, unless the URL itself is refused before routing (too
      // long a path segment, or one that does not decode).
      const refusedUrl =
        r.json?.code === 'URI_TOO_LONG' ||
        (r.json?.code === 'BAD_REQUEST' && /valid url/.test(r.json?.detail));
      if (!refusedUrl && (r.status !== 404 || r.json?.code !== 'NOT_FOUND')) {
        throw new Error(`${where}: not a documented route, yet not 404 NOT_FOUND: ${r.text.slice(0, 300)}`);
      }
      return null;
    }
    // Problems are documented as application/problem+json, everything else as application/json.
    const mediaType = type.startsWith('application/problem+json')
      ? 'application/problem+json'
      : 'application/json';
    const validate = this.schemaFor(route, r.status, mediaType);
    if (typeof validate === 'string') throw new Error(`${where}: ${validate}`);
    const isJson = /^application\/(problem\+)?json/.test(type);
    if (isJson && !validate(r.json)) {
      throw new Error(
        `${where}: the body does not match the documented schema: ${this.ajv.errorsText(validate.errors)}\n${r.text.slice(0, 500)}`,
      );
    }
    if (!isJson && !validate(r.text)) {
      throw new Error(
        `${where}: a ${type} body, documented otherwise: ${this.ajv.errorsText(validate.errors)}`,
      );
    }
    return route;
  }
}

/** An RFC 9457 problem as the server renders them. */
export function assertProblem(body: unknown, status: number, where = ''): void {
  const p = body as Record<string, unknown> | null;
  const ok =
    p !== null &&
    typeof p === 'object' &&
    typeof p.type === 'string' &&
    typeof p.title === 'string' &&
    typeof p.code === 'string' &&
    typeof p.detail === 'string' &&
    p.status === status &&
    p.type === `urn:cutover:problem:${String(p.code).toLowerCase().replaceAll('_', '-')}`;
  if (!ok) throw new Error(`${where}: not a problem of status ${status}: ${JSON.stringify(body)}`);
}

// ─── A client ───────────────────────────────────────────────────────────────────────────────────

export interface RequestOptions {
  /** Sent as JSON (with content-type application/json). */
  body?: unknown;
  /** Sent as it is; give the content-type in headers. */
  raw?: string | Uint8Array;
  headers?: Record<string, string>;
  /** A bearer token; null: none (overrides the client's). */
  token?: string | null;
  signal?: AbortSignal;
}

/** A client whose every answer is checked by the contract, over fetch or inject. */
export class Api {
  readonly transport: Transport;

  /**
   * `url`: the server's origin (http://127.0.0.1:<port>), or `injectOrigin` with the transport of
   * an in-process server.
   */
  constructor(
    readonly url: string,
    readonly contract: Contract,
    readonly token: string | null = null,
    transport?: Transport,
  ) {
    this.transport = transport ?? fetchTransport(url);
  }

  /** A client of a listening server (fetch over loopback). */
  static async connect(url: string, token: string | null = null): Promise<Api> {
    return Api.over(url, fetchTransport(url), token);
  }

  /** A client of an in-process server, through `app.inject`. */
  static async inject(app: FastifyInstance, token: string | null = null): Promise<Api> {
    return Api.over(injectOrigin, injectTransport(app), token);
  }

  private static async over(url: string, transport: Transport, token: string | null): Promise<Api> {
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    return new Api(url, await Contract.load(transport, headers), token, transport);
  }

  as(token: string | null): Api {
    return new Api(this.url, this.contract, token, this.transport);
  }

  async request(method: string, url: string, options: RequestOptions = {}): Promise<CheckedResponse> {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? this.token : options.token;
    if (token !== null && headers.authorization === undefined) headers.authorization = `Bearer ${token}`;
    let body: string | Uint8Array | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] ??= 'application/json';
    }
    // Sent, and checked, as the server sees it (fetch resolves `..` and the like; so does this for
    // inject).
    const sent = new URL(`${this.url}${url}`);
    const path = `${sent.pathname}${sent.search}`;
    const response = await this.transport({
      method,
      url: path,
      headers,
      ...(body === undefined ? {} : { body }),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const type = response.headers.get('content-type') ?? '';
    let json: unknown;
    if (/^application\/(problem\+)?json/.test(type)) json = JSON.parse(response.text);
    const r = { ...response, json };
    const route = this.contract.check(method, path, r);
    return { ...r, route };
  }

  get(url: string, options?: RequestOptions): Promise<CheckedResponse> {
    return this.request('GET', url, options);
  }

  post(url: string, body?: unknown, options: RequestOptions = {}): Promise<CheckedResponse> {
    return this.request('POST', url, body === undefined ? options : { ...options, body });
  }

  /** The migration's summary. */
  async summary(id: string): Promise<MigrationSummary> {
    const r = await this.get(`/v1/migrations/${id}`);
    if (r.status !== 200) throw new Error(`GET /v1/migrations/${id}: ${r.status} ${r.text}`);
    return r.json.summary as MigrationSummary;
  }

  /** Polls until the predicate holds (bounded). */
  async waitFor(
    id: string,
    predicate: (s: MigrationSummary) => boolean,
    timeoutMs = 25_000,
  ): Promise<MigrationSummary> {
    const deadline = Date.now() + timeoutMs;
    let last: MigrationSummary | undefined;
    while (Date.now() < deadline) {
      last = await this.summary(id);
      if (predicate(last)) return last;
      await sleep(100);
    }
    throw new Error(`timed out waiting for ${id}; last: ${JSON.stringify(last)}`);
  }

  /** Waits until the migration has ended and its runner process is gone. */
  async waitForEnd(id: string, timeoutMs = 25_000): Promise<MigrationSummary> {
    const summary = await this.waitFor(id, (s) => s.endedAt !== null && s.runnerPid === null, timeoutMs);
    return summary;
  }

  /** A gauge's value on GET /metrics. */
  async gauge(name: string): Promise<number> {
    const r = await this.get('/metrics');
    const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(r.text);
    if (!match) throw new Error(`no ${name} in /metrics`);
    return Number(match[1]);
  }

  /** Waits (bounded) until the gauge reads `value`: the server has seen what it counts open or close. */
  async gaugeReaches(name: string, value: number, timeoutMs = 10_000): Promise<void> {
    let now: number | undefined;
    await eventually(
      async () => {
        now = await this.gauge(name);
        return now === value;
      },
      timeoutMs,
      () => `${name} is ${now}, expected ${value}`,
    );
  }

  /** Cancels it if it is still in flight, then waits for the end. */
  async cancelAndWait(id: string): Promise<MigrationSummary> {
    const s = await this.summary(id);
    if (s.endedAt === null) {
      const r = await this.post('/v1/cancel', { migrationId: id });
      if (r.status !== 202 && r.status !== 409) throw new Error(`cancel ${id}: ${r.status} ${r.text}`);
    }
    return this.waitForEnd(id);
  }
}

export interface MigrationSummary {
  id: string;
  environment: string;
  lifecycle: string;
  status: string;
  planId: string;
  actionsDone: number;
  actionsTotal: number;
  /** Times are ISO 8601 in all JSON (docs/json.md, the JSON contract). */
  startedAt: string;
  updatedAt: string;
  committedAt: string | null;
  endedAt: string | null;
  reason: string | null;
  runnerPid: number | null;
}
