/**
 * Whether a local migration has a process driving it, read from its runner record at the time of
 * asking (no timer): so `list`, `show`, `logs` and the API say a runner died as soon as it has.
 */
import type { RunnerSeen } from '../../core/migration/summary.js';
import { isFinal, type MigrationState } from '../../core/migration/types.js';
import { isAlive } from '../../platform/process-identity.js';
import { readRunner } from '../runner/runner-claim.js';
import type { StateDir } from '../store/state-dir.js';

/**
 * How long a new runner has to claim its migration: `spawnRunner` waits this long for it, and a
 * migration this young without a runner record is still `starting`, not dead.
 */
export const runnerStartTimeoutMs = 15_000;

/** The command that resumes a migration, with the options that reach its state directory. */
export function resumeCommand(id: string, reachAgain: string): string {
  return `cutover topology migration resume ${id}${reachAgain}`;
}

/**
 * The runner of a migration: alive (its recorded process runs, the same one: pid and start time),
 * dead (the record names a process that is gone or is another program now, or no record is left
 * although the migration is older than a runner's start), starting, or none (it has ended).
 */
export function runnerSeen(
  stateDir: StateDir,
  state: MigrationState,
  reachAgain: string,
  now = Date.now(),
): RunnerSeen {
  if (isFinal(state.lifecycle)) return { state: 'none' };
  const { environment, id } = state.spec;
  const record = readRunner(stateDir.migration(environment, id).runner);
  if (record && isAlive(record.process)) return { state: 'alive', pid: record.process.pid };
  if (!record && now - state.spec.createdAt < runnerStartTimeoutMs) return { state: 'starting' };
  return { state: 'dead', pid: record?.process.pid ?? null, resumeWith: resumeCommand(id, reachAgain) };
}
