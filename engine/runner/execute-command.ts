import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { assertNever, environmentFault } from '../../core/errors.js';
import { type HostPort, parseHostPort } from '../../core/host-port.js';
import { drainTimeoutMs } from '../../core/migration/commands.js';
import { previewRoutes } from '../../core/migration/queries.js';
import { isSwitchCommand } from '../../core/migration/switch.js';
import type {
  AnalysisResult,
  Command,
  CommandError,
  LagReport,
  MigrationState,
  SwitchResult,
} from '../../core/migration/types.js';
import { own } from '../../core/records.js';
import { formatDuration } from '../../core/topology/duration.js';
import type { Route } from '../../core/topology/types.js';
import { loopbackRequest } from '../../platform/loopback-http.js';
import { analyzeHold, type RouteReader } from '../analysis/analyze-hold.js';
import { componentDriverFor, type DriverSet, routeDriverFor } from '../drivers/driver-set.js';
import { holdReleasedTo } from '../drivers/router-driver.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type SlotInfo,
} from '../drivers/types.js';
import { HealthGateFailedError, waitHealthy } from '../health/check-health.js';
import {
  GreenUnhealthyError,
  type WatchedSlot,
  watchGreen,
  whileGreenHealthy,
} from '../health/watch-health.js';
import { runHookCommand } from '../hooks/hook-command.js';
import { recordLayout } from '../store/layout-store.js';
import {
  applyRoutes,
  componentContext,
  type ExecuteOptions,
  type LayoutSide,
  placeholderSlot,
  type RouteSetting,
  routeContext,
  routePorts,
  routeSpec,
  routeStateOf,
  slotEnv,
  topologyOf,
} from './command-context.js';
import { leftText, sleepCounting } from './countdown.js';
import {
  followIfSwitched,
  heldByRelease,
  lagBeyondMax,
  runSwitchCommand,
  stopReplicationOf,
  untilSwitchDeadline,
  waitLagWithin,
  withinBudget,
} from './execute-switch.js';
import { goneReplicas, othersAnswer, quoteReplicaLogs } from './replica-logs.js';

export type { DriverSet, ExecuteOptions };

export type CommandResult =
  | {
      type: 'command_succeeded';
      output?: SlotInfo;
      analysis?: AnalysisResult;
      switched?: SwitchResult;
      lagging?: LagReport;
    }
  | { type: 'command_failed'; error: CommandError }
  | { type: 'command_cancelled'; elapsedMs: number };

/**
 * Carries out one command of the step function against the drivers. Never throws: every outcome
 * is a result for the journal. A permanent error or a failed health gate is not retried.
 */
/**
 * Calls whose drivers keep no time limit of their own (routes, recording the layout) get this one;
 * driver stages have theirs (the exec driver's timeout, the health gate's deadline).
 */
export const defaultCallTimeoutMs = 30_000;

const ownTimeout: ReadonlySet<Command['kind']> = new Set<Command['kind']>([
  'provision',
  'restart',
  'replicate',
  'drain',
  'retire',
  'check_health',
  'wait_lag',
  'wait',
  // A hold's window and a hook (its timeout and retries) bound themselves.
  'analyze',
  'hook',
]);

export async function executeCommand(
  state: MigrationState,
  command: Command,
  options: ExecuteOptions,
): Promise<CommandResult> {
  const started = Date.now();
  const timeout = ownTimeout.has(command.kind) ? null : AbortSignal.timeout(defaultCallTimeoutMs);
  const signal = timeout ? AbortSignal.any([options.signal, timeout]) : options.signal;
  try {
    if (command.kind === 'analyze') {
      // Green's health is watched beside the analysis: a green that dies is not judged on traffic.
      const watched = await greenSlots(state, options);
      const analysis = await whileGreenHealthy(
        watched,
        `during the ${command.weight} % hold`,
        signal,
        options.log,
        (watching) =>
          analyzeHold(
            command,
            (route) => routeReader(state, options, route, watching),
            watching,
            options.log,
          ),
      );
      return { type: 'command_succeeded', analysis };
    }
    if (command.kind === 'hook') {
      const secrets = options.secrets.for(state.spec.baseDir);
      const hookOptions = { signal, log: options.log, secrets };
      const result = await runHookCommand(
        state,
        command,
        options.trackProcess ? { ...hookOptions, trackProcess: options.trackProcess } : hookOptions,
      );
      if (result.ok) return { type: 'command_succeeded' };
      if (result.aborted) return { type: 'command_cancelled', elapsedMs: Date.now() - started };
      // runHook made the hook's attempts: its failure is final.
      return { type: 'command_failed', error: { message: result.reason, retryable: false } };
    }
    if (isSwitchCommand(command)) {
      const call = { signal, log: options.log };
      const switched = await runSwitchCommand(state, command as never, { ...options, signal }, call);
      return { type: 'command_succeeded', switched };
    }
    if (command.kind === 'wait_lag') {
      const lagging = await waitLagWithin(
        state,
        command,
        { ...options, signal },
        { signal, log: options.log },
      );
      return lagging ? { type: 'command_succeeded', lagging } : { type: 'command_succeeded' };
    }
    const output = await run(state, command, { ...options, signal });
    if (command.kind === 'check_health' && command.slot !== 'blue') {
      // A switched component's green must also trail blue by at most replicate.maxLag: past it,
      // the step function says so once and the gate waits (wait_lag).
      const call = { signal, log: options.log };
      const lagging = await lagBeyondMax(state, { ...options, signal }, call, command.component);
      if (lagging) return { type: 'command_succeeded', lagging };
    }
    if (command.kind === 'shift_routes' || command.kind === 'apply_route') {
      const switched = await heldByRelease(state, options, command);
      if (switched) return { type: 'command_succeeded', switched };
    }
    return output ? { type: 'command_succeeded', output } : { type: 'command_succeeded' };
  } catch (error) {
    if (options.signal.aborted) return { type: 'command_cancelled', elapsedMs: Date.now() - started };
    if (error instanceof GreenUnhealthyError) {
      return { type: 'command_failed', error: { message: error.message, retryable: false, unhealthy: true } };
    }
    if (timeout?.aborted) {
      return {
        type: 'command_failed',
        error: { message: `timed out after ${defaultCallTimeoutMs / 1000}s`, retryable: true },
      };
    }
    const permanent = error instanceof PermanentDriverError || error instanceof HealthGateFailedError;
    return {
      type: 'command_failed',
      error: { message: failureMessage(error), retryable: !permanent },
    };
  }
}

/** A driver's failure as the operator reads it: a fault of the machine with its cause and next step. */
function failureMessage(error: unknown): string {
  return environmentFault(error)?.message ?? (error as Error)?.message ?? String(error);
}

async function run(s: MigrationState, c: Command, o: ExecuteOptions): Promise<SlotInfo | undefined> {
  const call: DriverCallOptions = o.trackProcess
    ? { signal: o.signal, log: o.log, trackProcess: o.trackProcess }
    : { signal: o.signal, log: o.log };
  switch (c.kind) {
    case 'provision': {
      const { ctx, secretDigests } = await componentContext(s, o, c.component, 'desired');
      const planned = own(s.spec.images ?? {}, c.component);
      if (planned !== undefined) ctx.plannedImageId = planned;
      ctx.reservedPorts = routePorts(s);
      const slot = await componentDriverFor(o.drivers, ctx).provision(ctx, 'green', call);
      // Recorded with the slot (journaled, then kept in the layout): the next plan compares them.
      return secretDigests ? { ...slot, secretDigests } : slot;
    }
    case 'restart': {
      // The live slot, as the live layout runs it (its directory, its secrets read now).
      const { ctx } = await componentContext(s, o, c.component, 'base');
      ctx.reservedPorts = routePorts(s);
      const live = own(s.slots, c.component)?.blue;
      if (!live) throw new PermanentDriverError(`no live slot of ${c.component} recorded to restart`);
      const driver = componentDriverFor(o.drivers, ctx);
      if (!driver.restart) {
        throw new PermanentDriverError(
          `driver ${ctx.spec.driver} (${ctx.driver.type}) of ${c.component} cannot restart in place; replace it green-blue with \`cutover topology migrate --replace ${c.component}\``,
        );
      }
      return driver.restart(ctx, live, call);
    }
    case 'replicate': {
      const { ctx } = await componentContext(s, o, c.component, 'desired');
      const pair = own(s.slots, c.component);
      if (!pair?.blue || !pair.green)
        throw new PermanentDriverError(
          `no ${pair?.blue ? 'green' : 'live'} slot of ${c.component} recorded to replicate`,
        );
      // A switched component's green follows blue from here to the switch; the others get one copy.
      if (!(await followIfSwitched(s, o, call, ctx)))
        await componentDriverFor(o.drivers, ctx).replicate(ctx, pair.blue, pair.green, call);
      return undefined;
    }
    case 'check_health': {
      // After a restart in place, the live slot it restarted; else the green slot.
      const live = c.slot === 'blue';
      const { ctx } = await componentContext(s, o, c.component, live ? 'base' : 'desired');
      const slot = own(s.slots, c.component)?.[live ? 'blue' : 'green'];
      try {
        await waitHealthy({
          health: ctx.spec.health,
          addresses: slot?.addresses ?? [],
          env: slotEnv(ctx, slot, live ? 'blue' : 'green'),
          cwd: ctx.spec.run?.cwd ? path.resolve(ctx.baseDir, ctx.spec.run.cwd) : ctx.baseDir,
          deadlineMs: c.deadlineMs,
          signal: o.signal,
          log: o.log,
        });
      } catch (error) {
        if (error instanceof HealthGateFailedError && slot) {
          const driver = componentDriverFor(o.drivers, ctx);
          await quoteReplicaLogs(driver, ctx, slot, call);
          const gone = await goneReplicas(driver, ctx, slot, call, true);
          if (gone !== '') throw new HealthGateFailedError(`${error.message}${gone}`);
        }
        throw error;
      }
      const others = slot && (await othersAnswer(componentDriverFor(o.drivers, ctx), ctx, slot, call));
      if (others) throw new HealthGateFailedError(others);
      // No route sends to a component restarted in place: it has no preview to check through. Between
      // two shift steps the gate has looked through the previews already, and opening a route at
      // 0 % again would take its step's traffic back off green.
      if (!live && !c.betweenSteps) await checkThroughPreviews(s, o, call, c.component, ctx);
      return undefined;
    }
    case 'apply_route': {
      const side: LayoutSide = c.restore ? 'base' : 'desired';
      const state = routeStateOf(s, c.route, c);
      const driver = routeDriverFor(o.drivers, topologyOf(s, side), state.spec.driver);
      await checkGreenBefore(s, o, c, [c.route]);
      await driver.apply(routeContext(s, o, side, state.spec.driver), state, call);
      return undefined;
    }
    case 'shift_routes': {
      // The release of a switch (to green; or back to blue, a rollback's routes restored) that
      // already went live (a runner that died before its result was journaled) is applied again as
      // it is; otherwise only within the hold's budget, and with green looked at first.
      // Past the budget the router has let go of the held requests by the weights the hold kept
      // (blue's on the way to green, green's on the way back), and that side has taken writes since.
      const release = releaseOf(s, c);
      if (!release) await checkGreenBefore(s, o, c, c.routes);
      else if (!(await releaseWentLive(s, o, c, release))) {
        const what = `releasing the held requests to ${release}`;
        withinBudget(s, what);
        // The look at green ends with the budget (a probe may take its whole health.timeout), and
        // the budget is checked again after it, right before the routes are set: a release set
        // after the router let go of the hold would leave behind what blue took meanwhile.
        await checkGreenBefore(s, { ...o, signal: untilSwitchDeadline(s, o.signal) }, c, c.routes);
        withinBudget(s, what);
      }
      await applyRoutes(s, o, call, c);
      return undefined;
    }
    case 'remove_route': {
      const side: LayoutSide = own(s.spec.base.topology?.routes, c.route) ? 'base' : 'desired';
      const topology = topologyOf(s, side);
      const driverName = own(topology.routes, c.route)?.driver;
      await routeDriverFor(o.drivers, topology, driverName).remove(
        routeContext(s, o, side, driverName),
        c.route,
        call,
      );
      return undefined;
    }
    case 'drain': {
      const { ctx } = await componentContext(s, o, c.component, 'base', 'omit');
      const blue = own(s.slots, c.component)?.blue ?? placeholderSlot(ctx, 'blue');
      // Blue is drained only while green serves well: once drained, a rollback has cold replicas to go back to.
      await watchGreen(await greenSlots(s, o), 'check', 'before the drain', o.signal, o.log);
      await drainRoutes(s, o, call, c.component, blue, c.timeoutMs);
      await componentDriverFor(o.drivers, ctx).drain(ctx, blue, c.timeoutMs, call);
      // The drain can take its whole timeout: green is looked at again before the commit that follows.
      await watchGreen(await greenSlots(s, o), 'check', 'before the commit', o.signal, o.log);
      return undefined;
    }
    case 'retire': {
      const { ctx } = await componentContext(
        s,
        o,
        c.component,
        c.slot === 'blue' ? 'base' : 'desired',
        'omit',
      );
      const slot = own(s.slots, c.component)?.[c.slot] ?? placeholderSlot(ctx, c.slot);
      // A rollback's green: what its routes still carry to it (upgraded connections above all,
      // which stay where their handshake went) ends first, as blue's does at a drain.
      if (c.slot === 'green')
        await drainRoutes(s, o, call, c.component, slot, drainTimeoutMs(s, c.component), 'green');
      // What replication made between the two slots goes before either does.
      await stopReplicationOf(s, o, call, ctx);
      await componentDriverFor(o.drivers, ctx).retire(ctx, slot, call);
      return undefined;
    }
    case 'wait': {
      if (c.purpose === 'retry') {
        await sleep(c.ms, undefined, { signal: o.signal });
        return undefined;
      }
      // A hold and the bake say how long is left as they go: never minutes of silence.
      const sleeping = (signal: AbortSignal) =>
        sleepCounting(c.ms, signal, (left) =>
          o.log(`${c.purpose}: ${leftText(left)} left of ${formatDuration(c.ms)}`),
        );
      // A hold and the bake watch green all along: green lost ends them, and the migration rolls back.
      await whileGreenHealthy(await greenSlots(s, o), `during the ${c.purpose}`, o.signal, o.log, sleeping);
      return undefined;
    }
    case 'record_layout':
      await recordLayout(o.stateDir, s);
      return undefined;
    case 'analyze':
    case 'hook':
    case 'wait_lag':
    case 'hold_routes':
    case 'fence':
    case 'unfence':
    case 'catch_up':
    case 'promote_slot':
    case 'reverse_replication':
      throw new PermanentDriverError(`${c.kind} is run by executeCommand itself`);
    default:
      return assertNever(c, 'command');
  }
}

/**
 * The green slots to watch, of the named components or of every component with one, each with a
 * health check: their probes as the gate ran them (its environment, its directory).
 */
async function greenSlots(
  s: MigrationState,
  o: ExecuteOptions,
  components?: string[],
): Promise<WatchedSlot[]> {
  const names = components ?? Object.keys(s.spec.desired.components).sort();
  const watched: WatchedSlot[] = [];
  for (const component of new Set(names)) {
    const slot = own(s.slots, component)?.green;
    const health = own(s.spec.desired.components, component)?.health;
    if (!slot || !health) continue;
    const { ctx } = await componentContext(s, o, component, 'desired', 'omit');
    const driver = componentDriverFor(o.drivers, ctx);
    watched.push({
      component,
      health,
      addresses: slot.addresses,
      env: slotEnv(ctx, slot, 'green'),
      cwd: ctx.spec.run?.cwd ? path.resolve(ctx.baseDir, ctx.spec.run.cwd) : ctx.baseDir,
      gone: () => othersAnswer(driver, ctx, slot, { signal: o.signal, log: o.log }),
    });
  }
  return watched;
}

/**
 * Which release of a switch the route setting is, if it is one: to green (the routes at 100 % green
 * without the hold, the switch to green in progress), or to blue (the routes restored, the switch
 * back in progress). The routes of a switch undone or abandoned are not a release of it.
 */
function releaseOf(s: MigrationState, c: RouteSetting): 'green' | 'blue' | null {
  const sw = s.switch;
  if (!sw || sw.released) return null;
  if (sw.direction === 'to_green') return !c.restore && c.greenPercent === 100 ? 'green' : null;
  return c.restore ? 'blue' : null;
}

/**
 * Whether the release of the switch in progress went live already: its runner died after the
 * router applied it and before its result was kept. That side has taken writes since: the release
 * is set again as it is, without a look at green first (a refusal would undo the switch as if the
 * side had taken nothing, and drop its writes).
 */
async function releaseWentLive(
  s: MigrationState,
  o: ExecuteOptions,
  c: RouteSetting & { routes: string[] },
  to: 'green' | 'blue',
) {
  const sw = s.switch as NonNullable<MigrationState['switch']>;
  for (const route of c.routes) {
    const ctx = routeContext(s, o, c.restore ? 'base' : 'desired', routeSpec(s, route, c.restore).driver);
    if (!(await holdReleasedTo(ctx, route, sw.heldAt, to))) return false;
  }
  o.log(
    `the write hold on ${c.routes.join(', ')} was released to ${to} before (${to} has taken writes since): the routes are set again as they are`,
  );
  return true;
}

/** Before more traffic moves to green, green is looked at again (the routes' targets). */
async function checkGreenBefore(
  s: MigrationState,
  o: ExecuteOptions,
  setting: RouteSetting,
  routes: string[],
) {
  if (setting.restore || setting.promote || setting.greenPercent <= 0) return;
  const targets = routes.map((route) => routeSpec(s, route, false).to);
  await watchGreen(
    await greenSlots(s, o, targets),
    'check',
    `before setting ${setting.greenPercent} %`,
    o.signal,
    o.log,
  );
}

/** How an analysis reads a route's traffic: through its driver in the desired topology. */
function routeReader(s: MigrationState, o: ExecuteOptions, route: string, signal: AbortSignal): RouteReader {
  const spec = routeSpec(s, route, false);
  const driver = routeDriverFor(o.drivers, s.spec.desired, spec.driver);
  const name = spec.driver === undefined ? 'built-in router' : `driver ${spec.driver}`;
  if (!driver.traffic) return { traffic: null, driver: name };
  const ctx = routeContext(s, o, 'desired', spec.driver);
  const read = driver.traffic.bind(driver);
  return { traffic: () => read(ctx, route, { signal, log: o.log }), driver: name };
}

/** Successes in a row that a probe through a preview listener needs. */
const previewSuccesses = 3;
const previewTimeoutMs = 10_000;

/**
 * The gate's last check: green answers through the router, on each preview listener of its routes,
 * before any real traffic moves. The route is opened to green at 0 %: real traffic stays on blue.
 */
async function checkThroughPreviews(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  component: string,
  ctx: ComponentCallContext,
): Promise<void> {
  for (const name of previewRoutes(s, component)) {
    const spec = own(s.spec.desired.routes, name) as Route;
    const pair = own(s.slots, component);
    await routeDriverFor(o.drivers, s.spec.desired, undefined).apply(
      routeContext(s, o, 'desired', undefined),
      { route: name, spec, blue: pair?.blue ?? null, green: pair?.green ?? null, greenPercent: 0 },
      call,
    );
    const previewPath = ctx.spec.health?.http?.path ?? '/';
    const url = `http://${spec.preview}${previewPath}`;
    // A valid topology's preview is a host:port (the schema checks it).
    const preview = parseHostPort(spec.preview as string) as HostPort;
    const expected = ctx.spec.health?.http?.expectStatus;
    let last = '';
    let successes = 0;
    const deadline = Date.now() + previewTimeoutMs;
    while (successes < previewSuccesses && Date.now() < deadline) {
      try {
        const { status } = await loopbackRequest({
          method: 'GET',
          host: preview.host,
          port: preview.port,
          path: previewPath,
          timeoutMs: 2_000,
          signal: o.signal,
        });
        const ok = expected !== undefined ? status === expected : status < 500;
        successes = ok ? successes + 1 : 0;
        last = `HTTP ${status}`;
      } catch (error) {
        o.signal.throwIfAborted();
        successes = 0;
        last = (error as Error).message;
      }
      if (successes < previewSuccesses) await sleep(100, undefined, { signal: o.signal });
    }
    if (successes < previewSuccesses) {
      throw new HealthGateFailedError(
        `green ${component} is healthy but not through the router: preview ${url} → ${last}`,
      );
    }
    o.log(`health: green ${component} answers through the preview listener of route ${name} (${url})`);
  }
}

/**
 * Blue is drained when no request is in flight to it through any route to it, each route's driver
 * judging in its own way, bounded by the drain timeout; past it, the migration goes on and says how
 * many requests were still running.
 */
async function drainRoutes(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  component: string,
  blue: SlotInfo,
  timeoutMs: number,
  slotName: 'blue' | 'green' = 'blue',
): Promise<void> {
  const topology = s.spec.base.topology;
  if (blue.addresses.length === 0 || topology === null) return;
  for (const [name, route] of Object.entries(topology.routes)) {
    if (route.to !== component) continue;
    const started = Date.now();
    const result = await routeDriverFor(o.drivers, topology, route.driver).drain(
      routeContext(s, o, 'base', route.driver),
      name,
      blue.addresses,
      timeoutMs,
      call,
    );
    if (result === null) continue;
    const closed = result.closedUpgraded
      ? `; ${result.closedUpgraded} upgraded connections (WebSockets) still open at the drain timeout closed (1001 going away)`
      : '';
    if (result.drained)
      o.log(`route ${name}: ${slotName} ${component} drained in ${Date.now() - started} ms${closed}`);
    else
      o.log(
        `route ${name}: ${result.inFlight} ${result.unit ?? 'requests'} still in flight to ${slotName} ${component} after the drain timeout${closed}`,
      );
  }
}
