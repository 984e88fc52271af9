/**
 * Dependency cycles in a graph given as adjacency lists. Iterative (no recursion, so a chain of
 * 100,000 components cannot overflow the stack). Each cycle is reported once, rotated to start at
 * its smallest name, e.g. ['api', 'db', 'api'].
 */
export function findCycles(edges: ReadonlyMap<string, readonly string[]>, maxCycles = 20): string[][] {
  const state = new Map<string, 1 | 2>(); // 1 on the current path, 2 finished
  const cycles: string[][] = [];
  const seen = new Set<string>();
  const names = [...edges.keys()].sort();
  for (const start of names) {
    if (state.has(start)) continue;
    const path: string[] = [];
    const stack: { node: string; next: number }[] = [{ node: start, next: 0 }];
    state.set(start, 1);
    path.push(start);
    while (stack.length > 0) {
      const frame = stack[stack.length - 1] as { node: string; next: number };
      const targets = edges.get(frame.node) ?? [];
      if (frame.next < targets.length) {
        const target = targets[frame.next++] as string;
        if (!edges.has(target)) continue; // dangling: reported elsewhere
        const s = state.get(target);
        if (s === undefined) {
          state.set(target, 1);
          path.push(target);
          stack.push({ node: target, next: 0 });
        } else if (s === 1) {
          const cycle = path.slice(path.indexOf(target));
          const key = canonicalCycle(cycle);
          if (!seen.has(key.join('>'))) {
            seen.add(key.join('>'));
            cycles.push([...key, key[0] as string]);
            if (cycles.length >= maxCycles) return cycles;
          }
        }
        continue;
      }
      state.set(frame.node, 2);
      path.pop();
      stack.pop();
    }
  }
  return cycles;
}

function canonicalCycle(cycle: string[]): string[] {
  let min = 0;
  for (let i = 1; i < cycle.length; i++) if ((cycle[i] as string) < (cycle[min] as string)) min = i;
  return [...cycle.slice(min), ...cycle.slice(0, min)];
}
