import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { RouteTraffic } from '../core/analysis/traffic.js';
import { CutoverError, environmentCause } from '../core/errors.js';
import type { HostPort } from '../core/host-port.js';
import { defaultControlListen } from './control-address.js';
import type {
  CloseUpgradedAnswer,
  FinishedHold,
  InFlightAnswer,
  PauseSpec,
  ReloadResult,
  RoutesSnapshot,
} from './control-types.js';
import { prometheusTextType } from './metrics-text.js';
import { type ReplicationReport, reportProblem } from './replication-lag.js';
import { PauseRefused } from './write-holds.js';

/** What the control API drives: the router, seen through the things it can be asked. */
export interface ControlTarget {
  reload(): Promise<ReloadResult>;
  routes(): RoutesSnapshot;
  inFlight(routeKey: string, addresses: readonly string[]): number;
  upgraded(routeKey: string, addresses: readonly string[]): number;
  closeUpgraded(routeKey: string, addresses: readonly string[]): Promise<number>;
  pause(routeKey: string, bounds: Omit<PauseSpec, 'since'>): PauseSpec;
  resume(routeKey: string): FinishedHold;
  traffic(routeKey: string): RouteTraffic | null;
  metricsText(): string;
  reportReplication(report: ReplicationReport): void;
}

export interface ControlServer {
  host: string;
  port: number;
  token: string;
  close(): Promise<void>;
}

/**
 * The router's control API: HTTP on 127.0.0.1 (a random port), or the fixed address kept in the
 * state directory (control-address.ts), with a random bearer token kept in the router record (mode
 * 0600).
 *
 * - `GET /healthz` (no token) → 200 `{ ok: true, pid }`
 * - `GET /metrics` (no token) → per-slot requests, 5xx and latency in Prometheus's text format.
 *   No token, so that Prometheus scrapes it as it scrapes anything: it tells counts and durations
 *   per environment, route and slot, never an address, a header or the token, and it changes
 *   nothing; the listener is on 127.0.0.1 only, as for the rest of the API.
 * - `GET /traffic?route=<env/route>` → `RouteTraffic`, the same counters as JSON for the engine's
 *   analysis (404 for a route the router does not serve)
 * - `POST /reload` → re-reads the table; answers `ReloadResult` once the new state is live
 * - `GET /routes` → `RoutesSnapshot`: each route's split, addresses and requests in flight, and a
 *   TLS route's certificates (names, file, expiry, fingerprint, the last load's problem)
 * - `GET /in-flight?route=<env/route>&address=<a>&address=<b>` → `InFlightAnswer`: requests in
 *   flight, and upgraded connections (WebSockets) open, to those addresses
 * - `POST /close-upgraded?route=<env/route>&address=<a>…` → `CloseUpgradedAnswer`, once the route's
 *   upgraded connections to those addresses are closed (1001 for a WebSocket): the end of a drain
 * - `POST /pause?route=<env/route>[&timeoutMs=N][&maxHeld=N]` → `{ route, pause }`: an operator's
 *   pause (write-holds.ts); 404 for a route not served, 409 during a stateful switch's write hold
 * - `POST /resume?route=<env/route>` → `{ route, resumed }` (a FinishedHold): what it held goes on;
 *   409 when the route is not paused
 * - `POST /replication` with a `ReplicationReport` → 204: the engine's last measure of a switched
 *   component's replication lag, shown on `/metrics` (router/replication-lag.ts)
 */
export async function startRouterControl(
  target: ControlTarget,
  listen: HostPort = defaultControlListen,
): Promise<ControlServer> {
  const token = randomBytes(24).toString('hex');
  const expected = Buffer.from(`Bearer ${token}`);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    if (req.method === 'GET' && url.pathname === '/healthz')
      return send(res, 200, { ok: true, pid: process.pid });
    if (req.method === 'GET' && url.pathname === '/metrics') {
      const text = target.metricsText();
      res.writeHead(200, { 'content-type': prometheusTextType, 'content-length': Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    const auth = Buffer.from(req.headers.authorization ?? '');
    if (auth.length !== expected.length || !timingSafeEqual(auth, expected))
      return send(res, 401, { error: 'unauthorized' });
    return route(target, req, res, url);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve());
  }).catch((error: unknown) => {
    const shown = listen.host.includes(':')
      ? `[${listen.host}]:${listen.port}`
      : `${listen.host}:${listen.port}`;
    const cause =
      (error as NodeJS.ErrnoException).code === 'EADDRINUSE'
        ? 'the address is in use (EADDRINUSE): another program, or another router, listens there; stop it or choose another address with --control-listen'
        : (environmentCause(error) ?? (error as Error).message);
    throw new CutoverError(
      'ENVIRONMENT_FAULT',
      `the router's control API cannot listen on ${shown}: ${cause}`,
    );
  });
  const address = server.address();
  if (address === null || typeof address === 'string')
    throw new CutoverError('INTERNAL', 'router control server has no port');
  return { host: listen.host, port: address.port, token, close: () => closeServer(server) };
}

function route(target: ControlTarget, req: IncomingMessage, res: ServerResponse, url: URL): void {
  const endpoint = `${req.method} ${url.pathname}`;
  switch (endpoint) {
    case 'POST /reload':
      req.resume();
      target.reload().then(
        (result) => send(res, 200, result),
        (error: Error) =>
          send(res, 500, {
            error: error.message,
            code: error instanceof CutoverError ? error.code : 'INTERNAL',
          }),
      );
      return;
    case 'GET /routes':
      send(res, 200, target.routes());
      return;
    case 'GET /in-flight': {
      const routeKey = url.searchParams.get('route');
      const addresses = url.searchParams.getAll('address');
      if (!routeKey) send(res, 400, { error: 'route= is required' });
      else {
        const answer: InFlightAnswer = {
          route: routeKey,
          addresses,
          inFlight: target.inFlight(routeKey, addresses),
          upgraded: target.upgraded(routeKey, addresses),
        };
        send(res, 200, answer);
      }
      return;
    }
    case 'POST /close-upgraded': {
      req.resume();
      const routeKey = url.searchParams.get('route');
      const addresses = url.searchParams.getAll('address');
      if (!routeKey) send(res, 400, { error: 'route= is required' });
      else
        void target.closeUpgraded(routeKey, addresses).then((closed) => {
          const answer: CloseUpgradedAnswer = { route: routeKey, addresses, closed };
          send(res, 200, answer);
        });
      return;
    }
    case 'POST /pause':
    case 'POST /resume':
      req.resume();
      pauseOrResume(target, endpoint, res, url);
      return;
    case 'GET /traffic': {
      const routeKey = url.searchParams.get('route');
      const traffic = routeKey ? target.traffic(routeKey) : null;
      if (!routeKey) send(res, 400, { error: 'route= is required' });
      else if (!traffic) send(res, 404, { error: `the router does not serve route ${routeKey}` });
      else send(res, 200, traffic);
      return;
    }
    case 'POST /replication':
      readReport(req).then(
        (report) => {
          const problem = reportProblem(report);
          if (problem !== null) return send(res, 400, { error: problem });
          target.reportReplication(report as ReplicationReport);
          res.writeHead(204).end();
        },
        () => send(res, 400, { error: 'the body is not JSON' }),
      );
      return;
    default:
      send(res, 404, { error: `no ${endpoint}` });
  }
}

function pauseOrResume(target: ControlTarget, endpoint: string, res: ServerResponse, url: URL): void {
  const routeKey = url.searchParams.get('route');
  const bounds = pauseBounds(url);
  if (!routeKey) send(res, 400, { error: 'route= is required' });
  else if (typeof bounds === 'string') send(res, 400, { error: bounds });
  else
    try {
      if (endpoint === 'POST /resume') send(res, 200, { route: routeKey, resumed: target.resume(routeKey) });
      else send(res, 200, { route: routeKey, pause: target.pause(routeKey, bounds) });
    } catch (error) {
      if (error instanceof PauseRefused) send(res, error.status, { error: error.message, code: 'USAGE' });
      else send(res, 500, { error: (error as Error).message, code: 'ENVIRONMENT_FAULT' });
    }
}

/** A pause's bounds when the operator names none: half a minute per request, a thousand at once. */
export const defaultPauseTimeoutMs = 30_000;
export const defaultPauseMaxHeld = 1_000;

/** `timeoutMs=` and `maxHeld=` of a pause, defaulted; a string says what is wrong. */
function pauseBounds(url: URL): Omit<PauseSpec, 'since'> | string {
  const number = (name: string, fallback: number) => {
    const text = url.searchParams.get(name);
    return text === null ? fallback : /^[0-9]{1,9}$/.test(text) ? Number(text) : Number.NaN;
  };
  const timeoutMs = number('timeoutMs', defaultPauseTimeoutMs);
  const maxHeld = number('maxHeld', defaultPauseMaxHeld);
  if (!(timeoutMs > 0)) return 'timeoutMs= must be a whole number of milliseconds above 0';
  if (!(maxHeld >= 0)) return 'maxHeld= must be a whole number';
  return { timeoutMs, maxHeld };
}

/** A report is a few hundred bytes; a body past this is refused. */
const maxReportBytes = 4_096;

function readReport(req: IncomingMessage): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      text += chunk;
      if (text.length > maxReportBytes) req.destroy(new Error('too large'));
    });
    req.on('end', () => {
      try {
        resolve(JSON.parse(text));
      } catch (error) {
        reject(error);
      }
    });
    req.on('error', reject);
  });
}

function send(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}
