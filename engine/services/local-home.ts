/**
 * The local mode's `MigrationHome`: layouts in a state directory, what runs observed here by the
 * built-in drivers, secrets (this process's) hashed with the state directory's key.
 */
import { localModeHostProblem } from '../../core/topology/hosts.js';
import { observeEnvironmentLayout } from '../observe/observe-environment.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import { readCurrentLayout, readLayoutAt } from '../store/layout-store.js';
import type { StateDir } from '../store/state-dir.js';
import type { HeldEnvironment, MigrationHome } from './prepare-migration.js';

/** `hold`: how a start takes the environment (the claim file); absent for a plan alone. */
export function localHome(
  stateDir: StateDir,
  secrets: ProcessSecrets,
  hold?: (environment: string) => HeldEnvironment,
): MigrationHome {
  return {
    layout: (environment) => readCurrentLayout(stateDir, environment),
    layoutAt: (environment, serial) => readLayoutAt(stateDir, environment, serial),
    observe: (layout, baseDir) => observeEnvironmentLayout(stateDir, layout, baseDir),
    secrets: { key: stateDir, read: secrets },
    // One machine: every call runs here, on the host `local` (a worker without --host is the same).
    refuseHost: localModeHostProblem,
    ...(hold === undefined ? {} : { hold }),
  };
}
