/**
 * The switch of stateful components (issue 28; DESIGN.md 5a). A migration's `spec.switched`
 * components replicate continuously from blue to green; the shift of every route that reaches one
 * of them (the route's component, or what it depends on) is not stepped but one switch:
 *
 *   hold the routes (new requests wait at the router; those in flight to blue finish)
 *   → per component: fence blue, green catches up to blue's position read after the fence,
 *     promote green, start replicating green → blue (reverse)
 *   → release: the routes at 100 % green, without the hold.
 *
 * Every step must end within the hold's budget (`replicate.writeHold`, default 2 s) counted from
 * when the router began to hold; a step that fails or runs past it fails the action, and the undo
 * (undoSwitch) unfences blue before it puts the routes back on blue, which releases the held
 * requests to blue: nothing was written to green, nothing is lost. After the switch, a rollback
 * until the commit is the same in reverse (hold, fence green, blue catches up through the reverse
 * direction, promote blue, unfence it, release to blue). What replication made is dropped when a
 * slot is retired (the edge stops it first).
 */
import { own } from '../records.js';
import { formatDuration } from '../topology/duration.js';
import { defaults } from '../topology/types.js';
import type { Command, MigrationState, SwitchResult, SwitchState, Transition } from './types.js';

type Unnumbered<C> = C extends Command ? Omit<C, 'id'> : never;

/** A step of the forward switch, as a part of its shift (commands.ts ShiftPart). */
export type SwitchStep =
  | { step: 'hold' }
  | { step: 'fence' | 'catch_up' | 'promote' | 'reverse'; component: string };

/** The commands of the switch, by kind. */
export const switchKinds: ReadonlySet<Command['kind']> = new Set<Command['kind']>([
  'hold_routes',
  'fence',
  'unfence',
  'catch_up',
  'promote_slot',
  'reverse_replication',
]);

export function isSwitchCommand(command: Pick<Command, 'kind'>): boolean {
  return switchKinds.has(command.kind);
}

/**
 * Whether the command is a step of the switch back to blue in progress: one of the switch's own, or
 * its release (the routes restored to blue). Failing for good, either leaves green with writes blue
 * may lack (after the router let go of the hold by its bound, to green), so the switch back is
 * abandoned and green serves again (undo.ts).
 */
export function isSwitchBackStep(s: MigrationState, command: Command): boolean {
  const sw = s.switch;
  if (sw?.direction !== 'to_blue') return false;
  if (isSwitchCommand(command)) return true;
  return command.kind === 'shift_routes' && command.restore && !sw.released;
}

/**
 * The switched components that routes sending to `targets` reach: the targets and what they
 * depend on, transitively, in the desired topology; sorted.
 */
export function switchedBehind(s: MigrationState, targets: readonly string[]): string[] {
  const switched = s.spec.switched ?? [];
  if (switched.length === 0) return [];
  const seen = new Set<string>();
  const stack = [...targets];
  while (stack.length > 0) {
    const name = stack.pop() as string;
    if (seen.has(name)) continue;
    seen.add(name);
    stack.push(...(own(s.spec.desired.components, name)?.dependsOn ?? []));
  }
  return switched.filter((c) => seen.has(c)).sort();
}

/** The steps of a forward switch of `components`, in order (the release is the shift's weight 100). */
export function switchSteps(components: readonly string[]): SwitchStep[] {
  const steps: SwitchStep[] = [{ step: 'hold' }];
  for (const step of ['fence', 'catch_up', 'promote', 'reverse'] as const)
    for (const component of components) steps.push({ step, component });
  return steps;
}

/** The hold's budget and bound for `components`: the smallest of theirs. */
export function holdSettings(
  s: MigrationState,
  components: readonly string[],
): { budgetMs: number; maxHeld: number } {
  let budgetMs = Number.POSITIVE_INFINITY;
  let maxHeld = Number.POSITIVE_INFINITY;
  for (const name of components) {
    const replicate = own(s.spec.desired.components, name)?.replicate;
    budgetMs = Math.min(budgetMs, replicate?.writeHold ?? defaults.writeHoldMs);
    maxHeld = Math.min(maxHeld, replicate?.maxHeld ?? defaults.maxHeld);
  }
  return {
    budgetMs: Number.isFinite(budgetMs) ? budgetMs : defaults.writeHoldMs,
    maxHeld: Number.isFinite(maxHeld) ? maxHeld : defaults.maxHeld,
  };
}

/** The command of a forward switch step, for a shift of `routes` to `components`. */
export function switchCommand(
  s: MigrationState,
  step: SwitchStep,
  routes: string[],
  components: readonly string[],
): Unnumbered<Command> {
  switch (step.step) {
    case 'hold':
      return { kind: 'hold_routes', routes, greenPercent: 0, from: 'blue', ...holdSettings(s, components) };
    case 'fence':
      return { kind: 'fence', component: step.component, slot: 'blue' };
    case 'catch_up':
      return { kind: 'catch_up', component: step.component, from: 'blue' };
    case 'promote':
      return { kind: 'promote_slot', component: step.component, slot: 'green' };
    case 'reverse':
      return { kind: 'reverse_replication', component: step.component, from: 'green' };
  }
}

/** The epoch ms by which the switch in progress must be done (its hold's start plus budget). */
export function switchDeadline(s: MigrationState): number {
  const sw = s.switch;
  return sw ? sw.heldAt + sw.budgetMs : 0;
}

/** Keeps what a switch step did (whatever happens next, the undo reads it). */
export function recordSwitchEffect(
  t: Transition,
  command: Command,
  at: number,
  result: SwitchResult | undefined,
  notify: (message: string, kind: 'write_hold_started') => void,
): void {
  const s = t.state;
  const sw = s.switch;
  const set = (next: SwitchState) => {
    t.state = { ...t.state, switch: next };
  };
  switch (command.kind) {
    case 'hold_routes': {
      const heldAt = result?.heldAt ?? at;
      set({
        direction: command.from === 'blue' ? 'to_green' : 'to_blue',
        heldAt,
        budgetMs: command.budgetMs,
        positions: {},
        fenced: sw?.fenced ?? [],
        primary: sw?.primary ?? {},
        released: false,
      });
      notify(
        `write hold on ${command.routes.join(', ')}: requests held (budget ${formatDuration(command.budgetMs)}, at most ${command.maxHeld}) while ${command.from} is fenced and the other side catches up`,
        'write_hold_started',
      );
      return;
    }
    case 'fence':
      if (!sw) return;
      set({
        ...sw,
        fenced: [...sw.fenced.filter((f) => f !== fenceKey(command)), fenceKey(command)],
        positions: { ...sw.positions, [command.component]: result?.position ?? '' },
      });
      return;
    case 'unfence':
      if (!sw) return;
      set({ ...sw, fenced: sw.fenced.filter((f) => f !== fenceKey(command)) });
      return;
    case 'promote_slot':
      if (!sw) return;
      set({ ...sw, primary: { ...sw.primary, [command.component]: command.slot } });
      return;
    default:
      return;
  }
}

/** The routes were set without the hold: the held requests went on. Returns how long it held. */
export function releaseSwitch(t: Transition, at: number): number | null {
  const sw = t.state.switch;
  if (!sw || sw.released) return null;
  t.state = { ...t.state, switch: { ...sw, released: true } };
  return at - sw.heldAt;
}

function fenceKey(c: { component: string; slot: 'blue' | 'green' }): string {
  return `${c.component}/${c.slot}`;
}

/**
 * What the undo does first about the switch, before it puts the routes back on blue (which
 * releases any hold to blue): a switch not finished is undone (blue unfenced: green took no write);
 * a finished one is switched back (hold, fence green, blue catches up, promote blue, unfence it).
 */
export function undoSwitch(s: MigrationState, liveRoutes: readonly string[]): Unnumbered<Command>[] {
  const sw = s.switch;
  if (!sw) return [];
  const components = s.spec.switched ?? [];
  const steps: Unnumbered<Command>[] = [];
  if (sw.direction === 'to_green' && sw.released && liveRoutes.length > 0) {
    steps.push(
      ...switchBackSteps(
        s,
        liveRoutes,
        components.filter((c) => sw.primary[c] === 'green'),
      ),
    );
  }
  // Blue takes writes again before the routes send the held requests to it.
  for (const component of components) steps.push({ kind: 'unfence', component, slot: 'blue' });
  return steps;
}

/** The switch back to blue of `moved`: hold at 100 % green, fence green, blue catches up, promote blue. */
function switchBackSteps(
  s: MigrationState,
  routes: readonly string[],
  moved: readonly string[],
): Unnumbered<Command>[] {
  const steps: Unnumbered<Command>[] = [
    { kind: 'hold_routes', routes: [...routes], greenPercent: 100, from: 'green', ...holdSettings(s, moved) },
  ];
  for (const component of moved) steps.push({ kind: 'fence', component, slot: 'green' });
  for (const component of moved) steps.push({ kind: 'catch_up', component, from: 'green' });
  for (const component of moved) steps.push({ kind: 'promote_slot', component, slot: 'blue' });
  return steps;
}

/**
 * A person retries the steps of a switch back to blue that was given up (undo.ts
 * abandonSwitchBack): green has served again since, unfenced, taking writes, so the steps left
 * cannot be taken again one by one (blue would miss what green took since its catch-up, or catch
 * up without a hold). The switch back is made afresh before them: hold, fence green, blue catches
 * up, promote blue, unfence it. Nothing when `retried` has no step of it (a retire left, say).
 */
export function switchBackAgain(s: MigrationState, retried: readonly Command[]): Unnumbered<Command>[] {
  const sw = s.switch;
  if (sw?.direction !== 'to_blue' || !sw.released) return [];
  if (!retried.some((c) => isSwitchCommand(c) || (c.kind === 'shift_routes' && c.restore))) return [];
  const hold = s.ending?.steps.find(
    (c): c is Extract<Command, { kind: 'hold_routes' }> => c.kind === 'hold_routes' && c.from === 'green',
  );
  if (!hold) return [];
  const components = s.spec.switched ?? [];
  return [
    ...switchBackSteps(s, hold.routes, components),
    ...components.map((component) => ({ kind: 'unfence', component, slot: 'blue' }) as const),
  ];
}

/** After a switch back to blue failed: green unfenced, and its routes at 100 % without the hold. */
export function keepGreenServing(s: MigrationState): Unnumbered<Command>[] {
  const steps: Unnumbered<Command>[] = [];
  for (const component of s.spec.switched ?? []) steps.push({ kind: 'unfence', component, slot: 'green' });
  const live = s.touchedRoutes.filter((route) => own(s.spec.base.topology?.routes, route) !== undefined);
  if (live.length > 0) steps.push({ kind: 'shift_routes', routes: live, greenPercent: 100, restore: false });
  return steps;
}

/** For people: "fence blue db". */
export function describeSwitchCommand(c: Command): string | null {
  switch (c.kind) {
    case 'hold_routes':
      return `hold requests of ${c.routes.join(', ')} (budget ${formatDuration(c.budgetMs)})`;
    case 'fence':
      return `fence ${c.slot} ${c.component}`;
    case 'unfence':
      return `unfence ${c.slot} ${c.component}`;
    case 'catch_up':
      return `${c.from === 'blue' ? 'green' : 'blue'} ${c.component} catches up with ${c.from}`;
    case 'promote_slot':
      return `promote ${c.slot} ${c.component}`;
    case 'reverse_replication':
      return `replicate ${c.component} from ${c.from} back to ${c.from === 'green' ? 'blue' : 'green'}`;
    default:
      return null;
  }
}
