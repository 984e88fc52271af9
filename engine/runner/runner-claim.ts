import { closeSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { currentProcess, isAlive, type ProcessIdentity } from './process-identity.js';

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
 * Becomes the runner of a migration: only one process drives a migration at a time. A record left
 * by a dead runner is taken over; a live one wins and this returns false.
 */
export function claimRunner(file: string, record: Omit<RunnerRecord, 'process'>): RunnerRecord | null {
  const full: RunnerRecord = { ...record, process: currentProcess() };
  for (let tries = 0; tries < 3; tries++) {
    try {
      const fd = openSync(file, 'wx', 0o600);
      try {
        writeSync(fd, `${JSON.stringify(full)}\n`);
      } finally {
        closeSync(fd);
      }
      return full;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = readRunner(file);
    if (holder && isAlive(holder.process)) return null;
    try {
      unlinkSync(file);
    } catch {
      // another process removed it first; try again
    }
  }
  return null;
}

export function releaseRunner(file: string): void {
  const holder = readRunner(file);
  if (holder && holder.process.pid !== process.pid) return;
  try {
    unlinkSync(file);
  } catch {
    // already gone
  }
}

export type { ProcessIdentity };
