/**
 * How a process replica is spawned: detached, leading its own process group, its stdout and stderr
 * a pipe to its log pump (process-log-pump.ts), which masks the secrets the replica was given
 * before anything reaches the replica's log file. A replica given no secret writes its log itself.
 *
 * The pump is cutover's child, started first and detached too (its own session and group, its
 * working directory the slot's): it outlives the cutover process that started it, as the replica
 * does, and no signal meant for the replica's group reaches it. It ends when the replica's output
 * does (the replica, and whatever it started that kept its stdout, are gone), after writing the
 * last lines; whoever stops a replica waits for its pump (process-slot.ts), so nothing of a slot
 * runs, nor writes in it, once it is stopped.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import type { Socket } from 'node:net';
import { setPriority } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CutoverError } from '../../core/errors.js';
import { minMaskedValueChars } from '../../core/redact.js';
import { cutoverCliPath } from '../../platform/package-path.js';
import { type ProcessIdentity, processIdentity } from '../../platform/process-identity.js';
import { inheritedEnv } from '../secrets/resolve-secrets.js';

/** In a log pump's environment: the log it writes (how stopping a slot finds the pumps it did not record). */
export const logPumpEnv = 'CUTOVER_LOG_PUMP';

/** What spawnReplica needs: the replica's command and environment, and its log file's descriptor. */
export interface ReplicaSpawn {
  command: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The values to mask in what the replica prints (its secrets). */
  secrets: string[];
  /** The log file's path (its directory is the pump's working directory) and descriptor, open for appending. */
  log: string;
  logFd: number;
}

/** A replica's log pump, as seen from the process that started it. */
export interface LogPump {
  identity: ProcessIdentity;
  /** Set once it exited (code 0: the replica's output ended and it wrote it all). */
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  /** Settles when it has exited. */
  exited: Promise<void>;
}

/**
 * The replica's shell: SIGPIPE ignored, as systemd does for its services (IgnoreSIGPIPE=yes), so a
 * pump killed on its own costs the replica its log, not its life; then it becomes the replica
 * (exec: same pid, leading the group).
 */
const replicaShell = `trap '' PIPE; exec "$@"`;

/**
 * Starts the log pump, hands it the values to mask (written before the replica can write
 * anything), then spawns the replica writing into it and lets go of cutover's end of the pipe.
 * Throws the spawn error (ENOENT, EACCES) of a command that cannot run before anything starts, as
 * spawning it directly would; a pump that cannot start is cutover's environment fault.
 */
export async function spawnReplica(spec: ReplicaSpawn): Promise<{ child: ChildProcess; pump?: LogPump }> {
  const [file = '', ...args] = spec.command;
  if (!spec.secrets.some((value) => value.length >= minMaskedValueChars)) {
    // Nothing to mask: the replica writes its log itself, without a pump's start (a second Node
    // process, about 70 ms of CPU, per replica). What it prints of its own is its own (0600).
    const child = spawn(file, args, {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ['ignore', spec.logFd, spec.logFd],
      detached: true,
    });
    return { child };
  }
  checkRunnable(file, spec.cwd, spec.env.PATH);
  const pumpChild = spawn(process.execPath, ['--jitless', '--no-expose-wasm', logPumpProgram()], {
    cwd: path.dirname(spec.log),
    env: pumpEnvironment(spec.log),
    stdio: ['pipe', spec.logFd, spec.logFd],
    detached: true,
  });
  const input = pumpChild.stdin as Socket;
  const spawnError = new Promise<Error>((resolve) => pumpChild.once('error', resolve));
  if (pumpChild.pid === undefined) {
    input.destroy();
    throw new CutoverError(
      'ENVIRONMENT_FAULT',
      `cannot start the log pump of a replica (${process.execPath}): ${(await spawnError).message}`,
    );
  }
  const pump: LogPump = {
    identity: processIdentity(pumpChild.pid),
    exited: new Promise((resolve) => {
      pumpChild.once('exit', (code, signal) => {
        pump.exit = { code, signal };
        resolve();
      });
    }),
  };
  pumpChild.unref();
  // A pump starts in about 40 ms of CPU (under --jitless): at a lower priority it does not slow
  // the replica's own start on a busy machine. It needs little once started.
  try {
    setPriority(pumpChild.pid, 10);
  } catch {
    // it may be gone already: its exit says so
  }
  input.on('error', () => {
    // the pump is gone: its exit says so
  });
  const values = spec.secrets.map((value) => Buffer.from(value, 'utf8').toString('base64'));
  const written = await new Promise<Error | null | undefined>((resolve) =>
    input.write(`${JSON.stringify({ values })}\n`, resolve),
  );
  if (written) {
    input.destroy();
    throw new CutoverError(
      'ENVIRONMENT_FAULT',
      `the log pump of a replica ended as it started (${written.message}): its output would not be logged`,
    );
  }
  try {
    const child = spawn('/bin/sh', ['-c', replicaShell, 'cutover-replica', file, ...args], {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ['ignore', input, input],
      detached: true,
    });
    return { child, pump };
  } finally {
    // Closed, not ended: ending would shut the pipe down for the replica too. The pump reads to
    // the end of what the replica writes (with cutover's end closed, it ends with the replica).
    input.destroy();
  }
}

/** The pump's environment: cutover's (without its secrets), without NODE_OPTIONS meant for replicas. */
function pumpEnvironment(log: string): NodeJS.ProcessEnv {
  const env = inheritedEnv();
  delete env.NODE_OPTIONS;
  return { ...env, [logPumpEnv]: log };
}

/**
 * The compiled pump: beside this module when it runs compiled, else (the sources, under test) in
 * the package's `dist/`.
 */
function logPumpProgram(): string {
  const beside = fileURLToPath(new URL('./process-log-pump.js', import.meta.url));
  if (existsSync(beside)) return beside;
  const built = path.join(
    path.dirname(path.dirname(cutoverCliPath())),
    'dist',
    'engine',
    'drivers',
    'process-log-pump.js',
  );
  if (existsSync(built)) return built;
  throw new CutoverError(
    'ENVIRONMENT_FAULT',
    `cannot find the log pump of process replicas (${built}): build cutover (npm run build)`,
  );
}

/** Where the replica's shell looks for a program when its environment has no PATH (dash's default). */
const shellDefaultPath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Throws as spawn would for a program that cannot run: ENOENT when it is nowhere on `PATH` (or not
 * at its path, relative to `cwd`), EACCES when it is there but not executable. The replica's shell
 * would say so too, but in the replica's log and with exit 127, not as the cause it is.
 */
function checkRunnable(file: string, cwd: string, pathVariable: string | undefined): void {
  const candidates = file.includes('/')
    ? [path.resolve(cwd, file)]
    : (pathVariable ?? shellDefaultPath).split(':').map((dir) => path.resolve(cwd, dir, file));
  let denied = false;
  for (const candidate of candidates) {
    try {
      if (!statSync(candidate).isFile()) continue;
      accessSync(candidate, constants.X_OK);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EACCES') denied = true;
    }
  }
  const code = denied ? 'EACCES' : 'ENOENT';
  throw Object.assign(new Error(`spawn ${file} ${code}`), { code, errno: code, syscall: `spawn ${file}` });
}
