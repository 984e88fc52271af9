/**
 * Dependency cycles in a graph given as adjacency lists. Iterative (no recursion, so a chain of
 * 100,000 components cannot overflow the stack). Each cycle is reported once, rotated to start at
 * its smallest name, e.g. ['api', 'db', 'api'].
 */
export function findCycles(edges: ReadonlyMap<string, readonly string[]>, maxCycles = 20): string[][] {
  // Nodes as indexes in name order, targets resolved once (dangling ones, reported elsewhere, left
  // out): the walk itself then touches no map.
  const names = [...edges.keys()].sort();
  const index = new Map<string, number>();
  for (let i = 0; i < names.length; i++) index.set(names[i] as string, i);
  const targets: number[][] = names.map((name) => {
    const out: number[] = [];
    for (const target of edges.get(name) ?? []) {
      const j = index.get(target);
      if (j !== undefined) out.push(j);
    }
    return out;
  });
  const state = new Uint8Array(names.length); // 0 unvisited, 1 on the current path, 2 finished
  const cycles: string[][] = [];
  const seen = new Set<string>();
  const path: number[] = []; // the nodes on the current path, which is also the stack
  const next: number[] = []; // per stack frame, the index of the next target to follow
  for (let start = 0; start < names.length; start++) {
    if (state[start] !== 0) continue;
    state[start] = 1;
    path.push(start);
    next.push(0);
    while (path.length > 0) {
      const top = path.length - 1;
      const node = path[top] as number;
      const out = targets[node] as number[];
      const k = next[top] as number;
      if (k < out.length) {
        next[top] = k + 1;
        const target = out[k] as number;
        const s = state[target];
        if (s === 0) {
          state[target] = 1;
          path.push(target);
          next.push(0);
        } else if (s === 1) {
          const cycle = path.slice(path.indexOf(target)).map((i) => names[i] as string);
          const key = canonicalCycle(cycle);
          if (!seen.has(key.join('>'))) {
            seen.add(key.join('>'));
            cycles.push([...key, key[0] as string]);
            if (cycles.length >= maxCycles) return cycles;
          }
        }
        continue;
      }
      state[node] = 2;
      path.pop();
      next.pop();
    }
  }
  return cycles;
}

function canonicalCycle(cycle: string[]): string[] {
  let min = 0;
  for (let i = 1; i < cycle.length; i++) if ((cycle[i] as string) < (cycle[min] as string)) min = i;
  return [...cycle.slice(min), ...cycle.slice(0, min)];
}

/**
 * A node on a cycle reachable from `from`, or undefined when none is: an iterative depth-first walk
 * of only what `from` reaches (a few components of a large graph when the rest is known acyclic).
 * Targets outside the graph are left out, as in findCycles.
 */
export function reachesCycle(
  edges: ReadonlyMap<string, readonly string[]>,
  from: readonly string[],
): string | undefined {
  const state = new Map<string, 1 | 2>(); // 1 on the current path, 2 finished
  const path: string[] = [];
  const next: number[] = [];
  for (const start of from) {
    if (state.has(start)) continue;
    state.set(start, 1);
    path.push(start);
    next.push(0);
    while (path.length > 0) {
      const top = path.length - 1;
      const node = path[top] as string;
      const out = edges.get(node) ?? [];
      const k = next[top] as number;
      if (k < out.length) {
        next[top] = k + 1;
        const target = out[k] as string;
        if (!edges.has(target)) continue;
        const s = state.get(target);
        if (s === 1) return target;
        if (s === undefined) {
          state.set(target, 1);
          path.push(target);
          next.push(0);
        }
        continue;
      }
      state.set(node, 2);
      path.pop();
      next.pop();
    }
  }
  return undefined;
}
