/**
 * How a process replica is spawned: detached, leading its own process group, its stdout and stderr
 * going through its log pump (process-log-pump.ts), which masks the secrets the replica was given
 * before anything reaches the replica's log file.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import type { Socket } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CutoverError } from '../../core/errors.js';
import { cutoverCliPath } from '../../platform/package-path.js';

/** What spawnReplica needs: the replica's command and environment, and its log file's descriptor. */
export interface ReplicaSpawn {
  command: string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** The names of the variables of `env` that hold secrets: masked in the log, kept from the pump. */
  secretKeys: string[];
  /** Where the FIFO from the replica to its pump is made (it is removed once both ends are open). */
  fifo: string;
  /** The log file, open for appending: the pump's stdout and stderr. */
  logFd: number;
}

/** The replica's log pump, as seen from the process that started it, until it is released. */
export interface LogPump {
  /** true once the pump masks and writes; false when it ended without (it did not start). */
  ready: Promise<boolean>;
  /** Settles when the pump has exited (it wrote the replica's last lines), or was released. */
  done: Promise<void>;
  /** Lets go of the pump: it runs on with the replica, and this process may exit. */
  release(): void;
}

/**
 * The replica's shell, given (after `$0`) the FIFO, node, the pump, the number and names of the
 * secret variables, then the replica's command. It forks the pump first, reading the FIFO, with
 * the secret variables unset (it masks them: it gets their values over fd 3, from cutover), so the
 * pump is in the replica's process group: a stop signals both, a stop waits for both, and Node
 * cannot put a process into another's group. Then the shell becomes the replica (exec: same pid,
 * leading the group), writing into the FIFO, without fd 3, and with SIGPIPE ignored as systemd does
 * for its services (IgnoreSIGPIPE=yes): a pump that died costs the replica its log, not its life.
 */
const replicaShell = [
  'f=$1 node=$2 pump=$3 n=$4',
  'shift 4',
  'PATH="$PATH:/usr/bin:/bin" mkfifo -m 600 "$f" || exit 70',
  '(',
  '  while [ "$n" -gt 0 ]; do unset -v "$1"; shift; n=$((n - 1)); done',
  '  exec "$node" "$pump" "$f"',
  ') <"$f" &',
  'while [ "$n" -gt 0 ]; do shift; n=$((n - 1)); done',
  "trap '' PIPE",
  'exec "$@" >"$f" 2>&1 3<&-',
].join('\n');

/**
 * Spawns the replica and its log pump, and hands the pump the secret values to mask over their
 * socket before anything is awaited. Throws the spawn error (ENOENT, EACCES) of a command that
 * cannot run, as spawning it directly would, before any process starts.
 */
export function spawnReplica(spec: ReplicaSpawn): { child: ChildProcess; pump: LogPump } {
  const [file = '', ...args] = spec.command;
  checkRunnable(file, spec.cwd, spec.env.PATH);
  const pumpProgram = logPumpProgram();
  const child = spawn(
    '/bin/sh',
    [
      '-c',
      replicaShell,
      'cutover-replica',
      spec.fifo,
      process.execPath,
      pumpProgram,
      String(spec.secretKeys.length),
      ...spec.secretKeys,
      file,
      ...args,
    ],
    { cwd: spec.cwd, env: spec.env, stdio: ['ignore', spec.logFd, spec.logFd, 'pipe'], detached: true },
  );
  const control = child.stdio[3] as Socket | null;
  if (!control) {
    // the spawn failed (it says why in 'error'): there is no pump to wait for
    const none = Promise.resolve();
    return { child, pump: { ready: Promise.resolve(false), done: none, release: () => {} } };
  }
  const values = spec.secretKeys.map((key) => spec.env[key] ?? '');
  control.write(`${JSON.stringify({ values })}\n`);
  control.unref();
  control.on('error', () => {
    // the pump is gone; `ready` and `done` say so
  });
  let said = '';
  const ready = new Promise<boolean>((resolve) => {
    control.on('data', (data: Buffer) => {
      said += data.toString('utf8');
      if (said.includes('ready\n')) resolve(true);
    });
    control.once('close', () => resolve(false));
  });
  const done = new Promise<void>((resolve) => control.once('close', () => resolve()));
  return { child, pump: { ready, done, release: () => control.destroy() } };
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

/**
 * Throws as spawn would for a program that cannot run: ENOENT when it is nowhere on `PATH` (or not
 * at its path, relative to `cwd`), EACCES when it is there but not executable. The replica's shell
 * would say so too, but in the replica's log and with exit 127, not as the cause it is.
 */
function checkRunnable(file: string, cwd: string, pathVariable: string | undefined): void {
  const candidates = file.includes('/')
    ? [path.resolve(cwd, file)]
    : (pathVariable ?? '').split(':').map((dir) => path.resolve(cwd, dir, file));
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
