import type { Plan } from '../../core/plan/types.js';
import { own } from '../../core/records.js';
import type { Topology } from '../../core/topology/types.js';
import type { DriverSet } from './driver-set.js';

/**
 * The stateful components a migration of `plan` switches under a write hold (MigrationSpec.switched):
 * those it replaces (a replicate action) whose driver replicates continuously for their settings.
 * The others are copied once, as before: the plan says what that cannot promise.
 */
export function switchedComponents(plan: Plan, desired: Topology, drivers: DriverSet): string[] {
  const replicated = new Set<string>();
  for (const action of plan.actions)
    if (action.type === 'replicate' && action.component !== undefined) replicated.add(action.component);
  return [...replicated]
    .filter((name) => {
      const spec = own(desired.components, name);
      if (!spec?.stateful) return false;
      const type = own(desired.drivers, spec.driver)?.type;
      const driver = type === undefined ? undefined : drivers.component[type as keyof DriverSet['component']];
      const replicator = driver?.replication;
      return replicator !== undefined && (replicator.supports?.(spec) ?? true);
    })
    .sort();
}
