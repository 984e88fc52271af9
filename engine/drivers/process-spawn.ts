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
  /** Whether it ended before it said it masks and writes: it did not start. */
  failed(): boolean;
  /** Settles when the pump has exited (it wrote the replica's last lines), or was released. */
  done: Promise<void>;
  /**
   * Lets go of the pump (it gets what was sent to it first): it runs on with the replica, and
   * this process may exit.
   */
  release(): void;
}

/**
 * The replica's shell, given (after `$0`) the FIFO, node, the pump, the pump's keeper, the number
 * and names of the secret variables, then the replica's command.
 *
 * It forks the pump's keeper first, reading the FIFO, so the pump is in the replica's process group
 * (a stop signals both and waits for both; Node cannot put a process into another's group). The
 * pump runs without the secret variables (it gets their values over fd 3, from cutover) and without
 * the replica's NODE_OPTIONS; under `--jitless` (40 ms of CPU to start instead of 65, half the
 * memory, and still 170,000 lines masked a second); and at `nice 10`, since it shares the replica's
 * CPU share (the session's autogroup): at normal priority its start delayed the replica's, 430 ms
 * to its port instead of 170 on a loaded machine. Node takes the default action of SIGTERM until
 * the pump's handler is in place, so a stop in those first milliseconds killed the pump and lost
 * what the replica printed: the keeper (ignoring SIGTERM, holding the FIFO open) starts a pump
 * killed by a signal again, at most 5 times; one killed after it took the values writes nothing.
 *
 * Then the shell becomes the replica (exec: same pid, leading the group), writing into the FIFO,
 * without fd 3, with SIGPIPE ignored as systemd does for its services (IgnoreSIGPIPE=yes): a pump
 * and keeper that died cost the replica its log, not its life.
 */
const replicaShell = [
  'f=$1 node=$2 pump=$3 keeper=$4 n=$5',
  'shift 5',
  'PATH="$PATH:/usr/bin:/bin" mkfifo -m 600 "$f" || exit 70',
  '(',
  '  while [ "$n" -gt 0 ]; do unset -v "$1"; shift; n=$((n - 1)); done',
  '  unset -v NODE_OPTIONS',
  "  trap '' TERM INT HUP",
  '  exec /bin/sh -c "$keeper" cutover-log-pump "$node" "$pump" "$f"',
  ') <"$f" &',
  'while [ "$n" -gt 0 ]; do shift; n=$((n - 1)); done',
  "trap '' PIPE",
  'exec "$@" >"$f" 2>&1 3<&-',
].join('\n');

/**
 * The pump's keeper: a shell of its own (exec'd, so its environment is the one without the secret
 * variables), ignoring SIGTERM from the start, that starts the pump again when a signal killed it.
 */
const pumpKeeper = [
  'node=$1 pump=$2 f=$3 again=0',
  'while :; do',
  '  PATH="$PATH:/usr/bin:/bin" nice -n 10 "$node" --jitless --no-expose-wasm "$pump" "$f" "$again"',
  '  s=$?',
  '  [ "$s" -gt 128 ] && [ "$again" -lt 5 ] || exit "$s"',
  '  again=$((again + 1))',
  'done',
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
      pumpKeeper,
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
    return { child, pump: { failed: () => true, done: Promise.resolve(), release: () => {} } };
  }
  const values = spec.secretKeys.map((key) => spec.env[key] ?? '');
  control.write(`${JSON.stringify({ values })}\n`);
  control.unref();
  control.on('error', () => {
    // the pump is gone: failed() and done say so
  });
  let said = '';
  let state: 'starting' | 'ready' | 'failed' = 'starting';
  control.on('data', (data: Buffer) => {
    said += data.toString('utf8');
    if (said.includes('ready\n')) state = 'ready';
  });
  const done = new Promise<void>((resolve) =>
    control.once('close', () => {
      if (state === 'starting') state = 'failed';
      resolve();
    }),
  );
  const pump: LogPump = {
    failed: () => state === 'failed',
    done,
    release: () => {
      if (state === 'starting') state = 'ready'; // not asked again: it may still be starting
      control.end(); // after what was written: a pump still starting reads it all the same
    },
  };
  return { child, pump };
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
