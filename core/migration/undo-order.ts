import type { Topology } from '../topology/types.js';
import { isSwitchCommand } from './switch.js';
import type { Command } from './types.js';

/**
 * The order undo steps may run in, as a graph: for each step, the indexes of the earlier steps it
 * waits for. Traffic goes back to blue before green goes (a retirement waits for every route step
 * before it), and green is retired dependents first (a retirement waits for the retirements of the
 * components that depend on its own, in the desired topology). Route steps wait for nothing: they
 * put different routes back. Every index is below the step's own, so running the steps one at a
 * time in order, as before, is one of the orders this allows. The steps of a switch back
 * (switch.ts undoSwitch) run one after the other, and the route steps after them.
 */
export function undoPrerequisites(steps: readonly Command[], desired: Topology): readonly number[][] {
  const hit = cache.get(steps);
  if (hit) return hit;
  const dependents = new Map<string, string[]>();
  for (const [name, component] of Object.entries(desired.components)) {
    for (const dependency of component.dependsOn) {
      const list = dependents.get(dependency);
      if (list) list.push(name);
      else dependents.set(dependency, [name]);
    }
  }
  const routeSteps: number[] = [];
  const switchSteps: number[] = [];
  const retiresOf = new Map<string, number[]>();
  const out = steps.map((command, i): number[] => {
    if (isSwitchCommand(command)) {
      // The switch back (or its undo) is a sequence: each step after the one before it.
      const after = [...switchSteps];
      switchSteps.push(i);
      return after;
    }
    if (command.kind !== 'retire') {
      routeSteps.push(i);
      // Routes go back to blue (releasing a hold) once blue takes writes again.
      return [...switchSteps];
    }
    const after = [...routeSteps];
    for (const dependent of dependents.get(command.component) ?? [])
      after.push(...(retiresOf.get(dependent) ?? []));
    const list = retiresOf.get(command.component);
    if (list) list.push(i);
    else retiresOf.set(command.component, [i]);
    return after.sort((a, b) => a - b);
  });
  cache.set(steps, out);
  return out;
}

/**
 * Cache: keyed by the steps array, which an ending never changes (a retry by a person makes a new
 * one), so not state: the step function stays a function of its inputs. Weak: it goes with them.
 */
const cache = new WeakMap<readonly Command[], number[][]>();
