import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DriverSpec } from '../../core/topology/types.js';
import {
  type CaddyInstance,
  type CaddyPaths,
  type CaddyRecord,
  type CaddyRouteEntry,
  caddyPaths,
  canonicalJson,
  recordKey,
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
  writeFileAtomically,
} from './caddy-process.js';
import { readCaddyTraffic } from './caddy-traffic.js';
import { describeTraffic } from './describe-traffic.js';
import {
  type DrainResult,
  type DriverCallOptions,
  PermanentDriverError,
  type RouteCallContext,
  type RouteDriver,
  type RouteState,
} from './types.js';

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
  // Each call is a read-modify-write of one record: one at a time per state directory.
  const queues = new Map<string, Promise<unknown>>();
  const serialised = <T>(key: string, f: () => Promise<T>): Promise<T> => {
    const next = (queues.get(key) ?? Promise.resolve()).then(f, f);
    queues.set(
      key,
      next.catch(() => undefined),
    );
    return next;
  };
  const applyAll = (ctx: RouteCallContext, states: readonly RouteState[], options: DriverCallOptions) => {
    const held = states.find((state) => state.hold !== undefined);
    if (held)
      return Promise.reject(
        new PermanentDriverError(
          `route ${held.route}: caddy cannot hold requests, and the switch of stateful component ${held.spec.to} needs a write hold; route it through the built-in router (leave out the route's driver)`,
        ),
      );
    const spec = caddySpec(ctx, states[0]?.route ?? '');
    const paths = caddyPaths(ctx.stateDir.root);
    return serialised(paths.dir, async () => {
      const before = await readRecord(paths.record);
      const next: CaddyRecord = { version: 1, routes: { ...before.routes } };
      for (const state of states) {
        const key = recordKey(ctx.environment, state.route);
        next.routes[key] = entryOf(ctx, state, before.routes[key]);
      }
      for (const state of states) refuseListenClash(next, recordKey(ctx.environment, state.route));
      const started = Date.now();
      await applyRecord(paths, caddyBin(spec, ctx.baseDir), next, 'split first', options);
      for (const state of states)
        options.log(
          `route ${state.route}: caddy: ${describeTraffic(state)}, live (${Date.now() - started} ms)`,
        );
    });
  };
  return {
    holds: false,
    apply: (ctx, state, options) => applyAll(ctx, [state], options),
    applyAll,
    remove(ctx: RouteCallContext, route: string, options: DriverCallOptions) {
      const spec = caddySpec(ctx, route);
      const paths = caddyPaths(ctx.stateDir.root);
      return serialised(paths.dir, async () => {
        const before = await readRecord(paths.record);
        const key = recordKey(ctx.environment, route);
        if (!before.routes[key]) return;
        const routes = { ...before.routes };
        delete routes[key];
        // The edge lets go of the listeners before the split of the sockets behind them.
        await applyRecord(paths, caddyBin(spec, ctx.baseDir), { version: 1, routes }, 'edge first', options);
        options.log(`route ${route}: removed from caddy`);
        if (Object.keys(routes).length === 0)
          for (const instance of ['edge', 'split'] as const) await stopCaddy(paths, instance, options.log);
      });
    },
    drain: (ctx, _route, addresses, timeoutMs, options) =>
      waitUpstreamsIdle(caddyPaths(ctx.stateDir.root), addresses, timeoutMs, options.signal),
    observe: (ctx, route, spec) => observeCaddyRoute(ctx, route, spec),
    traffic: (ctx, route) => {
      const names = serverNames(routeId(ctx.environment, route));
      return readCaddyTraffic(caddyPaths(ctx.stateDir.root), recordKey(ctx.environment, route), {
        blue: names.slot('blue'),
        green: names.slot('green'),
      });
    },
  };
}

type CaddyDriverSpec = Extract<DriverSpec, { type: 'caddy' }>;

export function caddySpec(ctx: RouteCallContext, route: string): CaddyDriverSpec {
  const driver = ctx.driver;
  if (driver?.type !== 'caddy')
    throw new PermanentDriverError(`route ${route}: the caddy driver was called without caddy settings`);
  return driver;
}

/** The Caddy program: the driver's `bin` (a path relative to the topology file, or a name on the PATH), else `caddy`. */
function caddyBin(spec: CaddyDriverSpec, baseDir: string): string {
  if (spec.bin === undefined) return 'caddy';
  return spec.bin.includes('/') ? path.resolve(baseDir, spec.bin) : spec.bin;
}

function entryOf(ctx: RouteCallContext, state: RouteState, previous?: CaddyRouteEntry): CaddyRouteEntry {
  const entry: CaddyRouteEntry = {
    environment: ctx.environment,
    route: state.route,
    listen: state.spec.listen,
    blue: state.blue?.addresses ?? [],
    green: state.green?.addresses ?? [],
    greenPercent: state.greenPercent,
  };
  if (state.spec.preview !== undefined) entry.preview = state.spec.preview;
  if (state.spec.upstreamTimeout !== undefined) entry.upstreamTimeoutMs = state.spec.upstreamTimeout;
  // A slot server that loses its replicas in this change stays one change longer (caddy-config.ts).
  const left = (['green', 'blue'] as const).find(
    (slot) => entry[slot].length === 0 && (previous?.[slot].length ?? 0) > 0,
  );
  if (left && previous) entry.lingering = { slot: left, addresses: [...previous[left]] };
  return entry;
}

/** Caddy would refuse a configuration with two servers on one address: say which routes clash. */
function refuseListenClash(record: CaddyRecord, key: string): void {
  const entry = record.routes[key] as CaddyRouteEntry;
  const mine = [entry.listen, entry.preview].filter((a) => a !== undefined).map((a) => a.toLowerCase());
  for (const [otherKey, other] of Object.entries(record.routes)) {
    if (otherKey === key) continue;
    const clash = [other.listen, other.preview].find(
      (a) => a !== undefined && mine.includes(a.toLowerCase()),
    );
    if (clash)
      throw new PermanentDriverError(`route ${entry.route}: ${clash} is already a listener of ${otherKey}`);
  }
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
    await writeFileAtomically(configFile(paths, instance), `${JSON.stringify(configs[instance], null, 2)}\n`);
  await writeFileAtomically(paths.record, `${JSON.stringify(next, null, 2)}\n`);
}

/** How often the split's upstream counters are read while blue drains. */
export const caddyDrainPollIntervalMs = 50;

/**
 * Waits until the split has no request in flight to any of `addresses` (Caddy counts them per
 * upstream address, `GET /reverse_proxy/upstreams`). A slot keeps its server in the split until it
 * leaves the route, so requests that older configurations still carry to blue are counted. null:
 * the split does not know these addresses (or does not answer), so it cannot tell.
 */
async function waitUpstreamsIdle(
  paths: CaddyPaths,
  addresses: readonly string[],
  timeoutMs: number,
  signal: AbortSignal,
): Promise<DrainResult | null> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal.throwIfAborted();
    const inFlight = await upstreamRequests(paths, addresses);
    if (inFlight === null) return null;
    if (inFlight === 0) return { drained: true, inFlight: 0, unit: 'requests' };
    if (Date.now() >= deadline) return { drained: false, inFlight, unit: 'requests' };
    await sleep(Math.min(caddyDrainPollIntervalMs, Math.max(0, deadline - Date.now())), undefined, {
      signal,
    });
  }
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
