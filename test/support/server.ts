/**
 * Helpers of the server tests (test/server/): a real `cutover server` in a child process (the
 * compiled bin, as a user starts it), a fetch client that checks every answer against the route's
 * documented response schema, exec-demo topologies for real migrations, and cleanup that leaves no
 * server, runner or temp directory behind.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { repoRoot, tempDir } from './cli.js';
import { killRunners } from './migrations.js';
import { eventually, waitUntil } from './wait.js';

/** ajv-formats is CommonJS: its function is the module's `default`. */
const addFormats = (ajvFormats as unknown as { default: (ajv: Ajv2020) => Ajv2020 }).default;

/** How long a server may take to print its "listening on" line on a loaded machine. */
const serverStartTimeoutMs = 20_000;

const bin = path.join(repoRoot, 'bin', 'cutover.js');

// ─── Servers ────────────────────────────────────────────────────────────────────────────────────

export interface ServerProcess {
  url: string;
  pid: number;
  stateDir: string;
  child: ChildProcess;
  /** Everything the server wrote so far. */
  stdout(): string;
  stderr(): string;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends a signal (SIGTERM by default) and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface StartOptions {
  stateDir: string;
  workdir?: string;
  /** The server's working directory (default: the repository). */
  cwd?: string;
  args?: string[];
  env?: Record<string, string>;
}

function spawnServer(options: StartOptions): {
  child: ChildProcess;
  out: { stdout: string; stderr: string };
  exited: ServerProcess['exited'];
} {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...options.env };
  if (options.env?.CUTOVER_TOKENS === undefined) delete env.CUTOVER_TOKENS;
  delete env.CUTOVER_STATE_DIR;
  const child = spawn(
    process.execPath,
    [
      bin,
      'server',
      '--port',
      '0',
      '--state-dir',
      options.stateDir,
      '--workdir',
      options.workdir ?? repoRoot,
      ...(options.args ?? []),
    ],
    { cwd: options.cwd ?? repoRoot, env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const out = { stdout: '', stderr: '' };
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    out.stdout += chunk;
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    out.stderr += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return { child, out, exited };
}

/**
 * A test file's servers and temp dirs: `cleanup()` (in afterAll) kills every server still running
 * and every runner recorded in their state directories, by pid, then removes the directories.
 */
export class ServerHarness {
  private readonly servers: ServerProcess[] = [];
  private readonly dirs: { dir: string; cleanup: () => Promise<void> }[] = [];
  private readonly stateDirs = new Set<string>();

  async tempDir(prefix = 'cutover-server-'): Promise<string> {
    const made = await tempDir(prefix);
    this.dirs.push(made);
    return made.dir;
  }

  /** A fresh state directory (inside a temp dir of its own). */
  async stateDir(): Promise<string> {
    return path.join(await this.tempDir(), 'state');
  }

  /** Starts `cutover server --port 0` and waits for its "listening on" line. */
  async start(options: StartOptions): Promise<ServerProcess> {
    this.stateDirs.add(options.stateDir);
    const { child, out, exited } = spawnServer(options);
    let exitedEarly = false;
    void exited.then(() => {
      exitedEarly = true;
    });
    const listeningOn = () => /cutover server listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out.stderr)?.[1];
    await waitUntil(() => listeningOn() !== undefined || exitedEarly, serverStartTimeoutMs);
    const url = listeningOn();
    if (!url) {
      child.kill('SIGKILL');
      throw new Error(`the server did not start:\n${out.stderr}`);
    }
    const server: ServerProcess = {
      url,
      pid: child.pid as number,
      stateDir: options.stateDir,
      child,
      stdout: () => out.stdout,
      stderr: () => out.stderr,
      exited,
      async stop(signal = 'SIGTERM') {
        if (child.exitCode === null && child.signalCode === null) child.kill(signal);
        return exited;
      },
    };
    this.servers.push(server);
    return server;
  }

  /**
   * Runs `cutover server` expecting it to refuse to start: its exit code and output. Fails (and
   * kills it) if it starts listening instead.
   */
  async startRefused(
    options: StartOptions,
  ): Promise<{ code: number | null; stderr: string; listening: boolean }> {
    this.stateDirs.add(options.stateDir);
    const { child, out, exited } = spawnServer(options);
    const outcome = await Promise.race([
      exited.then((e) => ({ ...e, listening: false })),
      (async () => {
        await waitUntil(() => /listening on/.test(out.stderr), serverStartTimeoutMs);
        return { code: null, signal: null, listening: true };
      })(),
    ]);
    if (outcome.listening) {
      child.kill('SIGKILL');
      await exited;
    }
    return { code: outcome.code, stderr: out.stderr, listening: outcome.listening };
  }

  /**
   * Starts a server (on a fresh state directory unless one is given) and connects a checked client
   * to it, with `token` if given.
   */
  async serve(
    options: Partial<StartOptions> = {},
    token: string | null = null,
  ): Promise<{ server: ServerProcess; api: Api }> {
    const server = await this.start({ ...options, stateDir: options.stateDir ?? (await this.stateDir()) });
    return { server, api: await Api.connect(server.url, token) };
  }

  /**
   * Cancels the migrations the tests left in flight and waits for their ends (so that no runner is
   * killed half way), then cleans up, whatever failed.
   */
  async cancelThenCleanup(api: Api | undefined, ids: Iterable<string>): Promise<void> {
    try {
      if (api) for (const id of ids) await api.cancelAndWait(id);
    } finally {
      await this.cleanup();
    }
  }

  async cleanup(): Promise<void> {
    for (const server of this.servers) {
      if (server.child.exitCode === null && server.child.signalCode === null) {
        server.child.kill('SIGKILL');
        await server.exited;
      }
    }
    for (const stateDir of this.stateDirs) killRunners(stateDir);
    for (const { cleanup } of this.dirs) await cleanup();
  }
}

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

  static async load(url: string, headers: Record<string, string> = {}): Promise<Contract> {
    const response = await fetch(`${url}/v1/openapi.json`, { headers });
    if (response.status !== 200) throw new Error(`GET /v1/openapi.json: ${response.status}`);
    return new Contract((await response.json()) as OpenApiDoc);
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

/** fetch over loopback (keep-alive), each answer checked by the contract. */
export class Api {
  constructor(
    readonly url: string,
    readonly contract: Contract,
    readonly token: string | null = null,
  ) {}

  static async connect(url: string, token: string | null = null): Promise<Api> {
    return new Api(url, await Contract.load(url, token ? { authorization: `Bearer ${token}` } : {}), token);
  }

  as(token: string | null): Api {
    return new Api(this.url, this.contract, token);
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
    const response = await fetch(`${this.url}${url}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      ...(options.signal ? { signal: options.signal } : {}),
    });
    const text = await response.text();
    const type = response.headers.get('content-type') ?? '';
    let json: unknown;
    if (/^application\/(problem\+)?json/.test(type)) json = JSON.parse(text);
    const r = { status: response.status, headers: response.headers, text, json };
    // Checked as the server saw it (fetch resolves `..` and the like).
    const sent = new URL(`${this.url}${url}`);
    const route = this.contract.check(method, `${sent.pathname}${sent.search}`, r);
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
  /** Times are ISO 8601 in all JSON (the README's JSON contract). */
  startedAt: string;
  updatedAt: string;
  committedAt: string | null;
  endedAt: string | null;
  reason: string | null;
  runnerPid: number | null;
}

/** The pids of every runner recorded in a state directory (runner.json), alive or not. */
export function recordedRunnerPids(stateDir: string): number[] {
  const pids: number[] = [];
  const envs = path.join(stateDir, 'environments');
  if (!existsSync(envs)) return pids;
  for (const env of readdirSafe(envs)) {
    const migrations = path.join(envs, env, 'migrations');
    for (const id of readdirSafe(migrations)) {
      const file = path.join(migrations, id, 'runner.json');
      try {
        pids.push((JSON.parse(readFileSync(file, 'utf8')) as { process: { pid: number } }).process.pid);
      } catch {
        // no record
      }
    }
  }
  return pids;
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

// ─── Topologies ─────────────────────────────────────────────────────────────────────────────────

/** Where examples/exec-demo lives, relative to the servers' workdir (the repository). */
export const demoPath = 'examples/exec-demo/topology.yaml';
export const demoText = readFileSync(path.join(repoRoot, demoPath), 'utf8');

/**
 * examples/exec-demo as another environment: its scripts run in well under a second. `bake` and
 * `commit: manual` keep a migration in flight (a long bake: until it is cancelled).
 */
export function demoTopology(
  options: { name: string; version?: string; bake?: string; commit?: 'auto' | 'manual' } = {
    name: 'exec-demo',
  },
): string {
  let text = demoText.replace(/^ {2}name: exec-demo$/m, `  name: ${options.name}`);
  if (options.version !== undefined) text = text.replaceAll('version: "1"', `version: "${options.version}"`);
  if (options.bake !== undefined || options.commit !== undefined) {
    text += `\nstrategy:\n  bake: ${options.bake ?? '0s'}\n  commit: ${options.commit ?? 'auto'}\n`;
  }
  return text;
}

/** An apply body for a demo topology (text, so relative paths resolve against examples/exec-demo). */
export function demoApply(options: Parameters<typeof demoTopology>[0], extra: JsonObject = {}): JsonObject {
  return { topology: demoTopology(options), path: demoPath, ...extra };
}

/** A migration id nobody has (valid form). */
export const unknownId = 'mig_00000000000000000000000000';

/** Runs `fn` over `items` with at most `limit` at a time; results in order. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, i: number) => Promise<R>) {
  const results = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i] as T, i);
    }
  });
  await Promise.all(workers);
  return results;
}
