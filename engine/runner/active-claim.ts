import { existsSync, linkSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CutoverError } from '../errors.js';
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
 * is created with link(2), which fails if it exists, so two concurrent claims cannot both win.
 * A claim whose migration ended, or whose claimer died before its journal existed, is stale and is
 * replaced; `isFinished` tells whether a migration's journal says it ended.
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
  const temp = `${file}.${process.pid}.${migrationId}.tmp`;
  writeFileSync(temp, `${JSON.stringify(claim)}\n`);
  try {
    for (let tries = 0; tries < 3; tries++) {
      try {
        linkSync(temp, file);
        return { ok: true };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const holder = readClaim(stateDir, environment);
      if (holder === null) continue; // released meanwhile
      if (!isStale(stateDir, environment, holder, isFinished)) return { ok: false, holder };
      releaseEnvironment(stateDir, environment, holder.migrationId);
    }
    const holder = readClaim(stateDir, environment);
    if (holder) return { ok: false, holder };
    throw new CutoverError('INTERNAL', `could not claim environment ${environment}`);
  } finally {
    unlinkSync(temp);
  }
}

export function readClaim(stateDir: string, environment: string): ActiveClaim | null {
  try {
    return JSON.parse(readFileSync(activePath(stateDir, environment), 'utf8')) as ActiveClaim;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (error instanceof SyntaxError) return null; // a torn claim is no claim
    throw error;
  }
}

/** Releases the claim if it is this migration's (never another's). */
export function releaseEnvironment(stateDir: string, environment: string, migrationId: string): void {
  const holder = readClaim(stateDir, environment);
  if (holder?.migrationId !== migrationId) return;
  try {
    unlinkSync(activePath(stateDir, environment));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
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
