import type { SlotInfo } from '../layout.js';
import { own, setOwn } from '../records.js';
import type { DependencySlot } from '../topology/dependency-refs.js';
import type { MigrationState } from './types.js';

/**
 * Which generation a driver call of a component acts on: `green`, the slot the migration stands up
 * (in the desired topology), or `live`, the slot that runs now (in the live topology: a restart in
 * place, a blue drain or retirement).
 */
export type Generation = 'green' | 'live';

/**
 * The slot of each dependency a component's slot of `generation` talks to. Pure.
 *
 * - green: a dependency with a green slot in this migration (replaced or added: its provision comes
 *   before its dependents', plan-edges.ts) gives its green slot; any other its live slot. So green
 *   talks to green, and to what stays live.
 * - live: every dependency's live slot. Blue keeps what it had: its dependencies' live slots were
 *   its own generation's green when it was provisioned, and they stay until the commit retires
 *   them together with it.
 *
 * A dependency without any slot recorded (a layout from before slots were kept) is left out.
 */
export function dependencySlots(
  state: Pick<MigrationState, 'slots' | 'spec'>,
  component: string,
  generation: Generation,
): Record<string, DependencySlot> {
  const topology = generation === 'green' ? state.spec.desired : state.spec.base.topology;
  const dependsOn = own(topology?.components, component)?.dependsOn ?? [];
  const out: Record<string, DependencySlot> = {};
  for (const dependency of dependsOn) {
    const pair = own(state.slots, dependency);
    const slot = generation === 'green' ? (pair?.green ?? pair?.blue) : pair?.blue;
    if (slot) setOwn(out, dependency, shown(slot));
  }
  return out;
}

/** The live slots of a recorded layout: what a component of it reaches (`topology down`). */
export function liveDependencySlots(
  slots: Readonly<Record<string, SlotInfo>> | undefined,
  dependsOn: readonly string[],
): Record<string, DependencySlot> {
  const out: Record<string, DependencySlot> = {};
  for (const dependency of dependsOn) {
    const slot = own(slots, dependency);
    if (slot) setOwn(out, dependency, { slot: 'blue', addresses: [...slot.addresses] });
  }
  return out;
}

function shown(slot: SlotInfo): DependencySlot {
  return { slot: slot.slot, addresses: [...slot.addresses] };
}
