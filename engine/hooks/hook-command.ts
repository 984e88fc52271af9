/**
 * The `hook` command of the step function: the hook it names, run by runHook with the migration's
 * context. runHook made the attempts; the step function decides what a failure means.
 */
import type { Command, MigrationState } from '../../core/migration/types.js';
import { own } from '../../core/records.js';
import type { SecretSource } from '../secrets/secret-source.js';
import type { HookContext } from './hook-context.js';
import { type HookResult, runHook } from './run-hook.js';

export interface HookCallOptions {
  signal: AbortSignal;
  log: (line: string) => void;
  secrets: SecretSource;
  trackProcess?: (pid: number) => () => void;
}

export async function runHookCommand(
  s: MigrationState,
  c: Extract<Command, { kind: 'hook' }>,
  o: HookCallOptions,
): Promise<HookResult> {
  const hook = s.spec.desired.strategy.hooks?.[c.point]?.[c.index];
  if (!hook)
    return { ok: false, reason: `hook ${c.name} is not in the topology at ${c.point}`, attempts: 0, ms: 0 };
  const options = { signal: o.signal, log: o.log, secrets: o.secrets, cwd: s.spec.baseDir };
  return runHook(
    hook,
    hookContext(s, c),
    o.trackProcess ? { ...options, trackProcess: o.trackProcess } : options,
  );
}

/** What the hook is told: the migration, the point (and weight), versions and green addresses. */
export function hookContext(s: MigrationState, c: Extract<Command, { kind: 'hook' }>): HookContext {
  const versions: HookContext['versions'] = {};
  const green: HookContext['green'] = {};
  for (const name of Object.keys(s.spec.desired.components).sort()) {
    const pair = own(s.slots, name);
    if (!pair?.green) continue;
    const before = own(s.spec.base.topology?.components, name)?.version;
    const after = own(s.spec.desired.components, name)?.version ?? pair.green.version;
    versions[name] = before === undefined ? { green: after } : { blue: before, green: after };
    green[name] = [...pair.green.addresses];
  }
  const context: HookContext = {
    // Command ids are journaled and a resume dispatches the in-flight command with its own id.
    id: `${s.spec.id}.${c.id}`,
    environment: s.spec.environment,
    migrationId: s.spec.id,
    serial: s.spec.base.serial + 1,
    point: c.point,
    versions,
    green,
  };
  if (c.weight !== undefined) context.weight = c.weight;
  return context;
}
