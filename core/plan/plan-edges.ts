import { own } from '../records.js';
import type { Topology } from '../topology/types.js';
import type { Action } from './types.js';

/**
 * The dependency edges of a plan: for each action, the ids of the actions it waits for (`after`).
 * A runner may run at once any actions whose `after` are all done (bounded by the parallelism).
 *
 * Invariant: every id in an action's `after` names an action earlier in the plan, so plan order is a
 * topological order, and running the plan one action at a time in plan order (parallelism 1) is
 * exactly what the runner did before edges existed.
 *
 * The rules, from the stages and `dependsOn`:
 * - a green provision (or a restart in place) waits for its dependencies' provisions;
 * - a replication waits for its own provision;
 * - a health gate waits for its own provision (or restart) and replication, and its dependencies' gates;
 * - a cutover action waits for the gate of the component it routes to (the shift: of every route's);
 * - a route removed waits for every cutover action (the new routes serve before an old one goes);
 * - a blue drain waits for the routes that sent it traffic, its green's gate and its dependents' drains;
 * - a blue retirement (commit stage) waits for its drain and its dependents' retirements. Commit-stage
 *   actions also run only once the commit is reached, after every action before the commit.
 */
export function withEdges(
  actions: readonly Action[],
  current: Topology | null,
  desired: Topology,
  /** What depends on a component in `current`, when known (classify.ts has it): else indexed here. */
  currentDependents?: (name: string) => readonly string[],
): Action[] {
  // Every lookup below is an index built once: the edges of a plan cost time linear in the plan and
  // the layouts, not a scan of the current layout per action (10,000 components made that seconds).
  const position = new Map(actions.map((a, i) => [a.id, i]));
  const byKey = new Map<string, string>();
  for (const a of actions) {
    for (const subject of a.routes ?? [a.component ?? a.route ?? '']) byKey.set(key(a.type, subject), a.id);
  }
  const provisionOf = (c: string) => byKey.get(key('provision', c)) ?? byKey.get(key('restart', c));
  const cutoverIds = actions.filter((a) => a.stage === 'cutover').map((a) => a.id);
  const dependentsBefore = currentDependents ?? indexed(dependentsIndex(current, actions));
  const routesToBefore = routesToIndex(current);
  const routeActionOf = (r: string) =>
    byKey.get(key('create_route', r)) ??
    byKey.get(key('shift_traffic', r)) ??
    byKey.get(key('update_route', r)) ??
    byKey.get(key('remove_route', r));
  const inPlanOrder = (a: string, b: string) => (position.get(a) as number) - (position.get(b) as number);

  return actions.map((a) => {
    const c = a.component ?? '';
    const deps = own(desired.components, c)?.dependsOn ?? [];
    let after: (string | undefined)[];
    switch (a.type) {
      case 'provision':
      case 'restart':
        after = deps.map(provisionOf);
        break;
      case 'replicate':
        after = [provisionOf(c)];
        break;
      case 'check_health':
        after = [
          provisionOf(c),
          byKey.get(key('replicate', c)),
          ...deps.map((d) => byKey.get(key('check_health', d))),
        ];
        break;
      case 'create_route':
      case 'shift_traffic':
      case 'update_route':
        // A shift of several routes waits for the gates of all their components.
        after = (a.routes ?? [a.route as string]).map((r) =>
          byKey.get(key('check_health', own(desired.routes, r)?.to ?? '')),
        );
        break;
      case 'remove_route':
        after = cutoverIds;
        break;
      case 'drain':
        after = [
          ...(routesToBefore.get(c) ?? []).map(routeActionOf),
          byKey.get(key('check_health', c)),
          ...dependentsBefore(c).map((d) => byKey.get(key('drain', d))),
        ];
        break;
      case 'retire_blue':
      case 'retire':
        after = [
          byKey.get(key('drain', c)),
          ...dependentsBefore(c).flatMap((d) => [
            byKey.get(key('retire_blue', d)),
            byKey.get(key('retire', d)),
          ]),
        ];
        break;
    }
    const list = [...new Set(after.filter((id): id is string => id !== undefined && position.has(id)))];
    return { ...a, after: list.sort(inPlanOrder) };
  });
}

function indexed(index: ReadonlyMap<string, string[]>): (name: string) => readonly string[] {
  return (name) => index.get(name) ?? [];
}

function key(type: Action['type'], subject: string): string {
  return `${type} ${subject}`;
}

/**
 * Component → the components of the current layout that depend on it. Only blue slots going down
 * (drains, retirements) ask, so a plan without any builds nothing.
 */
function dependentsIndex(current: Topology | null, actions: readonly Action[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (!current || !actions.some((a) => a.stage === 'drain_blue' || a.stage === 'commit')) return out;
  const components = current.components;
  for (const name of Object.keys(components)) {
    // An own key (from Object.keys): a plain read is enough, and `__proto__` reads the own value.
    const dependsOn = (components[name] as Topology['components'][string]).dependsOn;
    for (let i = 0; i < dependsOn.length; i++) {
      const dependency = dependsOn[i] as string;
      if (dependsOn.indexOf(dependency) !== i) continue; // named twice: one edge
      const list = out.get(dependency);
      if (list) list.push(name);
      else out.set(dependency, [name]);
    }
  }
  return out;
}

/** Component → the routes of the current layout that send it traffic. */
function routesToIndex(current: Topology | null): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [name, route] of Object.entries(current?.routes ?? {})) {
    const list = out.get(route.to);
    if (list) list.push(name);
    else out.set(route.to, [name]);
  }
  return out;
}

/**
 * The actions a runner needs done before it starts `index`: its `after`, or, for a plan of format
 * 1.0 (no edges, in journals and saved plans written before them), the action just before it, so
 * such a plan still runs one action at a time in plan order.
 */
export function prerequisites(actions: readonly Action[], index: number): string[] {
  const action = actions[index] as Action;
  if (action.after) return action.after;
  const previous = actions[index - 1];
  return previous ? [previous.id] : [];
}

/**
 * The waves of a plan, for people: wave 1 is what can start at once, wave n what waits for wave
 * n - 1 at most. The commit is a barrier: commit-stage actions come in waves after all the others.
 */
export function planWaves(actions: readonly Action[]): Action[][] {
  const wave = new Map<string, number>();
  let barrier = 0;
  for (const [i, a] of actions.entries()) {
    const floor = a.stage === 'commit' ? barrier : 0;
    const w = Math.max(floor, ...prerequisites(actions, i).map((id) => wave.get(id) ?? 0)) + 1;
    wave.set(a.id, w);
    if (a.stage !== 'commit') barrier = Math.max(barrier, w);
  }
  const out: Action[][] = [];
  for (const a of actions) {
    const w = (wave.get(a.id) as number) - 1;
    const list = out[w];
    if (list) list.push(a);
    else out[w] = [a];
  }
  return out.filter((w) => w !== undefined);
}

const verbs: Record<Action['type'], string> = {
  provision: 'provision',
  restart: 'restart',
  replicate: 'replicate',
  check_health: 'gate',
  create_route: 'route',
  shift_traffic: 'route',
  update_route: 'route',
  remove_route: 'remove route',
  drain: 'drain',
  retire_blue: 'retire',
  retire: 'retire',
};

/**
 * The waves in one line, as people read them: "wave 1: provision cache, db · wave 2: provision
 * api; gate cache, db". Within a wave, subjects are grouped by what is done to them, in plan order.
 */
export function describeWaves(actions: readonly Action[]): string {
  return planWaves(actions)
    .map((wave, i) => {
      const groups = new Map<string, string[]>();
      for (const a of wave) {
        const verb = verbs[a.type];
        const subject = a.component ?? a.route ?? (a.routes ?? []).join(' + ');
        const list = groups.get(verb);
        if (list) list.push(subject);
        else groups.set(verb, [subject]);
      }
      const parts = [...groups].map(([verb, subjects]) => `${verb} ${subjects.join(', ')}`);
      return `wave ${i + 1}: ${parts.join('; ')}`;
    })
    .join(' · ');
}
