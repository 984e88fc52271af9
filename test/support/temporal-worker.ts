/**
 * `cutover worker` as a child process for the Temporal-mode tests: the compiled bin, on the run's
 * dev server (test/support/temporal-global-setup.ts), on a task queue of its own (other test files
 * run workers on the same server at the same time; a shared queue would hand this file's driver
 * calls to their workers and state directories), with a temporary state directory. Stopped by pid;
 * the router its drivers started is killed too.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { inject } from 'vitest';
import { repoRoot, tempDir } from './cli.js';
import { killRunners } from './migrations.js';

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

export interface WorkerProcess {
  pid: number;
  /** The worker's --state-dir: where exec driver scripts see CUTOVER_STATE_DIR. */
  stateDir: string;
  /** WORKFLOW_HOST and TEMPORAL_TASK_QUEUE, for the CLI (and servers) that talk to this worker. */
  env: Record<string, string>;
  stderr(): string;
  /** SIGTERM (SIGKILL after 5 s), the router it started, the temp dir. */
  stop(): Promise<void>;
}

export async function startWorkerProcess(options: {
  address: string;
  taskQueue: string;
  /** More environment for the worker (the secrets its migrations read). */
  env?: Record<string, string>;
}): Promise<WorkerProcess> {
  const { dir, cleanup } = await tempDir('cutover-worker-');
  const stateDir = path.join(dir, 'state');
  const env = { WORKFLOW_HOST: options.address, TEMPORAL_TASK_QUEUE: options.taskQueue, ...options.env };
  const child: ChildProcess = spawn(
    process.execPath,
    [path.join(repoRoot, 'bin', 'cutover.js'), 'worker', '--state-dir', stateDir],
    { cwd: repoRoot, env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const running = () => child.exitCode === null && child.signalCode === null;
  const stop = async () => {
    if (running()) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }
    killRunners(stateDir);
    await cleanup();
  };
  const deadline = Date.now() + 20_000;
  while (!stderr.includes('cutover worker on')) {
    if (!running() || Date.now() > deadline) {
      await stop();
      throw new Error(`cutover worker did not start:\n${stderr}`);
    }
    await sleep(50);
  }
  return { pid: child.pid as number, stateDir, env, stderr: () => stderr, stop };
}
