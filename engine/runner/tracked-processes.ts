import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { sleepSync, unlinkQuietly } from '../../platform/claim-lock.js';
import { isAlive, type ProcessIdentity, processIdentity } from '../../platform/process-identity.js';
import { groupRunning } from '../drivers/process-group.js';

/** Longest the next runner waits for a killed leftover process group to be gone. */
const leftoverKillWaitMs = 5_000;

/**
 * Process groups started by driver calls (exec scripts), recorded while they run. A script runs in
 * its own process group and outlives a runner killed with SIGKILL; left alone it would finish the
 * stage a second time alongside the stage re-run by the next runner, or undo that runner's work.
 */
export function processTracker(dir: string): (pid: number) => () => void {
  return (pid) => {
    const file = path.join(dir, `${pid}.json`);
    try {
      mkdirSync(dir, { recursive: true });
      writeFileSync(file, JSON.stringify(processIdentity(pid)));
    } catch {
      // A full or read-only disk: the process runs untracked (only a crash of this runner would
      // leave it behind). Failing here would leave it running with no one waiting for it.
      unlinkQuietly(file);
      return () => undefined;
    }
    return () => unlinkQuietly(file);
  };
}

/** Kills every recorded process group that still runs (the previous runner died); returns their pids. */
export function stopLeftoverProcesses(dir: string): number[] {
  if (!existsSync(dir)) return [];
  const stopped: number[] = [];
  for (const name of readdirSync(dir)) {
    const file = path.join(dir, name);
    let holder: ProcessIdentity;
    try {
      holder = JSON.parse(readFileSync(file, 'utf8')) as ProcessIdentity;
    } catch {
      unlinkQuietly(file);
      continue;
    }
    if (isAlive(holder)) {
      for (const target of [-holder.pid, holder.pid]) {
        try {
          process.kill(target, 'SIGKILL');
        } catch {
          // the group or the process is already gone
        }
      }
      // Until the whole group is gone, not just its leader: a killed PostgreSQL's children outlive
      // the postmaster by a moment and hold its shared memory and port (ci25 saw the group still
      // running right after this returned).
      const deadline = Date.now() + leftoverKillWaitMs;
      while (groupRunning(holder) && Date.now() < deadline) sleepSync(20);
      stopped.push(holder.pid);
    }
    unlinkQuietly(file);
  }
  return stopped;
}
