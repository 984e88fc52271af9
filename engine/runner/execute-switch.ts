/**
 * The edge of the switch of stateful components (core/migration/switch.ts): the write hold on the
 * routes, and the calls to each component driver's Replicator. Each call is bounded by the hold's
 * budget counted from when the router began to hold (state.switch); past it, the call fails and the
 * step function undoes the switch.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SlotInfo } from '../../core/layout.js';
import {
  describeLagAmount,
  lagWithin,
  type ReplicationFigure,
} from '../../core/migration/replication-lag.js';
import { switchDeadline } from '../../core/migration/switch.js';
import type { Command, LagReport, MigrationState, SwitchResult } from '../../core/migration/types.js';
import { own } from '../../core/records.js';
import { formatDuration } from '../../core/topology/duration.js';
import { defaults } from '../../core/topology/types.js';
import { componentDriverFor, routeDriverFor } from '../drivers/driver-set.js';
import { heldCountSince, reportReplicationLag } from '../drivers/router-driver.js';
import {
  type ComponentCallContext,
  type DriverCallOptions,
  PermanentDriverError,
  type ReplicationLag,
  type Replicator,
} from '../drivers/types.js';
import {
  applyRoutes,
  componentContext,
  type ExecuteOptions,
  routeContext,
  routeSpec,
  topologyOf,
} from './command-context.js';

type SwitchCommand = Extract<
  Command,
  { kind: 'hold_routes' | 'fence' | 'unfence' | 'catch_up' | 'promote_slot' | 'reverse_replication' }
>;

/** How long past its budget the router keeps a hold the engine never released (the engine died). */
export const holdExpiryGraceMs = 5_000;

export async function runSwitchCommand(
  s: MigrationState,
  c: SwitchCommand,
  o: ExecuteOptions,
  call: DriverCallOptions,
): Promise<SwitchResult> {
  if (c.kind === 'hold_routes') return holdRoutes(s, c, o, call);
  const { ctx } = await componentContext(s, o, c.component, 'desired', 'omit');
  const replicator = replicatorOf(o, ctx);
  const pair = own(s.slots, c.component);
  const slotOf = (which: 'blue' | 'green'): SlotInfo => {
    const slot = pair?.[which];
    if (!slot) throw new PermanentDriverError(`no ${which} slot of ${c.component} recorded to switch`);
    return slot;
  };
  const other = (which: 'blue' | 'green') => (which === 'blue' ? 'green' : 'blue');
  switch (c.kind) {
    case 'fence': {
      const { position } = await replicator.fence(ctx, slotOf(c.slot), deadlineOf(s), call);
      o.log(`${c.slot} ${c.component} fenced at position ${position}`);
      return { position };
    }
    case 'unfence':
      // Nothing to lift on a slot never recorded (a switch undone before it began).
      if (pair?.[c.slot]) await replicator.unfence(ctx, slotOf(c.slot), call);
      return {};
    case 'catch_up': {
      const position = s.switch?.positions[c.component];
      if (position === undefined)
        throw new PermanentDriverError(`no position of ${c.from} ${c.component} recorded: it was not fenced`);
      const started = Date.now();
      const lag = await replicator.catchUp(
        ctx,
        slotOf(c.from),
        slotOf(other(c.from)),
        position,
        deadlineOf(s),
        call,
      );
      o.log(
        `${other(c.from)} ${c.component} applied ${c.from}'s writes up to ${position} in ${Date.now() - started} ms`,
      );
      return { lagBytes: lag.bytes };
    }
    case 'promote_slot':
      withinBudget(s, `promoting ${c.slot} ${c.component}`);
      await replicator.promote(ctx, slotOf(c.slot), call);
      o.log(`${c.slot} ${c.component} promoted: it takes the writes`);
      return {};
    case 'reverse_replication':
      withinBudget(s, `replicating ${c.component} back`);
      await replicator.reverse(ctx, slotOf(c.from), slotOf(other(c.from)), call);
      o.log(
        `${c.component}: ${other(c.from)} follows ${c.from} now (a rollback until the commit loses nothing)`,
      );
      return {};
  }
}

/**
 * The routes hold new requests where they are, then the requests in flight to the side being left
 * finish (each route driver's drain), within the budget; resolves with when the hold began.
 */
async function holdRoutes(
  s: MigrationState,
  c: Extract<Command, { kind: 'hold_routes' }>,
  o: ExecuteOptions,
  call: DriverCallOptions,
): Promise<SwitchResult> {
  const restore = c.from === 'green';
  const side = restore ? 'base' : 'desired';
  const topology = topologyOf(s, side);
  for (const route of c.routes) {
    const driverName = routeSpec(s, route, restore).driver;
    if (!routeDriverFor(o.drivers, topology, driverName).holds)
      throw new PermanentDriverError(
        `route ${route}'s driver ${driverName ?? ''} cannot hold requests: a stateful component behind it cannot be switched without losing writes; route it through the built-in router`,
      );
  }
  const heldAt = Date.now();
  // A hold of its own each time the command runs: run again (a runner that died meanwhile), it
  // starts afresh, its bound counted from now as the engine's budget is, instead of keeping the
  // first run's (near its end, or past it).
  const hold = {
    id: `${c.id}@${heldAt}`,
    since: heldAt,
    expiresAt: heldAt + c.budgetMs + holdExpiryGraceMs,
    maxHeld: c.maxHeld,
  };
  // Where they are: all on blue for the switch to green; all on green (not promoted yet) for the way back.
  await applyRoutes(s, o, call, { routes: c.routes, greenPercent: c.greenPercent, restore: false }, hold);
  const deadline = heldAt + c.budgetMs;
  for (const route of c.routes) {
    const spec = routeSpec(s, route, restore);
    const leaving = own(s.slots, spec.to)?.[c.from];
    if (!leaving || leaving.addresses.length === 0) continue;
    const result = await routeDriverFor(o.drivers, topology, spec.driver).drain(
      routeContext(s, o, side, spec.driver),
      route,
      leaving.addresses,
      Math.max(0, deadline - Date.now()),
      call,
      // Within the hold's budget only requests are waited for: held writes must not wait on
      // WebSockets that can stay open for hours.
      'leave',
    );
    if (result && !result.drained)
      throw new PermanentDriverError(
        `route ${route}: ${result.inFlight} requests still in flight to ${c.from} ${spec.to} at the end of the write hold's budget (${formatDuration(c.budgetMs)})`,
      );
  }
  o.log(
    `write hold on ${c.routes.join(', ')}: nothing in flight to ${c.from} after ${Date.now() - heldAt} ms`,
  );
  return { heldAt };
}

/**
 * A step of the switch that would start past the hold's budget fails instead: the router lets go of
 * what it holds soon after (its own bound), by the weights it has, so a switch that went on would
 * find writes on the side it left (a runner that was down for a while, a slow step).
 */
export function withinBudget(s: MigrationState, what: string): void {
  const deadline = switchDeadline(s);
  if (deadline > 0 && Date.now() > deadline)
    throw new PermanentDriverError(
      `the write hold's budget (${formatDuration(s.switch?.budgetMs ?? 0)}) ran out before ${what}; the switch is undone`,
    );
}

/**
 * `signal`, aborted also once the switch in progress is past the end of its hold's budget: 1 ms
 * after it, so that withinBudget, asked then, refuses (an aborted look at green passed nothing).
 */
export function untilSwitchDeadline(s: MigrationState, signal: AbortSignal): AbortSignal {
  const left = Math.max(0, switchDeadline(s) - Date.now()) + 1;
  return AbortSignal.any([signal, AbortSignal.timeout(left)]);
}

function deadlineOf(s: MigrationState): number {
  return switchDeadline(s) || Date.now();
}

function replicatorOf(o: ExecuteOptions, ctx: ComponentCallContext): Replicator {
  const replicator = componentDriverFor(o.drivers, ctx).replication;
  if (!replicator || (replicator.supports && !replicator.supports(ctx.spec)))
    throw new PermanentDriverError(
      `driver ${ctx.spec.driver} of ${ctx.component} does not replicate continuously`,
    );
  return replicator;
}

/** How often the gate measures a lag while it waits. */
export const lagPollMs = 200;
/** The live figure (the runner's file, the router's /metrics) at most this often, and at once when the gate starts or stops waiting. */
export const lagFigureEveryMs = 1_000;
/** A line in the log while the gate waits, this often. */
const lagSayEveryMs = 5_000;

/** One switched component's lag, measured and shown live (the journal keeps only the episode). */
interface LagGauge {
  measure(): Promise<{ lag: ReplicationLag; figure: ReplicationFigure }>;
}

/** The gauge of a switched component whose driver tells its lag; null for any other. */
async function lagGaugeOf(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  component: string,
): Promise<{ gauge: LagGauge; maxLagMs: number } | null> {
  if (!(s.spec.switched ?? []).includes(component)) return null;
  const { ctx } = await componentContext(s, o, component, 'desired', 'omit');
  const replicator = switchedReplicator(s, o, ctx) as Replicator;
  const pair = own(s.slots, component);
  if (!replicator.capabilities.lag || !pair?.blue || !pair.green) return null;
  const { blue, green } = pair;
  const maxLagMs = ctx.spec.replicate?.maxLag ?? defaults.replicateMaxLagMs;
  let shownAt = 0;
  let shownWaiting: boolean | null = null;
  const gauge: LagGauge = {
    async measure() {
      const lag = await replicator.lag(ctx, blue, green, call);
      const measured = { lagMs: lag.ms, lagBytes: lag.bytes };
      const figure: ReplicationFigure = {
        component,
        ...measured,
        applied: String(lag.applied),
        source: String(lag.source),
        maxLagMs,
        measuredAt: Date.now(),
        waiting: !lagWithin(measured, maxLagMs),
      };
      if (figure.waiting !== shownWaiting || figure.measuredAt - shownAt >= lagFigureEveryMs) {
        shownAt = figure.measuredAt;
        shownWaiting = figure.waiting;
        showFigure(s, o, figure);
      }
      return { lag, figure };
    },
  };
  return { gauge, maxLagMs };
}

/** The live figure: to the runner (`migration show`, `topology status`, the API) and to the router's /metrics. */
function showFigure(s: MigrationState, o: ExecuteOptions, figure: ReplicationFigure): void {
  o.replicationFigure?.(figure);
  void reportReplicationLag(o.stateDir, {
    environment: s.spec.environment,
    component: figure.component,
    lagSeconds: figure.lagMs === null ? null : Math.max(0, figure.lagMs) / 1000,
    lagBytes: figure.lagBytes,
    maxLagSeconds: figure.maxLagMs / 1000,
    measuredAt: figure.measuredAt,
    waiting: figure.waiting,
  });
}

function reportOf(figure: ReplicationFigure): LagReport {
  return {
    component: figure.component,
    lagMs: figure.lagMs,
    lagBytes: figure.lagBytes,
    maxLagMs: figure.maxLagMs,
  };
}

/**
 * The health gate's look at a switched component's lag, once, after green is healthy: the lag
 * when green trails blue by more than `replicate.maxLag` (the step function then says so once and
 * waits: `wait_lag`), else null (within, not switched, or a driver that cannot tell).
 */
export async function lagBeyondMax(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  component: string,
): Promise<LagReport | null> {
  const found = await lagGaugeOf(s, o, call, component);
  if (!found) return null;
  const { lag, figure } = await found.gauge.measure();
  if (!figure.waiting) {
    o.log(
      `replication: green ${component} trails blue by ${describeLag(lag)} (maxLag ${formatDuration(found.maxLagMs)})`,
    );
    return null;
  }
  return reportOf(figure);
}

/**
 * `wait_lag`: the gate waits while green trails blue by more than `replicate.maxLag`, saying so in
 * the log every few seconds, and fails at `replicate.timeout` with the lag. Resolves with the lag
 * within bounds.
 */
export async function waitLagWithin(
  s: MigrationState,
  c: Extract<Command, { kind: 'wait_lag' }>,
  o: ExecuteOptions,
  call: DriverCallOptions,
): Promise<LagReport | undefined> {
  const found = await lagGaugeOf(s, o, call, c.component);
  if (!found) return undefined;
  const started = Date.now();
  let lastSaid = started;
  let lag: ReplicationLag | null = null;
  while (Date.now() - started <= c.timeoutMs) {
    const measured = await found.gauge.measure();
    lag = measured.lag;
    if (!measured.figure.waiting) {
      o.log(
        `replication: green ${c.component} trails blue by ${describeLag(lag)} (maxLag ${formatDuration(found.maxLagMs)}) after ${formatDuration(Date.now() - started) || '0s'}`,
      );
      return reportOf(measured.figure);
    }
    if (Date.now() - lastSaid >= lagSayEveryMs) {
      lastSaid = Date.now();
      o.log(
        `replication lagging: green ${c.component} trails blue by ${describeLag(lag)}, more than maxLag ${formatDuration(found.maxLagMs)}; waiting`,
      );
    }
    await sleep(lagPollMs, undefined, { signal: o.signal });
  }
  throw new PermanentDriverError(
    `replication of ${c.component} lagging: green trails blue by ${lag ? describeLag(lag) : 'an unknown amount'}, more than replicate.maxLag ${formatDuration(found.maxLagMs)}, for all of replicate.timeout ${formatDuration(c.timeoutMs)}`,
  );
}

export function describeLag(lag: ReplicationLag): string {
  const amount = describeLagAmount({ lagMs: lag.ms, lagBytes: lag.bytes });
  return lag.ms === null && lag.bytes === null ? amount : `${amount} (at ${lag.applied} of ${lag.source})`;
}

/** The component's Replicator when the migration switches it; null otherwise. */
function switchedReplicator(
  s: MigrationState,
  o: ExecuteOptions,
  ctx: ComponentCallContext,
): Replicator | null {
  if (!(s.spec.switched ?? []).includes(ctx.component)) return null;
  return replicatorOf(o, ctx);
}

/**
 * Before a slot of a switched component is retired, replication between its two slots is ended in
 * both directions and what it made dropped (a replication slot left on a primary keeps its WAL).
 */
export async function stopReplicationOf(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  ctx: ComponentCallContext,
): Promise<void> {
  const replicator = switchedReplicator(s, o, ctx);
  const pair = own(s.slots, ctx.component);
  if (!replicator || !pair?.blue || !pair.green) return;
  await replicator.stop(ctx, pair.blue, pair.green, call);
  await replicator.stop(ctx, pair.green, pair.blue, call);
}

/** The replicate stage of a switched component: the initial copy, then green follows blue. False: not switched. */
export async function followIfSwitched(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  ctx: ComponentCallContext,
): Promise<boolean> {
  const replicator = switchedReplicator(s, o, ctx);
  const pair = own(s.slots, ctx.component);
  if (!replicator || !pair?.blue || !pair.green) return false;
  await replicator.follow(ctx, pair.blue, pair.green, call);
  o.log(
    `${ctx.component}: green follows blue (${replicator.capabilities.follow ? 'continuously' : 'one copy now, the final sync under the write hold'})`,
  );
  return true;
}

/**
 * The routes were just set without the hold (the release, or the undo's restore): how many
 * requests the hold held, as the router tells it, for the journal (write_hold_ended).
 */
export async function heldByRelease(
  s: MigrationState,
  o: ExecuteOptions,
  command: Extract<Command, { kind: 'shift_routes' | 'apply_route' }>,
): Promise<SwitchResult | undefined> {
  const sw = s.switch;
  if (!sw || sw.released) return undefined;
  const routes = command.kind === 'shift_routes' ? command.routes : [command.route];
  const heldCount = await heldCountSince(o.stateDir, s.spec.environment, routes, sw.heldAt);
  return heldCount === undefined ? undefined : { heldCount };
}
