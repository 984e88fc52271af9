/**
 * The Caddy configurations the caddy route driver loads, rendered from its record of the routes.
 * Pure: no I/O. Two Caddy processes serve a state directory's routes (DESIGN in caddy-driver.ts):
 *
 * - the edge holds the clients' connections: one server per listener (a route's `listen`, its
 *   `preview`), each proxying to the split over a unix socket. Its configuration changes only when
 *   the listeners do (a route added, removed, its preview set), never for a shift, so a client's
 *   keep-alive connection lives through every weight change.
 * - the split holds the weights: per route a server that spreads requests over the route's slots
 *   by weight (round robin over a list where each slot appears as often as its weight), and per
 *   slot a server that spreads them over the slot's replicas. A shift reloads only the split.
 *   Caddy's metrics per slot server are the slot's traffic, read for analysis.
 */
import { createHash } from 'node:crypto';
import path from 'node:path';
import type { BalancerRecord, BalancerRoute } from './managed-balancer.js';

/**
 * The driver's record of one route: what the configurations are rendered from. Its upstreamTimeout
 * is Caddy's response_header_timeout towards a replica; it has no bodyTimeout.
 */
export interface CaddyRouteEntry extends Omit<BalancerRoute, 'bodyTimeoutMs'> {
  /**
   * A slot that left the route in this change (the rollback's green, the green promoted to blue's
   * place): its slot server stays, with no traffic, until the route's next change. A request the
   * previous configuration's route server took just before the change is still sent there, and
   * would be refused if the slot server went in the same load (seen: 5 502s at a promotion).
   */
  lingering?: { slot: 'blue' | 'green'; addresses: string[] };
}

/** Every route the driver serves from one state directory, by `<environment>/<route>`. */
export type CaddyRecord = BalancerRecord<CaddyRouteEntry>;

export type CaddyInstance = 'edge' | 'split';

/** Where the files of a state directory's two Caddy processes live. */
export interface CaddyPaths {
  /** `<state>/caddy`. */
  dir: string;
  record: string;
  instanceDir(instance: CaddyInstance): string;
  adminSocket(instance: CaddyInstance): string;
  /** A socket of the split: `r-<id>` a route's main listener, `p-<id>` its preview, `s-<id>-<slot>` a slot. */
  splitSocket(name: string): string;
}

export function caddyPaths(stateRoot: string): CaddyPaths {
  const dir = path.join(stateRoot, 'caddy');
  return {
    dir,
    record: path.join(dir, 'routes.json'),
    instanceDir: (instance) => path.join(dir, instance),
    adminSocket: (instance) => path.join(dir, instance, 'admin.sock'),
    splitSocket: (name) => path.join(dir, 'split', `${name}.sock`),
  };
}

/** Header a client sends to Caddy's admin API; the admin endpoint accepts only it. */
export const caddyAdminOrigin = 'cutover';

/** Short, stable id of a route in server and socket names (unix socket paths are short). */
export function routeId(environment: string, route: string): string {
  return createHash('sha256').update(`${environment}/${route}`).digest('hex').slice(0, 10);
}

/** The names of a route's servers in the two configurations. */
export function serverNames(id: string) {
  return {
    main: `cutover_${id}`,
    preview: `cutover_${id}_preview`,
    slot: (slot: 'blue' | 'green') => `cutover_${id}_${slot}`,
  };
}

type Json = Record<string, unknown>;

/** What the edge and the split are configured with, for one state directory. */
export interface CaddyConfigs {
  edge: Json;
  split: Json;
}

export function renderCaddyConfigs(record: CaddyRecord, paths: CaddyPaths): CaddyConfigs {
  const edgeServers: Json = {};
  const splitServers: Json = {};
  for (const key of Object.keys(record.routes).sort()) {
    const entry = record.routes[key] as CaddyRouteEntry;
    Object.assign(edgeServers, renderEdgeServers(entry, paths));
    Object.assign(splitServers, renderSplitServers(entry, paths));
  }
  return {
    edge: wholeConfig(paths, 'edge', edgeServers),
    split: wholeConfig(paths, 'split', splitServers),
  };
}

/** A whole configuration: the admin endpoint on the instance's socket, nothing written elsewhere. */
function wholeConfig(paths: CaddyPaths, instance: CaddyInstance, servers: Json): Json {
  return {
    admin: {
      listen: `unix/${paths.adminSocket(instance)}`,
      origins: [caddyAdminOrigin],
      // The driver writes the file a restart loads (caddy-process.ts); no autosave elsewhere.
      config: { persist: false },
    },
    logging: { logs: { default: { level: 'WARN' } } },
    // No certificates: nothing is stored, but Caddy must not look for a home of its own.
    storage: { module: 'file_system', root: path.join(paths.instanceDir(instance), 'data') },
    apps: { http: { servers } },
  };
}

/** The edge's servers of a route: its listeners, each to the split's socket for it. */
export function renderEdgeServers(entry: CaddyRouteEntry, paths: CaddyPaths): Json {
  const id = routeId(entry.environment, entry.route);
  const names = serverNames(id);
  const servers: Json = { [names.main]: edgeServer(entry.listen, paths.splitSocket(`r-${id}`)) };
  if (entry.preview !== undefined)
    servers[names.preview] = edgeServer(entry.preview, paths.splitSocket(`p-${id}`));
  return servers;
}

/** How long the edge retries reaching the split (a split restarting): connection errors only. */
export const edgeTryDurationMs = 5_000;
const edgeTryIntervalMs = 50;

function edgeServer(listen: string, socket: string): Json {
  return {
    listen: [listen],
    automatic_https: { disable: true },
    routes: [
      {
        handle: [
          {
            handler: 'reverse_proxy',
            upstreams: [{ dial: `unix/${socket}` }],
            // A fresh connection per request: the split's reload closes idle ones, and a request
            // sent on one just then would fail. Connections to a local socket cost microseconds.
            transport: { protocol: 'http', keep_alive: { enabled: false } },
            load_balancing: {
              try_duration: `${edgeTryDurationMs}ms`,
              try_interval: `${edgeTryIntervalMs}ms`,
            },
          },
        ],
      },
    ],
  };
}

/** The split's servers of a route: the weighted main one, the preview one, one per slot. */
export function renderSplitServers(entry: CaddyRouteEntry, paths: CaddyPaths): Json {
  const id = routeId(entry.environment, entry.route);
  const names = serverNames(id);
  const slotSocket = (slot: 'blue' | 'green') => paths.splitSocket(`s-${id}-${slot}`);
  const servers: Json = {};
  servers[names.main] = splitServer(
    paths.splitSocket(`r-${id}`),
    slotWeights(entry).map((slot) => `unix/${slotSocket(slot)}`),
  );
  if (entry.preview !== undefined) {
    const previewSlot = entry.green.length > 0 ? 'green' : 'blue';
    servers[names.preview] = splitServer(
      paths.splitSocket(`p-${id}`),
      entry[previewSlot].length > 0 ? [`unix/${slotSocket(previewSlot)}`] : [],
    );
  }
  for (const slot of ['blue', 'green'] as const) {
    const addresses =
      entry[slot].length > 0 ? entry[slot] : entry.lingering?.slot === slot ? entry.lingering.addresses : [];
    if (addresses.length === 0) continue;
    const server = splitServer(slotSocket(slot), addresses, entry.upstreamTimeoutMs);
    // Caddy counts requests, status codes and durations per server: these are the slot's traffic.
    server.metrics = {};
    servers[names.slot(slot)] = server;
  }
  return servers;
}

/**
 * The split's requests come from the edge over a unix socket, a peer Caddy does not trust, so it
 * would drop the X-Forwarded-* headers the edge set from the client's connection: pass them on.
 */
const forwardedFromEdge = Object.fromEntries(
  ['X-Forwarded-For', 'X-Forwarded-Proto', 'X-Forwarded-Host'].map((name) => [
    name,
    [`{http.request.header.${name}}`],
  ]),
);

/**
 * How long a split server retries a connection that is refused (nothing was sent yet, so any
 * method may be retried): a replica that is gone (the next one is tried), and, while the split
 * starts, a slot server that does not listen yet (Caddy starts its servers one by one, so a
 * route's server may accept before the slot servers behind it do: seen as 5 502s in 4,400
 * requests when the split was killed and started again under load).
 */
export const splitTryDurationMs = 2_000;
const splitTryIntervalMs = 20;

function splitServer(socket: string, dials: readonly string[], upstreamTimeoutMs?: number): Json {
  const handler: Json =
    dials.length === 0
      ? { handler: 'static_response', status_code: 503 }
      : {
          handler: 'reverse_proxy',
          upstreams: dials.map((dial) => ({ dial })),
          load_balancing: {
            selection_policy: { policy: 'round_robin' },
            try_duration: `${splitTryDurationMs}ms`,
            try_interval: `${splitTryIntervalMs}ms`,
          },
          headers: { request: { set: forwardedFromEdge } },
          ...(upstreamTimeoutMs !== undefined
            ? { transport: { protocol: 'http', response_header_timeout: `${upstreamTimeoutMs}ms` } }
            : {}),
        };
  return { listen: [`unix/${socket}`], automatic_https: { disable: true }, routes: [{ handle: [handler] }] };
}

/**
 * The main server's upstreams: each slot as often as its weight, the smallest integers that keep
 * the split exact (90/10 → 9 and 1), interleaved (smooth weighted round robin, as nginx orders
 * them) so that round robin never sends a run of requests to one side. A slot at 0 % is left out;
 * when every slot with replicas is at 0 %, what exists serves (as the built-in router does).
 */
export function slotWeights(
  entry: Pick<CaddyRouteEntry, 'blue' | 'green' | 'greenPercent'>,
): ('blue' | 'green')[] {
  const share = { blue: 100 - entry.greenPercent, green: entry.greenPercent };
  const present = (['blue', 'green'] as const).filter((slot) => entry[slot].length > 0);
  const sharing = present.filter((slot) => share[slot] > 0);
  if (sharing.length === 0) return [...present];
  const divisor = sharing.reduce((acc, slot) => gcd(acc, share[slot]), 0);
  const weights = sharing.map((slot) => ({ slot, weight: share[slot] / divisor, current: 0 }));
  const total = weights.reduce((sum, w) => sum + w.weight, 0);
  const order: ('blue' | 'green')[] = [];
  for (let i = 0; i < total; i++) {
    for (const w of weights) w.current += w.weight;
    const best = weights.reduce((a, b) => (b.current > a.current ? b : a));
    best.current -= total;
    order.push(best.slot);
  }
  return order;
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

/** JSON with sorted keys: Caddy answers its configuration in an order of its own. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const key of Object.keys(value).sort()) out[key] = sortKeys((value as Json)[key]);
  return out;
}
