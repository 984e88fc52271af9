import path from 'node:path';
import {
  type CaddyInstance,
  type CaddyPaths,
  type CaddyRecord,
  type CaddyRouteEntry,
  caddyPaths,
  canonicalJson,
  renderCaddyConfigs,
  routeId,
  serverNames,
} from './caddy-config.js';
import { observeCaddyRoute } from './caddy-observe.js';
import {
  adminCall,
  configFile,
  ensureCaddy,
  liveConfig,
  loadConfig,
  readRecord,
  stopCaddy,
} from './caddy-process.js';
import { readCaddyTraffic } from './caddy-traffic.js';
import { describeTraffic } from './describe-traffic.js';
import { writeAtomically } from './driver-files.js';
import {
  balancerRoute,
  balancerSpec,
  managedBalancerDriver,
  refuseListenClash,
  routeKey,
  waitNoneInFlight,
} from './managed-balancer.js';
import type { DrainResult, DriverCallOptions, RouteCallContext, RouteDriver, RouteState } from './types.js';

/**
 * The caddy route driver: the routes of a state directory served by Caddy (Debian's 2.6), which
 * the driver starts and reconfigures through its admin API, never by a reload signal.
 *
 * Caddy applies every admin API change by starting the new configuration's servers and shutting
 * the old ones down gracefully; that shutdown closes the old servers' idle keep-alive connections
 * at once, and a client whose next request is on its way on one gets a reset (seen: 2 of about
 * 1,000 requests at 200 requests/s with 20 changes, every one on a reused connection). So the
 * clients' connections are held by a Caddy whose configuration a shift never changes (the edge),
 * and the weights by a second one (the split) that the edge reaches with a fresh connection per
 * request (caddy-config.ts). Clients keep their keep-alive connections through every shift.
 *
 * Every call loads the whole configuration (`POST /load`): Caddy runs all of it or none of it.
 * The files a restart starts from, and the driver's record, are written once both loads are done.
 */
export function createCaddyDriver(): RouteDriver {
  return managedBalancerDriver({
    name: 'caddy',
    recordOf: (ctx) => caddyPaths(ctx.stateDir.root).dir,
    applyAll: (ctx, states, options) => applyStates(ctx, states, options),
    remove: (ctx, route, options) => removeRoute(ctx, route, options),
    drain: (ctx, _route, addresses, timeoutMs, options) =>
      waitUpstreamsIdle(caddyPaths(ctx.stateDir.root), addresses, timeoutMs, options.signal),
    observe: (ctx, route, spec) => observeCaddyRoute(ctx, route, spec),
    traffic: (ctx, route) => {
      const names = serverNames(routeId(ctx.environment, route));
      return readCaddyTraffic(caddyPaths(ctx.stateDir.root), routeKey(ctx.environment, route), {
        blue: names.slot('blue'),
        green: names.slot('green'),
      });
    },
  });
}

async function applyStates(
  ctx: RouteCallContext,
  states: readonly RouteState[],
  options: DriverCallOptions,
): Promise<void> {
  const bin = caddyBin(ctx, states[0]?.route ?? '');
  const paths = caddyPaths(ctx.stateDir.root);
  const before = await readRecord(paths.record);
  const next: CaddyRecord = { version: 1, routes: { ...before.routes } };
  for (const state of states) {
    const key = routeKey(ctx.environment, state.route);
    next.routes[key] = entryOf(ctx, state, before.routes[key]);
  }
  for (const state of states) {
    const key = routeKey(ctx.environment, state.route);
    refuseListenClash(next, key, next.routes[key] as CaddyRouteEntry);
  }
  const started = Date.now();
  await applyRecord(paths, bin, next, 'split first', options);
  for (const state of states)
    options.log(`route ${state.route}: caddy: ${describeTraffic(state)}, live (${Date.now() - started} ms)`);
}

async function removeRoute(ctx: RouteCallContext, route: string, options: DriverCallOptions): Promise<void> {
  const bin = caddyBin(ctx, route);
  const paths = caddyPaths(ctx.stateDir.root);
  const before = await readRecord(paths.record);
  const key = routeKey(ctx.environment, route);
  if (!before.routes[key]) return;
  const routes = { ...before.routes };
  delete routes[key];
  // The edge lets go of the listeners before the split of the sockets behind them.
  await applyRecord(paths, bin, { version: 1, routes }, 'edge first', options);
  options.log(`route ${route}: removed from caddy`);
  if (Object.keys(routes).length === 0)
    for (const instance of ['edge', 'split'] as const) await stopCaddy(paths, instance, options.log);
}

/** The Caddy program: the driver's `bin` (a path relative to the topology file, or a name on the PATH), else `caddy`. */
function caddyBin(ctx: RouteCallContext, route: string): string {
  const spec = balancerSpec(ctx, 'caddy', route);
  if (spec.bin === undefined) return 'caddy';
  return spec.bin.includes('/') ? path.resolve(ctx.baseDir, spec.bin) : spec.bin;
}

function entryOf(ctx: RouteCallContext, state: RouteState, previous?: CaddyRouteEntry): CaddyRouteEntry {
  const entry: CaddyRouteEntry = balancerRoute(ctx.environment, state, { bodyTimeout: false });
  // A slot server that loses its replicas in this change stays one change longer (caddy-config.ts).
  const left = (['green', 'blue'] as const).find(
    (slot) => entry[slot].length === 0 && (previous?.[slot].length ?? 0) > 0,
  );
  if (left && previous) entry.lingering = { slot: left, addresses: [...previous[left]] };
  return entry;
}

/**
 * Puts `next` live: both Caddys started if they are not running (from their files: what was last
 * applied), the split's whole configuration loaded, the edge's loaded when its listeners changed
 * (or were changed by hand), then the files and the record written. A failure before the record
 * leaves the record as it was: the step fails, and running it again applies the same `next`.
 */
async function applyRecord(
  paths: CaddyPaths,
  bin: string,
  next: CaddyRecord,
  order: 'split first' | 'edge first',
  options: DriverCallOptions,
): Promise<void> {
  const configs = renderCaddyConfigs(next, paths);
  const empty = renderCaddyConfigs({ version: 1, routes: {} }, paths);
  const put = async (instance: CaddyInstance) => {
    options.signal.throwIfAborted();
    await ensureCaddy(paths, instance, empty[instance], bin, options.log);
    const live = await liveConfig(paths, instance);
    // The edge's configuration is the same through a shift: loading it would close idle clients.
    if (live === null || canonicalJson(live) !== canonicalJson(configs[instance]))
      await loadConfig(paths, instance, configs[instance]);
  };
  const instances: CaddyInstance[] = order === 'split first' ? ['split', 'edge'] : ['edge', 'split'];
  for (const instance of instances) await put(instance);
  for (const instance of instances)
    await writeAtomically(configFile(paths, instance), `${JSON.stringify(configs[instance], null, 2)}\n`);
  await writeAtomically(paths.record, `${JSON.stringify(next, null, 2)}\n`);
}

/** How often the split's upstream counters are read while blue drains. */
export const caddyDrainPollIntervalMs = 50;

/**
 * Waits until the split has no request in flight to any of `addresses` (Caddy counts them per
 * upstream address, `GET /reverse_proxy/upstreams`). A slot keeps its server in the split until it
 * leaves the route, so requests that older configurations still carry to blue are counted. null:
 * the split does not know these addresses (or does not answer), so it cannot tell.
 */
function waitUpstreamsIdle(
  paths: CaddyPaths,
  addresses: readonly string[],
  timeoutMs: number,
  signal: AbortSignal,
): Promise<DrainResult | null> {
  return waitNoneInFlight(
    () => upstreamRequests(paths, addresses),
    timeoutMs,
    caddyDrainPollIntervalMs,
    signal,
  );
}

async function upstreamRequests(paths: CaddyPaths, addresses: readonly string[]): Promise<number | null> {
  let upstreams: { address: string; num_requests: number }[];
  try {
    const answer = await adminCall(paths, 'split', 'GET', '/reverse_proxy/upstreams');
    if (answer.status !== 200) return null;
    upstreams = JSON.parse(answer.body) as typeof upstreams;
  } catch {
    return null;
  }
  const seen = upstreams.filter((u) => addresses.includes(u.address));
  if (seen.length === 0) return null;
  return seen.reduce((sum, u) => sum + u.num_requests, 0);
}
