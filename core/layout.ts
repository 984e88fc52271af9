import type { SlotInfo } from '../engine/drivers/types.js';
import type { MigrationState } from './migration/types.js';
import { own, setOwn } from './records.js';
import type { Topology } from './topology/types.js';

/**
 * The layout that is live now in one environment: the last committed topology and its serial. The
 * serial increases at every commit; a plan records the serial it was computed against.
 */
export interface CurrentLayout {
  environment: string;
  serial: number;
  /** null before the first commit: everything in a topology is then new. */
  topology: Topology | null;
  committedAt?: string;
  /** The live slot of each component, as its driver reported it. */
  slots?: Record<string, SlotInfo>;
  /** The migration that committed this layout (makes recording it idempotent). */
  migrationId?: string;
  /** Directory of the topology file it was migrated from: its relative paths resolve here. */
  baseDir?: string;
}

export function emptyLayout(environment: string): CurrentLayout {
  return { environment, serial: 0, topology: null };
}

/** The layout a committed migration leaves: its desired topology, with the live slot of each component. Pure. */
export function committedLayout(state: MigrationState): CurrentLayout {
  const spec = state.spec;
  const slots: Record<string, SlotInfo> = {};
  for (const name of Object.keys(spec.desired.components)) {
    const pair = own(state.slots, name);
    const live = pair?.green ?? pair?.blue;
    if (live) setOwn(slots, name, { ...live, slot: 'blue' });
  }
  return {
    environment: spec.environment,
    serial: spec.base.serial + 1,
    topology: spec.desired,
    committedAt: new Date(state.committedAt ?? state.updatedAt).toISOString(),
    slots,
    migrationId: spec.id,
    baseDir: spec.baseDir,
  };
}
