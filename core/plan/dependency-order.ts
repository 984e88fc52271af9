import { InvariantError } from '../errors.js';

/**
 * Depth of each component in its dependency graph: 0 for no dependencies, else one more than its
 * deepest dependency. Sorting by depth puts every dependency before its dependents (and the reverse
 * order puts dependents first). Kahn's algorithm, iterative; dependencies outside the graph are
 * ignored. The loader rejects cycles, so a cycle here is a bug.
 */
export function dependencyDepths(
  components: Readonly<Record<string, { dependsOn: readonly string[] }>>,
): Map<string, number> {
  return dependencyGraph(components).depths;
}

/** The depths of a dependency graph, and what depends on each component in it. */
export interface DependencyGraph {
  depths: Map<string, number>;
  /** The components that name `name` in their `dependsOn` (one named twice may come twice). */
  dependentsOf(name: string): string[];
}

/** `dependencyDepths`, and the graph's reverse edges it follows, asked for by name. */
export function dependencyGraph(
  components: Readonly<Record<string, { dependsOn: readonly string[] }>>,
): DependencyGraph {
  // Indexes and typed arrays rather than maps keyed by name: this runs on every component of both
  // layouts. The result is the same map, with its entries in the same order (first depth assigned).
  const names = Object.keys(components);
  const n = names.length;
  const index = new Map<string, number>();
  for (let i = 0; i < n; i++) index.set(names[i] as string, i);
  const pending = new Int32Array(n);
  const dependents: (number[] | undefined)[] = new Array(n);
  for (let i = 0; i < n; i++) {
    // An own key (from Object.keys): a plain read is enough, and `__proto__` reads the own value.
    const deps = (components[names[i] as string] as { dependsOn: readonly string[] }).dependsOn;
    for (let k = 0; k < deps.length; k++) {
      const j = index.get(deps[k] as string); // dependencies outside the graph are ignored
      if (j === undefined) continue;
      pending[i] = (pending[i] as number) + 1;
      const list = dependents[j];
      if (list) list.push(i);
      else dependents[j] = [i];
    }
  }
  const depth = new Int32Array(n).fill(-1);
  const order: number[] = []; // in the order depths are first assigned
  const queue: number[] = [];
  for (let i = 0; i < n; i++) {
    if (pending[i] === 0) {
      queue.push(i);
      depth[i] = 0;
      order.push(i);
    }
  }
  for (let q = 0; q < queue.length; q++) {
    const at = queue[q] as number;
    const next = (depth[at] as number) + 1;
    const list = dependents[at];
    if (!list) continue;
    for (let k = 0; k < list.length; k++) {
      const dependent = list[k] as number;
      const d = depth[dependent] as number;
      if (d < 0) order.push(dependent);
      if (next > d) depth[dependent] = next;
      pending[dependent] = (pending[dependent] as number) - 1;
      if (pending[dependent] === 0) queue.push(dependent);
    }
  }
  if (queue.length !== n) throw new InvariantError('dependency cycle in a loaded topology');
  const out = new Map<string, number>();
  for (let k = 0; k < order.length; k++) {
    const i = order[k] as number;
    out.set(names[i] as string, depth[i] as number);
  }
  const dependentsOf = (name: string): string[] => {
    const j = index.get(name);
    const list = j === undefined ? undefined : dependents[j];
    return list === undefined ? [] : list.map((i) => names[i] as string);
  };
  return { depths: out, dependentsOf };
}

/** The names of a depth map, shallowest first; equal depths keep the map's order (a stable sort). */
export function byDepth(depths: ReadonlyMap<string, number>): string[] {
  const buckets: string[][] = [];
  // forEach and indexes, not for-of: no entry pair per name while the code is still cold.
  depths.forEach((depth, name) => {
    const bucket = buckets[depth];
    if (bucket) bucket.push(name);
    else buckets[depth] = [name];
  });
  const out: string[] = [];
  for (let d = 0; d < buckets.length; d++) {
    const bucket = buckets[d];
    if (bucket) for (let k = 0; k < bucket.length; k++) out.push(bucket[k] as string);
  }
  return out;
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
