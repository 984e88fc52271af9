/**
 * What the haproxy driver wants haproxy to serve, as data and as a configuration file. The record
 * (`haproxy/routes.json`) holds every route of the state directory; from it come, for each route,
 * the servers of its backends (`desiredBackends`: what the runtime API sets) and the whole file
 * (`renderHaproxyConfig`: what a start or a restart of haproxy reads). Both come from the same
 * function, so haproxy restarted from the file serves what the runtime API had set. No I/O here.
 */
import type { RouteState } from './types.js';

/** haproxy's highest server weight (`set server … weight` refuses more). */
export const haproxyMaxWeight = 256;

export interface HaproxyRecord {
  version: 1;
  /** By `<environment>/<route>`. */
  routes: Record<string, HaproxyRoute>;
}

export interface HaproxyRoute {
  environment: string;
  route: string;
  listen: string;
  preview?: string;
  blue: string[];
  green: string[];
  greenPercent: number;
  /** The route's upstreamTimeout (`timeout server`); absent: 60 s. */
  upstreamTimeoutMs?: number;
  /** The route's bodyTimeout (the frontend's `timeout client`); absent: 60 s. */
  bodyTimeoutMs?: number;
}

/** A server as cutover sets it: weight 0 is a server kept but sent nothing new (state drain). */
export interface DesiredServer {
  name: string;
  address: string;
  slot: 'blue' | 'green';
  weight: number;
}

export interface DesiredBackend {
  backend: string;
  /** `main` carries the route's traffic, `preview` green's alone. */
  kind: 'main' | 'preview';
  servers: DesiredServer[];
}

export function routeKey(environment: string, route: string): string {
  return `${environment}/${route}`;
}

export function routeEntry(environment: string, state: RouteState): HaproxyRoute {
  const entry: HaproxyRoute = {
    environment,
    route: state.route,
    listen: state.spec.listen,
    blue: state.blue?.addresses ?? [],
    green: state.green?.addresses ?? [],
    greenPercent: state.greenPercent,
  };
  if (state.spec.preview !== undefined) entry.preview = state.spec.preview;
  if (state.spec.upstreamTimeout !== undefined) entry.upstreamTimeoutMs = state.spec.upstreamTimeout;
  if (state.spec.bodyTimeout !== undefined) entry.bodyTimeoutMs = state.spec.bodyTimeout;
  return entry;
}

/** `cutover_<environment>_<route>`: a name haproxy accepts for a frontend or backend. */
export function backendName(entry: Pick<HaproxyRoute, 'environment' | 'route'>): string {
  return `cutover_${entry.environment}_${entry.route}`.replace(/[^A-Za-z0-9_.-]/g, '_');
}

/** A server is named for its address, so the same replica keeps its name in every split. */
export function serverName(address: string): string {
  return `s_${address.replace(/[^A-Za-z0-9]/g, '_')}`;
}

/** The servers of a route's backends as cutover sets them. */
export function desiredBackends(entry: HaproxyRoute): DesiredBackend[] {
  const main = backendName(entry);
  const backends: DesiredBackend[] = [{ backend: main, kind: 'main', servers: mainServers(entry) }];
  if (entry.preview !== undefined) {
    // The preview reaches green only (blue while there is no green, as the router does).
    const slot = entry.green.length > 0 ? 'green' : 'blue';
    const servers = entry[slot].map((address) => server(address, slot, 1));
    backends.push({ backend: `${main}_preview`, kind: 'preview', servers });
  }
  return backends;
}

/**
 * The main backend's servers: each slot's share spread over its replicas as the smallest integer
 * weights that keep the split exact (scaled down to haproxy's 256 when they would pass it); a slot
 * at 0 % keeps its servers at weight 0 (drained: what they carry ends, nothing new comes). When
 * every slot with replicas is at 0 %, what exists serves, as the built-in router does.
 */
export function mainServers(entry: Pick<HaproxyRoute, 'blue' | 'green' | 'greenPercent'>): DesiredServer[] {
  const share = { blue: 100 - entry.greenPercent, green: entry.greenPercent };
  const present = (['blue', 'green'] as const).filter((slot) => entry[slot].length > 0);
  const sharing = present.filter((slot) => share[slot] > 0);
  if (sharing.length === 0)
    return present.flatMap((slot) => entry[slot].map((address) => server(address, slot, 1)));
  const lcm = sharing.reduce((acc, slot) => (acc * entry[slot].length) / gcd(acc, entry[slot].length), 1);
  const raw = sharing.map((slot) => ({ slot, weight: (share[slot] * lcm) / entry[slot].length }));
  const divisor = raw.reduce((acc, r) => gcd(acc, r.weight), 0);
  const exact = new Map(raw.map((r) => [r.slot, r.weight / divisor]));
  const highest = Math.max(...exact.values());
  const scale = highest > haproxyMaxWeight ? haproxyMaxWeight / highest : 1;
  return present.flatMap((slot) => {
    const weight = exact.get(slot);
    const scaled = weight === undefined ? 0 : Math.max(1, Math.round(weight * scale));
    return entry[slot].map((address) => server(address, slot, scaled));
  });
}

function server(address: string, slot: 'blue' | 'green', weight: number): DesiredServer {
  return { name: serverName(address), address, slot, weight };
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

export interface HaproxyConfigPaths {
  /** The runtime API socket. */
  socket: string;
}

/** Idle client connections are kept this long: clients, not haproxy, should close them first. */
const keepAliveIdleMs = 300_000;

/**
 * The whole configuration for every route of the record. The servers' lines carry the weights the
 * runtime API sets, so a restart comes back with the same split (the drained ones at weight 0).
 */
export function renderHaproxyConfig(record: HaproxyRecord, paths: HaproxyConfigPaths): string {
  const lines = [
    '# Generated by cutover (the haproxy route driver) from routes.json beside it: edits are drift.',
    'global',
    `    stats socket ${paths.socket} mode 600 level admin expose-fd listeners`,
    '    stats timeout 30s',
    'defaults',
    '    mode http',
    '    option http-keep-alive',
    // A connection refused, or a reused idle connection the server had just closed, goes to another
    // server instead of failing the request.
    '    retries 3',
    '    option redispatch 1',
    '    retry-on conn-failure empty-response',
    '    timeout connect 5s',
    '    timeout client 60s',
    '    timeout server 60s',
    `    timeout http-keep-alive ${keepAliveIdleMs}ms`,
    '    timeout http-request 60s',
  ];
  for (const key of Object.keys(record.routes).sort()) {
    const entry = record.routes[key] as HaproxyRoute;
    for (const backend of desiredBackends(entry)) {
      const listen = backend.kind === 'main' ? entry.listen : (entry.preview as string);
      lines.push(
        '',
        `# route ${key}${backend.kind === 'preview' ? ' (preview: green only)' : ''}: ${100 - entry.greenPercent}% blue, ${entry.greenPercent}% green`,
        `frontend ${backend.backend}`,
        `    bind ${listen}`,
        ...(entry.bodyTimeoutMs !== undefined ? [`    timeout client ${entry.bodyTimeoutMs}ms`] : []),
        `    default_backend ${backend.backend}`,
        `backend ${backend.backend}`,
        '    balance roundrobin',
        ...(entry.upstreamTimeoutMs !== undefined ? [`    timeout server ${entry.upstreamTimeoutMs}ms`] : []),
        ...backend.servers.map((s) => `    server ${s.name} ${s.address} weight ${s.weight} # ${s.slot}`),
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

/**
 * What only a reload changes: the configuration without its server lines (frontends, listeners,
 * backends, timeouts). Two files with the same structure differ only in what the runtime API sets.
 */
export function configStructure(text: string): string {
  return text
    .split('\n')
    .filter((line) => !line.startsWith('    server ') && !line.startsWith('# route '))
    .join('\n');
}
