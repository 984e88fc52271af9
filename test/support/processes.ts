/** Child processes of the tests, watched and stopped by pid. */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isAlive, type ProcessIdentity, procStat } from '../../platform/process-identity.js';

/** Whether a process of this pid exists (a zombie not yet reaped counts). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether a process of this pid runs: not a zombie. An orphan that died (its parent, a runner, was
 * killed) waits for init to reap it, which in some containers takes a while; it holds nothing.
 */
export function running(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return false;
  }
  const state = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  return state !== 'Z' && state !== 'X';
}

/** Waits (bounded) until no process has this pid. */
export async function waitGone(pid: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) throw new Error(`process ${pid} is still running`);
    await sleep(50);
  }
}

/** Signals a child of this process (SIGKILL by default) and waits for its exit; nothing if it is gone. */
export async function killChild(child: ChildProcess, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = once(child, 'exit');
  process.kill(child.pid, signal);
  await exited;
}

/**
 * A child's exit, once its piped stdout and stderr have also ended: 'exit' can come before the
 * last output is read (ci on 2026-11-27: a server's one-line refusal was read as ''), so output
 * read at 'exit' may be short. Bounded: a grandchild holding a pipe open does not keep it waiting
 * past `drainMs` after the exit.
 */
export function exitedAndDrained(
  child: ChildProcess,
  drainMs = 5_000,
): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  const ended = (stream: NodeJS.ReadableStream | null) =>
    stream === null || (stream as { readableEnded?: boolean }).readableEnded
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
          stream.once('end', () => resolve());
          stream.once('close', () => resolve());
        });
  const streams = Promise.all([ended(child.stdout), ended(child.stderr)]);
  return new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      const timer = setTimeout(() => resolve({ code, signal }), drainMs);
      void streams.then(() => {
        clearTimeout(timer);
        resolve({ code, signal });
      });
    });
  });
}

/**
 * SIGKILLs a process (or, with `group`, its process group) named by a record in a state directory,
 * only while that pid is still the recorded process: its start time matches. A record outlives
 * its process, and this machine reuses pids (pid_max 32768, and a CI run starts thousands), so a
 * cleanup that killed a recorded pid as it stood could kill another test's server or runner (a
 * likely cause of the lone flakes each fresh-clone run found). Never this process. True when it
 * signalled.
 */
export function killRecorded(identity: ProcessIdentity, options: { group?: boolean } = {}): boolean {
  if (identity.pid === process.pid) return false;
  if (options.group) {
    // A group outlives its leader, and Linux frees no pid still some group's id: while the group
    // has members its leader's pid is not reused. So a group is signalled unless its pid now names
    // another process (then the group had emptied and the pid was freed).
    const stat = procStat(identity.pid);
    if (stat !== null && identity.startTime !== null && stat[19] !== identity.startTime) return false;
  } else if (!isAlive(identity)) {
    return false;
  }
  try {
    process.kill(options.group ? -identity.pid : identity.pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}
