import { parseHostPort } from '../core/host-port.js';
import type { WriteHold } from '../core/layout.js';
import type { RoutingEntry } from './route-table.js';
import { type ListenerProtocol, plainHttp, type RouteTlsState, routeTlsState } from './route-tls.js';

/**
 * The router's in-memory routing state, built from one version of the routing table. Pure: no I/O.
 * Invariant: the router holds exactly one RoutingState and replaces it with one assignment, so a
 * request sees either the old table or the new one, never a mix.
 */
export type Slot = 'blue' | 'green';
export const slots: readonly Slot[] = ['blue', 'green'];

/**
 * A route's main listener takes the weighted split; its preview listener reaches green only; its
 * redirect listener (tls.redirectHttp) sends every client to https.
 */
export type ListenerKind = 'main' | 'preview' | 'redirect';

export interface Binding {
  routeKey: string;
  kind: ListenerKind;
  /** How the listener speaks (plain HTTP, h2c, TLS): a listener is opened anew when it changes. */
  protocol: ListenerProtocol;
}

/** Where a route is in its rotation. Mutated by every pick; kept across reloads that leave the split alone. */
export interface Rotation {
  /** Smooth weighted round robin credit per slot (nginx's algorithm): deterministic, evenly spread. */
  credit: Record<Slot, number>;
  /** Index of the next replica to try, per slot. */
  next: Record<Slot, number>;
}

export interface RouteState {
  key: string;
  listen: string;
  preview?: string;
  blue: readonly string[];
  green: readonly string[];
  greenPercent: number;
  drainTimeoutMs: number;
  /** Longest silence of an upstream while its answer is awaited. */
  upstreamTimeoutMs: number;
  /** Longest silence of a client in the middle of its request body. */
  bodyTimeoutMs: number;
  /** Longest wait for a free connection to an upstream. */
  queueTimeoutMs: number;
  updatedAt: number;
  /** The engine's write hold on the route (RoutingEntry.hold); write-holds.ts honours it. */
  hold?: WriteHold;
  /** TLS termination on `listen` (route-tls.ts); absent: plain HTTP. */
  tls?: RouteTlsState;
  rotation: Rotation;
}

/** A route's upstreamTimeout when the topology names none: nginx's proxy_read_timeout default. */
export const defaultUpstreamTimeoutMs = 60_000;
/** A route's bodyTimeout when the topology names none: nginx's client_body_timeout default. */
export const defaultBodyTimeoutMs = 60_000;
/**
 * A route's queueTimeout when the topology names none. Long enough for a burst to be served from
 * the queue as connections free up; short enough that a client stuck behind a saturated upstream
 * hears 503 (and when to come back) well before its own timeout, rather than nothing.
 */
export const defaultQueueTimeoutMs = 10_000;

export interface RoutingState {
  /** The newest `updatedAt` of any route: what a reload reports, so a writer can tell its change is live. */
  version: number;
  routes: ReadonlyMap<string, RouteState>;
  /** Listen address (lower case) → the route and kind served there. */
  bindings: ReadonlyMap<string, Binding>;
  /** Entries or fields left out because they were malformed or clashed. */
  problems: string[];
}

export const emptyRoutingState: RoutingState = {
  version: 0,
  routes: new Map(),
  bindings: new Map(),
  problems: [],
};

/** Builds the state for a parsed table. Rotations of routes whose split is unchanged carry over. */
export function buildRoutingState(table: unknown, previous: RoutingState): RoutingState {
  const problems: string[] = [];
  const routes = new Map<string, RouteState>();
  const bindings = new Map<string, Binding>();
  const entries = tableEntries(table, problems);
  for (const key of Object.keys(entries).sort()) {
    const route = routeState(key, entries[key], problems);
    if (!route) continue;
    const before = previous.routes.get(key);
    if (before && sameSplit(before, route)) route.rotation = before.rotation;
    routes.set(key, route);
    const wanted: [string | undefined, ListenerKind, ListenerProtocol][] = [
      [route.listen, 'main', route.tls?.protocol ?? mainProtocol(entries[key])],
      [route.preview, 'preview', plainHttp],
      [route.tls?.redirectHttp, 'redirect', plainHttp],
    ];
    for (const [address, kind, protocol] of wanted) {
      if (address === undefined) continue;
      const holder = bindings.get(address);
      if (holder)
        problems.push(`${key}: ${address} is already the ${holder.kind} listener of ${holder.routeKey}`);
      else bindings.set(address, { routeKey: key, kind, protocol });
    }
  }
  const version = Math.max(0, ...[...routes.values()].map((r) => r.updatedAt));
  return { version, routes, bindings, problems };
}

function tableEntries(table: unknown, problems: string[]): Record<string, unknown> {
  if (!isObject(table) || table.version !== 1 || !isObject(table.routes)) {
    problems.push('the routing table is not {version: 1, routes: {...}}');
    return {};
  }
  return table.routes;
}

function routeState(key: string, raw: unknown, problems: string[]): RouteState | null {
  if (!isObject(raw)) {
    problems.push(`${key}: not an object`);
    return null;
  }
  const entry = raw as Partial<RoutingEntry>;
  const listen = listenAddress(entry.listen);
  if (listen === null) {
    problems.push(`${key}: listen ${JSON.stringify(entry.listen)} is not host:port`);
    return null;
  }
  const route: RouteState = {
    key,
    listen,
    blue: addresses(key, 'blue', entry.blue, problems),
    green: addresses(key, 'green', entry.green, problems),
    greenPercent: clampPercent(entry.greenPercent),
    drainTimeoutMs: typeof entry.drainTimeoutMs === 'number' ? entry.drainTimeoutMs : 0,
    upstreamTimeoutMs: positiveOr(entry.upstreamTimeoutMs, defaultUpstreamTimeoutMs),
    bodyTimeoutMs: positiveOr(entry.bodyTimeoutMs, defaultBodyTimeoutMs),
    queueTimeoutMs: positiveOr(entry.queueTimeoutMs, defaultQueueTimeoutMs),
    updatedAt: typeof entry.updatedAt === 'number' ? entry.updatedAt : 0,
    rotation: { credit: { blue: 0, green: 0 }, next: { blue: 0, green: 0 } },
  };
  if (entry.preview !== undefined) {
    const preview = listenAddress(entry.preview);
    if (preview === null) problems.push(`${key}: preview ${JSON.stringify(entry.preview)} is not host:port`);
    else route.preview = preview;
  }
  if (entry.tls !== undefined) {
    const tls = routeTlsState(entry.tls);
    // Never served as plain HTTP in its place: the route is left out.
    if (typeof tls === 'string') {
      problems.push(`${key}: tls ${tls}`);
      return null;
    }
    route.tls = tls;
  }
  if (entry.hold !== undefined) {
    const hold = writeHold(entry.hold);
    // Served without it, and said: the engine's driver sees the hold missing from the reload's answer.
    if (hold === null)
      problems.push(`${key}: hold ${JSON.stringify(entry.hold)} is not {id, since, expiresAt, maxHeld}`);
    else route.hold = hold;
  }
  return route;
}

/** A plain main listener: HTTP/1.1, and h2c when the entry asks for it. */
function mainProtocol(raw: unknown): ListenerProtocol {
  return isObject(raw) && raw.h2c === true ? { type: 'http', h2c: true } : plainHttp;
}

function writeHold(value: unknown): WriteHold | null {
  if (!isObject(value)) return null;
  const { id, since, expiresAt, maxHeld } = value;
  if (typeof id !== 'string' || id === '') return null;
  if (typeof since !== 'number' || typeof expiresAt !== 'number') return null;
  if (typeof maxHeld !== 'number' || !Number.isInteger(maxHeld) || maxHeld < 0) return null;
  return { id, since, expiresAt, maxHeld };
}

function positiveOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && value > 0 ? value : fallback;
}

function listenAddress(value: unknown): string | null {
  return typeof value === 'string' && parseHostPort(value) !== null ? value.toLowerCase() : null;
}

function addresses(key: string, slot: Slot, value: unknown, problems: string[]): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) {
    problems.push(`${key}: ${slot} is not a list of addresses`);
    return [];
  }
  return value.filter((address): address is string => {
    const ok = typeof address === 'string' && parseHostPort(address) !== null;
    if (!ok) problems.push(`${key}: ${slot} address ${JSON.stringify(address)} is not host:port`);
    return ok;
  });
}

function clampPercent(value: unknown): number {
  if (typeof value !== 'number' || Number.isNaN(value)) return 0;
  return Math.min(100, Math.max(0, value));
}

function sameSplit(a: RouteState, b: RouteState): boolean {
  const same = (x: readonly string[], y: readonly string[]) =>
    x.length === y.length && x.every((v, i) => v === y[i]);
  return a.greenPercent === b.greenPercent && same(a.blue, b.blue) && same(a.green, b.green);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The share of a route's main traffic that a slot takes, 0..100. */
export function slotShare(route: RouteState, slot: Slot): number {
  return slot === 'green' ? route.greenPercent : 100 - route.greenPercent;
}

export function otherSlot(slot: Slot): Slot {
  return slot === 'blue' ? 'green' : 'blue';
}

/**
 * The slot for the next request, or null when the route has no address at all. Preview traffic goes
 * to green (blue only while there is no green). Main traffic is split by smooth weighted round robin,
 * so at 10% exactly one request in every ten goes to green; a slot without addresses takes no share.
 */
export function chooseSlot(route: RouteState, kind: ListenerKind): Slot | null {
  // No allocation here: this runs for every request.
  const hasBlue = route.blue.length > 0;
  const hasGreen = route.green.length > 0;
  if (!hasBlue) return hasGreen ? 'green' : null;
  if (!hasGreen) return 'blue';
  if (kind === 'preview') return 'green';
  const blueWeight = 100 - route.greenPercent;
  const greenWeight = route.greenPercent;
  const total = blueWeight + greenWeight;
  // Every present slot at 0% (e.g. 100% green before green has addresses): serve what exists.
  if (total === 0) return 'blue';
  const { credit } = route.rotation;
  credit.blue += blueWeight;
  credit.green += greenWeight;
  const chosen: Slot = credit.green > credit.blue ? 'green' : 'blue';
  credit[chosen] -= total;
  return chosen;
}

/** The slot's next replica in round robin, skipping those already tried; undefined when none is left. */
export function nextReplica(route: RouteState, slot: Slot, tried: ReadonlySet<string>): string | undefined {
  const replicas = route[slot];
  for (let i = 0; i < replicas.length; i++) {
    const index = route.rotation.next[slot] % replicas.length;
    route.rotation.next[slot] = index + 1;
    const address = replicas[index];
    if (address !== undefined && !tried.has(address)) return address;
  }
  return undefined;
}

/**
 * Where a request goes after an upstream failed before answering: another replica of the same
 * slot, then the other slot — but only when that slot takes a share of the traffic. A slot at 0% is
 * being drained (the engine may be about to stop it) or is not yet trusted, and preview traffic
 * never falls back to blue: that would hide a broken green from the gate.
 */
export function failoverTarget(
  route: RouteState,
  kind: ListenerKind,
  slot: Slot,
  tried: ReadonlySet<string>,
): { slot: Slot; address: string } | null {
  const same = nextReplica(route, slot, tried);
  if (same !== undefined) return { slot, address: same };
  const other = otherSlot(slot);
  if (kind === 'preview' || slotShare(route, other) === 0) return null;
  const address = nextReplica(route, other, tried);
  return address === undefined ? null : { slot: other, address };
}
