import { readFileSync } from 'node:fs';
import { StateLayout } from '../core/state-layout.js';
import { linkIfAbsent, unlinkQuietly, withClaimLock, writeTemp } from '../platform/claim-lock.js';
import { currentProcess, isAlive } from '../platform/process-identity.js';

/**
 * How to reach the router of a state directory: `<stateDir>/router/router.json`, mode 0600. It
 * appears whole (link(2) of a file written first) and names its process by pid and start time, so a
 * record left by a router killed with -9 is recognised as stale and replaced by the next router.
 */
export interface RouterRecord {
  pid: number;
  /** Field 22 of /proc/<pid>/stat; null where there is no /proc. */
  startTime: string | null;
  /** Control API: http://<host>:<port>, bearer `token`. */
  port: number;
  /** The control listener's host (`--control-listen`); absent: 127.0.0.1. */
  host?: string;
  token: string;
  startedAt: number;
}

export function routerRecordPath(stateDir: string): string {
  return new StateLayout(stateDir).routerRecordFile();
}

export function readRouterRecord(stateDir: string): RouterRecord | null {
  try {
    return JSON.parse(readFileSync(routerRecordPath(stateDir), 'utf8')) as RouterRecord;
  } catch {
    return null;
  }
}

/** The record of the router serving this state directory, or null when none runs. */
export function liveRouterRecord(stateDir: string): RouterRecord | null {
  const record = readRouterRecord(stateDir);
  return record && isAlive({ pid: record.pid, startTime: record.startTime }) ? record : null;
}

/**
 * Becomes the router of a state directory: one at a time, since two would fight over the same
 * ports. Returns the holder's record when another live router has it.
 */
export function claimRouterRecord(
  stateDir: string,
  control: Pick<RouterRecord, 'port' | 'token' | 'host'>,
): { claimed: true; record: RouterRecord } | { claimed: false; holder: RouterRecord | null } {
  const file = routerRecordPath(stateDir);
  const { pid, startTime } = currentProcess();
  const record: RouterRecord = { pid, startTime, ...control, startedAt: Date.now() };
  const temp = writeTemp(file, `${JSON.stringify(record)}\n`);
  try {
    if (linkIfAbsent(temp, file)) return { claimed: true, record };
    return withClaimLock(
      file,
      () => {
        const holder = readRouterRecord(stateDir);
        if (holder && isAlive({ pid: holder.pid, startTime: holder.startTime }))
          return { claimed: false as const, holder };
        // Dead, or unreadable (records appear whole, so unreadable is damaged): replace it.
        unlinkQuietly(file);
        return linkIfAbsent(temp, file)
          ? { claimed: true as const, record }
          : { claimed: false as const, holder: readRouterRecord(stateDir) };
      },
      () => ({ claimed: false as const, holder: readRouterRecord(stateDir) }),
    );
  } finally {
    unlinkQuietly(temp);
  }
}

export function releaseRouterRecord(stateDir: string): void {
  const file = routerRecordPath(stateDir);
  withClaimLock(
    file,
    () => {
      if (readRouterRecord(stateDir)?.pid === process.pid) unlinkQuietly(file);
    },
    () => undefined,
  );
}
