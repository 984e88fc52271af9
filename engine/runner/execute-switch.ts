/**
 * The edge of the switch of stateful components (core/migration/switch.ts): the write hold on the
 * routes, and the calls to each component driver's Replicator. Each call is bounded by the hold's
 * budget counted from when the router began to hold (state.switch); past it, the call fails and the
 * step function undoes the switch.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { SlotInfo } from '../../core/layout.js';
import { switchDeadline } from '../../core/migration/switch.js';
import type { Command, MigrationState, SwitchResult } from '../../core/migration/types.js';
import { own } from '../../core/records.js';
import { formatDuration } from '../../core/topology/duration.js';
import { componentDriverFor, routeDriverFor } from '../drivers/driver-set.js';
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

/**
 * After the health gate, a switched component's green must trail blue by at most
 * `replicate.maxLag` before any traffic moves: waits while it trails more, saying so every few
 * seconds (`replication_lagging`), and fails at `replicate.timeout` with the lag.
 */
export async function waitLagWithin(
  ctx: ComponentCallContext,
  replicator: Replicator,
  blue: SlotInfo,
  green: SlotInfo,
  o: ExecuteOptions,
  call: DriverCallOptions,
): Promise<void> {
  if (!replicator.capabilities.lag) return;
  const maxLag = ctx.spec.replicate?.maxLag ?? 1_000;
  const timeout = ctx.spec.replicate?.timeout ?? 300_000;
  const started = Date.now();
  let lastSaid = 0;
  let lag: ReplicationLag | null = null;
  while (Date.now() - started <= timeout) {
    lag = await replicator.lag(ctx, blue, green, call);
    if (within(lag, maxLag)) {
      o.log(
        `replication: green ${ctx.component} trails blue by ${describeLag(lag)} (maxLag ${formatDuration(maxLag)})`,
      );
      return;
    }
    if (Date.now() - lastSaid >= 5_000) {
      lastSaid = Date.now();
      o.log(
        `replication lagging: green ${ctx.component} trails blue by ${describeLag(lag)}, more than maxLag ${formatDuration(maxLag)}; waiting`,
      );
    }
    await sleep(200, undefined, { signal: o.signal });
  }
  throw new PermanentDriverError(
    `replication of ${ctx.component} lagging: green trails blue by ${lag ? describeLag(lag) : 'an unknown amount'}, more than replicate.maxLag ${formatDuration(maxLag)}, for all of replicate.timeout ${formatDuration(timeout)}`,
  );
}

function within(lag: ReplicationLag, maxLagMs: number): boolean {
  if (lag.ms !== null) return lag.ms <= maxLagMs;
  return lag.bytes === 0;
}

export function describeLag(lag: ReplicationLag): string {
  const parts: string[] = [];
  if (lag.ms !== null) parts.push(formatDuration(Math.max(0, Math.round(lag.ms))) || '0s');
  if (lag.bytes !== null) parts.push(`${lag.bytes} bytes`);
  return parts.length > 0 ? `${parts.join(', ')} (at ${lag.applied} of ${lag.source})` : 'an unknown amount';
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

/** The health gate's lag check of a switched component (waitLagWithin); nothing for the others. */
export async function waitLagOf(
  s: MigrationState,
  o: ExecuteOptions,
  call: DriverCallOptions,
  component: string,
): Promise<void> {
  if (!(s.spec.switched ?? []).includes(component)) return;
  const { ctx } = await componentContext(s, o, component, 'desired', 'omit');
  const replicator = switchedReplicator(s, o, ctx) as Replicator;
  const pair = own(s.slots, component);
  if (!pair?.blue || !pair.green) return;
  await waitLagWithin(ctx, replicator, pair.blue, pair.green, o, call);
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
