import { existsSync, mkdirSync, readFileSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { linkIfAbsent, unlinkQuietly, withClaimLock, writeTemp } from './claim-lock.js';
import { activePath, migrationPaths } from './paths.js';
import { currentProcess, isAlive, type ProcessIdentity } from './process-identity.js';

/** The record that an environment has a migration in flight. */
export interface ActiveClaim {
  migrationId: string;
  claimedAt: number;
  claimedBy: ProcessIdentity;
}

export type ClaimResult = { ok: true } | { ok: false; holder: ActiveClaim };

/**
 * Claims an environment for one migration: at most one in flight per environment. The claim file
 * appears whole through link(2), which fails if it exists, so two concurrent claims cannot both
 * win. A claim whose migration ended, or whose claimer died before its journal existed, is stale:
 * it is replaced under the claim lock, so two processes cannot both replace it.
 * `isFinished` tells whether a migration's journal says it ended.
 */
export function claimEnvironment(
  stateDir: string,
  environment: string,
  migrationId: string,
  isFinished: (id: string) => boolean,
): ClaimResult {
  const file = activePath(stateDir, environment);
  mkdirSync(path.dirname(file), { recursive: true });
  const claim: ActiveClaim = { migrationId, claimedAt: Date.now(), claimedBy: currentProcess() };
  const temp = writeTemp(file, `${JSON.stringify(claim)}\n`);
  try {
    if (linkIfAbsent(temp, file)) return { ok: true };
    return withClaimLock(
      file,
      () => {
        for (let tries = 0; tries < 3; tries++) {
          const holder = readClaim(stateDir, environment);
          if (holder !== null && !isStale(stateDir, environment, holder, isFinished))
            return { ok: false, holder };
          if (holder !== null) unlinkSync(file);
          if (linkIfAbsent(temp, file)) return { ok: true };
        }
        return { ok: false, holder: readClaim(stateDir, environment) ?? claim };
      },
      () => ({ ok: false, holder: readClaim(stateDir, environment) ?? claim }),
    );
  } finally {
    unlinkQuietly(temp);
  }
}

export function readClaim(stateDir: string, environment: string): ActiveClaim | null {
  try {
    return JSON.parse(readFileSync(activePath(stateDir, environment), 'utf8')) as ActiveClaim;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    if (error instanceof SyntaxError) return null; // claims appear whole; this cannot be a claim
    throw error;
  }
}

/** Releases the claim if it is this migration's (never another's). */
export function releaseEnvironment(stateDir: string, environment: string, migrationId: string): void {
  const file = activePath(stateDir, environment);
  withClaimLock(
    file,
    () => {
      if (readClaim(stateDir, environment)?.migrationId === migrationId) unlinkQuietly(file);
    },
    // Busy for seconds: leave it; once this migration's journal says it ended, the claim is stale.
    () => undefined,
  );
}

function isStale(
  stateDir: string,
  environment: string,
  holder: ActiveClaim,
  isFinished: (id: string) => boolean,
): boolean {
  const journal = migrationPaths(stateDir, environment, holder.migrationId).journal;
  if (!existsSync(journal)) return !isAlive(holder.claimedBy);
  return isFinished(holder.migrationId);
}
