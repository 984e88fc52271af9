/**
 * Starting a balancer that its driver runs itself (haproxy, Caddy): detached, so that it outlives
 * the runner as the built-in router does, its output appended to a file in the state directory,
 * its control socket there. Never a system service.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fstatSync, mkdirSync, openSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { spawnFailure } from './spawn-failure.js';
import { PermanentDriverError } from './types.js';

/** Longest unix socket path Linux accepts (sun_path is 108 bytes with its NUL). */
const maxSocketPathBytes = 107;

/** A socket path the balancer can bind, or a permanent error saying what to do; `what` names the socket. */
export function refuseLongSocketPath(socket: string, what: string): void {
  if (Buffer.byteLength(socket) > maxSocketPathBytes)
    throw new PermanentDriverError(
      `${what} ${socket} is longer than the ${maxSocketPathBytes} bytes a unix socket path may have: use a state directory with a shorter path (--state-dir, CUTOVER_STATE_DIR)`,
    );
}

export interface DetachedProcess {
  child: ChildProcess;
  pid: number | undefined;
  /** Whether it has exited since it started. */
  exited(): boolean;
  /** The output file's size before the start: what this process said comes after. */
  outputFrom: number;
}

export interface DetachedSettings {
  /** Created if missing; the output file is in it. */
  dir: string;
  output: string;
  env: NodeJS.ProcessEnv;
  cwd?: string;
  /** The line when `bin` is not found: what to install, or which setting names the program. */
  notFound: string;
}

/**
 * Starts `bin` detached (its own process group, not waited for), stdout and stderr appended to
 * `settings.output`. Resolves once it runs; rejects with a permanent error when it cannot start.
 */
export async function startDetached(
  bin: string,
  args: readonly string[],
  settings: DetachedSettings,
): Promise<DetachedProcess> {
  mkdirSync(settings.dir, { recursive: true });
  const out = openSync(settings.output, 'a');
  const outputFrom = fstatSync(out).size;
  let child: ChildProcess;
  try {
    child = spawn(bin, args, {
      ...(settings.cwd !== undefined ? { cwd: settings.cwd } : {}),
      detached: true,
      stdio: ['ignore', out, out],
      env: settings.env,
    });
  } finally {
    closeSync(out); // the child has its own copy
  }
  child.unref();
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const pid = await new Promise<number | undefined>((resolve, reject) => {
    child.once('spawn', () => resolve(child.pid));
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new PermanentDriverError(
          error.code === 'ENOENT' ? settings.notFound : `could not start ${bin}: ${spawnFailure(error)}`,
        ),
      ),
    );
  });
  return { child, pid, exited: () => exited, outputFrom };
}

/**
 * Looks every `intervalMs` until `look` gives a value, `stop` says to give up (the process exited),
 * or `timeoutMs` passed; null when it gave none. Looks once more at the deadline.
 */
export async function pollFor<T>(
  look: () => Promise<T | null>,
  settings: { timeoutMs: number; intervalMs: number; signal?: AbortSignal; stop?: () => boolean },
): Promise<T | null> {
  const deadline = Date.now() + settings.timeoutMs;
  const sleepOptions = settings.signal ? { signal: settings.signal } : undefined;
  for (;;) {
    settings.signal?.throwIfAborted();
    const seen = await look();
    if (seen !== null) return seen;
    if (settings.stop?.() || Date.now() > deadline) return null;
    await sleep(settings.intervalMs, undefined, sleepOptions);
  }
}

/** What `file` got after byte `offset` ('' when it cannot be read): what a process that did not start said. */
export async function outputSince(file: string, offset: number): Promise<string> {
  return (await readFile(file).catch(() => Buffer.alloc(0))).subarray(offset).toString('utf8');
}
