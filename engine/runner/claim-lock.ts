import { linkSync, readFileSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { currentProcess, isAlive, type ProcessIdentity } from './process-identity.js';

/** Longest a claimer waits for another process's critical section (they last microseconds). */
export const lockWaitMs = 2_000;

let tempCounter = 0;

/** A unique file beside `file`, written whole before it is linked anywhere. */
export function writeTemp(file: string, content: string): string {
  const temp = `${file}.${process.pid}.${Date.now()}.${tempCounter++}.tmp`;
  writeFileSync(temp, content, { mode: 0o600 });
  return temp;
}

/**
 * Runs `critical` holding a lock beside `file`, so that reading a claim and removing it (taking
 * over a stale claim, or releasing one's own) cannot interleave with another process doing the
 * same. Creating a claim needs no lock: link(2) fails if the file exists. The lock is a file linked
 * into place with its owner inside; a lock whose owner died is removed. A process never waits for
 * itself, and nobody waits longer than `lockWaitMs`: then `busy` answers instead.
 */
export function withClaimLock<T>(file: string, critical: () => T, busy: () => T): T {
  const lock = `${file}.lock`;
  const temp = writeTemp(lock, JSON.stringify(currentProcess()));
  try {
    const deadline = Date.now() + lockWaitMs;
    for (;;) {
      try {
        linkSync(temp, lock);
        break;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const owner = readOwner(lock);
      if (owner?.pid === process.pid) return busy();
      if (owner && !isAlive(owner)) {
        removeIfUnchanged(lock, owner);
        continue;
      }
      if (Date.now() > deadline) return busy();
      sleepSync(2);
    }
  } finally {
    unlinkQuietly(temp);
  }
  try {
    return critical();
  } finally {
    unlinkQuietly(lock);
  }
}

function readOwner(lock: string): ProcessIdentity | null {
  try {
    return JSON.parse(readFileSync(lock, 'utf8')) as ProcessIdentity;
  } catch {
    return null;
  }
}

/** Removes a dead owner's lock, unless it was replaced meanwhile (moved aside, checked, restored). */
function removeIfUnchanged(lock: string, owner: ProcessIdentity): void {
  let before: number;
  try {
    before = statSync(lock).ino;
  } catch {
    return;
  }
  const aside = `${lock}.${process.pid}.stale`;
  try {
    renameSync(lock, aside);
  } catch {
    return;
  }
  const moved = readOwner(aside);
  if (statSync(aside).ino !== before || moved?.pid !== owner.pid) {
    // A live process locked it in between: give it back (link fails only if yet another locked).
    try {
      linkSync(aside, lock);
    } catch {
      // the lock is taken again; the moved one's owner will find its lock gone and retry
    }
  }
  unlinkQuietly(aside);
}

/** link(2): creates `file` with the temp file's content, or returns false if `file` exists. */
export function linkIfAbsent(temp: string, file: string): boolean {
  try {
    linkSync(temp, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  }
}

export function unlinkQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
export function sleepSync(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}
