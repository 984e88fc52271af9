/**
 * What runs now of a layout recorded in a state directory, as the built-in drivers see it (the
 * local mode's observation; Temporal's runs the same observeLayout on a worker).
 */
import type { CurrentLayout } from '../../core/layout.js';
import type { ObservedLayout } from '../../core/observed.js';
import type { StateDir } from '../store/state-dir.js';
import { observeLayout } from './observe-layout.js';

/** Relative paths resolve where the layout's migration ran, else against `fallbackBaseDir`. */
export async function observeEnvironmentLayout(
  stateDir: StateDir,
  layout: CurrentLayout,
  fallbackBaseDir: string,
): Promise<ObservedLayout> {
  // Loaded here: the drivers pull in most of the engine.
  const { defaultDrivers } = await import('../drivers/default-drivers.js');
  return observeLayout(stateDir, layout, { drivers: defaultDrivers(), fallbackBaseDir });
}
