/** Child processes of the tests, watched and stopped by pid. */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

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
