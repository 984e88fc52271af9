/**
 * For the haproxy driver's tests: the real haproxy (Debian's 2.6) that the driver starts in a
 * state directory, stopped by its master's pid; the runtime API as an operator would use it
 * (`disable server`, `set server … weight`).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { haproxyFiles } from '../../engine/drivers/haproxy-process.js';
import { runtimeCommand } from '../../engine/drivers/haproxy-runtime.js';
import { StateDir } from '../../engine/store/state-dir.js';
import { requireProgram } from '../support/balancers.js';
import { waitGone } from '../support/processes.js';
import type { Resources } from '../support/resources.js';

/** Fails the file, saying how to install it, when haproxy is not on PATH. */
export function requireHaproxy(): void {
  requireProgram('haproxy', ['-v'], 'haproxy');
}

/** The pid of the haproxy master the driver started for `stateDir`, or null. */
export function haproxyMaster(stateDir: string): number | null {
  try {
    const pid = Number(readFileSync(haproxyFiles(StateDir.at(stateDir)).pid, 'utf8').trim());
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

/** The worker processes of a master (its children), from /proc. */
export function haproxyWorkers(master: number): number[] {
  const children = spawnSync('pgrep', ['-P', String(master)], { encoding: 'utf8' }).stdout;
  return children
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map(Number);
}

/** Stops the haproxy of `stateDir` (master and workers), by pid, at cleanup. */
export function stopHaproxyAtCleanup(resources: Resources, stateDir: string): void {
  resources.add(async () => {
    const master = haproxyMaster(stateDir);
    if (master === null) return;
    const workers = haproxyWorkers(master);
    process.kill(master, 'SIGKILL');
    for (const pid of workers) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone with its master
      }
    }
    await waitGone(master);
  });
}

/** Kills the haproxy of `stateDir`, master and workers, as a crash would. */
export async function killHaproxy(stateDir: string): Promise<void> {
  const master = haproxyMaster(stateDir);
  if (master === null) throw new Error(`no haproxy runs for ${stateDir}`);
  const workers = haproxyWorkers(master);
  for (const pid of [master, ...workers]) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch (error) {
      // A worker may go with its master before its own kill (ci56: ESRCH).
      if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
    }
  }
  for (const pid of [master, ...workers]) await waitGone(pid);
}

/** A runtime API command on the haproxy of `stateDir`, as an operator would send it. */
export function operatorCommand(stateDir: string, command: string): Promise<string> {
  return runtimeCommand(haproxyFiles(StateDir.at(stateDir)).socket, command);
}
