import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { type ProcessIdentity, processIdentity } from '../../platform/process-identity.js';
import { logPumpEnv } from './process-spawn.js';

/**
 * Replicas of a slot that its slot.json does not record. startReplicas spawns a replica and then
 * records it; a runner SIGKILLed between the two leaves the replica running, and stopping the slot
 * by its record (the provision that resume runs again, retire) would never stop it: it would hold
 * its port and memory for good. Every replica carries its slot's data directory in its environment
 * (`CUTOVER_DATA_DIR`, set by the driver after the component's own env), which names this slot
 * and no other, so on Linux the leaders of such process groups (replicas start detached, each
 * leading its own group) are found in /proc. Elsewhere none are found: the record is all there is.
 */
export function unrecordedReplicas(slotDir: string, recorded: ReadonlySet<number>): ProcessIdentity[] {
  const tag = `CUTOVER_DATA_DIR=${path.join(slotDir, 'data')}`;
  return groupLeadersWhere((pid, environ) => !recorded.has(pid) && environ.includes(tag));
}

/**
 * The log pumps (process-spawn.ts) writing the logs of the slot in `slotDir`, recorded or not: each
 * names the log it writes in its environment (`CUTOVER_LOG_PUMP`) and leads its own group. Linux
 * only, as above.
 */
export function slotLogPumps(slotDir: string): ProcessIdentity[] {
  const prefix = `${logPumpEnv}=${slotDir}${path.sep}`;
  return groupLeadersWhere((_pid, environ) => environ.some((entry) => entry.startsWith(prefix)));
}

/** Running leaders of their process groups whose environment (its `NAME=value` entries) passes `wanted`. */
function groupLeadersWhere(wanted: (pid: number, environ: string[]) => boolean): ProcessIdentity[] {
  if (process.platform !== 'linux') return [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return []; // no /proc to look in
  }
  const found: ProcessIdentity[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (!leadsItsGroup(pid)) continue;
    let environ: string;
    try {
      environ = readFileSync(`/proc/${pid}/environ`, 'utf8');
    } catch {
      continue; // gone, or another user's
    }
    if (wanted(pid, environ.split('\0'))) found.push(processIdentity(pid));
  }
  return found;
}

/** Whether the process runs (not a zombie) and leads its own process group. */
function leadsItsGroup(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return state !== 'Z' && state !== 'X' && Number(pgrp) === pid;
  } catch {
    return false; // exited while we looked
  }
}
