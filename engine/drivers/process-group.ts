import { readdirSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { type ProcessIdentity, procStat } from '../../platform/process-identity.js';

/** After SIGKILL, how long a process group may take to go before stopping it counts as failed. */
export const killWaitMs = 5_000;
const pollIntervalMs = 25;

export type StopOutcome = 'not-running' | 'stopped' | 'killed';

/**
 * Stops the process group led by `leader` (a process started detached, so its pgid is its pid):
 * SIGTERM to the group, SIGKILL after `graceMs` if any of it is left, then waits until it is gone.
 * Stopping a group that is gone is a no-op. Rejects when the signal aborts the wait (the signals
 * already sent stand) or when the group outlives SIGKILL by killWaitMs.
 */
export async function stopProcessGroup(
  leader: ProcessIdentity,
  graceMs: number,
  signal?: AbortSignal,
): Promise<StopOutcome> {
  if (!groupRunning(leader)) return 'not-running';
  signalGroup(leader.pid, 'SIGTERM');
  return killAfter(leader, graceMs, signal);
}

/**
 * Waits for the process group led by `leader` to end by itself (nothing is sent to it first: a
 * replica's log pump ends with its replica's output), SIGKILL after `graceMs`; as stopProcessGroup.
 */
export async function awaitProcessGroup(
  leader: ProcessIdentity,
  graceMs: number,
  signal?: AbortSignal,
): Promise<StopOutcome> {
  if (!groupRunning(leader)) return 'not-running';
  return killAfter(leader, graceMs, signal);
}

async function killAfter(
  leader: ProcessIdentity,
  graceMs: number,
  signal?: AbortSignal,
): Promise<StopOutcome> {
  if (await goneWithin(leader, graceMs, signal)) return 'stopped';
  signalGroup(leader.pid, 'SIGKILL');
  if (await goneWithin(leader, killWaitMs, signal)) return 'killed';
  throw new Error(`process group ${leader.pid} still runs ${killWaitMs} ms after SIGKILL`);
}

/**
 * Whether any process of the group `leader` started still runs. A pid is not reused while a process
 * group holds it as its id, so when a process with the leader's pid but another start time runs,
 * the group is gone. Zombies do not count: an orphan that died waits for init to reap it, which in
 * some containers takes over a second, and it holds nothing.
 */
export function groupRunning(leader: ProcessIdentity): boolean {
  const stat = procStat(leader.pid);
  if (stat !== null && leader.startTime !== null && stat[19] !== leader.startTime) return false;
  if (!signalGroup(leader.pid, 0)) return false;
  if (process.platform !== 'linux') return true;
  // The leader itself still runs in its group: the common case while a stop waits, answered without
  // reading every process of the machine (this is polled, during the cutover, beside the traffic).
  if (stat !== null && stat[0] !== 'Z' && stat[0] !== 'X' && Number(stat[2]) === leader.pid) return true;
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return true; // no /proc: kill(-pgid, 0) is all there is, zombies included
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    // "pid (comm) state ppid pgrp …"; comm may hold spaces and parentheses: split after the last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === leader.pid && state !== 'Z' && state !== 'X') return true;
  }
  return false;
}

function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false; // ESRCH: nothing left in the group
  }
}

async function goneWithin(leader: ProcessIdentity, ms: number, signal?: AbortSignal): Promise<boolean> {
  const until = Date.now() + ms;
  while (groupRunning(leader)) {
    if (Date.now() >= until) return false;
    await sleep(pollIntervalMs, undefined, signal ? { signal } : undefined);
  }
  return true;
}
