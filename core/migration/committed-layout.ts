import type { CurrentLayout, SlotInfo } from '../layout.js';
import { own, setOwn } from '../records.js';
import type { MigrationState } from './types.js';

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
