/**
 * A command a driver runs to its end (an exec script, a process-driver command): spawned detached,
 * so it leads a process group of its own; tracked, so that a runner that dies meanwhile has it
 * stopped by the next one; its group stopped at its timeout or when the call is aborted.
 */
import type { ChildProcess } from 'node:child_process';
import { type ProcessIdentity, processIdentity } from '../../platform/process-identity.js';
import { stopProcessGroup } from './process-group.js';
import type { DriverCallOptions } from './types.js';

/** Between SIGTERM and SIGKILL to a command's process group. */
export const killGraceMs = 2_000;

/** How a supervised command ended. */
export interface GroupRun {
  /** Why cutover stopped the command, if it did. */
  stopped?: 'timeout' | 'abort';
  exitCode: number | null;
  exitSignal: NodeJS.Signals | null;
  spawnError?: Error;
}

export interface SupervisedGroup {
  /** Resolves once the command exited (or could not start), the timer and the abort listener gone. */
  ended: Promise<void>;
  /** The group being stopped (settles once it is gone, never rejects), if it is. */
  stopping(): Promise<void> | undefined;
  /** Stops what is left of the group (a command's children holding its output open), unless it is being stopped. */
  stopLeft(): Promise<void> | undefined;
  /** Ends the tracking: call once the group is gone or its output closed. */
  untrack(): void;
}

/** Supervises `child` (spawned with `detached: true`), writing how it ended into `run`. */
export function superviseGroup(
  child: ChildProcess,
  run: GroupRun,
  timeoutMs: number,
  options: DriverCallOptions,
): SupervisedGroup {
  const pid = child.pid;
  // Recorded at the start, so a pid reused after the group is gone is never signalled.
  const leader: ProcessIdentity | undefined = pid !== undefined ? processIdentity(pid) : undefined;
  const untrack = pid !== undefined ? options.trackProcess?.(pid) : undefined;
  let stopping: Promise<void> | undefined;
  const stopGroup = () => {
    // SIGTERM to the group, SIGKILL killGraceMs later if any of it is left; settles once it is gone.
    if (leader !== undefined && !stopping)
      stopping = stopProcessGroup(leader, killGraceMs).then(
        () => undefined,
        () => undefined,
      );
  };
  const stop = (why: 'timeout' | 'abort') => {
    if (leader === undefined || stopping) return;
    run.stopped = why;
    stopGroup();
  };
  const timer = setTimeout(() => stop('timeout'), timeoutMs);
  const onAbort = () => stop('abort');
  options.signal.addEventListener('abort', onAbort, { once: true });
  if (options.signal.aborted) onAbort();
  const ended = new Promise<void>((resolve) => {
    const end = () => {
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      resolve();
    };
    child.on('error', (error) => {
      run.spawnError = error;
      end();
    });
    child.on('exit', (code, signal) => {
      run.exitCode = code;
      run.exitSignal = signal;
      end();
    });
  });
  return {
    ended,
    stopping: () => stopping,
    stopLeft: () => {
      stopGroup();
      return stopping;
    },
    untrack: () => untrack?.(),
  };
}
