import { InvariantError } from '../errors.js';
import { has, own } from '../records.js';

/**
 * Depth of each component in its dependency graph: 0 for no dependencies, else one more than its
 * deepest dependency. Sorting by depth puts every dependency before its dependents (and the reverse
 * order puts dependents first). Kahn's algorithm, iterative; dependencies outside the graph are
 * ignored. The loader rejects cycles, so a cycle here is a bug.
 */
export function dependencyDepths(
  components: Readonly<Record<string, { dependsOn: readonly string[] }>>,
): Map<string, number> {
  const names = Object.keys(components);
  const pending = new Map<string, number>();
  const dependents = new Map<string, string[]>();
  for (const name of names) {
    const deps = (own(components, name)?.dependsOn ?? []).filter((d) => has(components, d));
    pending.set(name, deps.length);
    for (const dep of deps) {
      const list = dependents.get(dep);
      if (list) list.push(name);
      else dependents.set(dep, [name]);
    }
  }
  const depth = new Map<string, number>();
  const queue = names.filter((n) => pending.get(n) === 0);
  for (const n of queue) depth.set(n, 0);
  for (let i = 0; i < queue.length; i++) {
    const name = queue[i] as string;
    const d = depth.get(name) as number;
    for (const dependent of dependents.get(name) ?? []) {
      depth.set(dependent, Math.max(depth.get(dependent) ?? 0, d + 1));
      const left = (pending.get(dependent) as number) - 1;
      pending.set(dependent, left);
      if (left === 0) queue.push(dependent);
    }
  }
  if (queue.length !== names.length) throw new InvariantError('dependency cycle in a loaded topology');
  return depth;
}

/** Names in dependency order (dependencies first), ties by name. */
export function inDependencyOrder(names: Iterable<string>, depths: ReadonlyMap<string, number>): string[] {
  return [...names].sort((a, b) => (depths.get(a) ?? 0) - (depths.get(b) ?? 0) || compareNames(a, b));
}

/** Names in teardown order (dependents first), ties by name. */
export function inTeardownOrder(names: Iterable<string>, depths: ReadonlyMap<string, number>): string[] {
  return [...names].sort((a, b) => (depths.get(b) ?? 0) - (depths.get(a) ?? 0) || compareNames(a, b));
}

export function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
