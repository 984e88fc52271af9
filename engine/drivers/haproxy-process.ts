/**
 * The haproxy process of a state directory: started by the driver in master-worker mode (`-W`),
 * detached, from `haproxy/haproxy.cfg`, its master's pid in `haproxy/haproxy.pid` and what it
 * prints in `haproxy/haproxy.out`; never a system service. It outlives the runner, as the built-in
 * router does: traffic flows while runners come and go. A reload (SIGUSR2 to the master) is only
 * for a change of listeners or backends; weights and servers change through the runtime API.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inheritedEnv } from '../secrets/resolve-secrets.js';
import type { StateDir } from '../store/state-dir.js';
import { outputSince, pollFor, refuseLongSocketPath, startDetached } from './balancer-process.js';
import { HaproxyUnreachableError, showInfo } from './haproxy-runtime.js';
import { PermanentDriverError } from './types.js';

/** Longest haproxy may take to answer on its socket after a start or a reload. */
export const haproxyStartTimeoutMs = 10_000;
const pollIntervalMs = 20;
const notFound = (bin: string) =>
  `${bin} not found: is haproxy installed and on PATH (Debian: apt-get install haproxy)?`;

export interface HaproxyFiles {
  dir: string;
  config: string;
  record: string;
  pid: string;
  socket: string;
  output: string;
}

export function haproxyFiles(stateDir: StateDir): HaproxyFiles {
  const dir = stateDir.haproxyDir();
  return {
    dir,
    config: path.join(dir, 'haproxy.cfg'),
    record: path.join(dir, 'routes.json'),
    pid: path.join(dir, 'haproxy.pid'),
    socket: path.join(dir, 'haproxy.sock'),
    output: path.join(dir, 'haproxy.out'),
  };
}

/** A socket path haproxy can bind, or a permanent error saying what to do. */
export function checkSocketPath(files: HaproxyFiles): void {
  refuseLongSocketPath(files.socket, 'the haproxy runtime API socket');
}

/** The pid of haproxy's worker now (the one the socket reaches), or null when none answers. */
export async function workerPid(files: HaproxyFiles): Promise<number | null> {
  try {
    return Number((await showInfo(files.socket)).Pid);
  } catch (error) {
    if (error instanceof HaproxyUnreachableError) return null;
    throw error;
  }
}

/** The master's pid from its pid file, when that process is alive and is haproxy. */
export async function masterPid(files: HaproxyFiles): Promise<number | null> {
  const pid = Number((await readFile(files.pid, 'utf8').catch(() => '')).trim());
  if (!Number.isInteger(pid) || pid <= 1) return null;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => null);
  if (cmdline === null) {
    // No /proc (not Linux): alive is all that can be told.
    try {
      process.kill(pid, 0);
      return pid;
    } catch {
      return null;
    }
  }
  return cmdline.includes('haproxy') ? pid : null;
}

/**
 * Makes sure haproxy serves the state directory: when its socket does not answer, starts it from
 * the configuration file (which holds the routes as last applied). Resolves with the worker's pid.
 */
export async function ensureHaproxy(
  files: HaproxyFiles,
  bin: string,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<number> {
  const running = await workerPid(files);
  if (running !== null) return running;
  // A master alive without an answering worker is starting (or stuck): wait for it, then judge.
  const master = await masterPid(files);
  if (master !== null) {
    const worker = await waitWorker(files, signal);
    if (worker !== null) return worker;
    throw new Error(
      `haproxy (master pid ${master}) runs for ${files.dir} but its runtime API ${files.socket} does not answer within ${haproxyStartTimeoutMs} ms; stop it (kill ${master}) so the next step starts it again`,
    );
  }
  return startHaproxy(files, bin, log, signal);
}

async function startHaproxy(
  files: HaproxyFiles,
  bin: string,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<number> {
  checkSocketPath(files);
  const started = await startDetached(bin, ['-W', '-f', files.config, '-p', files.pid], {
    dir: files.dir,
    output: files.output,
    env: inheritedEnv(),
    notFound: notFound(bin),
  });
  const worker = await waitWorker(files, signal, started.exited);
  if (worker !== null) {
    log(
      `started haproxy for ${files.dir} (master pid ${started.pid}, worker ${worker}) from ${files.config}`,
    );
    return worker;
  }
  if (!started.exited()) started.child.kill('SIGTERM');
  const said = await alertsSince(files.output, started.outputFrom);
  throw new PermanentDriverError(
    `haproxy did not start from ${files.config}${said ? `: ${said}` : ''} (its output: ${files.output})`,
  );
}

/**
 * Reloads haproxy (SIGUSR2 to its master: a new worker reads the file, takes the listeners over,
 * and the old one finishes what it carries). Resolves once the socket answers from a new worker;
 * a file the new worker could not load fails with haproxy's own alert, the old worker serving on.
 */
export async function reloadHaproxy(
  files: HaproxyFiles,
  bin: string,
  log: (line: string) => void,
  signal: AbortSignal,
): Promise<number> {
  const before = await workerPid(files);
  const master = await masterPid(files);
  if (before === null || master === null) return ensureHaproxy(files, bin, log, signal);
  const outputFrom = await outputSize(files.output);
  process.kill(master, 'SIGUSR2');
  const deadline = Date.now() + haproxyStartTimeoutMs;
  for (;;) {
    signal.throwIfAborted();
    const now = await workerPid(files);
    if (now !== null && now !== before) {
      log(`reloaded haproxy for ${files.dir} (master pid ${master}, new worker ${now})`);
      return now;
    }
    const said = await alertsSince(files.output, outputFrom);
    if (said && /fail|exit|error/i.test(said))
      throw new PermanentDriverError(`haproxy did not load the new ${files.config}: ${said}`);
    if (Date.now() > deadline)
      throw new Error(
        `haproxy (master pid ${master}) did not reload ${files.config} within ${haproxyStartTimeoutMs} ms (its output: ${files.output})`,
      );
    await sleep(pollIntervalMs, undefined, { signal });
  }
}

/** Stops the haproxy of the state directory (SIGTERM to the master), once it is gone. */
export async function stopHaproxy(files: HaproxyFiles, log: (line: string) => void): Promise<void> {
  const master = await masterPid(files);
  if (master === null) return;
  try {
    process.kill(master, 'SIGTERM');
  } catch {
    return; // already gone
  }
  const deadline = Date.now() + haproxyStartTimeoutMs;
  while ((await masterPid(files)) !== null && Date.now() < deadline) await sleep(pollIntervalMs);
  log(`stopped haproxy for ${files.dir} (master pid ${master}): no route left`);
}

/** Checks a configuration file with `haproxy -c`: null when valid, else haproxy's alerts. */
export function checkConfig(bin: string, file: string, signal: AbortSignal): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ['-c', '-q', '-f', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: inheritedEnv(),
      signal,
    });
    let said = '';
    const take = (data: Buffer) => {
      said = (said + data.toString()).slice(-8_192);
    };
    child.stdout.on('data', take);
    child.stderr.on('data', take);
    child.on('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'ENOENT' ? new PermanentDriverError(notFound(bin)) : error),
    );
    child.on('close', (code) => resolve(code === 0 ? null : alertLines(said) || `exited ${code}`));
  });
}

/** The worker's pid once one answers on the socket; null when none did in time (or `exited` says to stop looking). */
function waitWorker(
  files: HaproxyFiles,
  signal: AbortSignal,
  exited?: () => boolean,
): Promise<number | null> {
  return pollFor(() => workerPid(files), {
    timeoutMs: haproxyStartTimeoutMs,
    intervalMs: pollIntervalMs,
    signal,
    ...(exited ? { stop: exited } : {}),
  });
}

async function outputSize(file: string): Promise<number> {
  return (await readFile(file).catch(() => Buffer.alloc(0))).length;
}

/** haproxy's [ALERT] lines written to `file` after byte `offset`, joined; '' when none. */
async function alertsSince(file: string, offset: number): Promise<string> {
  return alertLines(await outputSince(file, offset));
}

function alertLines(text: string): string {
  return text
    .split('\n')
    .filter((line) => line.includes('[ALERT]'))
    .map((line) => line.replace(/^\[ALERT\]\s*\(\d+\)\s*:\s*/, '').trim())
    .slice(-5)
    .join('; ');
}
