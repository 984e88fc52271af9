import { dependencySlots } from '../../core/migration/dependency-slots.js';
import type { MigrationState } from '../../core/migration/types.js';
import { type DependencySlot, resolveReferences } from '../../core/topology/dependency-refs.js';
import type { Component } from '../../core/topology/types.js';
import { PermanentDriverError } from '../drivers/types.js';

export interface DependencyEnv {
  /** The values of the component's references to its dependencies, by `env` key. */
  env: Record<string, string>;
  /** The slot each dependency of the call's slot talks to. */
  dependencies: Record<string, DependencySlot>;
}

/**
 * What a driver call of `component` gets of its dependencies, from the migration's slots: green
 * (`desired`) reaches the green slots of the dependencies replaced with it, the live layout (`base`)
 * the live ones. A reference without a value fails a call that stands a slot up (retrying gives no
 * address); draining and retiring go on without it (`missing: 'omit'`), as without a secret.
 */
export function dependencyEnv(
  state: Pick<MigrationState, 'slots' | 'spec'>,
  component: string,
  spec: Pick<Component, 'env'>,
  side: 'base' | 'desired',
  missing: 'fail' | 'omit',
  log: (line: string) => void,
): DependencyEnv {
  const dependencies = dependencySlots(state, component, side === 'desired' ? 'green' : 'live');
  const { env, unresolved } = resolveReferences(component, spec, dependencies);
  const [first] = unresolved;
  if (first !== undefined && missing === 'fail') throw new PermanentDriverError(first);
  for (const line of unresolved) log(`${line}: its driver goes on without it`);
  return { env, dependencies };
}
