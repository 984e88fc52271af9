import { rm } from 'node:fs/promises';
import { describeTraffic } from './describe-traffic.js';
import { readIfExists, restoreFile, writeAtomically } from './driver-files.js';
import {
  configStructure,
  desiredBackends,
  type HaproxyRecord,
  type HaproxyRoute,
  renderHaproxyConfig,
} from './haproxy-config.js';
import { observeHaproxyRoute, trafficReader } from './haproxy-observe.js';
import {
  checkConfig,
  ensureHaproxy,
  type HaproxyFiles,
  haproxyFiles,
  reloadHaproxy,
  stopHaproxy,
  workerPid,
} from './haproxy-process.js';
import { backendCommands, runBackendPlans } from './haproxy-reconcile.js';
import { readRecord } from './haproxy-record.js';
import {
  HaproxyRefusedError,
  HaproxyUnreachableError,
  showServersState,
  showStat,
} from './haproxy-runtime.js';
import {
  balancerRoute,
  balancerSpec,
  managedBalancerDriver,
  refuseListenClash,
  routeKey,
  waitNoneInFlight,
} from './managed-balancer.js';
import {
  type DrainResult,
  type DriverCallOptions,
  PermanentDriverError,
  type RouteCallContext,
  type RouteDriver,
  type RouteState,
} from './types.js';

/**
 * The haproxy route driver (`{ type: haproxy }`): one haproxy per state directory, started by the
 * driver (haproxy-process.ts), a frontend and a backend per route (and a preview pair), blue's and
 * green's replicas as the backend's servers. A change of split is made through the runtime API
 * with no reload (`set server … weight`, `state ready|drain|maint`, `add server`, `del server`):
 * client connections, keep-alive ones included, never notice it. Only a new route, a removed one,
 * or a changed listener or timeout reloads haproxy. Every change also rewrites `haproxy.cfg` (and
 * the record, `routes.json`), so a restarted haproxy comes back with the same weights.
 *
 * A change is all or nothing: the runtime API goes first and the files follow once it is done. When
 * haproxy refuses a command, the commands already run are undone and the files are untouched; when
 * its socket stops answering mid-change (haproxy killed or restarting), the files still hold the
 * previous split (a haproxy started from them serves it) and the call fails to be retried, naming
 * the socket and the route: the retry starts haproxy if none runs and sets the whole split again.
 */
export function createHaproxyDriver(): RouteDriver {
  return managedBalancerDriver({
    name: 'haproxy',
    recordOf: (ctx) => haproxyFiles(ctx.stateDir).dir,
    applyAll: (ctx, states, options) =>
      applyStates(ctx, haproxyFiles(ctx.stateDir), haproxyBin(ctx, states[0]?.route ?? ''), states, options),
    remove: (ctx, route, options) =>
      removeRoute(ctx, haproxyFiles(ctx.stateDir), haproxyBin(ctx, route), route, options),
    drain: (ctx, route, addresses, timeoutMs, options) =>
      drainServers(ctx, route, addresses, timeoutMs, options.signal),
    traffic: trafficReader(),
    observe: (ctx, route, spec) => observeHaproxyRoute(ctx, route, spec),
  });
}

function haproxyBin(ctx: RouteCallContext, route: string): string {
  return balancerSpec(ctx, 'haproxy', route).bin ?? 'haproxy';
}

/** How often drain looks at blue's servers' current sessions. */
export const haproxyDrainPollIntervalMs = 100;

async function applyStates(
  ctx: RouteCallContext,
  files: HaproxyFiles,
  bin: string,
  states: readonly RouteState[],
  options: DriverCallOptions,
): Promise<void> {
  const before = await readRecord(files.record);
  const next: HaproxyRecord = { version: 1, routes: { ...before.routes } };
  const entries = states.map((state) => {
    const entry = balancerRoute(ctx.environment, state, { bodyTimeout: true });
    next.routes[routeKey(ctx.environment, state.route)] = entry;
    return entry;
  });
  for (const entry of entries) refuseListenClash(next, routeKey(ctx.environment, entry.route), entry);
  const text = renderHaproxyConfig(next, files);
  const previous = { config: await readIfExists(files.config), record: await readIfExists(files.record) };
  const running = await workerPid(files);
  if (
    running === null ||
    previous.config === null ||
    configStructure(previous.config) !== configStructure(text)
  ) {
    // New listeners or backends: haproxy reads them from the file, at a start or a reload.
    await writeChecked(files, bin, text, next, options.signal);
    if (running === null && previous.config !== null)
      options.log(
        `route ${states.map((s) => s.route).join(', ')}: haproxy for ${files.dir} is not running (its runtime API ${files.socket} does not answer): starting it from ${files.config} with the new split`,
      );
    try {
      if (running === null) await ensureHaproxy(files, bin, options.log, options.signal);
      else await reloadHaproxy(files, bin, options.log, options.signal);
    } catch (error) {
      await putBack(files, previous);
      throw error;
    }
    for (const state of states)
      options.log(`route ${state.route}: haproxy ${files.config}: ${describeTraffic(state)}, live`);
    return;
  }
  // The same listeners and backends: servers and weights change through the runtime API, at once;
  // then the files, so a restart comes back the same (a crash between the two leaves haproxy ahead
  // of its file: observed as drift, and the step's retry writes the file).
  const names = states.map((s) => s.route).join(', ');
  const started = performance.now();
  let kept: string[];
  try {
    kept = await reconcile(files.socket, entries);
  } catch (error) {
    if (error instanceof HaproxyUnreachableError)
      throw new Error(
        `route ${names}: haproxy's runtime API stopped answering mid-change (${error.message}); ${files.config} still holds the previous split, so a haproxy started from it serves that; the step is retried and sets the split again`,
      );
    // haproxy refused a command: the routes go back to their previous servers, as far as it lets.
    await reconcile(files.socket, entriesOf(before, ctx.environment, states)).catch(() => undefined);
    const why = error instanceof HaproxyRefusedError ? error.message : (error as Error).message;
    throw new PermanentDriverError(`route ${names}: ${why}; the previous split is back in place`);
  }
  const tookMs = Math.round(performance.now() - started);
  await writeFiles(files, text, next);
  for (const state of states)
    options.log(
      `route ${state.route}: haproxy ${files.socket}: ${describeTraffic(state)}, set through the runtime API in ${tookMs} ms (no reload)`,
    );
  if (kept.length > 0)
    options.log(
      `haproxy ${files.socket}: ${kept.join(', ')} kept in maintenance until their connections close (removed at the next change or restart)`,
    );
}

/** Every backend of the routes, set to what their entries want. Resolves with servers left in maintenance. */
async function reconcile(socket: string, entries: readonly HaproxyRoute[]): Promise<string[]> {
  const live = await showServersState(socket);
  const plans = entries.flatMap((entry) =>
    desiredBackends(entry).map((backend) => backendCommands(backend, live)),
  );
  return runBackendPlans(socket, plans);
}

function entriesOf(
  record: HaproxyRecord,
  environment: string,
  states: readonly RouteState[],
): HaproxyRoute[] {
  return states
    .map((state) => record.routes[routeKey(environment, state.route)])
    .filter((entry): entry is HaproxyRoute => entry !== undefined);
}

async function removeRoute(
  ctx: RouteCallContext,
  files: HaproxyFiles,
  bin: string,
  route: string,
  options: DriverCallOptions,
): Promise<void> {
  const record = await readRecord(files.record);
  const key = routeKey(ctx.environment, route);
  if (!record.routes[key]) {
    if (Object.keys(record.routes).length === 0) await stopHaproxy(files, options.log);
    return;
  }
  const routes = { ...record.routes };
  delete routes[key];
  const next: HaproxyRecord = { version: 1, routes };
  const text = renderHaproxyConfig(next, files);
  if (Object.keys(routes).length === 0) {
    await writeFiles(files, text, next);
    await stopHaproxy(files, options.log);
  } else {
    const previous = { config: await readIfExists(files.config), record: await readIfExists(files.record) };
    await writeChecked(files, bin, text, next, options.signal);
    try {
      if ((await workerPid(files)) !== null) await reloadHaproxy(files, bin, options.log, options.signal);
    } catch (error) {
      await putBack(files, previous);
      throw error;
    }
  }
  options.log(`route ${route}: removed from haproxy ${files.config}`);
}

/**
 * Waits until blue's servers (by address) in the route's backend have no current session (scur),
 * or the timeout. haproxy not running carries nothing: drained.
 */
async function drainServers(
  ctx: RouteCallContext,
  route: string,
  addresses: readonly string[],
  timeoutMs: number,
  signal: AbortSignal,
): Promise<DrainResult | null> {
  const files = haproxyFiles(ctx.stateDir);
  const entry = (await readRecord(files.record)).routes[routeKey(ctx.environment, route)];
  if (!entry) return null;
  const backends = new Set(desiredBackends(entry).map((b) => b.backend));
  const wanted = new Set(addresses);
  const inFlight = async () => {
    let count = 0;
    try {
      for (const row of await showStat(files.socket))
        if (backends.has(row.pxname ?? '') && wanted.has(row.addr ?? '')) count += Number(row.scur) || 0;
    } catch (error) {
      if (error instanceof HaproxyUnreachableError) return 0;
      throw error;
    }
    return count;
  };
  return waitNoneInFlight(inFlight, timeoutMs, haproxyDrainPollIntervalMs, signal);
}

/** Writes the files after `haproxy -c` accepted the configuration; a refusal leaves them as they were. */
async function writeChecked(
  files: HaproxyFiles,
  bin: string,
  text: string,
  record: HaproxyRecord,
  signal: AbortSignal,
): Promise<void> {
  const candidate = `${files.config}.next`;
  await writeAtomically(candidate, text);
  try {
    const refused = await checkConfig(bin, candidate, signal);
    if (refused) throw new PermanentDriverError(`haproxy rejected the generated configuration: ${refused}`);
  } finally {
    await rm(candidate, { force: true });
  }
  await writeFiles(files, text, record);
}

async function writeFiles(files: HaproxyFiles, text: string, record: HaproxyRecord): Promise<void> {
  await writeAtomically(files.record, `${JSON.stringify(record, null, 2)}\n`);
  await writeAtomically(files.config, text);
}

async function putBack(files: HaproxyFiles, previous: { config: string | null; record: string | null }) {
  await restoreFile(files.config, previous.config);
  await restoreFile(files.record, previous.record);
}
