import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CutoverError } from '../../core/errors.js';
import type { ObservedRoute } from '../../core/observed.js';
import type { Route, RouteTls } from '../../core/topology/types.js';
import { cutoverCliPath } from '../../platform/package-path.js';
import { routerClient, waitDrained } from '../../router/client.js';
import type { ListenFailure, ReloadResult, RoutesSnapshot } from '../../router/control-types.js';
import type { ReplicationReport } from '../../router/replication-lag.js';
import {
  addressesTaken,
  type RoutingEntry,
  type RoutingTls,
  readRoutingTable,
  routeKey,
  writeRoutingTable,
} from '../../router/route-table.js';
import { liveRouterRecord, readRouterRecord } from '../../router/router-record.js';
import { tcpProbe } from '../health/probes.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import type { StateDir } from '../store/state-dir.js';
import { describeTraffic } from './describe-traffic.js';
import {
  type DriverCallOptions,
  PermanentDriverError,
  type RouteCallContext,
  type RouteDriver,
  type RouteState,
} from './types.js';

/** Longest the engine waits for a router it started to answer. */
export const routerStartTimeoutMs = 15_000;

/**
 * The built-in router as a route driver: writes the routing table, makes sure a router serves the
 * state directory (starting `cutover proxy` in the background when none runs), and has it apply
 * the table before returning, so a traffic switch is done when the step that made it is.
 * The router outlives the engine: traffic keeps flowing while a runner is restarted.
 */
export function createRouterDriver(): RouteDriver {
  const table = createRouteTableDriver();
  // Every route in one table write and one reload: the router swaps its whole routing state at once,
  // so all of them go live in the same generation.
  const applyAll = async (
    ctx: RouteCallContext,
    states: readonly RouteState[],
    options: DriverCallOptions,
  ) => {
    await table.applyAll(ctx, states, options);
    await ensureRouter(ctx.stateDir, options.log);
    const result = await routerClient(ctx.stateDir.root).reload();
    // The table is written, but traffic goes where the route's listeners are open: a listener the
    // router could not open (another program holds the address) is a step that did not happen.
    const problems = states.flatMap((state) => {
      const key = routeKey(ctx.environment, state.route);
      const unbound = (result.unbound ?? []).filter((failure) => failure.routeKey === key);
      const holdProblem = holdNotInEffect(state, key, result);
      return [
        ...(unbound.length > 0 ? [unboundMessage(state.route, unbound)] : []),
        ...(holdProblem ? [holdProblem] : []),
      ];
    });
    if (problems.length > 0) throw new PermanentDriverError(problems.join('; '));
  };
  return {
    holds: true,
    apply: (ctx, state, options) => applyAll(ctx, [state], options),
    applyAll,
    async remove(ctx: RouteCallContext, route: string, options: DriverCallOptions) {
      await table.remove(ctx, route, options);
      if (liveRouterRecord(ctx.stateDir.root)) await routerClient(ctx.stateDir.root).reload();
    },
    // The router counts the requests and upgraded connections it carries; no router running counts
    // as drained. Upgraded connections still open at the timeout are closed (1001 for a WebSocket).
    drain(ctx, route, addresses, timeoutMs, options, upgraded) {
      return waitDrained(
        ctx.stateDir.root,
        routeKey(ctx.environment, route),
        addresses,
        timeoutMs,
        options.signal,
        upgraded,
      );
    },
    observe: (ctx, route, spec) => observeRoute(ctx, route, spec),
    // No router running: nothing to measure, and the client says so (RUNNER_UNREACHABLE).
    traffic: (ctx, route) => routerClient(ctx.stateDir.root).traffic(routeKey(ctx.environment, route)),
  };
}

/** How long a look at a route's address may wait for a connection when no router of ours runs. */
const addressProbeTimeoutMs = 1_000;

/**
 * A route as the router serves it now: `not_served` when no router runs for the state directory
 * or it does not serve the route, `address_taken` when it could not open the route's listener,
 * else `served` with the split, the addresses and the requests in flight.
 */
async function observeRoute(ctx: RouteCallContext, route: string, spec: Route): Promise<ObservedRoute> {
  const seen = { route, listen: spec.listen };
  if (!liveRouterRecord(ctx.stateDir.root)) {
    const noRouter = `no router is running for ${ctx.stateDir.root}`;
    // With no router of ours, whatever answers on the route's address is another program: a
    // router started now could not listen there, so telling it apart is what says how to repair.
    const probe = await tcpProbe(spec.listen).run(addressProbeTimeoutMs, new AbortController().signal);
    if (probe?.ok) {
      return {
        ...seen,
        state: 'address_taken',
        detail: `${noRouter}, and another program accepts connections on ${spec.listen}`,
      };
    }
    return { ...seen, state: 'not_served', detail: noRouter };
  }
  let snapshot: RoutesSnapshot;
  try {
    snapshot = await routerClient(ctx.stateDir.root).routes();
  } catch (error) {
    return { ...seen, state: 'not_served', detail: (error as Error).message };
  }
  const key = routeKey(ctx.environment, route);
  const unbound = (snapshot.unbound ?? []).find((u) => u.routeKey === key && u.kind === 'main');
  if (unbound?.opening) return { ...seen, state: 'not_served', detail: 'the router is opening its listener' };
  if (unbound) return { ...seen, state: 'address_taken', detail: unbound.cause };
  const served = snapshot.routes[key];
  if (!served) return { ...seen, state: 'not_served', detail: 'the router does not serve this route' };
  return {
    ...seen,
    state: 'served',
    greenPercent: served.greenPercent,
    blue: served.blue,
    green: served.green,
    inFlight: served.inFlight.blue + served.inFlight.green,
  };
}

/**
 * Why the router does not hold `state`'s write hold now that the table is live, or null when it
 * does (or none was asked). A release needs no check: a router that applied a table without the
 * hold has sent what it held on before answering the reload.
 */
function holdNotInEffect(state: RouteState, key: string, result: ReloadResult): string | null {
  const hold = state.hold;
  if (!hold || result.holds?.[key] === hold.id) return null;
  if (result.holds === undefined)
    return `route ${state.route}: the router serving it cannot hold requests (it is older than this cutover); stop it (its pid is in the router record) so that the next step starts a current one, then run the migration again`;
  if (Date.now() >= hold.expiresAt)
    return `route ${state.route}: write hold ${hold.id} expired (at ${new Date(hold.expiresAt).toISOString()}) before the router applied it`;
  const said = result.problems.filter((p) => p.startsWith(`${key}:`));
  // Else the id expired on this router before: the router's bound holds whatever tables follow.
  const why = said.length > 0 ? said.join('; ') : 'that id expired on it before (a new hold needs a new id)';
  return `route ${state.route}: the router did not take write hold ${hold.id}: ${why}`;
}

/** "route www cannot listen on 127.0.0.1:8080: the address is already in use (EADDRINUSE); …". */
function unboundMessage(route: string, unbound: readonly ListenFailure[]): string {
  return unbound
    .map(
      (u) =>
        `route ${route} cannot listen on ${u.kind === 'main' ? '' : `its ${u.kind} `}${u.address}: ${u.cause}`,
    )
    .join('; ');
}

/** Starts `cutover proxy` for the state directory unless one runs; resolves once it answers. */
export async function ensureRouter(stateDir: StateDir, log: (line: string) => void): Promise<void> {
  if (liveRouterRecord(stateDir.root)) return;
  mkdirSync(stateDir.routerDir(), { recursive: true });
  const outputFile = stateDir.routerOutputFile();
  const out = openSync(outputFile, 'a');
  const outputFrom = fstatSync(out).size;
  let child: ChildProcess;
  try {
    child = spawn(process.execPath, [cutoverCliPath(), 'proxy', '--state-dir', stateDir.root], {
      detached: true,
      stdio: ['ignore', out, out],
      // The router outlives this process and needs no secret: it never holds one (nor a stale one).
      env: inheritedEnv(),
    });
  } finally {
    closeSync(out); // the router has its own copy
  }
  child.unref();
  log(`started the router for ${stateDir.root} (pid ${child.pid})`);
  const deadline = Date.now() + routerStartTimeoutMs;
  while (Date.now() < deadline) {
    if (routerRuns(stateDir, child)) return;
    if (child.exitCode !== null && !liveRouterRecord(stateDir.root)) break;
    await sleep(25);
  }
  if (routerRuns(stateDir, child)) return; // another process's router won the record
  const said = lastLineSince(outputFile, outputFrom)?.replace(/^cutover: /, '');
  throw new CutoverError(
    'RUNNER_UNREACHABLE',
    `the router for ${stateDir.root} did not start${said ? `: ${said}` : ''} (its output: ${outputFile})`,
  );
}

/**
 * Whether a router holds the record of the state directory. When another start won it (two
 * processes, or a supervisor and a route step, started one at once), ours is stopped: still
 * starting, it would take the record, and the routes' addresses, the moment the winner died, a
 * router nobody started and nobody waits for.
 */
function routerRuns(stateDir: StateDir, child: ChildProcess): boolean {
  const record = liveRouterRecord(stateDir.root);
  if (!record) return false;
  if (record.pid !== child.pid && child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  return true;
}

/** The last line written to `file` after byte `offset`: what a router that exited said last. */
function lastLineSince(file: string, offset: number): string | undefined {
  try {
    const lines = readFileSync(file).subarray(offset).toString('utf8').trim().split('\n');
    return lines[lines.length - 1] || undefined;
  } catch {
    return undefined; // no output to quote
  }
}

/** Stops the router of a state directory once its table has no route left (after `down`). */
export async function stopRouterIfIdle(stateDir: StateDir, log: (line: string) => void): Promise<void> {
  const record = liveRouterRecord(stateDir.root);
  if (!record) return;
  const table = await readRoutingTable(stateDir.root);
  if (Object.keys(table.routes).length > 0) return;
  try {
    process.kill(record.pid, 'SIGTERM');
    log(`stopped the router (pid ${record.pid}): no route left`);
  } catch {
    // already gone
  }
  const deadline = Date.now() + routerStartTimeoutMs;
  while (liveRouterRecord(stateDir.root) && Date.now() < deadline) await sleep(25);
}

/**
 * The table half of the router driver: writes a route's entry into the routing table, without
 * making a router apply it (the router's tests drive a router of their own with it).
 */
export function createRouteTableDriver(): Pick<RouteDriver, 'apply' | 'remove'> &
  Required<Pick<RouteDriver, 'applyAll'>> {
  // Table updates are read-modify-write of one file: one at a time.
  let queue: Promise<unknown> = Promise.resolve();
  const serialised = <T>(f: () => Promise<T>): Promise<T> => {
    const next = queue.then(f, f);
    queue = next.catch(() => undefined);
    return next;
  };
  const applyAll = (ctx: RouteCallContext, states: readonly RouteState[], options: DriverCallOptions) =>
    serialised(async () => {
      const table = await readRoutingTable(ctx.stateDir.root);
      const updatedAt = Date.now();
      const entries = states.map((state) => [state.route, entryOf(ctx, state, updatedAt)] as const);
      // Written anyway, the router would give the address to one of the two routes, by name: the
      // other environment's clients would reach this one's replicas, or this route go unserved.
      const taken = entries.flatMap(([route, entry]) =>
        addressesTaken(table, entry).map(({ address, key }) => takenMessage(ctx, route, address, key)),
      );
      if (taken.length > 0) throw new PermanentDriverError(taken.join('; '));
      for (const [route, entry] of entries) table.routes[routeKey(ctx.environment, route)] = entry;
      // One write: the router reads every route's new entry, or none of them.
      await writeRoutingTable(ctx.stateDir.root, table);
      for (const state of states) {
        const hold = state.hold ? `; holding new requests (hold ${state.hold.id})` : '';
        options.log(`route ${state.route}: ${describeTraffic(state)}${hold}`);
      }
    });
  return {
    apply: (ctx, state, options) => applyAll(ctx, [state], options),
    applyAll,
    remove(ctx: RouteCallContext, route: string, options: DriverCallOptions) {
      return serialised(async () => {
        const table = await readRoutingTable(ctx.stateDir.root);
        delete table.routes[routeKey(ctx.environment, route)];
        await writeRoutingTable(ctx.stateDir.root, table);
        options.log(`route ${route} removed`);
      });
    },
  };
}

/** "route www cannot listen on 127.0.0.1:8080: route web of environment shop listens there (…); …". */
function takenMessage(ctx: RouteCallContext, route: string, address: string, holderKey: string): string {
  const [environment = '', ...name] = holderKey.split('/');
  return `route ${route} cannot listen on ${address}: route ${name.join('/')} of environment ${environment} listens there (one router serves every environment of ${ctx.stateDir.root}); choose another address, or take that route down first`;
}

function entryOf(ctx: RouteCallContext, state: RouteState, updatedAt: number): RoutingEntry {
  const entry: RoutingEntry = {
    environment: ctx.environment,
    listen: state.spec.listen,
    component: state.spec.to,
    blue: state.blue?.addresses ?? [],
    green: state.green?.addresses ?? [],
    greenPercent: state.greenPercent,
    drainTimeoutMs: state.spec.drain.timeout,
    updatedAt,
  };
  if (state.spec.preview !== undefined) entry.preview = state.spec.preview;
  if (state.spec.upstreamTimeout !== undefined) entry.upstreamTimeoutMs = state.spec.upstreamTimeout;
  if (state.spec.bodyTimeout !== undefined) entry.bodyTimeoutMs = state.spec.bodyTimeout;
  if (state.spec.queueTimeout !== undefined) entry.queueTimeoutMs = state.spec.queueTimeout;
  if (state.hold !== undefined) entry.hold = { ...state.hold };
  if (state.spec.tls !== undefined) entry.tls = routingTls(state.spec.tls, ctx.baseDir);
  if (state.spec.h2c) entry.h2c = true;
  return entry;
}

/** The route's TLS for the router, a program of its own: certificate paths absolute. */
function routingTls(tls: RouteTls, baseDir: string): RoutingTls {
  const out: RoutingTls = {
    certificates: tls.certificates.map(({ cert, key }) => ({
      cert: path.resolve(baseDir, cert),
      key: path.resolve(baseDir, key),
    })),
    minVersion: tls.minVersion,
    http2: tls.http2,
  };
  if (tls.redirectHttp !== undefined) out.redirectHttp = tls.redirectHttp;
  if (tls.hsts !== undefined)
    out.hsts = {
      maxAgeSeconds: Math.floor(tls.hsts.maxAge / 1000),
      includeSubDomains: tls.hsts.includeSubDomains,
      preload: tls.hsts.preload,
    };
  return out;
}

/** How often a supervisor looks whether the router of its state directory still runs. */
export const routerSuperviseIntervalMs = 250;

/**
 * Keeps the router of a state directory running while `signal` is not aborted: a router that is
 * gone (killed, crashed) while its routing table still has routes is started again at once, from
 * the table, so traffic is refused for at most the interval plus a router's start (about half a
 * second) instead of until the next route step. Runners supervise for the life of a migration,
 * workers for theirs, `cutover server --self-heal` and `cutover watch --self-heal` between
 * migrations. Several supervisors of one directory are harmless: the router record admits one
 * router, and the others' starts see it. Never throws; a failed start is a line, tried again.
 */
export async function superviseRouter(
  stateDir: StateDir,
  options: { signal: AbortSignal; log: (line: string) => void; intervalMs?: number },
): Promise<void> {
  const intervalMs = options.intervalMs ?? routerSuperviseIntervalMs;
  let failures = 0;
  let seenRunning = false;
  while (!options.signal.aborted) {
    try {
      await sleep(failures === 0 ? intervalMs : Math.min(10_000, intervalMs * 2 ** failures), undefined, {
        signal: options.signal,
      });
    } catch {
      return;
    }
    try {
      if (liveRouterRecord(stateDir.root)) {
        seenRunning = true;
        continue;
      }
      // A router that ran and is gone leaves its record (a SIGKILL, a crash) or was seen here. One
      // never started yet is the route step's to start: starting it here too is a second router.
      const gone = readRouterRecord(stateDir.root);
      if (!gone && !seenRunning) continue;
      const table = await readRoutingTable(stateDir.root);
      if (Object.keys(table.routes).length === 0) continue;
      options.log(
        `the router for ${stateDir.root} is not running${gone ? ` (pid ${gone.pid} is gone)` : ''} while routes are set; starting it again`,
      );
      await ensureRouter(stateDir, options.log);
      failures = 0;
    } catch (error) {
      failures += 1;
      options.log(`could not start the router again: ${(error as Error).message}`);
    }
  }
}

/**
 * Whether the route's last write hold, begun at `since` or later, was released by a table that
 * sends all of the route to `side` (the table went live: that side has taken writes since). Not a
 * hold the router let go of by its own bound: that one went by the weights the hold kept.
 */
export async function holdReleasedTo(
  ctx: RouteCallContext,
  route: string,
  since: number,
  side: 'blue' | 'green',
): Promise<boolean> {
  const snapshot = await routerClient(ctx.stateDir.root)
    .routes()
    .catch(() => null);
  const entry = snapshot?.routes[routeKey(ctx.environment, route)];
  const last = entry?.lastHold;
  return (
    entry !== undefined &&
    entry.hold === undefined &&
    (side === 'blue' || entry.greenPercent === 100) &&
    last?.ended === 'released' &&
    last.releasedTo === side &&
    last.endedAt >= since
  );
}

/**
 * Tells the router serving `stateDir` a switched component's replication lag, for its `/metrics`
 * (router/replication-lag.ts). Nothing when no router runs; a router that does not answer (or an
 * older one, without the endpoint) costs the figure, never the gate.
 */
export async function reportReplicationLag(stateDir: StateDir, report: ReplicationReport): Promise<void> {
  if (!liveRouterRecord(stateDir.root)) return;
  await routerClient(stateDir.root)
    .reportReplication(report)
    .catch(() => undefined);
}

/**
 * How many requests the routes' last write holds held, summed, when each ended at `since` or later
 * (the release just applied); undefined when the router cannot tell (none runs, an older one).
 */
export async function heldCountSince(
  stateDir: StateDir,
  environment: string,
  routes: readonly string[],
  since: number,
): Promise<number | undefined> {
  const snapshot = await routerClient(stateDir.root)
    .routes()
    .catch(() => null);
  if (!snapshot) return undefined;
  let count = 0;
  for (const route of routes) {
    const last = snapshot.routes[routeKey(environment, route)]?.lastHold;
    if (!last || last.endedAt < since) return undefined;
    count += last.heldCount;
  }
  return count;
}
