/**
 * Orphaned local migrations: in flight, their runner dead (killed, crashed, or its machine
 * restarted). `cutover server` gives each a new background runner, as `resume` does; the runner
 * claim (engine/runner/runner-claim.ts) lets only one process drive a migration, so two servers,
 * or a server and an operator's `resume`, never both adopt one.
 */
import { lifecycleStatus } from '../../core/migration/summary.js';
import type { ProcessSecrets } from '../secrets/secret-source.js';
import type { StateDir } from '../store/state-dir.js';
import { listMigrations, startRunner } from './migrations.js';
import type { Adoption } from './service-types.js';

/**
 * Every in-flight migration of the state directory whose runner is dead, given a new runner;
 * `wanted` says which to adopt now (the caller's backoff).
 */
export async function adoptOrphans(
  stateDir: StateDir,
  reachAgain: string,
  secrets: ProcessSecrets,
  wanted: (id: string) => boolean = () => true,
): Promise<Adoption[]> {
  const adoptions: Adoption[] = [];
  for (const orphan of listMigrations(stateDir, { all: true, reachAgain })) {
    if (orphan.runner !== 'dead' || !wanted(orphan.id)) continue;
    const { id, environment } = orphan;
    const status = lifecycleStatus(orphan);
    const deadPid = orphan.deadRunnerPid ?? null;
    try {
      const started = await startRunner(stateDir, environment, id, secrets);
      // Another process's runner won the claim: that process adopted it, not this one.
      if (started.driver !== null && started.driver !== started.child) continue;
      adoptions.push({ kind: 'adopted', id, environment, status, deadPid, runnerPid: started.child });
    } catch (error) {
      adoptions.push({ kind: 'failed', id, environment, status, deadPid, error: (error as Error).message });
    }
  }
  return adoptions;
}
