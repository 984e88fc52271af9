import { existsSync, readFileSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { environmentFault } from '../../core/errors.js';
import {
  linkIfAbsent,
  removeDeadTemps,
  unlinkQuietly,
  withClaimLock,
  writeTemp,
} from '../../platform/claim-lock.js';
import { currentProcess, isAlive, type ProcessIdentity } from '../../platform/process-identity.js';
import type { StateDir } from '../store/state-dir.js';
import { makeDir } from './make-dir.js';
import { liveRunner } from './runner-claim.js';

/** The record that an environment has a migration in flight. */
export interface ActiveClaim {
  migrationId: string;
  claimedAt: number;
  claimedBy: ProcessIdentity;
}

/**
 * The claim id `cutover topology down` holds while it stops an environment, so that no migration
 * runs beside it. It has no journal: the claim holds while the process that took it lives.
 */
export const downClaimId = 'down';

/** holder null: the claim is unreadable and being changed by another process at this moment. */
export type ClaimResult = { ok: true; notice?: string } | { ok: false; holder: ActiveClaim | null };

/** What a migration's journal says: ended, not ended, or nothing (it cannot be read). */
export type JournalVerdict = boolean | null;

/**
 * Claims an environment for one migration: at most one in flight per environment. The claim file
 * is fsync'd, then appears whole through link(2), which fails if it exists, so two concurrent
 * claims cannot both win. A claim whose migration ended, or whose claimer died before its journal
 * existed, is stale: it is replaced under the claim lock, so two processes cannot both replace it.
 * `isFinished` tells whether a migration's journal says it ended (null: unreadable);
 * `inFlight` finds a migration of the environment that has not ended, for a claim that cannot be
 * read (damaged, e.g. by a power loss): such a claim is stale unless one is in flight.
 */
export function claimEnvironment(
  stateDir: StateDir,
  environment: string,
  migrationId: string,
  isFinished: (id: string) => JournalVerdict,
  inFlight: () => string | null = () => null,
): ClaimResult {
  const file = stateDir.activeFile(environment);
  makeDir(path.dirname(file));
  removeDeadTemps(file);
  const claim: ActiveClaim = { migrationId, claimedAt: Date.now(), claimedBy: currentProcess() };
  const temp = writeTemp(file, `${JSON.stringify(claim)}\n`);
  try {
    if (linkIfAbsent(temp, file)) return { ok: true };
    return withClaimLock(
      file,
      () => {
        let notice: string | undefined;
        for (let tries = 0; tries < 3; tries++) {
          const found = inspectClaim(file);
          if (found.kind === 'claim') {
            if (!isStale(stateDir, environment, found.claim, isFinished))
              return { ok: false, holder: found.claim };
            unlinkSync(file);
          } else if (found.kind === 'unreadable') {
            const other = inFlight();
            if (other !== null) return { ok: false, holder: unknownClaimer(other) };
            notice = `${file} could not be read (${found.problem}) and no migration of ${environment} is in flight: replaced it`;
            unlinkSync(file);
          }
          if (linkIfAbsent(temp, file)) return notice === undefined ? { ok: true } : { ok: true, notice };
        }
        return { ok: false, holder: readClaim(stateDir, environment) };
      },
      () => ({ ok: false, holder: readClaim(stateDir, environment) }),
    );
  } finally {
    unlinkQuietly(temp);
  }
}

type FoundClaim =
  | { kind: 'none' }
  | { kind: 'claim'; claim: ActiveClaim }
  | { kind: 'unreadable'; problem: string };

/** Claims appear whole (fsync'd, then linked): one that does not parse was damaged on disk. */
function inspectClaim(file: string): FoundClaim {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { kind: 'none' };
    throw error;
  }
  try {
    const claim = JSON.parse(text) as ActiveClaim;
    if (typeof claim?.migrationId === 'string' && typeof claim.claimedBy?.pid === 'number')
      return { kind: 'claim', claim };
  } catch {
    // reported below
  }
  return { kind: 'unreadable', problem: text.trim() === '' ? 'it is empty' : 'it is not a claim' };
}

/** The holder of a damaged claim, found from its journal: who claimed it is not known. */
function unknownClaimer(migrationId: string): ActiveClaim {
  return { migrationId, claimedAt: 0, claimedBy: { pid: 0, startTime: null } };
}

export function readClaim(stateDir: StateDir, environment: string): ActiveClaim | null {
  const found = inspectClaim(stateDir.activeFile(environment));
  return found.kind === 'claim' ? found.claim : null;
}

/**
 * Releases the claim if it is this migration's (never another's). Returns false when it could not
 * (the lock busy for seconds, or the disk refused): the claim is then stale, since this
 * migration's journal says it ended, and the next claimer replaces it.
 */
export function releaseEnvironment(stateDir: StateDir, environment: string, migrationId: string): boolean {
  const file = stateDir.activeFile(environment);
  try {
    return withClaimLock(
      file,
      () => {
        if (readClaim(stateDir, environment)?.migrationId !== migrationId) return true;
        try {
          unlinkSync(file);
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
        }
        return true;
      },
      () => false,
    );
  } catch (error) {
    if (environmentFault(error)) return false;
    throw error;
  }
}

function isStale(
  stateDir: StateDir,
  environment: string,
  holder: ActiveClaim,
  isFinished: (id: string) => JournalVerdict,
): boolean {
  const paths = stateDir.migration(environment, holder.migrationId);
  const finished = existsSync(paths.journal) ? isFinished(holder.migrationId) : null;
  if (finished !== null) return finished;
  // No journal, or one that cannot be read (its first line never written, or damaged): the claim
  // holds only while its claimer or a runner of that migration lives.
  return !isAlive(holder.claimedBy) && liveRunner(paths.runner) === null;
}
