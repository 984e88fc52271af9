/**
 * Workers for the Temporal-mode tests, on the run's dev server (test/support/temporal-global-setup.ts),
 * each on a task queue of its own (other test files run workers on the same server at the same
 * time; a shared queue would hand this file's driver calls to their workers and state
 * directories), with a state directory of its own (temporary unless given):
 * - `startWorker`: a worker in this process's worker host (test/support/temporal-worker-host.ts), what
 *   `cutover worker` runs without a process of its own: for every test that does not kill it or
 *   read its output.
 * - `startWorkerProcess`: `cutover worker` as a child process (the compiled bin), for a test that
 *   kills it or reads what it prints. Stopped by pid.
 * Either way the router its drivers started is killed when it stops (and a process's replicas).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inject } from 'vitest';
import { repoRoot, tempDir } from './cli.js';
import { killRunners, killSlots } from './migrations.js';
import { workerHost } from './temporal-worker-host.js';

/** The dev server's address; throws (failing the test) with the reason when there is none. */
export function temporalAddress(): string {
  const address = inject('temporalAddress');
  if (!address) throw new Error(`no Temporal dev server: ${inject('temporalProblem') ?? 'unknown reason'}`);
  return address;
}

/** A task queue no other test file uses. */
export function uniqueTaskQueue(prefix: string): string {
  return `${prefix}-${process.pid}-${randomBytes(4).toString('hex')}`;
}

export interface TestWorker {
  /** The worker's --state-dir: where exec driver scripts see CUTOVER_STATE_DIR. */
  stateDir: string;
  /** WORKFLOW_HOST and TEMPORAL_TASK_QUEUE, for the CLI (and servers) that talk to this worker. */
  env: Record<string, string>;
  /** Stops it (driver calls in flight finish), the router it started, the temp dir. */
  stop(): Promise<void>;
}

export interface WorkerProcess extends TestWorker {
  pid: number;
  stderr(): string;
  /** Resolves when the process has exited. */
  exited: Promise<void>;
  /** Whether it has not exited yet. */
  running(): boolean;
  /** Sends `signal` (default SIGKILL) and waits for the exit; its router and files stay. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** SIGTERM (SIGKILL after 5 s), the replicas and the router it recorded, the temp dir. */
  stop(): Promise<void>;
}

interface WorkerOptions {
  address: string;
  taskQueue: string;
  /** Its state directory (default: a temporary one, removed when it stops). */
  stateDir?: string;
  /** More environment for the worker: the secrets its migrations read (CUTOVER_SECRET_*, CUTOVER_SECRETS_FILE). */
  env?: Record<string, string>;
}

/** The state directory asked for, or a temporary one that `cleanup` removes. */
async function workerStateDir(
  given: string | undefined,
): Promise<{ stateDir: string; cleanup(): Promise<void> }> {
  if (given) return { stateDir: given, cleanup: async () => {} };
  const { dir, cleanup } = await tempDir('cutover-worker-');
  return { stateDir: path.join(dir, 'state'), cleanup };
}

/**
 * A worker in this process's worker host, polling once this resolves. Its driver calls run in the
 * host's process: the secrets it is given are its own, but hooks and replicas inherit the host's
 * environment (this process's when the host started, without later `vi.stubEnv`s).
 */
export async function startWorker(options: WorkerOptions): Promise<TestWorker> {
  const { url: host } = await workerHost();
  const { stateDir, cleanup } = await workerStateDir(options.stateDir);
  const env = { WORKFLOW_HOST: options.address, TEMPORAL_TASK_QUEUE: options.taskQueue };
  const response = await fetch(`${host}/workers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...options, stateDir, env: options.env ?? {} }),
  });
  if (!response.ok) {
    await cleanup();
    throw new Error(
      `the worker host did not start a worker: ${((await response.json()) as { error: string }).error}`,
    );
  }
  const stop = async () => {
    const stopped = await fetch(`${host}/workers?taskQueue=${encodeURIComponent(options.taskQueue)}`, {
      method: 'DELETE',
    });
    if (!stopped.ok)
      throw new Error(`the worker host did not stop ${options.taskQueue}: ${await stopped.text()}`);
    killRunners(stateDir);
    await cleanup();
  };
  return { stateDir, env, stop };
}

/**
 * How long a worker process may take to say it polls before the test fails: a bound, not a wait
 * (the loop below returns as soon as it says so). A worker loads @temporalio/worker, ~1 CPU-second;
 * on the shared 2-core machine at load 20-30, with other workers starting beside it, that took
 * over 20 s (session 14; and session 16, three kill cases of stateful-switch starting theirs at once).
 */
const workerStartBoundMs = 60_000;

export async function startWorkerProcess(
  options: WorkerOptions & {
    /** Node's own options before the bin (a test's preload: `--import FILE`). */
    nodeArgs?: string[];
    /** `--host NAME`: the machine it stands for (issue 30); none: the cluster's shared queue only. */
    host?: string;
  },
): Promise<WorkerProcess> {
  const { stateDir, cleanup } = await workerStateDir(options.stateDir);
  const env = { WORKFLOW_HOST: options.address, TEMPORAL_TASK_QUEUE: options.taskQueue, ...options.env };
  const child: ChildProcess = spawn(
    process.execPath,
    [
      ...(options.nodeArgs ?? []),
      path.join(repoRoot, 'bin', 'cutover.js'),
      'worker',
      '--state-dir',
      stateDir,
      ...(options.host === undefined ? [] : ['--host', options.host]),
    ],
    { cwd: repoRoot, env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (running()) child.kill(signal);
    await exited;
  };
  const stop = async () => {
    if (running()) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    killSlots(stateDir);
    killRunners(stateDir);
    await cleanup();
  };
  const deadline = Date.now() + workerStartBoundMs;
  while (!stderr.includes('cutover worker on')) {
    if (!running() || Date.now() > deadline) {
      await stop();
      throw new Error(`cutover worker did not start:\n${stderr}`);
    }
    await sleep(50);
  }
  return { pid: child.pid as number, stateDir, env, stderr: () => stderr, exited, running, kill, stop };
}
