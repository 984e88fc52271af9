import { own } from '../../core/records.js';
import type { Topology } from '../../core/topology/types.js';
import type { DriverSet } from './driver-set.js';

/**
 * The stateful components of `desired` whose driver replicates continuously for their settings
 * (PlanInputs.switchable): a migration that replaces one switches it under a write hold. The others
 * are copied once, as before; the plan says what that cannot promise.
 */
export function switchableComponents(desired: Topology, drivers: DriverSet): string[] {
  return Object.keys(desired.components)
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
