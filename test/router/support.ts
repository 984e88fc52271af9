/**
 * Shared by the router tests: real HTTP upstreams on 127.0.0.1 (in this process, or in a child
 * process so one can be killed with -9), routes written through the engine's own route-table
 * driver, a router serving one route, a small HTTP client that reports the slot that answered, and
 * one cleanup list per test (test/support/resources.ts) that closes every server, kills every child
 * by pid and removes every temp directory.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { Agent, createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import type { WriteHold } from '../../core/layout.js';
import type { Route, RouteTls } from '../../core/topology/types.js';
import { createRouteTableDriver } from '../../engine/drivers/router-driver.js';
import type { SlotInfo } from '../../engine/drivers/types.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { type Router, startRouter } from '../../router/router.js';
import { repoRoot } from '../support/cli.js';
import { freePort } from '../support/migrations.js';
import { killChild } from '../support/processes.js';
import type { Resources } from '../support/resources.js';

// The shared helpers the router tests take from here too.
export { freePort } from '../support/migrations.js';
export { killChild } from '../support/processes.js';
export { Resources, resourcesPerTest } from '../support/resources.js';
export { eventually } from '../support/wait.js';

export const environment = 'test';

export function stateDirFor(resources: Resources): Promise<string> {
  return resources.tempDir('cutover-router-');
}

export interface Upstream {
  name: string;
  address: string;
  close(): Promise<void>;
}

/** Milliseconds a `/slow` request takes at an upstream. */
export const slowRequestMs = 3_000;

/** How a test upstream misbehaves: every `failOneIn`-th request answers 500; every answer waits `delayMs`. */
export interface UpstreamBehaviour {
  failOneIn?: number;
  delayMs?: number;
}

/**
 * An upstream that answers its own name; `/slow` after `slowRequestMs` (or `/slow?ms=N` after N
 * ms); a POST with its name and the body it received (`name:body`). With `behaviour`, a share of
 * failures (deterministic: 1 in N) or added latency, for the analysis of a bad green.
 */
export async function startUpstream(
  resources: Resources,
  name: string,
  behaviour: UpstreamBehaviour = {},
): Promise<Upstream> {
  let served = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const answer = () => {
        served++;
        if (behaviour.failOneIn !== undefined && served % behaviour.failOneIn === 0) res.statusCode = 500;
        res.setHeader('x-upstream', name);
        res.setHeader('x-seen-forwarded-for', String(req.headers['x-forwarded-for'] ?? ''));
        res.end(req.method === 'POST' ? `${name}:${Buffer.concat(chunks).toString()}` : name);
      };
      const url = new URL(req.url ?? '/', 'http://upstream');
      if (url.pathname === '/slow') setTimeout(answer, Number(url.searchParams.get('ms') ?? slowRequestMs));
      else if (behaviour.delayMs !== undefined) setTimeout(answer, behaviour.delayMs);
      else answer();
    });
  });
  const address = await resources.listen(server);
  const close = async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  return { name, address, close };
}

/** A request as it reached a recording upstream, its body whole. */
export interface RecordedRequest {
  method: string;
  path: string;
  body: string;
}

/**
 * An upstream that records every request it receives (method, path, body) and answers its name
 * (`name:<body length>` to a request with a body); `/slow?ms=N` answers after N ms.
 */
export async function recordingUpstream(resources: Resources, name: string) {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString();
      requests.push({ method: req.method ?? '', path: req.url ?? '', body });
      const url = new URL(req.url ?? '/', 'http://upstream');
      const answer = () => res.end(body.length > 0 ? `${name}:${body.length}` : name);
      if (url.pathname === '/slow') setTimeout(answer, Number(url.searchParams.get('ms') ?? slowRequestMs));
      else answer();
    });
  });
  return { name, address: await resources.listen(server), requests };
}

/** An upstream with the test's handler that counts the connections it accepted, holds, and held at most. */
export async function countingUpstream(
  resources: Resources,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  options: { keepAliveTimeoutMs?: number } = {},
) {
  const server = createServer(handler);
  if (options.keepAliveTimeoutMs !== undefined) server.keepAliveTimeout = options.keepAliveTimeoutMs;
  let accepted = 0;
  let open = 0;
  let mostOpen = 0;
  server.on('connection', (socket: Socket) => {
    accepted++;
    mostOpen = Math.max(mostOpen, ++open);
    socket.on('close', () => open--);
  });
  return {
    address: await resources.listen(server),
    accepted: () => accepted,
    open: () => open,
    mostOpen: () => mostOpen,
    /** Closes every connection without a request in progress, as a server's idle timeout does. */
    dropIdle: () => server.closeIdleConnections(),
  };
}

/** The same upstream in a child process, so that it can die the hard way. */
export async function startChildUpstream(
  resources: Resources,
  name: string,
): Promise<Upstream & { child: ChildProcess }> {
  const script = `
    const http = require('node:http');
    const server = http.createServer((req, res) => { req.resume(); req.on('end', () => res.end(${JSON.stringify(name)})); });
    server.listen(0, '127.0.0.1', () => console.log('port ' + server.address().port));`;
  const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  resources.add(() => killChild(child));
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', () => reject(new Error(`upstream ${name} exited`)));
    child.stdout?.on('data', (data: Buffer) => {
      const match = /port (\d+)/.exec(data.toString());
      if (match) resolve(Number(match[1]));
    });
  });
  return { name, address: `127.0.0.1:${port}`, child, close: () => killChild(child) };
}

/** A free host:port on 127.0.0.1, for a route's listen address. */
export async function freeListen(): Promise<string> {
  return `127.0.0.1:${await freePort()}`;
}

export interface RouteSettings {
  listen: string;
  preview?: string;
  blue: string[];
  green: string[];
  greenPercent: number;
  upstreamTimeoutMs?: number;
  bodyTimeoutMs?: number;
  queueTimeoutMs?: number;
  /** A write hold on the route (the switch of a stateful component). */
  hold?: WriteHold;
  /** TLS on `listen`, as the topology's model has it (certificate paths relative to the state dir). */
  tls?: RouteTls;
  h2c?: true;
}

/** Writes a route into the table the way the engine does: through the route-table driver. */
export async function setRoute(stateDir: string, route: string, settings: RouteSettings): Promise<void> {
  const slot = (slot: 'blue' | 'green', addresses: string[]): SlotInfo | null =>
    addresses.length === 0 ? null : { component: 'web', slot, version: slot, addresses };
  const spec = {
    listen: settings.listen,
    to: 'web',
    shift: [settings.greenPercent],
    drain: { timeout: 30_000 },
    ...(settings.preview !== undefined ? { preview: settings.preview } : {}),
    ...(settings.upstreamTimeoutMs !== undefined ? { upstreamTimeout: settings.upstreamTimeoutMs } : {}),
    ...(settings.bodyTimeoutMs !== undefined ? { bodyTimeout: settings.bodyTimeoutMs } : {}),
    ...(settings.queueTimeoutMs !== undefined ? { queueTimeout: settings.queueTimeoutMs } : {}),
    ...(settings.tls !== undefined ? { tls: settings.tls } : {}),
    ...(settings.h2c ? { h2c: true } : {}),
  } as unknown as Route;
  await createRouteTableDriver().apply(
    callContext(stateDir),
    {
      route,
      spec,
      blue: slot('blue', settings.blue),
      green: slot('green', settings.green),
      greenPercent: settings.greenPercent,
      ...(settings.hold !== undefined ? { hold: settings.hold } : {}),
    },
    callOptions(),
  );
}

export async function removeRoute(stateDir: string, route: string): Promise<void> {
  await createRouteTableDriver().remove(callContext(stateDir), route, callOptions());
}

function callContext(stateDir: string) {
  return { environment, migrationId: 'test', stateDir: StateDir.at(stateDir), baseDir: stateDir };
}

function callOptions() {
  return { signal: new AbortController().signal, log: () => undefined };
}

/** A router (in this process) on the table in `stateDir`, closed with `resources`; what it logs. */
export async function startTestRouter(
  resources: Resources,
  stateDir: string,
  options: { keepAliveTimeoutMs?: number } = {},
): Promise<{ router: Router; log: string[] }> {
  const log: string[] = [];
  const router = await startRouter({ stateDir, log: (line) => log.push(line), ...options });
  resources.add(() => router.close());
  return { router, log };
}

/** A route's slots and timeouts, without its listen address. */
export type RouteSlots = Omit<RouteSettings, 'listen'>;

export interface RoutedTable {
  stateDir: string;
  /** Where the route listens (host:port). */
  listen: string;
  /** Writes the route again with another share of green (the router applies it on its reload). */
  split(greenPercent: number): Promise<void>;
}

export interface RoutedRouter extends RoutedTable {
  router: Router;
  log: string[];
}

/** A table (in a temp directory of `resources`) with one route, `web`, with these slots, on a free port. */
export async function tableWithRoute(resources: Resources, slots: RouteSlots): Promise<RoutedTable> {
  const stateDir = await stateDirFor(resources);
  const listen = await freeListen();
  const split = (greenPercent: number) => setRoute(stateDir, 'web', { ...slots, listen, greenPercent });
  await split(slots.greenPercent);
  return { stateDir, listen, split };
}

/** A router (in this process) serving one route, `web`, with these slots, on a free port. */
export async function routerWithRoute(
  resources: Resources,
  slots: RouteSlots,
  options: { keepAliveTimeoutMs?: number } = {},
): Promise<RoutedRouter> {
  const table = await tableWithRoute(resources, slots);
  return { ...table, ...(await startTestRouter(resources, table.stateDir, options)) };
}

/**
 * A router sending all of route `web` to `address`: as blue, or as green at 100% (no blue: no
 * connections are kept warm to it).
 */
export function routerTo(
  resources: Resources,
  address: string,
  options: { slot?: 'blue' | 'green'; upstreamTimeoutMs?: number } = {},
): Promise<RoutedRouter> {
  const slots =
    options.slot === 'green'
      ? { blue: [], green: [address], greenPercent: 100 }
      : { blue: [address], green: [], greenPercent: 0 };
  const timeout =
    options.upstreamTimeoutMs !== undefined ? { upstreamTimeoutMs: options.upstreamTimeoutMs } : {};
  return routerWithRoute(resources, { ...slots, ...timeout });
}

export interface Answer {
  status: number;
  body: string;
  slot: string | undefined;
  headers: Record<string, string | string[] | undefined>;
}

/** One HTTP request to `listen` (host:port); rejects on a socket error. */
export function send(
  listen: string,
  options: { path?: string; method?: string; body?: string; agent?: Agent } = {},
): Promise<Answer> {
  const [host, port] = listen.split(':') as [string, string];
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host,
        port: Number(port),
        path: options.path ?? '/',
        method: options.method ?? 'GET',
        agent: options.agent ?? false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString(),
            slot: res.headers['x-cutover-slot'] as string | undefined,
            headers: res.headers,
          }),
        );
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Sends `count` requests over `concurrency` keep-alive connections; counts answers and errors. */
export async function load(
  listen: string,
  count: number,
  concurrency: number,
  onAnswer: (answer: Answer, index: number) => void = () => undefined,
): Promise<{ statuses: Record<number, number>; errors: string[]; bodies: Record<string, number> }> {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const statuses: Record<number, number> = {};
  const bodies: Record<string, number> = {};
  const errors: string[] = [];
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const index = next++;
      try {
        const answer = await send(listen, { agent });
        statuses[answer.status] = (statuses[answer.status] ?? 0) + 1;
        bodies[answer.body] = (bodies[answer.body] ?? 0) + 1;
        onAnswer(answer, index);
      } catch (error) {
        errors.push((error as Error).message);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  agent.destroy();
  return { statuses, errors, bodies };
}

/**
 * A raw client connection to `listen` (destroyed with `resources`): what it received, as latin1
 * text, and whether it closed. Socket errors are taken as a close (the tests look at what came).
 */
export function rawClient(resources: Resources, listen: string) {
  const [host, port] = listen.split(':') as [string, string];
  const socket = connect(Number(port), host);
  let received = '';
  let error = '';
  let closed = false;
  socket.on('data', (data: Buffer) => {
    received += data.toString('latin1');
  });
  socket.on('error', (e: NodeJS.ErrnoException) => {
    error = e.code ?? e.message;
  });
  socket.on('close', () => {
    closed = true;
  });
  resources.add(() => {
    socket.destroy();
  });
  return {
    socket,
    received: () => received,
    /** Forgets what was received so far. */
    clear: () => {
      received = '';
    },
    /** The socket error's code, '' when none. */
    error: () => error,
    closed: () => closed,
  };
}

export const compiledRouter = path.join(repoRoot, 'dist', 'router', 'router.js');

/**
 * The router in a child process, as `cutover proxy` runs it, from the compiled dist/ (run
 * `npm run build` first). Resolves once it serves.
 */
export async function startChildRouter(
  resources: Resources,
  stateDir: string,
  scriptDir: string,
): Promise<ChildProcess> {
  const script = path.join(scriptDir, 'router-child.mjs');
  writeFileSync(
    script,
    `import { startRouter } from ${JSON.stringify(compiledRouter)};
const router = await startRouter({ stateDir: process.argv[2], log: (line) => console.log(line) });
console.log('ready');
process.on('SIGTERM', () => router.close().then(() => process.exit(0)));
`,
  );
  const child = spawn(process.execPath, [script, stateDir], { stdio: ['ignore', 'pipe', 'pipe'] });
  resources.add(() => killChild(child));
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (data: Buffer) => {
      output += data.toString();
      if (output.includes('ready\n')) resolve();
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', (code) => reject(new Error(`router child exited (${code}): ${output}`)));
  });
  return child;
}
