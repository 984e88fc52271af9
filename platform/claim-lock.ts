import { randomBytes } from 'node:crypto';
import {
  closeSync,
  fsyncSync,
  linkSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  symlinkSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import path from 'node:path';
import { currentProcess, isAlive, type ProcessIdentity } from './process-identity.js';

/** Longest a claimer waits for another process's critical section (they last microseconds). */
export const lockWaitMs = 2_000;
/** Pause between two looks at a lock held by a live process. */
const lockPollMs = 2;

/**
 * A unique file beside `file`, written whole and fsync'd before it is linked anywhere: a claim
 * linked into place must survive a power loss whole, or not at all. A write that fails (a full or
 * read-only disk) leaves no temp file behind.
 */
export function writeTemp(file: string, content: string): string {
  // The pid lets removeDeadTemps find a dead writer's; the random part keeps two writes of one
  // process apart (no counter to keep: 'wx' refuses to reuse a name in the 2^-48 case).
  const temp = `${file}.${process.pid}.${Date.now()}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(temp, 'wx', 0o600);
  try {
    const bytes = Buffer.from(content, 'utf8');
    for (let written = 0; written < bytes.length; ) {
      written += writeSync(fd, bytes, written, bytes.length - written, written);
    }
    fsyncSync(fd);
  } catch (error) {
    closeSync(fd);
    unlinkQuietly(temp);
    throw error;
  }
  closeSync(fd);
  return temp;
}

/**
 * Removes the temp files of `file` (`<file>.<pid>….tmp`) whose writer has died: a process killed
 * between writing one and linking or renaming it into place. Its content was never acknowledged.
 */
export function removeDeadTemps(file: string): void {
  const dir = path.dirname(file);
  const prefix = `${path.basename(file)}.`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = /^(\d+)(\..*)?\.tmp$/.exec(name.slice(prefix.length))?.[1];
    if (pid !== undefined && !isAlive({ pid: Number(pid), startTime: null })) {
      unlinkQuietly(path.join(dir, name));
    }
  }
}

/**
 * Runs `critical` holding a lock beside `file`, so that reading a claim and removing it (taking
 * over a stale claim, or releasing one's own) cannot interleave with another process doing the
 * same. Creating a claim needs no lock: link(2) fails if the file exists. A process never waits for
 * itself, and nobody waits longer than `lockWaitMs`: then `busy` answers instead.
 *
 * The lock is a symbolic link whose target names its owner (pid and start time): symlink(2) makes
 * it whole in one call, with no temp file and no data block, so a lock can be taken (and a claim
 * released) on a full disk. Invariants: a live owner's lock is removed only by its owner; a dead
 * owner's lock only by one breaker at a time (see `breakStaleLock`), so a lock re-taken by a live
 * process while another looked at the dead one is never removed.
 */
export function withClaimLock<T>(file: string, critical: () => T, busy: () => T): T {
  const lock = `${file}.lock`;
  const me = ownerName(currentProcess());
  const deadline = Date.now() + lockWaitMs;
  for (;;) {
    if (symlinkIfAbsent(me, lock)) break;
    const owner = readOwner(lock);
    if (owner === me) return busy();
    if (owner !== null && isDead(owner)) {
      breakStaleLock(lock, owner);
      continue;
    }
    if (Date.now() > deadline) return busy();
    sleepSync(lockPollMs);
  }
  try {
    return critical();
  } finally {
    // Only our own: nobody else removes a live owner's lock, so what reads as ours is ours.
    if (readOwner(lock) === me) unlinkQuietly(lock);
  }
}

/**
 * Removes a dead owner's lock, holding `<lock>.break` so that breakers go one at a time. Under it
 * the lock can only still be the dead owner's (nobody else removes it, and nobody can link over
 * it) or gone, or another's that a breaker before us let in: it is read again, and removed only
 * when it still names the dead owner. A pid and start time name one process, never a later one.
 */
function breakStaleLock(lock: string, deadOwner: string): void {
  const breaker = `${lock}.break`;
  const me = ownerName(currentProcess());
  if (!symlinkIfAbsent(me, breaker)) {
    // A breaker killed in its few microseconds leaves its mark: dead, it holds nothing.
    const other = readOwner(breaker);
    if (other !== null && other !== me && isDead(other)) unlinkQuietly(breaker);
    else sleepSync(lockPollMs);
    return;
  }
  try {
    if (readOwner(lock) === deadOwner) unlinkQuietly(lock);
  } finally {
    unlinkQuietly(breaker);
  }
}

function ownerName(owner: ProcessIdentity): string {
  return `${owner.pid}:${owner.startTime ?? ''}`;
}

function parseOwner(name: string): ProcessIdentity {
  const [pid, startTime] = name.split(':');
  return { pid: Number(pid), startTime: startTime ? startTime : null };
}

/** A lock that names nobody (damaged): nobody can hold it, so it is stale. */
const noOwner = '0:';

/**
 * The owner a lock names, or null when there is no lock. A regular file is a lock of an earlier
 * cutover (its owner as JSON); anything unreadable names nobody.
 */
function readOwner(lock: string): string | null {
  try {
    const owner = readlinkSync(lock);
    return /^[1-9]\d*:\d*$/.test(owner) ? owner : noOwner;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return null;
    if (code !== 'EINVAL') return noOwner;
  }
  try {
    const owner = JSON.parse(readFileSync(lock, 'utf8')) as ProcessIdentity;
    return Number.isSafeInteger(owner.pid) && owner.pid > 0 ? ownerName(owner) : noOwner;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? null : noOwner;
  }
}

function isDead(owner: string): boolean {
  return owner === noOwner || !isAlive(parseOwner(owner));
}

function symlinkIfAbsent(target: string, file: string): boolean {
  try {
    symlinkSync(target, file);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  }
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
