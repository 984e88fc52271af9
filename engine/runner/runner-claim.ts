import { readFileSync, unlinkSync } from 'node:fs';
import { environmentFault } from '../../core/errors.js';
import {
  linkIfAbsent,
  removeDeadTemps,
  unlinkQuietly,
  withClaimLock,
  writeTemp,
} from '../../platform/claim-lock.js';
import { currentProcess, isAlive, type ProcessIdentity } from '../../platform/process-identity.js';

/** The process driving a migration, and how to reach it. */
export interface RunnerRecord {
  migrationId: string;
  process: ProcessIdentity;
  /** Loopback control endpoint: http://127.0.0.1:<port>, with a bearer token. */
  port: number;
  token: string;
  startedAt: number;
}

export function readRunner(file: string): RunnerRecord | null {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as RunnerRecord;
  } catch {
    return null;
  }
}

/** The live runner of a migration, or null when none is (a crash leaves a stale record). */
export function liveRunner(file: string): RunnerRecord | null {
  const record = readRunner(file);
  return record && isAlive(record.process) ? record : null;
}

/**
 * Becomes the runner of a migration: only one process drives a migration at a time. The record
 * appears whole through link(2); a dead runner's record is replaced under the claim lock. Returns
 * null when another live process drives it.
 */
export function claimRunner(file: string, record: Omit<RunnerRecord, 'process'>): RunnerRecord | null {
  const full: RunnerRecord = { ...record, process: currentProcess() };
  removeDeadTemps(file);
  let temp: string;
  try {
    temp = writeTemp(file, `${JSON.stringify(full)}\n`);
  } catch (error) {
    // The temp file is gone again: name the record, not it.
    throw environmentFault(error, `writing ${file}`) ?? error;
  }
  try {
    if (linkIfAbsent(temp, file)) return full;
    return withClaimLock(
      file,
      () => {
        const holder = readRunner(file);
        if (holder && isAlive(holder.process)) return null;
        if (holder) unlinkSync(file);
        return linkIfAbsent(temp, file) ? full : null;
      },
      () => null,
    );
  } finally {
    unlinkQuietly(temp);
  }
}

/**
 * Removes this process's runner record. A record it cannot remove (the disk refused) is harmless
 * once this process has exited: a record of a dead process names no runner.
 */
export function releaseRunner(file: string): void {
  try {
    withClaimLock(
      file,
      () => {
        if (readRunner(file)?.process.pid === process.pid) unlinkQuietly(file);
      },
      () => undefined,
    );
  } catch (error) {
    if (!environmentFault(error)) throw error;
  }
}

export type { ProcessIdentity };
