import { setTimeout as sleep } from 'node:timers/promises';
import type { RouteTraffic } from '../core/analysis/traffic.js';
import { CutoverError, isErrorCode } from '../core/errors.js';
import { jsonOr, type LoopbackAnswer, loopbackRequest } from '../platform/loopback-http.js';
import { controlDialHost } from './control-address.js';
import type {
  CloseUpgradedAnswer,
  FinishedHold,
  InFlightAnswer,
  PauseSpec,
  ReloadResult,
  RoutesSnapshot,
} from './control-types.js';
import type { ReplicationReport } from './replication-lag.js';
import { liveRouterRecord, type RouterRecord } from './router-record.js';

/** Longest a control call waits for the router to answer. */
export const routerControlTimeoutMs = 10_000;
/** How often `waitDrained` asks the router what is still in flight. */
export const drainPollIntervalMs = 100;

export interface RouterClient {
  /** Makes the router apply the table as it is on disc now; resolves once it is live. */
  reload(): Promise<ReloadResult>;
  routes(): Promise<RoutesSnapshot>;
  /** Requests of a route in flight to any of `addresses`. */
  inFlight(routeKey: string, addresses: readonly string[]): Promise<number>;
  /** The same, with the upgraded connections (WebSockets) open to them. */
  inFlightAnswer(routeKey: string, addresses: readonly string[]): Promise<InFlightAnswer>;
  /** Closes the route's upgraded connections to `addresses` (1001 for a WebSocket); how many there were. */
  closeUpgraded(routeKey: string, addresses: readonly string[]): Promise<number>;
  /**
   * A route's cumulative requests, 5xx and latency per slot; a window's traffic is the difference of
   * two of these (core/analysis/traffic.ts). Rejects with RUNNER_UNREACHABLE for a route not served.
   */
  traffic(routeKey: string): Promise<RouteTraffic>;
  /** The engine's last measure of a switched component's lag, for the router's `/metrics`. */
  reportReplication(report: ReplicationReport): Promise<void>;
  /** An operator's pause of a route (`cutover proxy pause`); bounds absent: the router's defaults. */
  pause(routeKey: string, bounds: Partial<Omit<PauseSpec, 'since'>>): Promise<PauseSpec>;
  /** Ends it: what the pause held goes on, in order. */
  resume(routeKey: string): Promise<FinishedHold>;
}

/**
 * A client of the router serving `stateDir`, found through its record on every call, so a router
 * restarted meanwhile (new port, new token) is still reached. Rejects with RUNNER_UNREACHABLE
 * when no router runs or it does not answer.
 */
export function routerClient(stateDir: string): RouterClient {
  const call = async <T>(method: 'GET' | 'POST', pathAndQuery: string, body?: unknown): Promise<T> => {
    const record = liveRouterRecord(stateDir);
    if (!record) throw noRouter(stateDir);
    return callRouter<T>(record, method, pathAndQuery, body);
  };
  const query = (routeKey: string, addresses: readonly string[]) => {
    const params = new URLSearchParams({ route: routeKey });
    for (const address of addresses) params.append('address', address);
    return params;
  };
  return {
    reload: () => call<ReloadResult>('POST', '/reload'),
    routes: () => call<RoutesSnapshot>('GET', '/routes'),
    inFlight: async (routeKey, addresses) =>
      (await call<InFlightAnswer>('GET', `/in-flight?${query(routeKey, addresses)}`)).inFlight,
    inFlightAnswer: (routeKey, addresses) =>
      call<InFlightAnswer>('GET', `/in-flight?${query(routeKey, addresses)}`),
    closeUpgraded: async (routeKey, addresses) =>
      (await call<CloseUpgradedAnswer>('POST', `/close-upgraded?${query(routeKey, addresses)}`)).closed,
    traffic: (routeKey) => call<RouteTraffic>('GET', `/traffic?${new URLSearchParams({ route: routeKey })}`),
    reportReplication: async (report) => {
      await call<unknown>('POST', '/replication', report);
    },
    pause: async (routeKey, bounds) => {
      const params = new URLSearchParams({ route: routeKey });
      if (bounds.timeoutMs !== undefined) params.set('timeoutMs', String(bounds.timeoutMs));
      if (bounds.maxHeld !== undefined) params.set('maxHeld', String(bounds.maxHeld));
      return (await call<{ pause: PauseSpec }>('POST', `/pause?${params}`)).pause;
    },
    resume: async (routeKey) =>
      (await call<{ resumed: FinishedHold }>('POST', `/resume?${new URLSearchParams({ route: routeKey })}`))
        .resumed,
  };
}

async function callRouter<T>(
  record: RouterRecord,
  method: 'GET' | 'POST',
  pathAndQuery: string,
  sent?: unknown,
): Promise<T> {
  let answer: LoopbackAnswer;
  try {
    answer = await loopbackRequest({
      method,
      host: controlDialHost(record.host),
      port: record.port,
      path: pathAndQuery,
      headers: {
        authorization: `Bearer ${record.token}`,
        ...(sent === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(sent === undefined ? {} : { body: JSON.stringify(sent) }),
      timeoutMs: routerControlTimeoutMs,
    });
  } catch (error) {
    throw new CutoverError(
      'RUNNER_UNREACHABLE',
      `the router (pid ${record.pid}) does not answer: ${(error as Error).message}`,
    );
  }
  const body = jsonOr(answer.body, {}) as T & { error?: string; code?: string };
  if (answer.status !== 200 && answer.status !== 204) {
    // An error the router raised itself (a damaged table) keeps its code.
    if (isErrorCode(body.code) && body.error !== undefined) throw new CutoverError(body.code, body.error);
    throw new CutoverError(
      'RUNNER_UNREACHABLE',
      `the router (pid ${record.pid}) answered HTTP ${answer.status}: ${body.error ?? 'no reason given'}`,
    );
  }
  return body;
}

function noRouter(stateDir: string): CutoverError {
  return new CutoverError(
    'RUNNER_UNREACHABLE',
    `no router is running for ${stateDir}: start one with \`cutover proxy\``,
  );
}

export interface DrainResult {
  drained: boolean;
  /** Requests still in flight to those addresses (at the timeout: the last count the router gave). */
  inFlight: number;
  /**
   * Upgraded connections (WebSockets) still open to those addresses at the timeout, which the
   * router then closed (1001 for a WebSocket). Absent: none was left.
   */
  closedUpgraded?: number;
}

/** What a drain does with upgraded connections: wait for them, then close them; or leave them. */
export type UpgradedDrain = 'wait-then-close' | 'leave';

/**
 * Waits until no request of `routeKey` is in flight to any of `addresses`, nor (`upgraded`:
 * 'wait-then-close', the default) any upgraded connection open to them. Resolves at the timeout
 * with `drained: false` rather than rejecting, after having the router close the upgraded
 * connections still open; rejects only when `signal` aborts. No router running counts as drained:
 * requests in flight live in the router process and die with it.
 */
export async function waitDrained(
  stateDir: string,
  routeKey: string,
  addresses: readonly string[],
  timeoutMs: number,
  signal?: AbortSignal,
  upgraded: UpgradedDrain = 'wait-then-close',
): Promise<DrainResult> {
  const client = routerClient(stateDir);
  const deadline = Date.now() + timeoutMs;
  let last = 0;
  let lastUpgraded = 0;
  for (;;) {
    signal?.throwIfAborted();
    try {
      const answer = await client.inFlightAnswer(routeKey, addresses);
      last = answer.inFlight;
      lastUpgraded = upgraded === 'leave' ? 0 : (answer.upgraded ?? 0);
      if (last === 0 && lastUpgraded === 0) return { drained: true, inFlight: 0 };
    } catch (error) {
      if (!liveRouterRecord(stateDir)) return { drained: true, inFlight: 0 };
      if (!(error instanceof CutoverError)) throw error;
      // a router that is alive but slow to answer: ask again until the deadline
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      if (lastUpgraded === 0) return { drained: false, inFlight: last };
      const closed = await client.closeUpgraded(routeKey, addresses).catch((error: unknown) => {
        // Gone meanwhile: its connections went with it.
        if (!liveRouterRecord(stateDir)) return 0;
        throw error;
      });
      return { drained: last === 0, inFlight: last, ...(closed > 0 ? { closedUpgraded: closed } : {}) };
    }
    await sleep(Math.min(drainPollIntervalMs, left), undefined, signal ? { signal } : {}).catch(() => {
      throw signal?.reason ?? new DOMException('This operation was aborted', 'AbortError');
    });
  }
}
