import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { dependencyDepths } from '../../core/plan/dependency-order.js';
import { deepEqual } from '../../core/plan/diff-values.js';
import { parseDuration } from '../../core/topology/duration.js';
import { findCycles } from '../../core/topology/find-cycles.js';

/**
 * The hot helpers of loading and planning were rewritten for speed (no regular expression on the
 * common durations, indexes instead of maps in the graph walks, loops instead of closures); each
 * must still agree with the plain reference it replaced, kept here.
 */

const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;
function referenceParseDuration(text: string): number | undefined {
  const simple = /^(\d{1,9})(ms|s|m|h)$/.exec(text);
  if (simple) return Number(simple[1]) * unitMs[simple[2] as keyof typeof unitMs];
  if (!/^(?:\d+(?:ms|s|m|h))+$/.test(text)) return undefined;
  let total = 0;
  for (const match of text.matchAll(/(\d+)(ms|s|m|h)/g)) {
    total += Number(match[1]) * unitMs[match[2] as keyof typeof unitMs];
  }
  return Number.isSafeInteger(total) ? total : undefined;
}

function referenceFindCycles(edges: ReadonlyMap<string, readonly string[]>, maxCycles = 20): string[][] {
  const state = new Map<string, 1 | 2>();
  const cycles: string[][] = [];
  const seen = new Set<string>();
  for (const start of [...edges.keys()].sort()) {
    if (state.has(start)) continue;
    const path: string[] = [start];
    const stack: { node: string; next: number }[] = [{ node: start, next: 0 }];
    state.set(start, 1);
    while (stack.length > 0) {
      const frame = stack[stack.length - 1] as { node: string; next: number };
      const targets = edges.get(frame.node) ?? [];
      if (frame.next < targets.length) {
        const target = targets[frame.next++] as string;
        if (!edges.has(target)) continue;
        const s = state.get(target);
        if (s === undefined) {
          state.set(target, 1);
          path.push(target);
          stack.push({ node: target, next: 0 });
        } else if (s === 1) {
          const cycle = path.slice(path.indexOf(target));
          let min = 0;
          for (let i = 1; i < cycle.length; i++) if ((cycle[i] as string) < (cycle[min] as string)) min = i;
          const key = [...cycle.slice(min), ...cycle.slice(0, min)];
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

function referenceDeepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((v, i) => referenceDeepEqual(v, b[i]));
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && referenceDeepEqual((a as never)[k], (b as never)[k]));
}

const nodeName = fc.constantFrom('a', 'b', 'c', 'd', 'e', 'f', 'g', '__proto__', 'constructor');
const graphArb = fc
  .array(fc.tuple(nodeName, fc.array(fc.oneof(nodeName, fc.constant('missing')), { maxLength: 4 })), {
    maxLength: 9,
  })
  .map((entries) => new Map(entries));

describe('rewritten helpers agree with their references', () => {
  it('parseDuration', () => {
    const durationLike = fc.stringMatching(/^[0-9]{0,11}(ms|s|m|h|x|)([0-9]{0,3}(ms|s|m|h))?$/);
    fc.assert(
      fc.property(fc.oneof(durationLike, fc.string({ maxLength: 8 })), (text) => {
        expect(parseDuration(text)).toBe(referenceParseDuration(text));
      }),
      { numRuns: 3000 },
    );
  });

  it('findCycles', () => {
    fc.assert(
      fc.property(graphArb, fc.integer({ min: 1, max: 4 }), (edges, max) => {
        expect(findCycles(edges, max)).toEqual(referenceFindCycles(edges, max));
      }),
      { numRuns: 2000 },
    );
  });

  it('deepEqual', () => {
    const value = fc.jsonValue({ maxDepth: 3 });
    fc.assert(
      fc.property(value, value, fc.boolean(), (a, b, same) => {
        const other = same ? structuredClone(a) : b;
        expect(deepEqual(a, other)).toBe(referenceDeepEqual(a, other));
      }),
      { numRuns: 2000 },
    );
  });

  it('dependencyDepths: one more than the deepest dependency, entries in the order first reached', () => {
    fc.assert(
      fc.property(fc.array(fc.array(fc.nat(), { maxLength: 3 }), { maxLength: 12 }), (deps) => {
        // An acyclic graph: component i depends only on earlier ones.
        const components: Record<string, { dependsOn: string[] }> = {};
        deps.forEach((picks, i) => {
          components[`c${i}`] = { dependsOn: [...new Set(picks.filter((p) => p < i).map((p) => `c${p}`))] };
        });
        const depths = dependencyDepths(components);
        // The reference: Kahn's algorithm over maps, as it was written before.
        const names = Object.keys(components);
        const pending = new Map<string, number>();
        const dependents = new Map<string, string[]>();
        for (const name of names) {
          const ds = (components[name]?.dependsOn ?? []).filter((d) => Object.hasOwn(components, d));
          pending.set(name, ds.length);
          for (const d of ds) dependents.set(d, [...(dependents.get(d) ?? []), name]);
        }
        const expected = new Map<string, number>();
        const queue = names.filter((n) => pending.get(n) === 0);
        for (const n of queue) expected.set(n, 0);
        for (let i = 0; i < queue.length; i++) {
          const name = queue[i] as string;
          const d = expected.get(name) as number;
          for (const dependent of dependents.get(name) ?? []) {
            expected.set(dependent, Math.max(expected.get(dependent) ?? 0, d + 1));
            const left = (pending.get(dependent) as number) - 1;
            pending.set(dependent, left);
            if (left === 0) queue.push(dependent);
          }
        }
        expect([...depths]).toEqual([...expected]);
      }),
      { numRuns: 1000 },
    );
  });
});
