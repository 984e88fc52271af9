import { readFileSync } from 'node:fs';

/**
 * A process as recorded in a lock: its pid plus its start time (Linux), so a pid reused by an
 * unrelated process after a crash is not mistaken for the lock's holder.
 */
export interface ProcessIdentity {
  pid: number;
  startTime: string | null;
}

export function currentProcess(): ProcessIdentity {
  return processIdentity(process.pid);
}

export function processIdentity(pid: number): ProcessIdentity {
  return { pid, startTime: processStartTime(pid) };
}

export function isAlive(holder: ProcessIdentity): boolean {
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const stat = procStat(holder.pid);
  if (stat === null) return true; // no /proc: the signal check is all there is
  // A zombie has exited; it only waits to be reaped.
  if (stat[0] === 'Z' || stat[0] === 'X') return false;
  return holder.startTime === null || stat[19] === holder.startTime;
}

function processStartTime(pid: number): string | null {
  return procStat(pid)?.[19] ?? null;
}

/**
 * Fields of /proc/<pid>/stat from the third on (state, ppid, pgrp, …; the start time at 19), or
 * null without /proc or without that process.
 */
export function procStat(pid: number): string[] | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold spaces: split after it.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return null;
  }
}
